"""Protocol traces of one confluent-kafka session (create a topic, idempotent produce, consume as
a member of a classic consumer group, commit, leave): `serve --trace`, the
recording proxy in front of pykbroker and in front of Apache Kafka, and `trace diff` of them.

The Apache Kafka side (the oracle, compat/kafka/oracle.py) is skipped with PYKBROKER_QUICK=1, as
the differential suite is; everything else runs in the everyday suite.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from pykbroker.local.broker_process import BrokerProcess, wait_until

from .session import N_RECORDS, consume, create_topic, produce, wait_topic_ready

ROOT = Path(__file__).resolve().parents[2]
TOPIC, GROUP = "trace-t", "trace-g"

# Where Apache Kafka (4.x) and pykbroker answer this session differently, after `trace diff`'s
# own ignores (ids, timestamps, throttle, cluster id, hosts, ports, node ids).  Each entry is
# (API, regex of the field path).  docs/metrics.md ("In short") lists them too.
DOCUMENTED_DIFFERENCES = [
    # pykbroker's ApiVersions lists no feature flags (SKIPPED.md: ApiVersions); Kafka 4 lists
    # metadata.version, group.version, transaction.version, ...
    ("ApiVersions", r"^response\.(supported_features|finalized_features)\b"),
]


class Proxy:
    """`pykbroker trace proxy` as a child process (as a user runs it)."""

    def __init__(self, upstream: str, out: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "pykbroker", "trace", "proxy", "--listen",
                                      "127.0.0.1:0", "--upstream", upstream, "--out", out],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.port = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                m = re.search(r"proxy listening on [^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(30):
            self.stop()
            raise RuntimeError("proxy did not start: %s" % "".join(self.lines))
        self.bootstrap = "127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def warm_up(bootstrap: str) -> None:
    """Outside the recording: create the coordinators' internal topics (a fresh Apache Kafka
    answers the first FindCoordinator / InitProducerId with COORDINATOR_NOT_AVAILABLE /
    COORDINATOR_LOAD_IN_PROGRESS while it creates and loads them), the same way on both brokers:
    the session's group commits once here (its offsets partition loaded), and every client says
    ``warmup`` in its client id (left out of the server's trace)."""
    create_topic(bootstrap, "trace-warmup", client_id="warmup-admin")
    produce(bootstrap, "trace-warmup", 1, client_id="warmup-producer")
    for _ in range(30):   # Kafka may still be loading the group's partition: retry, unrecorded
        try:
            consume(bootstrap, "trace-warmup", GROUP, 1, client_id="warmup-consumer")
            return
        except KafkaException:
            time.sleep(1)
    raise AssertionError("the warm-up consumer could not commit")


def run_session(bootstrap: str, direct: str) -> list:
    """The recorded session, through the proxy at ``bootstrap``; ``direct``: the broker itself,
    asked (unrecorded) until the new topic has a leader, so that no answer in the recording
    depends on how fast the broker's metadata catches up."""
    create_topic(bootstrap, TOPIC)
    wait_topic_ready(direct, TOPIC)
    produce(bootstrap, TOPIC, N_RECORDS)
    return consume(bootstrap, TOPIC, GROUP, N_RECORDS, subscribe=True)


def load(path) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def trace_diff(a, b, *extra) -> tuple[int, list]:
    r = subprocess.run([sys.executable, "-m", "pykbroker", "trace", "diff", str(a), str(b), "--json", *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)["differences"]


def _recorded_session(bootstrap, trace):
    """The session run against ``bootstrap`` (warmed up first) through the recording proxy,
    which writes ``trace``: what the session read."""
    warm_up(bootstrap)
    proxy = Proxy(bootstrap, str(trace))
    try:
        return run_session(proxy.bootstrap, bootstrap)
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def pyk_traced(tmp_path_factory):
    """pykbroker with --trace, its session run through the recording proxy: both traces."""
    d = tmp_path_factory.mktemp("trace-pyk")
    server_trace, proxy_trace = d / "server.jsonl", d / "proxy.jsonl"
    with BrokerProcess(str(d / "data"), {"group.initial.rebalance.delay.ms": "0"},
                       extra_args=["--trace", str(server_trace)]) as b:
        got = _recorded_session(b.bootstrap, proxy_trace)
    assert [(o, k) for o, k, _ in got] == [(i, b"k%d" % i) for i in range(N_RECORDS)]
    # the recorded session only (not the warm-up's requests, some answered after it returned)
    session = [line for line in server_trace.read_text().splitlines()
               if "warmup" not in (json.loads(line)["header"]["client_id"] or "")]
    server_trace.write_text("".join(line + "\n" for line in session))
    return server_trace, proxy_trace


def _records(lines, api):
    """(key, value) of every record in the Produce requests / Fetch responses of a trace."""
    out = []
    for ex in lines:
        if ex["api"] != api:
            continue
        body = ex["request"] if api == "Produce" else ex["response"]
        topics = body["topic_data"] if api == "Produce" else body["responses"]
        for t in topics:
            for p in t["partition_data" if api == "Produce" else "partitions"]:
                for batch in p["records"] or ():
                    out += [(r["key"], r["value"]) for r in batch.get("records", ())]
    return out


def test_server_trace_decodes_the_session(pyk_traced):
    server_trace, _ = pyk_traced
    lines = load(server_trace)
    apis = {ex["api"] for ex in lines}
    assert {"ApiVersions", "Metadata", "CreateTopics", "InitProducerId", "Produce", "FindCoordinator",
            "JoinGroup", "SyncGroup", "OffsetFetch", "Fetch", "OffsetCommit", "LeaveGroup"} <= apis, apis
    expected = [("k%d" % i, "value-%d" % i) for i in range(N_RECORDS)]
    assert _records(lines, "Produce") == expected
    assert _records(lines, "Fetch")[:N_RECORDS] == expected
    produce_ex = next(ex for ex in lines if ex["api"] == "Produce")
    assert produce_ex["header"]["client_id"] == "trace-producer"
    assert produce_ex["response"]["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert produce_ex["total_ms"] >= 0
    batch = produce_ex["request"]["topic_data"][0]["partition_data"][0]["records"][0]
    assert batch["records_count"] == N_RECORDS and batch["records"][0]["headers"] == [["h", "x"]]


def test_proxy_trace_matches_server_trace(pyk_traced):
    """The proxy and the broker saw the same conversation: `trace diff` is clean."""
    server_trace, proxy_trace = pyk_traced
    assert len(load(proxy_trace)) == len(load(server_trace))
    rc, diffs = trace_diff(server_trace, proxy_trace)
    assert (rc, diffs) == (0, [])


def test_diff_reports_a_difference(pyk_traced, tmp_path):
    """A changed record value and a missing request are reported (exit 1)."""
    server_trace, _ = pyk_traced
    lines = load(server_trace)
    changed = tmp_path / "changed.jsonl"
    with open(changed, "w") as fh:
        dropped = False
        for ex in lines:
            if ex["api"] == "Produce":
                ex["request"]["topic_data"][0]["partition_data"][0]["records"][0]["records"][3]["value"] = "other"
            if ex["api"] == "OffsetCommit" and not dropped:
                dropped = True
                continue
            fh.write(json.dumps(ex) + "\n")
    rc, diffs = trace_diff(server_trace, changed)
    assert rc == 1
    assert any(d["kind"] == "field" and d["api"] == "Produce" and d["path"].endswith("records[3].value")
               and (d["a"], d["b"]) == ("value-3", "other") for d in diffs), diffs
    assert any(d["kind"] == "only_in_a" and d["api"] == "OffsetCommit" for d in diffs), diffs


def _load_oracle():
    spec = importlib.util.spec_from_file_location("pykbroker_kafka_oracle", ROOT / "compat" / "kafka" / "oracle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(os.environ.get("PYKBROKER_QUICK") == "1",
                    reason="PYKBROKER_QUICK=1: the comparison with Apache Kafka runs in CI")
def test_trace_against_apache_kafka_diffs_clean(pyk_traced, tmp_path):
    """The same session through the proxy in front of Apache Kafka: `trace diff` against the
    pykbroker trace shows only the documented differences."""
    from tests.differential.conftest import COMMON_OVERRIDES
    oracle = _load_oracle()
    k = oracle.KafkaOracle(tmp_path / "kafka", COMMON_OVERRIDES)
    try:
        k.start()
    except Exception as e:   # never a skip: a missing oracle is a CI failure
        pytest.fail("Apache Kafka (the oracle) could not be started: %s" % e, pytrace=False)
    kafka_trace = tmp_path / "kafka.jsonl"
    try:
        got = _recorded_session(k.bootstrap, kafka_trace)
    finally:
        k.stop()
    assert [(o, key) for o, key, _ in got] == [(i, b"k%d" % i) for i in range(N_RECORDS)]
    _, proxy_trace = pyk_traced
    kafka_lines = load(kafka_trace)
    assert _records(kafka_lines, "Produce") == _records(load(proxy_trace), "Produce")
    rc, diffs = trace_diff(proxy_trace, kafka_trace)
    undocumented = [d for d in diffs
                    if not any(d["api"] == api and re.search(rx, d.get("path", d["kind"]))
                               for api, rx in DOCUMENTED_DIFFERENCES)]
    assert undocumented == [], "\n".join(json.dumps(d, default=str) for d in undocumented)


def test_proxy_answers_a_too_new_api_versions(tmp_path):
    """ApiVersions newer than the codecs (Java 4.4 clients start with v5) is answered by the
    proxy as a broker would (KIP-511: v0 body, UNSUPPORTED_VERSION, the range it decodes), so
    the client retries with a version whose answer the proxy can read and cap."""
    import socket
    import struct

    from pykbroker.protocol.codec import APIS
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(4)   # accepts into the backlog: the proxy's upstream connection succeeds
    out = tmp_path / "av.jsonl"
    proxy = Proxy("127.0.0.1:%d" % upstream.getsockname()[1], str(out))
    try:
        too_new = APIS[18].max_version + 1
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            header = struct.pack(">hhih", 18, too_new, 77, 3) + b"abc" + b"\x00"
            body = b"\x02a\x021\x00"
            s.sendall(struct.pack(">i", len(header + body)) + header + body)
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            data = s.recv(size, socket.MSG_WAITALL)
        assert struct.unpack(">ihi", data[:10]) == (77, 35, 1)
        assert struct.unpack(">hhh", data[10:16]) == (18, 0, APIS[18].max_version)
    finally:
        proxy.stop()
        upstream.close()
    line = load(out)[-1]
    assert line["api"] == "ApiVersions" and line["response"]["error_code"] == 35
