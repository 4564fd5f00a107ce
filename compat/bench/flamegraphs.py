"""Flame graphs of pykbroker under the load of the benchmark cells that miss their target.

    python compat/bench/flamegraphs.py [--seconds 20] [--out compat/bench/profiles]

Starts one ``pykbroker serve`` (as the benchmark does), and for each cell runs the benchmark's own
load generator (compat/bench/loadgen.py) while ``py-spy record`` (the ``bench`` extra) samples the
broker process, writing ``<cell>.svg`` (a flame graph: open it in a browser) and the load
generator's JSON next to it:

* ``conns-active-100``: 100 connections, each a closed loop of one acks=1 Produce of 10 x 100 B
  records to one of 4 partitions (the "conns-active" cell).
* ``produce-100B``: one confluent-kafka producer flat out, 100 B records, 1 partition, acks=1,
  linger 5 ms (the "tput/ck/single/100B/1p" cell), then ``consume-100B``: a catch-up consumer
  over that backlog.

py-spy samples at 100 Hz with ``--nonblocking`` (the broker is not paused, so the profile does
not slow it down), ``--idle`` off: a flame graph shows where the broker's one thread spends CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pykbroker.testing import BrokerProcess  # noqa: E402
from pykbroker.testing.wire import WireClient, create_topic, wait_for_topic  # noqa: E402


def loadgen(*args) -> list:
    return [sys.executable, str(HERE / "loadgen.py")] + [str(a) for a in args]


def profiled(pid: int, svg: Path, cmd: list, rate: int = 100) -> dict:
    """Runs ``cmd`` while py-spy records ``pid``; returns cmd's last JSON line."""
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--nonblocking",
                            "--format", "flamegraph", "--output", str(svg)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    finally:
        spy.send_signal(2)   # SIGINT: py-spy writes the flame graph and exits
        out, _ = spy.communicate(timeout=120)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (cmd, r.stderr[-3000:]))
    if not svg.exists():
        raise RuntimeError("py-spy wrote no %s:\n%s" % (svg, out[-2000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--records", type=int, default=2_000_000, help="100 B records produced")
    ap.add_argument("--out", default=str(HERE / "profiles"))
    ap.add_argument("--cells", default="conns-active-100,produce-100B")
    a = ap.parse_args(argv)
    if not shutil.which("py-spy"):
        sys.exit("py-spy is not installed: pip install '.[bench]'")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = a.cells.split(",")
    results = {"loadavg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="pyk-profile-") as d:
        b = BrokerProcess(d, overrides={"group.initial.rebalance.delay.ms": "0"}).start(timeout=60)
        try:
            pid = b.proc.pid
            with WireClient(b.bootstrap) as c:
                create_topic(c, "conns", 4)
                create_topic(c, "p100", 1)
                wait_for_topic(c, "conns", 4)
                wait_for_topic(c, "p100", 1)
            if "conns-active-100" in cells:
                results["conns-active-100"] = profiled(pid, out / "conns-active-100.svg", loadgen(
                    "conns", "--bootstrap", b.bootstrap, "--topic", "conns", "--n", 100, "--mode", "active",
                    "--seconds", a.seconds, "--size", 100, "--partitions", 4))
            if "produce-100B" in cells:
                results["produce-100B"] = profiled(pid, out / "produce-100B.svg", loadgen(
                    "produce", "--bootstrap", b.bootstrap, "--topic", "p100", "--records", a.records,
                    "--size", 100, "--acks", 1, "--linger-ms", 5))
                results["consume-100B"] = profiled(pid, out / "consume-100B.svg", loadgen(
                    "consume", "--bootstrap", b.bootstrap, "--topic", "p100", "--records", a.records))
        finally:
            b.stop(timeout=60)
    results["loadavg_end"] = os.getloadavg()
    text = json.dumps(results, indent=1, default=str)
    (out / "results.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
