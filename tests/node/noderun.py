"""Run the Node.js client scenarios of compat/node (kafkajs today) and read their reports.

``missing()`` says why they cannot run here (no ``node``/``npm``, or compat/node's packages not
installed as package-lock.json pins them: ``tools/test.sh`` runs ``npm ci`` there), None when
they can.  ``tools/test.sh`` may still be installing them when pytest starts (the Confluent client
compiles librdkafka, minutes on 2 cores, so the build runs beside the first test directories
instead of before them): then ``missing()`` defers (None) and ``require()``, called from a
fixture, waits for that build to end before judging.  ``start(script, bootstrap, scenarios, **flags)`` starts one scenario program (one
Node process running the named scenarios in turn); ``Run.report()`` waits for it and returns its
report: ``{scenario: observations}``; a scenario in which the client failed reports
``{"error": ...}``, which fails only the tests judging that scenario.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "compat" / "node"


def node_binary() -> str | None:
    return shutil.which("node")


# Set by tools/test.sh when it started `npm ci` in the background: the file that build writes its
# exit status to when it ends (renamed into place whole; its log beside it, ``.log`` for ``.rc``).
BUILD_RC_ENV = "PYKBROKER_NODE_BUILD_RC"
# How long a test waits for that build: it takes about 4 minutes on 2 busy cores; 25 leaves room
# for a slow machine and still ends a hung build's wait well inside CI's time.
BUILD_WAIT_S = 25 * 60.0


def build_pending() -> bool:
    """True while tools/test.sh's background ``npm ci`` has not ended."""
    rc = os.environ.get(BUILD_RC_ENV)
    return bool(rc) and not os.path.exists(rc)


def wait_for_build(timeout: float = BUILD_WAIT_S) -> str | None:
    """Wait for the background ``npm ci`` (if any); why it did not give the packages, or None."""
    rc_path = os.environ.get(BUILD_RC_ENV)
    if not rc_path:
        return None
    deadline = time.monotonic() + timeout
    while not os.path.exists(rc_path):
        if time.monotonic() > deadline:
            return "compat/node's npm ci (started by tools/test.sh) still running after %.0f s" % timeout
        time.sleep(2.0)
    status = open(rc_path).read().strip()
    if status != "0":
        log = rc_path[:-3] + ".log" if rc_path.endswith(".rc") else rc_path + ".log"
        try:
            tail = open(log, errors="replace").read()[-2000:]
        except OSError:
            tail = "(no log at %s)" % log
        return "compat/node's npm ci (CKJS_LINKING=dynamic, started by tools/test.sh) failed (%s):\n%s" % (status, tail)
    return None


def native_missing() -> str | None:
    """Why @confluentinc/kafka-javascript's native module (librdkafka) does not load, or None."""
    load = subprocess.run([node_binary(), "-e", "require('@confluentinc/kafka-javascript')"],
                          cwd=PACKAGE, capture_output=True, text=True, timeout=60)
    if load.returncode != 0:
        return ("@confluentinc/kafka-javascript's native module (CKJS_LINKING=dynamic npm ci in compat/node, as "
                "tools/test.sh runs it): %s" % load.stderr.strip()[-500:])
    return None


def require(native: bool = False) -> None:
    """From a fixture: wait for a background install, then skip (a failure in CI) if the packages
    (and with ``native`` the Confluent client's compiled module) are not usable."""
    from tests import needs
    why = wait_for_build() or _missing_now()
    if why is None and native:
        why = native_missing()
    if why is not None:
        needs.skip_missing(why)


def skip_module_unless_usable(native: bool = False) -> None:
    """At a test module's top: skip the module (a failure under CI=true) when compat/node cannot
    run here (with ``native``: nor the Confluent client's compiled module, once built)."""
    from tests import needs
    why = missing()
    if why is None and native and not build_pending():
        why = native_missing()
    if why is not None:
        needs.skip_missing(why, allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def packages():
    """tools/test.sh may still be installing compat/node's packages when a module is collected:
    imported into a test module, this waits for them (and skips, saying so, if unusable)."""
    require()


@pytest.fixture(scope="module", autouse=True)
def native_packages():
    """As :func:`packages`, the Confluent client's native module (librdkafka) included."""
    require(native=True)


def missing() -> str | None:
    """Why compat/node cannot run here, or None; None too while tools/test.sh is still installing
    the packages (``require()`` judges them once that ends)."""
    if node_binary() is None or shutil.which("npm") is None:
        return "Node.js and npm (node and npm on PATH; tools/test.sh then runs npm ci in compat/node)"
    if build_pending():
        return None
    return _missing_now()


def _missing_now() -> str | None:
    if node_binary() is None or shutil.which("npm") is None:
        return "Node.js and npm (node and npm on PATH; tools/test.sh then runs npm ci in compat/node)"
    lock = json.loads((PACKAGE / "package-lock.json").read_text())
    for path, meta in lock.get("packages", {}).items():
        if not path:
            continue   # the root package itself
        installed = PACKAGE / path / "package.json"
        try:
            version = json.loads(installed.read_text()).get("version")
        except (OSError, ValueError):
            version = None
        if version != meta.get("version"):
            return ("compat/node's npm packages as package-lock.json pins them (%s: %s installed, %s pinned; "
                    "run: cd compat/node && CKJS_LINKING=dynamic npm ci, as tools/test.sh does)" % (path, version, meta.get("version")))
    return None


class Run:
    def __init__(self, args: list, wait: float):
        self.args, self.wait = args, wait
        self.proc = subprocess.Popen(args, cwd=PACKAGE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def report(self) -> dict:
        try:
            out, err = self.proc.communicate(timeout=self.wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError("%s: no report after %.0f s:\n%s" % (" ".join(self.args), self.wait, err[-4000:]))
        if self.proc.returncode != 0:
            raise AssertionError("%s exited %d:\n%s" % (" ".join(self.args), self.proc.returncode, err[-4000:]))
        rep = json.loads(out)
        rep["_stderr"] = err   # the client's own log lines, for the failure messages
        return rep


def start(script: str, bootstrap: str, scenarios: list, wait: float = 150.0, **flags) -> Run:
    args = [node_binary(), script, "--brokers", bootstrap, "--scenarios", ",".join(scenarios),
            "--timeout", str(int(wait) - 10)]
    for k, v in flags.items():
        args += ["--%s=%s" % (k.replace("_", "-"), v)]
    return Run(args, wait)


def scenario(rep: dict, name: str) -> dict:
    """One scenario's observations; its error (with the tail of the client's log) fails the test."""
    r = rep[name]
    if isinstance(r, dict) and "error" in r:
        raise AssertionError("%s failed in the client: %s\n--- client log (tail) ---\n%s"
                             % (name, r["error"], rep.get("_stderr", "")[-3000:]))
    return r


def check_group_run(r: dict, records: int) -> tuple:
    """The group scenario's common verdict (lib/scen.js): no problems, every record processed
    once; member A processed and committed a third of each partition and left; A, B and C
    together processed every record.  Returns the members' reports (a, b, c)."""
    assert r["problems"] == [], r["problems"]
    assert (r["duplicates"], r["missing"]) == (0, 0), r
    a, b, c = (r["members"][m] for m in "ABC")
    # A processed and committed a third of each partition (33 of 100) and left
    assert a["processed"] == r["committed_by_first"] == 3 * (records // 9), r
    assert a["per"] == {str(p): records // 9 for p in range(3)}, r
    assert a["processed"] + b["processed"] + c["processed"] == records, r
    return a, b, c


def check_leaderkill(cluster, script: str, prefix: str, pace_ms: int) -> dict:
    """The leaderkill scenario of ``script`` (3000 records, replication factor 3, ``pace_ms``
    between sends) while tests.client_brokers.run_killing_a_leader kills partition 0's leader
    -9 and restarts it: every acknowledged record read back once, in produce order per
    partition, at its acknowledged offset.  Returns the scenario's report."""
    from tests.client_brokers import run_killing_a_leader
    args = [node_binary(), str(PACKAGE / script), "--brokers", cluster.bootstrap_servers,
            "--scenarios", "leaderkill", "--prefix", prefix, "--rf", "3", "--records", "3000",
            "--pace", str(pace_ms), "--timeout", "200"]
    r = scenario(run_killing_a_leader(cluster, args, prefix + "-idem"), "leaderkill")
    assert r["verdict"] == {"produced": 3000, "acknowledged": 3000, "read": 3000, "duplicates": 0, "missing": 0,
                            "out_of_order": 0, "offset_errors": 0}, r
    # the kill landed while partition 0 was written: its acknowledgements stopped for the
    # election (the dead broker's ZooKeeper session, 6 s, then the controller's choice)
    assert r["partition0_longest_ack_gap_ms"] >= 2000, r
    return r


def batch_codecs(bootstrap: str, topic: str, partition: int = 0) -> set:
    """The compression codecs (attributes & 7: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of the
    record batches stored in one partition, read with a raw Fetch from its leader (one broker)."""
    import struct
    from pykbroker.protocol import wire
    part = wire.fetch_part(wire.fetch(bootstrap, topic, partition, 0))
    assert part["error_code"] == 0, part
    data, pos, codecs = bytes(part["records"] or b""), 0, set()
    while pos + 23 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)   # after offset, length, epoch, magic, crc
        codecs.add(attributes & 7)
        pos += 12 + length
    return codecs
