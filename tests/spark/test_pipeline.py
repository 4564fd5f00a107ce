"""End-to-end: ``pykbroker pipeline clickstream`` as users run it (a child process, its own Spark).

The aggregates the Spark job wrote to the output topic must equal counts computed here, in plain
Python, from the events read back out of the input topic by confluent-kafka: visits and distinct
visitor IPs per (tumbling window, site), each window written exactly once (append mode), and the
live summary the command printed must list the same rows.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime, timezone

import pytest

from tests import needs

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol import wire

from .conftest import AGAINST_KAFKA
from .util import read_all, skip_in_quick_mode, unique

pytestmark = [skip_in_quick_mode, pytest.mark.timeout(240)]

WINDOW_S = 4
SUMMARY = re.compile(r"^  window (\d\d:\d\d:\d\d) → (\d\d:\d\d:\d\d)  (\S+)\s+visits\s+(\d+)"
                     r"  unique visitors\s+(\d+)$", re.M)


def pipeline_cmd(*args):
    return [sys.executable, "-m", "pykbroker", "pipeline", "clickstream",
            "--window", str(WINDOW_S), "--watermark", "2", "--max-lateness", "1.5",
            "--trigger", "0.5", "--partitions", "3", *args]


def run_pipeline(*args, timeout=200):
    p = subprocess.run(pipeline_cmd(*args), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "pipeline failed (rc %d):\n%s\n%s" % (
        p.returncode, p.stdout[-5000:], p.stderr[-5000:])
    return p.stdout


def ms(iso: str) -> int:
    return int(datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
               .timestamp() * 1000)


def expected_from_input(records) -> tuple[dict, int]:
    visits = defaultdict(int)
    ips = defaultdict(set)
    n = 0
    for r in records:
        ev = json.loads(r["value"])
        assert r["timestamp"] == ev["ts"]       # record timestamp = event time
        if ev["type"] != "visit":
            assert ev["type"] == "tick" and r["key"] is None
            continue
        n += 1
        assert r["key"] == ev["site"].encode()
        assert set(ev) == {"type", "ts", "site", "ip", "url"} and ev["url"].startswith("/")
        start = ev["ts"] // (WINDOW_S * 1000) * WINDOW_S * 1000
        visits[(start, ev["site"])] += 1
        ips[(start, ev["site"])].add(ev["ip"])
    return {k: (visits[k], len(ips[k])) for k in visits}, n


def check(bootstrap, in_topic, out_topic, stdout):
    expected, n_visits = expected_from_input(read_all(bootstrap, in_topic, 3))
    assert n_visits > 50 and len(expected) >= 4 * 2    # several windows of several sites
    out = read_all(bootstrap, out_topic, 3)
    got = {}
    for r in out:
        row = json.loads(r["value"])
        key = (ms(row["window_start"]), row["site"])
        assert key not in got, "window written twice: %r" % (row,)
        assert ms(row["window_end"]) - key[0] == WINDOW_S * 1000
        assert r["key"] == row["site"].encode()
        got[key] = (row["visits"], row["unique_visitors"])
    assert got == expected
    # Some visitors came back within a window: distinct < visits somewhere (a real check of both).
    assert any(u < v for v, u in got.values())
    # The live summary printed exactly these rows.
    printed = sorted((s, int(v), int(u)) for _a, _b, s, v, u in SUMMARY.findall(stdout))
    assert printed == sorted((s, v, u) for (_w, s), (v, u) in got.items())
    assert "%d events generated" % n_visits in stdout


def test_clickstream_against_a_cluster(bootstrap):
    in_topic, out_topic = unique("clicks"), unique("site-stats")
    stdout = run_pipeline("--bootstrap-servers", bootstrap, "--input-topic", in_topic,
                          "--output-topic", out_topic, "--events", "400", "--rate", "40",
                          "--seed", "11")
    assert "using cluster %s" % bootstrap in stdout
    check(bootstrap, in_topic, out_topic, stdout)


def test_clickstream_embedded_broker_ctrl_c(tmp_path):
    """No limits given: it runs until Ctrl-C.  SIGINT goes to the whole process group, as from a
    terminal (the embedded broker runs in-process, PySpark's JVM ignores SIGINT): the generator
    stops, the last windows close, the command exits 0 with every visit accounted for."""
    if AGAINST_KAFKA:
        pytest.skip("the embedded broker is pykbroker")
    data = str(tmp_path / "data")
    p = subprocess.Popen(pipeline_cmd("--data-dir", data, "--rate", "60", "--seed", "5"),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")),
                              daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 150
        while len(SUMMARY.findall("".join(lines))) < 2:    # until two windows have closed
            assert p.poll() is None and time.monotonic() < deadline, "".join(lines)[-5000:]
            time.sleep(0.2)
        os.killpg(p.pid, signal.SIGINT)
        try:
            p.wait(120)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 120 s after Ctrl-C:\n" + "".join(lines)[-5000:]) from None
        reader.join(10)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    stdout = "".join(lines)
    assert p.returncode == 0, stdout[-5000:]
    assert "interrupted: stopping the generator" in stdout
    assert re.search(r"embedded pykbroker on 127\.0\.0\.1:\d+", stdout)
    # The embedded broker stopped with the command; reopen its data dir and check the topics.
    with BrokerProcess(data) as b:
        check(b.bootstrap, "clickstream-visits", "clickstream-site-stats", stdout)


CLUSTER_OVERRIDES = {"default.replication.factor": "3", "min.insync.replicas": "2",
                     "offsets.topic.replication.factor": "3", "group.initial.rebalance.delay.ms": "0",
                     # a killed broker's session expires 3 s after its last heartbeat (tick 500 ms,
                     # as in tests/cluster/test_zk_controller.py): its partitions stall that long
                     "zookeeper.session.timeout.ms": "3000"}


@pytest.mark.timeout(480)
def test_clickstream_on_a_3_broker_cluster_survives_a_leader_kill(tmp_path):
    """The pipeline against ZooKeeper + 3 pykbroker processes (topics with replication factor 3,
    min.insync.replicas=2).  Mid-run (events being generated, Spark's query running), the leader
    of output partition 0 is killed -9 (with 3 brokers it leads input partitions too) and restarted a few
    seconds later, while the generator, Spark's source and sink, and the summary reader are all
    running: every visit is still counted exactly once, each window written once."""
    if AGAINST_KAFKA:
        pytest.skip("kills pykbroker brokers")
    needs.module("kazoo.client")
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster

    in_topic, out_topic = unique("clicks"), unique("site-stats")
    with Cluster(3, str(tmp_path / "cluster"), overrides=CLUSTER_OVERRIDES, zk_tick_time=500) as cluster:
        cluster.wait_registered()   # 3 replicas need 3 registered brokers
        bootstrap = cluster.bootstrap_servers
        first = ("127.0.0.1", cluster.brokers[0].port)
        for t in (in_topic, out_topic):   # the pipeline uses existing topics as they are
            with wire.WireClient(first) as c:
                r = c.request(19, 5, {"topics": [{"name": t, "num_partitions": 3, "replication_factor": 3,
                                                  "assignments": [], "configs": []}],
                                      "timeout_ms": 30000, "validate_only": False})
                assert r["topics"][0]["error_code"] == 0, r
                wire.wait_for_topic(c, t, 3, timeout=30)
        p = subprocess.Popen(pipeline_cmd("--bootstrap-servers", bootstrap, "--input-topic", in_topic,
                                          "--output-topic", out_topic, "--duration", "28", "--rate", "12",
                                          "--seed", "13", "--timeout", "180",
                                          # 28 s of events: the kill comes at most ~18 s in and
                                          # the victim is back ~5 s later (3 s to a new leader
                                          # here at a load of 20, then its restart), so visits
                                          # flow before, during and after the fail-over
                                          # The victim's partitions stall for its ZooKeeper session
                                          # (3 s) plus the election and the clients' metadata
                                          # refresh; a visit held up for longer than the watermark
                                          # less --max-lateness (8.5 s) is late and Spark drops it
                                          # (with any Kafka), so here the watermark outlasts a
                                          # failover about twice over.
                                          "--watermark", "10"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        err: list[str] = []
        readers = [threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True),
                   threading.Thread(target=lambda: err.extend(iter(p.stderr.readline, "")), daemon=True)]
        for t in readers:
            t.start()
        try:
            # The kill comes once Spark has written its first window (its end plus the watermark
            # and a batch, 11-15 s into the generation), or 18 s in (a loaded machine may take
            # that long for Spark's first batches), while events flow.
            deadline = time.monotonic() + 200
            started = None
            while not SUMMARY.findall("".join(lines)) and (started is None or time.monotonic() < started + 18):
                assert p.poll() is None and time.monotonic() < deadline, \
                    "".join(lines)[-3000:] + "".join(err)[-3000:]
                if started is None and "generating page visits" in "".join(lines):
                    started = time.monotonic()
                time.sleep(0.2)
            generating = "generated" not in "".join(lines)
            m = wire.metadata(first, [out_topic])
            victim = m["topics"][0]["partitions"][0]["leader_id"]
            cluster.kill(victim)
            print("killed broker %d (leader of %s-0) %.1f s into the generation, %s, %s"
                  % (victim, out_topic, time.monotonic() - (started or time.monotonic()),
                     "generating" if generating else "generation over",
                     "after the first window" if SUMMARY.findall("".join(lines)) else "no window written yet"))
            # kept down until the controller has moved its leaderships (its ZooKeeper session,
            # 3 s, has expired): a survivor's Metadata names another leader of output partition 0
            survivor = next(("127.0.0.1", b.port) for b in cluster.brokers if b.broker_id != victim)
            moved_by = time.monotonic() + 60
            while wire.metadata(survivor, [out_topic])["topics"][0]["partitions"][0]["leader_id"] in (victim, -1):
                assert time.monotonic() < moved_by, "no new leader 60 s after the kill"
                time.sleep(0.2)
            print("a new leader %.1f s after the kill; restarting broker %d"
                  % (time.monotonic() - (moved_by - 60), victim))
            cluster.start(victim)
            p.wait(300)
            for t in readers:
                t.join(10)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        stdout = "".join(lines)
        assert generating, "the generator had finished before the kill: nothing was tested"
        if p.returncode != 0:
            # Which side lost visits: the input topic (the brokers) or the job (late rows)?
            _, n_visits = expected_from_input(read_all(bootstrap, in_topic, 3))
            raise AssertionError("pipeline failed; the input topic holds %d visits\n%s\n%s"
                                 % (n_visits, stdout[-5000:], "".join(err)[-3000:]))
        assert "using cluster %s" % bootstrap in stdout
        check(bootstrap, in_topic, out_topic, stdout)
        for t in (in_topic, out_topic):
            for part in wire.metadata(first, [t])["topics"][0]["partitions"]:
                assert sorted(part["replica_nodes"]) == [1, 2, 3], part

