"""Start-up stays lean: what ``pykbroker serve`` imports before it answers, and the lazy handler
table the broker uses.

Start-up time is measured by ``compat/bench/micro/bench_startup.py``, never asserted here (a shared machine's
load would make such a test flaky); what is checked is the laziness itself, so it cannot regress
unnoticed: which modules an import pulls in, and that a stand-in for a handler module answers
exactly as the module does."""
import importlib
import json
import os
import subprocess
import sys
import types

import pytest
import trio

from pykbroker.config import BrokerConfig
from pykbroker.handlers import LazyHandler, load_handlers
from pykbroker.handlers.support.versions import VERSIONS
from pykbroker.protocol.codec import APIS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Never needed to parse arguments and validate the configuration.
NOT_FOR_THE_CLI = ("trio", "pykbroker.broker", "pykbroker.protocol.codec", "pykbroker.protocol.records",
                   "pykbroker.server.dispatch", "pykbroker.storage", "pykbroker.pipeline.clickstream")
# Never needed before the first request that uses them (checksums, compression, handlers).
NOT_AT_START = ("crc32c", "gzip", "lz4", "zstandard", "cramjam", "snappy", "kafka", "importlib.metadata")


def _modules_after(code: str) -> set:
    """The modules a fresh interpreter holds after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _loaded(mods: set, names) -> list:
    return sorted(m for m in mods if any(m == n or m.startswith(n + ".") for n in names))


def test_cli_import_is_light():
    mods = _modules_after("import pykbroker.cli")
    assert _loaded(mods, NOT_FOR_THE_CLI + NOT_AT_START) == []
    assert not [m for m in mods if m.startswith("pykbroker.handlers")]


def test_cli_parses_serve_arguments_without_the_pipeline():
    mods = _modules_after("import argparse, pykbroker.cli as c\n"
                          "c.build_config(argparse.Namespace(config=None, listeners='PLAINTEXT://127.0.0.1:0',"
                          " log_dirs='unused', override=['num.partitions=2']))")
    assert _loaded(mods, NOT_FOR_THE_CLI + NOT_AT_START) == []


def test_broker_construction_imports_no_handler_nor_checksum_or_compression_module():
    mods = _modules_after(
        "from pykbroker.broker import BrokerServer\nfrom pykbroker.config import BrokerConfig\n"
        "b = BrokerServer(BrokerConfig({'listeners': 'PLAINTEXT://127.0.0.1:0', 'log.dirs': 'unused'}))\n"
        "assert len(b.handlers) > 20 and all(type(h).__name__ == 'LazyHandler' for h in b.handlers.values())")
    assert _loaded(mods, NOT_AT_START) == []
    assert [m for m in mods if m.startswith("pykbroker.handlers.k")] == []


def test_pipeline_command_still_parses(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pykbroker", "pipeline", "clickstream", "--help"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert r.returncode == 0 and "usage: pykbroker pipeline clickstream" in r.stdout
    assert "--" in r.stdout.split("usage:", 1)[1]   # its own options are listed
    r = subprocess.run([sys.executable, "-m", "pykbroker", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert r.returncode == 0 and "pipeline" in r.stdout and "serve" in r.stdout


CONSTANTS = ("API_KEY", "MIN_VERSION", "MAX_VERSION", "ADVERTISED_MIN_VERSION")


def test_lazy_table_matches_the_modules():
    lazy, eager = load_handlers(lazy=True), load_handlers()
    assert sorted(lazy) == sorted(eager)
    for key, mod in eager.items():
        h = lazy[key]
        assert isinstance(h, LazyHandler), key
        for c in CONSTANTS:
            assert getattr(h, c, "absent") == getattr(mod, c, "absent"), (key, c)


def test_first_use_puts_the_module_in_the_table():
    table = load_handlers(lazy=True)
    stand_in = table[3]
    handle = stand_in.handle   # any attribute but the constants loads the module
    mod = sys.modules["pykbroker.handlers.k03_metadata"]
    assert handle is mod.handle and table[3] is mod
    assert stand_in.error_response is mod.error_response   # a held stand-in still answers
    assert isinstance(table[0], LazyHandler)   # the others stay as they were


def test_table_lists_every_handler_module():
    """versions.py has one row per ``kNN_*`` module, under the module's own API key: a handler
    missing from the table would never be served, a row without its module never imported."""
    here = os.path.join(ROOT, "pykbroker", "handlers")
    modules = sorted(n[:-3] for n in os.listdir(here) if n.startswith("k") and n[1:3].isdigit() and n.endswith(".py"))
    assert sorted(row.module for row in VERSIONS.values()) == modules
    for key, row in VERSIONS.items():
        assert int(row.module[1:3]) == key, row
        assert row.min_version <= row.max_version, row
        mod = importlib.import_module("pykbroker.handlers." + row.module)
        assert (mod.API_KEY, mod.MIN_VERSION, mod.MAX_VERSION) == (key, row.min_version, row.max_version)


def _api_versions_frame(version: int) -> bytes:
    # a version newer than the codec knows is sent with the newest body (a client would)
    body = APIS[18].encode_bytes("request", min(version, 4), {"client_software_name": "t",
                                                                 "client_software_version": "1"})
    hdr = b"\x00\x12" + version.to_bytes(2, "big") + (7).to_bytes(4, "big") + b"\x00\x01t"
    if version >= 3:
        hdr += b"\x00"
    return len(hdr + body).to_bytes(4, "big") + hdr + body


@pytest.mark.parametrize("version", [0, 3, 4, 9])
def test_api_versions_answer_is_the_same_with_the_lazy_table(version):
    """Dispatch and answer an ApiVersions (also a too-new one) through both tables: same bytes,
    and the lazy table imports no module but ApiVersions'."""
    from pykbroker.server.dispatch import Dispatcher, HandleRequest

    def answer(table):
        broker = types.SimpleNamespace(handlers=table, services=types.SimpleNamespace(
            handlers=table, config=BrokerConfig({})))
        d = Dispatcher(table, 1 << 20, broker)
        d.receive_data(_api_versions_frame(version))
        ev = d.next_event()
        if isinstance(ev, HandleRequest):
            ev = d.finish(ev, trio.run(ev.handler.handle, ev.ctx, ev.request))
        return b"".join(bytes(p) for p in ev.parts)

    lazy = load_handlers(lazy=True)
    assert answer(lazy) == answer(load_handlers())
    assert [k for k, h in lazy.items() if not isinstance(h, LazyHandler)] == [18]


def test_spec_field_lists_are_read_by_their_first_use():
    from pykbroker.protocol.codec import load_specs, specs_dir

    specs = load_specs()
    assert all(s._fields is None for s in specs.values())   # only the files' heads were read
    for name in sorted(os.listdir(specs_dir())):
        if name.endswith(".json"):
            with open(os.path.join(specs_dir(), name)) as fh:
                d = json.load(fh)
            s = specs[d["api_key"]]
            assert (s.name, [s.min_version, s.max_version], s.flexible_from) == (
                d["name"], d["versions"], d["flexible_from"])
            assert (s.request, s.response) == (d["request"], d["response"])
