"""The benchmark's connection load generator (``compat/bench/loadgen.py conns --mode active``)
against a real pykbroker: what it reports must be what the broker stored.

Each of its raw connections is a closed loop of one acks=1 Produce of 10 records; it prints the
requests it got answered, the records they carried and its own CPU time over the loaded phase
(the harness divides that and the broker's by the requests: the "CPU/request" rows of the
connection cells).  Here confluent-kafka reads the topic back and must find exactly the records
reported, every value the loadgen's payload; nothing is asserted about speed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import needs

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol.wire import create_topic

ROOT = Path(__file__).resolve().parents[2]
LOADGEN = ROOT / "compat" / "bench" / "loadgen.py"
PARTITIONS = 4


@pytest.mark.timeout(180)
def test_active_connections_report_what_the_broker_stored(tmp_path):
    confluent_kafka = needs.module("confluent_kafka")
    b = BrokerProcess(str(tmp_path / "data"))
    b.start(timeout=60)
    try:
        create_topic(b.bootstrap, "lg", partitions=PARTITIONS)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
        r = subprocess.run([sys.executable, str(LOADGEN), "conns", "--bootstrap", b.bootstrap, "--topic", "lg",
                            "--n", "8", "--mode", "active", "--seconds", "1", "--size", "100",
                            "--partitions", str(PARTITIONS)],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        assert lines[0] == {"event": "ready", "open_seconds": lines[0]["open_seconds"]}
        out = lines[-1]
        assert out["produce_ok"] and out["connections"] == 8
        assert out["requests"] > 0 and out["records"] == out["requests"] * 10
        assert out["ack"]["samples"] == out["requests"]
        # its own CPU over the loaded phase: some, and no more than one thread can use
        assert 0 < out["cpu_seconds"] <= out["seconds"] * 1.05 + 0.05

        c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lg-check",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        values = {}
        try:
            c.subscribe(["lg"])
            seen = 0
            idle = 0
            while seen < out["records"] and idle < 20:
                msgs = c.consume(10000, timeout=1.0)
                idle = 0 if msgs else idle + 1
                for m in msgs:
                    assert m.error() is None, m.error()
                    values[m.value()] = values.get(m.value(), 0) + 1
                    seen += 1
            # nothing more than reported arrives either
            assert not [m for m in c.consume(1000, timeout=2.0) if m.error() is None]
        finally:
            c.close()
        # one payload (the loadgen's 100 random upper-case letters) in every record
        assert list(values.values()) == [out["records"]]
        (value,) = values
        assert len(value) == 100 and value.isupper()
    finally:
        b.stop()


@pytest.mark.timeout(180)
def test_floor_servers_answer_the_loadgen(tmp_path):
    """compat/bench/floor.py's two bare servers (trio, plain epoll) answer the load generator's
    closed loops with the generated codec's Produce answer (the loadgen decodes one and floor.py
    fails unless its error codes are 0), and every run reports the server's CPU per request."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    out = tmp_path / "floor.json"
    r = subprocess.run([sys.executable, str(ROOT / "compat" / "bench" / "floor.py"), "--n", "5", "--seconds", "1",
                        "--runs", "1", "--servers", "floor-trio,floor-epoll", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=170)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    assert [x["server"] for x in runs] == ["floor-trio", "floor-epoll"]
    for x in runs:
        assert x["connections"] == 5 and x["requests"] > 0 and x["rec_s"] > 0
        assert x["server_user_us_per_req"] + x["server_sys_us_per_req"] > 0
        assert 0 < x["server_cores"] <= 1.1   # one thread each
        assert x["client_us_per_req"] > 0
