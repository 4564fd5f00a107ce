"""Build the Go client scenarios of compat/go (a Go module: franz-go today) and run them.

``build(out_dir)`` runs ``go build -o out_dir/ ./...`` in compat/go (the module proxy supplies
the dependencies named in go.mod/go.sum on the first build; Go's caches make later builds quick)
and returns the directory of the binaries.  ``go_binary()`` finds the toolchain: ``go`` on PATH,
else /usr/local/go/bin/go; None when there is none (the tests then skip, saying so).
``run(binary, bootstrap, scenario, **flags)`` runs one scenario and returns its JSON report;
``run_killing_a_leader(cluster, args, topic)`` runs one that reports ``progress acked=N`` on
stderr and kills partition 0's leader of ``topic`` -9 while it produces.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "compat" / "go"


def go_binary() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


def build(out_dir: Path) -> Path:
    go = go_binary()
    r = subprocess.run([go, "build", "-o", str(out_dir) + "/", "./..."], cwd=MODULE, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("go build in %s failed:\n%s%s" % (MODULE, r.stdout, r.stderr))
    return out_dir


def require_toolchain(what: str) -> None:
    """At a test module's top: skip the module when there is no Go toolchain for ``what``."""
    if go_binary() is None:
        pytest.skip("no Go toolchain: %s needs one" % what, allow_module_level=True)


def build_or_fail(out_dir: Path) -> Path:
    """:func:`build` from a fixture: a failed build fails the tests using it (never a skip)."""
    try:
        return build(out_dir)
    except Exception as e:
        pytest.fail(str(e), pytrace=False)


def run(binary: Path, bootstrap: str, scenario: str, wait: float = 180.0, **flags) -> dict:
    """One scenario; its report (stdout JSON).  A client failure (exit 2) fails the test with
    the scenario's own message and the tail of franz-go's log."""
    args = [str(binary), "-brokers", bootstrap, "-scenario", scenario, "-v"]
    for k, v in flags.items():
        args += ["-%s=%s" % (k.replace("_", "-"), v)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=wait)
    if r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(args), r.returncode,
                                                   r.stderr[-4000:]))
    return json.loads(r.stdout)


def run_killing_a_leader(cluster, args, topic, first=600, after=900):
    """Run the scenario ``args`` (its stderr names the acknowledged count: ``progress acked=N``);
    once ``first`` records are acknowledged, kill -9 the leader of ``topic``'s partition 0 in
    ``cluster`` (pykbroker.local.cluster.Cluster), wait for ``after`` more acknowledgements (the
    other partitions at once, partition 0 after the election), restart the broker and return
    the scenario's report.  The broker is restarted whatever happens."""
    from pykbroker.protocol import wire
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked, err_lines = [0], []

    def pump():
        for line in proc.stderr:
            m = re.match(r"progress acked=(\d+)", line)
            if m:
                acked[0] = int(m.group(1))
            else:
                err_lines.append(line)
    threading.Thread(target=pump, daemon=True).start()

    def wait(what, pred, timeout):
        deadline = time.monotonic() + timeout
        while not pred():
            assert proc.poll() is None, "scenario exited early: %s" % "".join(err_lines[-30:])
            assert time.monotonic() < deadline, "timed out waiting for %s (acked %d)" % (what, acked[0])
            time.sleep(0.05)
    victim = None
    try:
        wait("the first acknowledgements", lambda: acked[0] >= first, 120)
        with wire.WireClient(cluster.brokers[0].bootstrap) as w:
            md = wire.wait_for_topic(w, topic, 3, timeout=30)
        victim = {p["partition_index"]: p["leader_id"] for p in md["topics"][0]["partitions"]}[0]
        cluster.kill(victim)
        killed_at = acked[0]
        wait("acknowledgements after the kill", lambda: acked[0] >= killed_at + after, 90)
        cluster.start(victim)
        victim = None
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if victim is not None:
            cluster.start(victim)
    assert proc.returncode == 0, "".join(err_lines[-30:])
    return json.loads(out)
