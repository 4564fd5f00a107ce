"""KIP-1071 streams groups with a real Kafka Streams application (compat/streams StreamsApp, Kafka
Streams 4.3.0 with ``group.protocol=streams``; kafka-streams 4.4.0 is not on Maven Central).

The word count has a repartition topic (groupBy) and a changelog topic (count), both created by
the broker's group coordinator from the heartbeat's topology.  Two instances share the tasks; one
leaves; the other takes its tasks over and processing goes on: the output topic's final counts
are asserted exactly after each phase.  The Java Admin's describeStreamsGroups and
listGroups(type streams) are checked along the way.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import struct
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from pykbroker.local.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "compat" / "streams"   # shared with tests/transactions/test_streams.py

# A leaving instance whose LeaveGroup heartbeat got lost is dropped after this session timeout
# (Kafka's default 45 s would make the test slow); the first assignment waits Kafka's 3 s.
# Members take tasks (and give revoked ones up) at their next heartbeat: 500 ms instead of
# Kafka's 5 s, configuration the test does not check.
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.streams.session.timeout.ms": "10000",
             "group.streams.heartbeat.interval.ms": "500"}


def build() -> str:
    missing = [t for t in ("java", "javac", "mvn") if shutil.which(t) is None]
    if missing:
        pytest.fail("the streams tests need %s on PATH" % " and ".join(missing), pytrace=False)
    target = PROJECT / "target"
    target.mkdir(exist_ok=True)
    with open(target / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cp = target / "classpath.txt"
        src = max(p.stat().st_mtime for p in list((PROJECT / "src").rglob("*")) + [PROJECT / "pom.xml"])
        if not (cp.exists() and cp.stat().st_mtime > src):
            base = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(PROJECT / "pom.xml"), "compile"]
            for cmd in (base[:1] + ["-o"] + base[1:], base):   # offline first
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode == 0:
                    break
            else:
                pytest.fail("Maven build of compat/streams failed:\n%s\n%s" % (r.stdout[-3000:], r.stderr[-3000:]))
            os.utime(cp)
        return str(target / "classes") + os.pathsep + cp.read_text().strip()


JAVA = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


class Instance:
    def __init__(self, cp, bootstrap, app, state_dir, out_path):
        self.out_path = out_path
        self.out = open(out_path, "wb")
        self.err = open(out_path + ".err", "wb")
        self.proc = subprocess.Popen(JAVA + ["-cp", cp, "pykbroker.streams.StreamsApp", "run", bootstrap, app,
                                            "words", "counts", state_dir],
                                     stdin=subprocess.PIPE, stdout=self.out, stderr=self.err)

    def events(self):
        with open(self.out_path) as f:
            return [json.loads(line) for line in f if line.strip().startswith("{")]

    def wait_running(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = [e["state"] for e in self.events() if e["event"] == "state"]
            if states and states[-1] == "RUNNING":
                return
            assert self.proc.poll() is None, self.context()
            time.sleep(0.3)
        raise AssertionError("instance not RUNNING\n" + self.context())

    def close(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        self.err.close()

    def context(self):
        with open(self.out_path + ".err", errors="replace") as f:
            err = f.read()[-4000:]
        return "events: %s\nstderr tail:\n%s" % (self.events(), err)


def admin(cp, bootstrap, app) -> dict:
    r = subprocess.run(JAVA + ["-cp", cp, "pykbroker.streams.StreamsApp", "admin", bootstrap, app],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-3000:]
    return {e["event"]: e for e in (json.loads(line) for line in r.stdout.splitlines() if line.startswith("{"))}


def produce(bootstrap, lines, start):
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i, line in enumerate(lines):
        p.send("words", key=str(start + i).encode(), value=line.encode())
    p.flush()
    p.close()


def wait_counts(consumer, seen, expected, timeout=90):
    """Read the output topic on until the last count per word equals ``expected``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            for m in recs:
                seen[m.key.decode()] = struct.unpack(">q", m.value)[0]
        if seen == expected:
            return
    assert seen == expected


def words_of(lines):
    return Counter(w for line in lines for w in line.lower().split())


BATCH1 = ["the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "a fox runs", "brown dog brown fox"] * 4
BATCH2 = ["the cat", "a lazy cat sleeps", "quick quick quick"] * 5


def word_count_two_instances_then_one(bg, tmp_path):
    """The test's run (in the background from the start of tests/java: it mostly waits on the
    Streams instances' startup and rebalances; tests/java/conftest.py ``runs_ahead``)."""
    cp = build()
    with BrokerProcess(str(tmp_path / "data"), OVERRIDES) as b:
        bs = b.bootstrap
        a = KafkaAdminClient(bootstrap_servers=bs)
        a.create_topics([NewTopic("words", 4, 1), NewTopic("counts", 2, 1)])
        a.close()
        produce(bs, BATCH1, 0)
        i1 = Instance(cp, bs, "wc", str(tmp_path / "s1"), str(tmp_path / "i1.out"))
        i2 = Instance(cp, bs, "wc", str(tmp_path / "s2"), str(tmp_path / "i2.out"))
        consumer = KafkaConsumer("counts", bootstrap_servers=bs, auto_offset_reset="earliest", group_id=None)
        try:
            i1.wait_running()
            i2.wait_running()
            seen: dict = {}
            wait_counts(consumer, seen, dict(words_of(BATCH1)))

            # the Java Admin sees the group: two members sharing the 8 tasks (2 subtopologies x 4)
            d = admin(cp, bs, "wc")
            desc, listing = d["describe"], d["list"]
            assert desc["state"] == "STABLE" or desc["state"].upper() == "STABLE", desc
            assert len(desc["members"]) == 2 and sum(m["active"] for m in desc["members"]) == 8, desc
            assert all(m["active"] == 4 for m in desc["members"]), desc
            subs = {s["id"]: s for s in desc["subtopologies"]}
            assert subs["0"]["sources"] == "words"
            assert subs["1"]["changelogs"] == "wc-counts-changelog"
            assert subs["1"]["repartition_sources"] == "wc-counts-repartition"
            assert [(g["group"], g["type"].upper(), g["protocol"]) for g in listing["groups"]] == [("wc", "STREAMS", "streams")]

            # the broker created the internal topics with the topology's partition counts
            md = KafkaAdminClient(bootstrap_servers=bs)
            topics = {t.get("topic", t.get("name")): len(t["partitions"]) for t in md.describe_topics(["wc-counts-repartition",
                                                                                   "wc-counts-changelog"])}
            md.close()
            assert topics == {"wc-counts-repartition": 4, "wc-counts-changelog": 4}

            # one instance leaves: the other takes over every task and processing goes on
            i2.close()
            assert {"event": "closed"} in i2.events(), i2.context()
            produce(bs, BATCH2, len(BATCH1))
            wait_counts(consumer, seen, dict(words_of(BATCH1 + BATCH2)), timeout=120)
            deadline = time.monotonic() + 60
            while True:
                desc = admin(cp, bs, "wc")["describe"]
                if len(desc["members"]) == 1 and desc["members"][0]["active"] == 8:
                    break
                assert time.monotonic() < deadline, desc
                time.sleep(1)
        finally:
            consumer.close()
            i1.close()
            i2.close()


AHEAD = {"test_word_count_two_instances_then_one": word_count_two_instances_then_one}


def test_word_count_two_instances_then_one(runs_ahead, request):
    runs_ahead[request.node.nodeid].result()
