"""Exactly-once fault run: a transactional consume-transform-produce loop on a real cluster while
partition leaders are killed (kill -9), then "output = input, exactly once" checked.

``N`` numbered records are written to an input topic first.  One confluent-kafka application
reads them in a consumer group (read_committed) and, per poll, writes ``out-<n>`` for each
input ``n`` to the output topic and commits the input offsets in the same transaction
(``send_offsets_to_transaction``).  A fault in the middle of a transaction aborts it (or the
application restarts from its last committed offsets with a new producer, fencing the old);
aborted output is invisible to read_committed readers.  Meanwhile the nemesis kills the leader of
a random output or input partition every ``interval`` seconds and restarts it.

librdkafka's ``send_offsets_to_transaction`` can block past its timeout, indefinitely, when the
group coordinator it cached goes down (librdkafka issues #5456 and #5511, open in 2.16, seen
against any broker).  The application bounds that call as a careful application would: if it
has not returned well after its own timeout, the producer is abandoned and a new session starts
with a new producer of the same transactional id, whose InitProducerId fences the stuck one and
aborts its transaction.  Such hangs are counted in the report (``client hangs``).

The check: a read_committed consumer of the whole output sees every ``out-n`` for n < N
exactly once (none missing, none twice).
"""
from __future__ import annotations

import dataclasses
import random
import signal
import threading
import time
import uuid
from typing import Callable, Optional

from pykbroker.local.cluster import Cluster

from compat.chaos.common import create_replicated_topic, draw_seed, leader_of

IN, OUT = "eos-in", "eos-out"


@dataclasses.dataclass
class EosReport:
    seconds: float
    records: int
    faults: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0
    restarts: int = 0
    client_hangs: int = 0
    output: int = 0
    missing: int = 0
    duplicates: int = 0
    examples: list = dataclasses.field(default_factory=list)
    seed: int = 0            # the nemesis's schedule (replays with the same seed)

    @property
    def ok(self) -> bool:
        return self.output == self.records and self.missing == 0 and self.duplicates == 0

    def row(self) -> str:
        return ("eos-kill-leader %5.0fs  input %d  output %d  missing %d  duplicates %d  "
                "transactions %d committed / %d aborted  app restarts %d  client hangs %d  faults %d  %s"
                % (self.seconds, self.records, self.output, self.missing, self.duplicates,
                   self.committed_txns, self.aborted_txns, self.restarts, self.client_hangs, self.faults,
                   "ok" if self.ok else "FAIL"))


class _ClientHang(Exception):
    pass


def _bounded(fn, timeout: float):
    """``fn()`` in a helper thread; _ClientHang if it has not returned after ``timeout`` seconds
    (the thread, blocked in the client library, is left behind)."""
    box: dict = {}

    def call():
        try:
            box["result"] = fn()
        except BaseException as e:   # handed to the caller
            box["error"] = e
    th = threading.Thread(target=call, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        raise _ClientHang()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _fill_input(bootstrap: str, n: int, partitions: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "log_level": 2})
    for i in range(n):
        p.produce(IN, str(i).encode(), partition=i % partitions)
    assert p.flush(120) == 0


class EosApp:
    """The consume-transform-produce application, restarted (new consumer and producer, same
    transactional id) whenever a transaction fails in a way that needs it."""

    BATCH = 50   # input records per transaction at most

    # send_offsets_to_transaction's own timeout, and how long past it the call may block before
    # the producer is abandoned (the hang above): a fail-over here (6 s ZooKeeper session, the
    # election, the coordinator's move) completes in well under 20 s even on 2 loaded cores, and a
    # call that does time out is a retriable error the loop handles (abort, rewind).  Waiting
    # 90 s for a hang, as before, cost a whole run's length each time librdkafka hung.
    SEND_OFFSETS_TIMEOUT_S = 20
    HANG_AFTER_S = 30

    def __init__(self, bootstrap: str, report: EosReport, target: int, pace_s: float = 0.0,
                 log: Callable[[str], None] = lambda m: None):
        self.log = log
        self.bootstrap = bootstrap
        # the schedule of transactions, so that the work spans the faults: the k-th commit comes
        # no earlier than k * pace_s after the start.  A slow machine that is behind it does not
        # pause at all (a fixed pause per transaction added its sum to whatever the work took).
        self.pace_s = pace_s
        self.t_start = time.monotonic()
        self.report = report
        self.target = target
        self.tid = "eos-app-" + uuid.uuid4().hex[:6]
        self.group = "eos-group-" + uuid.uuid4().hex[:6]
        self.done = threading.Event()
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None

    def _session(self) -> None:
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "log_level": 2, "session.timeout.ms": 10000})
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid,
                      "transaction.timeout.ms": 30000, "log_level": 2})
        try:
            p.init_transactions(60)
            c.subscribe([IN])
            while not self.stop.is_set():
                msgs = c.consume(self.BATCH, 1.0)
                msgs = [m for m in msgs if not m.error()]
                if not msgs:
                    if self._output_complete_hint():
                        return
                    continue
                p.begin_transaction()
                try:
                    for m in msgs:
                        p.produce(OUT, b"out-" + m.value(), partition=m.partition())
                    nxt: dict[int, int] = {}
                    for m in msgs:
                        nxt[m.partition()] = max(nxt.get(m.partition(), 0), m.offset() + 1)
                    offsets = [TopicPartition(IN, part, off) for part, off in nxt.items()]
                    meta = c.consumer_group_metadata()
                    # the call's own timeout; librdkafka may ignore it (see above)
                    _bounded(lambda: p.send_offsets_to_transaction(offsets, meta, self.SEND_OFFSETS_TIMEOUT_S),
                             self.HANG_AFTER_S)
                    p.commit_transaction(60)
                    self.report.committed_txns += 1
                    if self.pace_s:
                        next_at = self.t_start + self.report.committed_txns * self.pace_s
                        time.sleep(max(0.0, next_at - time.monotonic()))
                except _ClientHang:
                    self.report.client_hangs += 1
                    self.log("send_offsets_to_transaction blocked past its timeout: new producer")
                    if len(self.report.examples) < 5:
                        self.report.examples.append("client hang in send_offsets_to_transaction")
                    return   # a new session; its InitProducerId fences this producer
                except KafkaException as e:
                    err = e.args[0]
                    if len(self.report.examples) < 5:
                        self.report.examples.append("transaction failed: %s" % err)
                    self.log("transaction failed: %s" % err)
                    # A retriable error leaves the transaction open (librdkafka would let the
                    # call be retried): abort it too, so the loop never begins a transaction
                    # inside another one.
                    if err.txn_requires_abort() or err.retriable():
                        try:
                            p.abort_transaction(60)
                            self.report.aborted_txns += 1
                        except KafkaException:
                            return   # start over with a new session
                        # rewind to the committed offsets: the aborted input is read again
                        if not self._rewind(c):
                            return
                        continue
                    return   # fatal (fenced, ...): a new session
        except KafkaException as e:
            # outside a transaction's calls (init_transactions, begin_transaction, consume): the
            # cluster is failing over; a new session (producer + consumer) starts from the
            # committed offsets
            self.log("session failed: %s" % e.args[0])
            if len(self.report.examples) < 5:
                self.report.examples.append("session failed: %s" % e.args[0])
        finally:
            try:
                c.close()
            except Exception:
                pass

    def _rewind(self, c) -> bool:
        """Back to the committed offsets; False when they cannot be read now (the caller starts
        a new session, whose consumer starts from them)."""
        from confluent_kafka import KafkaException, TopicPartition
        try:
            committed = c.committed(c.assignment(), 30)
            for tp in committed:
                c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        except KafkaException as e:
            self.log("rewind failed (%s): new session" % e.args[0])
            return False
        return True

    def _output_complete_hint(self) -> bool:
        return self.done.is_set()

    def run(self) -> None:
        try:
            while not self.stop.is_set() and not self.done.is_set():
                self._session()
                if not self.stop.is_set() and not self.done.is_set():
                    self.report.restarts += 1
                    time.sleep(0.5)
        except BaseException as e:   # reported by the caller
            self.error = e


def read_output(bootstrap: str, partitions: int, expect: int, timeout: float) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-check-" + uuid.uuid4().hex[:6],
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "log_level": 2})
    c.assign([TopicPartition(OUT, p, 0) for p in range(partitions)])
    got: list[str] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
                quiet_until = None
            elif len(got) >= expect:
                quiet_until = quiet_until or time.monotonic() + 3.0
                if time.monotonic() > quiet_until:
                    break
    finally:
        c.close()
    return got


def run(seconds: float = 60.0, interval: float = 10.0, records: int = 20000, partitions: int = 3,
        data_dir: Optional[str] = None, seed: Optional[int] = None, session_timeout_ms: int = 6000,
        log: Callable[[str], None] = print) -> EosReport:
    seed = draw_seed(seed, log)   # drawn and logged when None; EosReport.seed keeps it
    rnd = random.Random(seed)
    overrides = {"zookeeper.session.timeout.ms": str(session_timeout_ms), "default.replication.factor": "3",
                 "min.insync.replicas": "2", "offsets.topic.num.partitions": "3",
                 "transaction.state.log.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
                 "unclean.leader.election.enable": "false"}
    report = EosReport(seconds, records, seed=seed)
    with Cluster(3, data_dir, overrides=overrides, zk_tick_time=500) as cluster:
        bootstrap = cluster.bootstrap_servers
        for t in (IN, OUT):
            create_replicated_topic(cluster, t, partitions)
        _fill_input(bootstrap, records, partitions)
        log("input written: %d records; starting the application" % records)
        # spread the transactions over about 80% of the run
        app = EosApp(bootstrap, report, records, pace_s=max(0.0, 0.8 * seconds / (records / EosApp.BATCH)), log=log)
        th = threading.Thread(target=app.run, daemon=True)
        th.start()
        t_end = time.monotonic() + seconds
        try:
            while time.monotonic() < t_end:
                time.sleep(min(interval, max(0.0, t_end - time.monotonic())))
                if time.monotonic() >= t_end:
                    break
                topic = rnd.choice((IN, OUT))
                victim = leader_of(cluster, rnd.randrange(partitions), topic)
                if victim is None:
                    continue
                cluster.kill(victim, signal.SIGKILL)
                report.faults += 1
                time.sleep(min(3.0, interval / 2))
                cluster.start(victim)
        finally:
            for b in cluster.brokers:
                b.resume()
                if not b.running():
                    cluster.start(b.broker_id)
        log("nemesis done (%d fault(s)); letting the application finish" % report.faults)
        got = read_output(bootstrap, partitions, records, timeout=180)
        app.done.set()
        app.stop.set()
        th.join(120)
        if app.error is not None:
            raise app.error
        report.output = len(got)
        seen: dict[str, int] = {}
        for v in got:
            seen[v] = seen.get(v, 0) + 1
        report.duplicates = sum(n - 1 for n in seen.values() if n > 1)
        want = {"out-%d" % i for i in range(records)}
        missing = sorted(want - set(seen), key=lambda s: int(s[4:]))
        report.missing = len(missing)
        if missing:
            report.examples.insert(0, "missing: %s" % missing[:10])
        if report.duplicates:
            report.examples.append("duplicated: %s" % [v for v, n in seen.items() if n > 1][:10])
    return report
