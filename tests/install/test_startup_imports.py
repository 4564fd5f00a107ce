"""What a plain single-node broker imports before its first answer.

Start-up time is mostly importing (docs/benchmarks.md, "Start-up time"): a module that the first
request does not need must not load before it.  These run, in a fresh interpreter, what
``pykbroker serve`` runs (``pykbroker.cli.main``, up to its listeners answering) and what an
embedding program runs (``pykbroker.Broker()`` and one ApiVersions answered), then list
``sys.modules``: the modules named below belong to features a default broker does not use
(a cluster, secured listeners, an authorizer, follower fetching, share groups, the admin tools, compression,
metrics, the test helpers) and are imported at their first use instead.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Modules a default single node must not import before its first answer: each line says which
# configuration needs it.
ABSENT = [
    "kazoo",                                  # zookeeper.connect (a cluster)
    "pykbroker.cluster.zookeeper",            # zookeeper.connect
    "pykbroker.cluster.replica_fetcher",      # a follower replica (a cluster)
    "pykbroker.security.client",              # inter-broker TLS/SASL (a cluster)
    "pykbroker.security.listeners",           # an SSL / SASL_* listener
    "pykbroker.security.tls",                 # an SSL / SASL_SSL listener
    "pykbroker.security.scram",               # SASL (SCRAM) listener or credentials
    "pykbroker.security.authenticator",       # a SASL listener
    "pykbroker.server.secure",                # a secured listener
    "pykbroker.share",                        # a share group's first ShareFetch (KIP-932)
    "pykbroker.acl.authorizer",               # authorizer.class.name
    "pykbroker.acl.bindings",                 # authorizer.class.name, the ACL APIs
    "pykbroker.admin_cli",                        # the admin commands (not `serve`)
    "pykbroker.observability.metrics",        # --metrics
    "prometheus_client",                      # --metrics
    "pykbroker.testing",                      # pytest fixtures
    "pykbroker.container",                    # container images
    "pykbroker.pipeline",                     # `pykbroker pipeline`
    "zstandard", "lz4", "snappy", "cramjam",  # a compressed batch (never one on start-up)
]
# pykbroker.admin_cli' package __init__ is what the CLI's argument parsing uses (`tools.add_parsers`,
# `tools.handles`); its command modules are what must stay out
ALLOWED_PREFIXES = {"pykbroker.admin_cli": ("pykbroker.admin_cli",)}

_SERVE = r"""
import os, signal, sys, json
import trio
import pykbroker.cli as cli

original = cli._serve
seen = []

async def _serve(config, control=None, as_kafka=None, observe=None, started=None):
    # the real serve, stopped by a SIGINT (its own shutdown path) once its listeners are bound
    async def watch():
        while not started:
            await trio.sleep(0.005)
        seen.append(sorted(sys.modules))
        os.kill(os.getpid(), signal.SIGINT)
    async with trio.open_nursery() as n:
        n.start_soon(watch)
        await original(config, control, as_kafka, observe, started)

cli._serve = _serve
rc = cli.main(["serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", sys.argv[1]])
print(json.dumps({"rc": rc, "modules": seen[0]}))
"""

_EMBED = r"""
import socket, struct, sys, json
import pykbroker

with pykbroker.Broker(port=0, log_dir=sys.argv[1]) as b:
    host, port = b.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.sendall(struct.pack(">ihhih4s", 14, 18, 0, 7, 4, b"test"))   # ApiVersions v0
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(n, socket.MSG_WAITALL)
    modules = sorted(sys.modules)
print(json.dumps({"answer": list(struct.unpack_from(">ih", body)), "modules": modules}))
"""


def _run(script: str, tmp_path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", script, str(tmp_path / "data")], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _present(modules: list[str]) -> list[str]:
    found = []
    for name in ABSENT:
        allowed = ALLOWED_PREFIXES.get(name)
        for m in modules:
            if m == name or m.startswith(name + "."):
                if allowed and m in allowed:
                    continue
                found.append(m)
    return found


def test_serve_imports_nothing_a_single_node_does_not_use(tmp_path):
    out = _run(_SERVE, tmp_path)
    assert out["rc"] == 0
    assert "pykbroker.broker" in out["modules"] and "trio" in out["modules"]   # it did start
    assert _present(out["modules"]) == []


def test_embedded_broker_imports_nothing_a_single_node_does_not_use(tmp_path):
    out = _run(_EMBED, tmp_path)
    assert out["answer"] == [7, 0]   # the ApiVersions answer: correlation id, no error
    assert _present(out["modules"]) == []


@pytest.mark.parametrize("name", ["pykbroker.acl.authorizer", "pykbroker.cluster.replica_fetcher"])
def test_the_check_sees_a_module(name):
    # the check itself: a module in sys.modules is reported (a list that could never fail
    # would prove nothing)
    assert _present(["trio", name]) == [name]
