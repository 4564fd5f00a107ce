"""Shared pieces of the group tests: a broker allowing short sessions, worker processes, checks."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

from pykbroker.local.broker_process import BrokerProcess, wait_until

# Short sessions keep the folder fast; Kafka's floor (6 s) is lowered the way operators do it.
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
                   "offsets.topic.num.partitions": "5"}

WORKER = os.path.join(os.path.dirname(__file__), "consumer_worker.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_broker(data_dir: str, **extra) -> BrokerProcess:
    return BrokerProcess(data_dir, {**GROUP_OVERRIDES, **extra}).start()


def unique(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def txn_offset_commit_v3(tid: str, group: str, pid: int, epoch: int, generation: int, member: str, topic: str,
                         offset: int) -> dict:
    """The body of a TxnOffsetCommit v3 committing ``offset`` of ``topic``'s partition 0 for
    ``group`` in the transaction of ``tid`` (producer ``pid``/``epoch``), as member ``member`` of
    generation ``generation`` (-1 and "": no member, as an old producer sends)."""
    return {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id_or_member_epoch": generation, "member_id": member, "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


def create_topic(bootstrap: str, name: str, partitions: int = 6) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        a.create_topics([NewTopic(name, partitions, -1)])   # the broker default (3 on a cluster)
    finally:
        a.close()


def produce(bootstrap: str, topic: str, n: int, partitions: int = 6, start: int = 0) -> None:
    """n records spread round-robin over the partitions; value = a unique sequence number."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(start, start + n):
        p.send(topic, str(i).encode(), partition=i % partitions)
    p.flush()
    p.close()


class Worker:
    def __init__(self, tmp, lib, bootstrap, topic, group, name, **opts):
        self.out = os.path.join(str(tmp), "%s.out" % name)
        args = [sys.executable, WORKER, lib, bootstrap, topic, group, self.out]
        for k, v in opts.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=open(self.out + ".err", "w"))

    def lines(self):
        try:
            with open(self.out) as fh:
                return fh.read().splitlines()
        except FileNotFoundError:
            return []

    def records(self):
        return [tuple(int(x) for x in ln.split()[1:4]) for ln in self.lines() if ln.startswith("R ")]

    def assignment(self):
        asg = None
        for ln in self.lines():
            if ln.startswith("A "):
                asg = [int(x) for x in ln[2:].split(",") if x]
        return asg

    def assignment_events(self):
        return [ln for ln in self.lines() if ln.startswith("A ")]

    def describe(self) -> str:
        """The worker's state for a failure message: assignment, its last A/G/E lines, whether
        it runs, and the end of its stderr."""
        events = [ln for ln in self.lines() if ln[:2] in ("A ", "G ", "E ")][-4:]
        try:
            with open(self.out + ".err") as fh:
                err = fh.read()[-400:]
        except FileNotFoundError:
            err = ""
        rc = self.proc.poll()
        return "%s: assignment %s, events %s, %s, stderr %r" % (
            os.path.basename(self.out), self.assignment(), events,
            "running" if rc is None else "exited %s" % rc, err)

    def alive(self):
        return self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=30):
        open(self.out + ".stop", "w").close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()


def wait_stable(workers, partitions=6, timeout=30, each=None):
    """Until the live workers' assignments are pairwise disjoint and cover every partition (and,
    with ``each``, every worker holds that many: a late joiner first sees a covering but uneven
    assignment while the others' revocations are still in flight)."""
    def ok():
        asgs = [w.assignment() for w in workers]
        if any(a is None or not a for a in asgs):
            return False
        if each is not None and any(len(a) != each for a in asgs):
            return False
        flat = [p for a in asgs for p in a]
        return sorted(flat) == list(range(partitions))
    _wait_workers(workers, ok, timeout, 0.1, lambda: "a stable assignment over %d workers" % len(workers))
    return [w.assignment() for w in workers]


def _wait_workers(workers, pred, timeout, interval, what):
    """wait_until, failing with ``what()`` and every worker's state taken at the deadline."""
    try:
        wait_until(pred, timeout, interval, "condition")
    except AssertionError:
        raise AssertionError("timed out after %ss waiting for %s; at the deadline: %s" % (
            timeout, what(), "; ".join(w.describe() for w in workers))) from None


def consumed(workers):
    """value -> number of times consumed, across workers."""
    seen: dict[int, int] = {}
    for w in workers:
        for p, off, val in w.records():
            seen[val] = seen.get(val, 0) + 1
    return seen


def wait_consumed(workers, n, timeout=60):
    _wait_workers(workers, lambda: len(consumed(workers)) >= n, timeout, 0.2,
                  lambda: "%d records consumed (have %d)" % (n, len(consumed(workers))))
    return consumed(workers)


def generations(worker):
    """generation -> partitions the worker's client said it got in that generation (G lines)."""
    out: dict[int, list[int]] = {}
    for ln in worker.lines():
        if ln.startswith("G "):
            parts = ln.split()
            out[int(parts[1])] = [int(x) for x in parts[2].split(",")] if len(parts) > 2 else []
    return out


def check_generations(workers):
    """No partition owned by two members in one generation, from the clients' own callbacks.
    Returns {generation: {partition: owner}}."""
    by_gen: dict[int, dict[int, str]] = {}
    for w in workers:
        for gen, parts in generations(w).items():
            owners = by_gen.setdefault(gen, {})
            for p in parts:
                assert p not in owners, "generation %d: partition %d owned by %s and %s" % (
                    gen, p, owners[p], w.out)
                owners[p] = w.out
    return by_gen


class BackgroundProducer:
    """Keeps writing sequence numbers (round-robin over the partitions) until stopped."""

    def __init__(self, bootstrap, topic, partitions=6, rate=300):
        import threading
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, acks="all")
        step = max(self.rate // 20, 1)
        while not self._stop.is_set():
            for _ in range(step):
                p.send(self.topic, str(self.sent).encode(), partition=self.sent % self.partitions)
                self.sent += 1
            p.flush()
            time.sleep(0.05)
        p.flush()
        p.close()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(30)
        return self.sent
