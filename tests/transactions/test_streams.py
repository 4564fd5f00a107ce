"""A Kafka Streams application (kafka-streams 4.3 from Maven Central (the newest published there), compat/streams) with
processing.guarantee=exactly_once_v2: a word count whose output stays exact while the application
and then the broker are killed with SIGKILL mid-run.

With the record cache off, every input word produces one output record, so under exactly-once
the committed output for a word that occurs n times is exactly "1", "2", ... "n" in order: a
duplicate or a lost update after a crash would show there."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from pykbroker.local.broker_process import BrokerProcess, wait_until

from .helpers import create_topic, unique

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "compat" / "streams"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def build_classpath() -> str:
    """Compile compat/streams (once; Maven offline first, then online for the first download).
    Missing Java/Maven or a failed build fails the test: Streams is part of the promise."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.fail("%s is needed for the Kafka Streams test" % tool, pytrace=False)
    target = PROJECT / "target"
    cp = target / "classpath.txt"
    cls = target / "classes" / "pykbroker" / "streams" / "WordCount.class"
    src = PROJECT / "src" / "main" / "java" / "pykbroker" / "streams" / "WordCount.java"
    if not (cp.exists() and cls.exists() and cls.stat().st_mtime > src.stat().st_mtime):
        base = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(PROJECT / "pom.xml"), "compile"]
        for cmd in (base[:1] + ["-o"] + base[1:], base):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 0:
                break
        else:
            pytest.fail("Maven build of compat/streams failed:\n%s\n%s" % (r.stdout[-3000:], r.stderr[-3000:]),
                        pytrace=False)
    return str(target / "classes") + os.pathsep + cp.read_text().strip()


class App:
    """One WordCount JVM; ``running`` is set once Streams reports RUNNING."""

    def __init__(self, classpath, bootstrap, app_id, inp, out, state_dir):
        self.args = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                     "pykbroker.streams.WordCount", bootstrap, app_id, inp, out, str(state_dir)]
        self.proc = None
        self.lines: list[str] = []

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
        return self

    def _pump(self, proc):
        for line in proc.stdout:
            self.lines.append(line)

    def running(self) -> bool:
        states = [l.split()[1] for l in self.lines if l.startswith("STATE ")]
        return bool(states) and states[-1] == "RUNNING"

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def text(self):
        return "".join(self.lines[-80:])


def committed_output(bs, out) -> dict:
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("check"), "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    md = c.list_topics(out, timeout=10).topics[out]
    tps = [TopicPartition(out, p) for p in md.partitions]
    c.assign([TopicPartition(out, p, 0) for p in md.partitions])

    def at_the_end() -> bool:
        # every partition read to its last stable offset (librdkafka asks for the watermarks with
        # the consumer's read_committed): everything committed now is read, no need to wait 2 s
        try:
            ends = [c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps]
        except KafkaException:
            return False
        return all(pos.offset >= end or (pos.offset < 0 and end == 0) for pos, end in zip(c.position(tps), ends))

    got: dict = {}
    idle = time.monotonic()
    while time.monotonic() - idle < 2.0:
        m = c.poll(0.2)
        if m is None and at_the_end():
            break
        if m is None or m.error():
            continue
        got.setdefault(m.key().decode(), []).append(m.value().decode())
        idle = time.monotonic()
    c.close()
    return got


def committed_input(bs, group, topic, partitions=3) -> int:
    """The input offsets the application's group has committed (Streams commits them in its
    transactions), summed over the partitions; 0 while OffsetFetch cannot answer.  Read without
    require_stable (librdkafka sets it under read_committed): an application that always has a
    transaction open would otherwise answer UNSTABLE_OFFSET_COMMIT until the timeout."""
    from confluent_kafka import KafkaException

    # never subscribes: reads the group's offsets without joining it
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    except KafkaException:
        return 0
    finally:
        c.close()
    return sum(max(tp.offset, 0) for tp in got)


def word_count_through_kill9_run(tmp_path: Path, _run=None) -> None:
    """The whole scenario, its assertions included (a failure raises from here): about 20 s of
    JVM start-ups and waits on the application's and the broker's restarts, light on the CPU
    between them, so tests/transactions/conftest.py starts it with the package, overlapped with
    the modules before this one; the test below re-raises whatever it raised."""
    classpath = build_classpath()
    rng = random.Random(12)
    b = BrokerProcess(str(tmp_path / "data"), {"group.initial.rebalance.delay.ms": "0",
                                                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    b.start()
    app = None
    try:
        inp = create_topic(b.bootstrap, "wc-in", 3)
        out = create_topic(b.bootstrap, "wc-out", 3)
        expected: dict = {}
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5))) for _ in range(900)]
        for line in lines:
            for w in line.split():
                expected[w] = expected.get(w, 0) + 1
        produced = []
        sent = [0]
        # the feeder holds a third of the input back until each kill happened, so both kills
        # land with input still to come, whatever the machine's speed
        gates = {len(lines) // 3: threading.Event(), 2 * len(lines) // 3: threading.Event()}

        def produce():
            # paced, so the kills below land while the application is processing; idempotent
            # and flushed, so every line is in the input exactly once whatever the broker does
            p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 5})
            for i, line in enumerate(lines):
                if i in gates:
                    gates[i].wait(300)
                p.produce(inp, value=line.encode(), key=b"%d" % i)
                p.poll(0)
                sent[0] = i + 1
                time.sleep(0.01)
            produced.append(p.flush(120))

        app_id = unique("wc")
        app = App(classpath, b.bootstrap, app_id, inp, out, tmp_path / "state").start()
        wait_until(app.running, 120, what="streams RUNNING")
        feeder = threading.Thread(target=produce, daemon=True)
        feeder.start()
        # mid-run: the application has committed a transaction (input offsets of its group
        # moved), and input is still to come
        wait_until(lambda: committed_input(b.bootstrap, app_id, inp) > 0, 120, what="a first committed transaction")
        at_kill = sent[0]
        app.kill()                                    # kill -9 of the application mid-run
        assert at_kill < len(lines)
        # what the killed application committed (its open transaction is never committed): the
        # restarted one must go past it, with the input released below
        before = committed_input(b.bootstrap, app_id, inp)
        gates[len(lines) // 3].set()
        app = App(classpath, b.bootstrap, app_id, inp, out, tmp_path / "state2").start()
        try:
            wait_until(app.running, 120, what="streams RUNNING after kill")
        except AssertionError:
            raise AssertionError("app log:\n" + app.text() + "\nbroker log:\n" + b.log_text()[-5000:])
        # the restarted application has committed a transaction of its own
        wait_until(lambda: committed_input(b.bootstrap, app_id, inp) > before, 120,
                   what="a transaction committed after the restart")
        at_kill = sent[0]
        b.kill()                                      # kill -9 of the broker mid-run
        assert at_kill < len(lines)
        b.start()
        gates[2 * len(lines) // 3].set()
        feeder.join(180)
        assert produced == [0], "the input was not fully written"

        def exact():
            got = committed_output(b.bootstrap, out)
            return all(got.get(w, [])[-1:] == [str(n)] for w, n in expected.items())
        wait_until(exact, 240, interval=2.0, what="final counts\n" + app.text())
        got = committed_output(b.bootstrap, out)
        for w, n in expected.items():
            assert got[w] == [str(i) for i in range(1, n + 1)], (w, got[w][:20])
    finally:
        if app is not None:
            app.kill()
        b.kill()


def test_streams_word_count_exactly_once_through_kill9(streams_kill9):
    streams_kill9.result()
