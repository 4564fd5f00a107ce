"""Run the Node.js client scenarios of compat/node (kafkajs today) and read their reports.

``missing()`` says why they cannot run here (no ``node``/``npm``, or compat/node's packages not
installed as package-lock.json pins them: ``tools/test.sh`` runs ``npm ci`` there), None when
they can.  ``start(script, bootstrap, scenarios, **flags)`` starts one scenario program (one
Node process running the named scenarios in turn); ``Run.report()`` waits for it and returns its
report: ``{scenario: observations}``; a scenario in which the client failed reports
``{"error": ...}``, which fails only the tests judging that scenario.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "compat" / "node"


def node_binary() -> str | None:
    return shutil.which("node")


def missing() -> str | None:
    """Why compat/node cannot run here, or None."""
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
