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
* ``produce-1KiB``: the same producer with 1 KiB records (the "tput/ck/single/1024B/1p" cell).
* ``produce-4x1KiB``: four such producers at once over 4 partitions ("tput/ck/single/1024B/4p/4prod").
* ``conns-active-1000``: as ``conns-active-100`` with 1,000 connections.
* ``cluster-acks-all``: a 3-broker cluster (ZooKeeper, RF 3, min.insync.replicas 2), one
  confluent-kafka producer flat out with acks=all and 1 KiB records; the partition's leader is
  sampled ("tput/ck/cluster/1024B/1p/acks=all").

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

from pykbroker.local.broker_process import BrokerProcess  # noqa: E402
from pykbroker.protocol.wire import WireClient, create_topic, wait_for_topic  # noqa: E402


def loadgen(*args) -> list:
    return [sys.executable, str(HERE / "loadgen.py")] + [str(a) for a in args]


def profiled(pid: int, svg: Path, cmd: list, rate: int = 100, parallel: int = 1) -> dict:
    """Runs ``cmd`` (``parallel`` copies at once) while py-spy records ``pid``; returns cmd's
    last JSON line (a list of them for several copies)."""
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--nonblocking",
                            "--format", "flamegraph", "--output", str(svg)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(parallel)]
        runs = [(p, *p.communicate(timeout=900)) for p in procs]
    finally:
        spy.send_signal(2)   # SIGINT: py-spy writes the flame graph and exits
        out, _ = spy.communicate(timeout=120)
    for p, _stdout, stderr in runs:
        if p.returncode != 0:
            raise RuntimeError("%s failed:\n%s" % (cmd, stderr[-3000:]))
    if not svg.exists():
        raise RuntimeError("py-spy wrote no %s:\n%s" % (svg, out[-2000:]))
    found = [json.loads(stdout.strip().splitlines()[-1]) for _p, stdout, _e in runs]
    return found[0] if parallel == 1 else found


def cluster_acks_all(tmp: str, out: Path, records: int) -> dict:
    """The acks=all cell on a 3-broker cluster: py-spy samples the leader of the one partition
    (its Produce requests wait for the followers' Fetches, which it also answers)."""
    from pykbroker.local import zookeeper
    from pykbroker.protocol import wire
    from pykbroker.local.cluster import Cluster

    if zookeeper.available() is not None:
        return {"skipped": zookeeper.available()}
    overrides = {"default.replication.factor": "3", "min.insync.replicas": "2",
                 "offsets.topic.replication.factor": "3", "group.initial.rebalance.delay.ms": "0"}
    with Cluster(3, os.path.join(tmp, "cluster"), overrides=overrides) as cluster:
        cluster.wait_registered()
        first = ("127.0.0.1", cluster.brokers[0].port)
        with WireClient(first) as c:
            r = c.request(19, 5, {"topics": [{"name": "pall", "num_partitions": 1, "replication_factor": 3,
                                              "assignments": [], "configs": []}],
                                  "timeout_ms": 30000, "validate_only": False})
            assert r["topics"][0]["error_code"] == 0, r
            wait_for_topic(c, "pall", 1, timeout=30)
        leader = wire.metadata(first, ["pall"])["topics"][0]["partitions"][0]["leader_id"]
        pid = next(b.pid for b in cluster.brokers if b.broker_id == leader)
        return profiled(pid, out / "cluster-acks-all.svg", loadgen(
            "produce", "--bootstrap", cluster.bootstrap_servers, "--topic", "pall", "--records", records,
            "--size", 1024, "--acks", "all", "--linger-ms", 5))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--records", type=int, default=2_000_000, help="100 B records produced")
    ap.add_argument("--out", default=str(HERE / "profiles"))
    ap.add_argument("--records-1k", type=int, default=1_000_000, help="1 KiB records produced (split among the producers)")
    ap.add_argument("--cells", default="conns-active-100,produce-100B",
                    help="comma-separated: conns-active-100, produce-100B, produce-1KiB, produce-4x1KiB, "
                         "conns-active-1000, cluster-acks-all")
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
            if "produce-1KiB" in cells:
                with WireClient(b.bootstrap) as c:
                    create_topic(c, "p1k", 1)
                    wait_for_topic(c, "p1k", 1)
                results["produce-1KiB"] = profiled(pid, out / "produce-1KiB.svg", loadgen(
                    "produce", "--bootstrap", b.bootstrap, "--topic", "p1k", "--records", a.records_1k,
                    "--size", 1024, "--acks", 1, "--linger-ms", 5))
            if "produce-4x1KiB" in cells:
                with WireClient(b.bootstrap) as c:
                    create_topic(c, "p1k4", 4)
                    wait_for_topic(c, "p1k4", 4)
                results["produce-4x1KiB"] = profiled(pid, out / "produce-4x1KiB.svg", loadgen(
                    "produce", "--bootstrap", b.bootstrap, "--topic", "p1k4", "--records", a.records_1k // 4,
                    "--size", 1024, "--acks", 1, "--linger-ms", 5), parallel=4)
            if "conns-active-1000" in cells:
                results["conns-active-1000"] = profiled(pid, out / "conns-active-1000.svg", loadgen(
                    "conns", "--bootstrap", b.bootstrap, "--topic", "conns", "--n", 1000, "--mode", "active",
                    "--seconds", a.seconds, "--size", 100, "--partitions", 4))
        finally:
            b.stop(timeout=60)
        if "cluster-acks-all" in cells:
            results["cluster-acks-all"] = cluster_acks_all(d, out, a.records_1k)
    results["loadavg_end"] = os.getloadavg()
    # merged into what earlier runs wrote (a run of some cells keeps the others' numbers)
    path = out / "results.json"
    merged = json.loads(path.read_text()) if path.exists() else {}
    merged.update({k: v for k, v in results.items() if not k.startswith("loadavg")})
    merged.setdefault("loadavg", {})[",".join(cells)] = [results["loadavg_start"], results["loadavg_end"]]
    text = json.dumps(merged, indent=1, default=str)
    path.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
