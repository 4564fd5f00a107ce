"""Fault runs against a real cluster: real brokers and ZooKeeper as processes, real clients, real
signals; then Kafka's rule checked on what a consumer reads back.

One run = a ``Cluster`` (ZooKeeper + N brokers), a topic (RF 3, ``min.insync.replicas=2``),
idempotent ``acks=all`` confluent-kafka producers writing numbered values (and with
``java_producers`` also idempotent acks=all Java kafka-clients producers, one JVM each, running
compat/java's ``produce_load`` scenario and reporting every acknowledgement as a JSON line), and
a *nemesis* hurting the cluster meanwhile.  Afterwards everything is healed, and one consumer reads every
partition from the start to its end.  The checker reports:

- **lost**: acknowledged records not read back (must be 0: Kafka's promise for acks=all with
  min.insync.replicas=2 and fewer than RF failures at once);
- **duplicates**: values read more than once (0 with idempotence);
- **inconsistent**: an acknowledged record read back at another offset than the one it was
  acknowledged with, or a producer's values out of order within a partition (Jepsen's queue
  checks on top of Kafka's rule);
- **unavailable**: the longest time without any acknowledgement while producing;
- produce latency p50/p99 (send to acknowledgement).

Scenarios (``SCENARIOS``): ``kill-leader`` (kill -9 the leader of a partition every
``interval`` s, restart it a little later), ``bounce`` (SIGTERM a broker and start it again),
``pause-leader`` (SIGSTOP a leader for 5-15 s), ``zookeeper`` (ZooKeeper killed for 20 s; 2.5 intervals when shorter),
``all-down`` (every broker killed at once, then all started), ``zk-blips`` (every broker's
ZooKeeper link dropped every 3 s through a relay, sessions kept, while the leader of a partition
other than the controller is killed -9 every ``interval`` s and kept down that long).

The command:

    python compat/chaos/chaos.py                       # every scenario, 120 s each
    python compat/chaos/chaos.py kill-leader --seconds 60 --json /tmp/chaos.json
    python compat/chaos/chaos.py --java                # plus an idempotent acks=all Java producer
    python compat/chaos/chaos.py --java 2 --java-profile kafka4

``--java [N]`` adds N Java kafka-clients producers (compat/java's ``produce_load`` scenario, one
JVM each, built with Maven on first use) beside the confluent-kafka ones: same value scheme
``<producer>-<seq>``, their acknowledgements (partition, offset, value) read from their stdout,
so the checker covers both clients.  Exit status 0 when no acknowledged record was lost,
duplicated or moved in any run.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional

if __name__ == "__main__":   # run as a script: this checkout (pykbroker and compat/) first on the path
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from pykbroker.local.cluster import Cluster  # noqa: E402
from pykbroker.protocol import wire  # noqa: E402

from compat.chaos.common import create_replicated_topic, draw_seed, leader_of, pace, start_threads  # noqa: E402

TOPIC = "chaos"


@dataclasses.dataclass
class Report:
    scenario: str
    seconds: float
    sent: int = 0
    acked: int = 0
    failed: int = 0
    consumed: int = 0
    lost: int = 0
    duplicates: int = 0
    inconsistent: int = 0
    unavailable_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    faults: int = 0
    java_acked: int = 0      # of ``acked``: by the Java producers
    examples: list = dataclasses.field(default_factory=list)
    seed: int = 0            # the nemesis's schedule: the same seed replays it (``seed=`` / --seed)
    # acknowledged records the first read-back missed and a later one found at their offsets
    # (a new leader's high watermark still catching up): absorbed by re-reading, reported here
    late: int = 0

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicates == 0 and self.inconsistent == 0 and self.acked > 0

    def row(self) -> str:
        return ("%-13s %6.0fs %8d %8d %7d %8d %5d %5d %5d %9.1fs %8.1f %8.1f %s"
                % (self.scenario, self.seconds, self.sent, self.acked, self.failed, self.consumed, self.lost,
                   self.duplicates, self.inconsistent, self.unavailable_s, self.p50_ms, self.p99_ms,
                   "ok" if self.ok else "FAIL"))

    HEADER = ("%-13s %7s %8s %8s %7s %8s %5s %5s %5s %10s %8s %8s %s"
              % ("scenario", "time", "sent", "acked", "failed", "consumed", "lost", "dup", "incon",
                 "unavail", "p50 ms", "p99 ms", ""))


class ProducerLoad:
    """``producers`` idempotent acks=all confluent-kafka producers in threads, each writing
    ``"<producer>-<seq>"`` at about ``rate`` records/s, keyed so every partition gets some; and
    ``java_producers`` Java ones (values ``"j<n>-<seq>"``, JVMs started from ``java_classpath``)
    whose acknowledgements land in the same ``acked`` map, so the checker treats both alike."""

    def __init__(self, bootstrap: str, producers: int = 2, rate: int = 500, partitions: int = 3,
                 java_producers: int = 0, java_classpath: Optional[str] = None):
        self.bootstrap = bootstrap
        self.n = producers
        self.rate = rate
        self.partitions = partitions
        self.java_n = java_producers
        self.java_classpath = java_classpath
        self.java_acked = 0
        self._java: list[tuple] = []   # (process, reader thread, name, its final counts)
        self._java_dir: Optional[str] = None
        self.acked: dict[str, tuple[int, int]] = {}      # value -> (partition, offset)
        self.ack_times: list[float] = []
        self.latencies: list[float] = []
        self.sent = 0
        self.failed = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _run(self, pid: int) -> None:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 300000, "retry.backoff.ms": 100,
                      "topic.metadata.refresh.interval.ms": 1000, "client.id": "chaos-%d" % pid,
                      "log_level": 2})   # brokers going away are expected: only critical lines
        seq = 0
        interval = 1.0 / max(1, self.rate)
        next_t = time.monotonic()

        def cb(err, msg, sent_at):
            now = time.monotonic()
            with self._lock:
                if err is not None:
                    self.failed += 1
                    return
                self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
                self.ack_times.append(now)
                self.latencies.append(now - sent_at)

        while not self._stop.is_set():
            value = "%d-%d" % (pid, seq)
            sent_at = time.monotonic()
            try:
                p.produce(TOPIC, value.encode(), partition=seq % self.partitions,
                          on_delivery=lambda err, msg, s=sent_at: cb(err, msg, s))
            except BufferError:
                p.poll(0.1)
                continue
            seq += 1
            with self._lock:
                self.sent += 1
            p.poll(0)
            next_t = pace(next_t, interval)
        # everything sent must end acknowledged or failed (message.timeout.ms)
        p.flush(330)

    def _java_reader(self, proc: subprocess.Popen, name: str, info: dict) -> None:
        """Acknowledgements of one Java producer, from its stdout (one JSON object a line)."""
        for line in proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            now = time.monotonic()
            with self._lock:
                if e.get("event") == "acked":
                    self.acked[e["value"]] = (e["partition"], e["offset"])
                    self.java_acked += 1
                    self.ack_times.append(now)
                    self.latencies.append(e["latency_ms"] / 1000.0)
                elif e.get("event") == "failed":
                    self.failed += 1
                elif e.get("event") == "produced":
                    info["sent"] = e["sent"]
                elif e.get("event") in ("fatal", "phase_error"):
                    info["error"] = e

    def start(self) -> None:
        self._threads += start_threads(self._run, self.n)
        if self.java_n:
            self._java_dir = tempfile.mkdtemp(prefix="pykbroker-chaos-java-")
            stop_file = os.path.join(self._java_dir, "stop")
            for i in range(self.java_n):
                name = "j%d" % i
                # Main's watchdog (timeout_s) must outlast the run and the final flush.
                cmd = ["java", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", self.java_classpath,
                       "pykbroker.compat.Main", "produce_load", self.bootstrap, "timeout_s=86400",
                       "topic=" + TOPIC, "producer=" + name, "partitions=%d" % self.partitions,
                       "rate=%d" % self.rate, "stop_file=" + stop_file]
                err = open(os.path.join(self._java_dir, name + ".err"), "wb")
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
                err.close()
                info: dict = {}
                t = threading.Thread(target=self._java_reader, args=(proc, name, info), daemon=True)
                t.start()
                self._java.append((proc, t, name, info))

    def kill(self) -> None:
        """Abandon the run: the Java producers killed (the threads are daemons)."""
        self._stop.set()
        for proc, _t, _name, _info in self._java:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self._java_dir is not None:
            shutil.rmtree(self._java_dir, ignore_errors=True)

    def stop(self) -> None:
        self._stop.set()
        if self._java_dir is not None:
            open(os.path.join(self._java_dir, "stop"), "w").close()
        for t in self._threads:
            t.join()
        problems = []
        for proc, t, name, info in self._java:
            try:
                proc.wait(360)   # its flush waits up to delivery.timeout.ms (300 s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            t.join(10)
            if proc.returncode != 0 or "sent" not in info:
                with open(os.path.join(self._java_dir, name + ".err"), errors="replace") as f:
                    tail = "".join(f.readlines()[-30:])
                problems.append("Java producer %s exited with %s (%s):\n%s"
                                % (name, proc.returncode, info.get("error"), tail))
            else:
                with self._lock:
                    self.sent += info["sent"]
        if self._java_dir is not None:
            shutil.rmtree(self._java_dir, ignore_errors=True)
        if problems:
            raise RuntimeError("\n".join(problems))


def read_back(bootstrap: str, partitions: int, timeout: float = 120.0) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, in offset order: {partition: [(offset, value)]}."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-check-%d" % random.randrange(1 << 30),
                  "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                  "isolation.level": "read_uncommitted", "topic.metadata.refresh.interval.ms": 1000,
                  "log_level": 2})
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        ends = {}
        deadline = time.monotonic() + timeout
        for p in range(partitions):
            while True:
                try:
                    ends[p] = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        done = {p for p in range(partitions) if ends[p] == 0}
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:   # _PARTITION_EOF
                    if m.offset() >= ends[m.partition()]:
                        done.add(m.partition())
                continue
            out[m.partition()].append((m.offset(), m.value().decode()))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        if len(done) < partitions:
            raise AssertionError("could not read every partition to its end: %s of %s (ends %s)"
                                 % (sorted(done), partitions, ends))
    finally:
        c.close()
    return out


def check(report: Report, load: ProducerLoad, records: dict[int, list[tuple[int, str]]]) -> Report:
    where: dict[str, list[tuple[int, int]]] = {}
    for p, recs in records.items():
        last_seq: dict[str, int] = {}
        for off, value in recs:
            where.setdefault(value, []).append((p, off))
            prod, seq = value.split("-")
            if last_seq.get(prod, -1) >= int(seq):
                report.inconsistent += 1
                report.examples.append("out of order in partition %d: %s after seq %d" % (p, value, last_seq[prod]))
            last_seq[prod] = int(seq)
    report.consumed = sum(len(r) for r in records.values())
    report.duplicates = sum(len(v) - 1 for v in where.values() if len(v) > 1)
    for value, (p, off) in load.acked.items():
        got = where.get(value)
        if not got:
            report.lost += 1
            if len(report.examples) < 10:
                report.examples.append("lost: %s acknowledged at %d@%d" % (value, p, off))
        elif (p, off) not in got:
            report.inconsistent += 1
            if len(report.examples) < 10:
                report.examples.append("moved: %s acknowledged at %d@%d, read at %s" % (value, p, off, got))
    report.sent, report.acked, report.failed = load.sent, len(load.acked), load.failed
    report.java_acked = load.java_acked
    times = sorted(load.ack_times)
    if times:
        report.unavailable_s = max([b - a for a, b in zip(times, times[1:])] or [0.0])
    lat = sorted(load.latencies)
    if lat:
        report.p50_ms = 1000 * statistics.median(lat)
        report.p99_ms = 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return report


# ---------------------------------------------------------------------- nemeses
def _kill_leader(cluster: Cluster, rnd: random.Random, partitions: int, interval: float, stop: Callable) -> int:
    n = 0
    while not stop(interval):
        victim = leader_of(cluster, rnd.randrange(partitions), TOPIC)
        if victim is None:
            continue
        cluster.kill(victim, signal.SIGKILL)
        n += 1
        if stop(min(3.0, interval / 2)):
            cluster.start(victim)
            break
        cluster.start(victim)
    return n


def _bounce(cluster, rnd, partitions, interval, stop) -> int:
    n = 0
    while not stop(interval):
        victim = rnd.choice(cluster.brokers).broker_id
        cluster.stop(victim)
        n += 1
        cluster.start(victim)
    return n


def _pause_leader(cluster, rnd, partitions, interval, stop) -> int:
    n = 0
    while not stop(interval / 2):
        victim = leader_of(cluster, rnd.randrange(partitions), TOPIC)
        if victim is None:
            continue
        node = cluster.broker(victim)
        node.pause()
        n += 1
        try:
            stop(rnd.uniform(5, 15))
        finally:
            node.resume()
    return n


def _zookeeper(cluster, rnd, partitions, interval, stop) -> int:
    if stop(interval / 2):
        return 0
    cluster.zookeeper.kill(signal.SIGKILL)
    # down 20 s in the default 10 s-interval runs, 2.5 intervals in shorter ones: always longer
    # than the brokers' 6 s sessions, and load still flows for a while after ZooKeeper returns
    stop(min(20.0, 2.5 * interval))
    cluster.zookeeper.start()
    return 1


# How often the zk-blips scenario drops the ZooKeeper links: several blips per session timeout
# (6 s in these runs), as in the runs that found a controller stepping down on a blip.
BLIP_INTERVAL_S = 3.0


def controller_of(cluster: Cluster) -> Optional[int]:
    for b in cluster.brokers:
        if b.running():
            try:
                cid = wire.metadata(("127.0.0.1", b.port), [])["controller_id"]
            except OSError:
                continue
            if cid >= 0:
                return cid
    return None


def _zk_blips(cluster, rnd, partitions, interval, stop) -> int:
    """ZooKeeper links dropped every BLIP_INTERVAL_S for the whole run (the relay of
    ``Cluster(zookeeper_relay=True)``) and, every ``interval`` s, the leader of a partition led
    by a broker other than the controller killed -9 and kept down ``interval`` s: its partitions
    then need the controller to elect new leaders across the blips.  Faults: the kills (the
    blips run throughout)."""
    relay = cluster.zk_relay
    relay.blip_every(BLIP_INTERVAL_S, first=0.5)
    kills = 0
    try:
        while not stop(interval / 2):
            controller = controller_of(cluster)
            leaders = {p: leader_of(cluster, p, TOPIC) for p in range(partitions)}
            victims = sorted({b for b in leaders.values() if b is not None and b != controller})
            if not victims:
                continue
            victim = rnd.choice(victims)
            cluster.kill(victim, signal.SIGKILL)
            kills += 1
            over = stop(interval)
            cluster.start(victim)
            if over:
                break
    finally:
        relay.stop_blips()
    return kills


@dataclasses.dataclass
class BlipFailover:
    """What :func:`blip_failover` measured."""
    controller: int
    victim: int
    new_leader: Optional[int]
    seconds_to_new_leader: Optional[float]   # None: no new leader within the wait
    blips: int
    acked_at_kill: int   # acknowledged before the kill (the report has the total)
    report: Report


def blip_failover(ports: dict, kill: Callable[[int], None], relay, session_s: float,
                  blip_every: float = 2.0, after_s: float = 3.0, rate: int = 200,
                  log: Callable[[str], None] = lambda m: None) -> BlipFailover:
    """The zk-blips fault measured once on any ZooKeeper-mode cluster (pykbroker's, or Apache
    Kafka 3.9's as the oracle): ``ports`` {broker id: port} of running brokers whose ZooKeeper
    links go through ``relay`` (a :class:`pykbroker.local.relay.TcpRelay`), ``kill(id)`` kills
    one with SIGKILL.

    A one-partition topic (RF 3, ``min.insync.replicas`` as the brokers have it) led by a broker
    that is not the controller; every ZooKeeper link dropped every ``blip_every`` s; an
    idempotent acks=all producer writing; after three blips the leader is killed, and the time
    until a live broker's Metadata names another leader is measured (waited for up to the
    session timeout + 10 s); ``after_s`` s more of writes, then everything is read back."""
    def metadata_from_any(exclude=()):
        for bid, port in sorted(ports.items()):
            if bid in exclude:
                continue
            try:
                return wire.metadata(("127.0.0.1", port), [TOPIC])
            except OSError:
                continue
        return None

    def leader(exclude=()):
        m = metadata_from_any(exclude)
        if m is None or not m["topics"] or m["topics"][0]["error_code"]:
            return None
        parts = m["topics"][0]["partitions"]
        return parts[0]["leader_id"] if parts else None

    ids = sorted(ports)
    controller = metadata_from_any()["controller_id"]
    victim = [b for b in ids if b != controller][0]
    replicas = [victim] + [b for b in ids if b != victim]
    # to the controller: Kafka's brokers in ZooKeeper mode answer CreateTopics NOT_CONTROLLER
    with wire.WireClient(("127.0.0.1", ports[controller])) as c:
        r = c.request(19, 5, {"topics": [{"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
                                          "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                                          "configs": []}],
                              "timeout_ms": 30000, "validate_only": False})
        if r["topics"][0]["error_code"]:
            raise RuntimeError("cannot create %s: %r" % (TOPIC, r))
        wire.wait_for_topic(c, TOPIC, 1, timeout=30)
    bootstrap = ",".join("127.0.0.1:%d" % ports[b] for b in ids)
    relay.blip_every(blip_every, first=0.5)
    load = ProducerLoad(bootstrap, producers=1, rate=rate, partitions=1)
    load.start()
    new = took = None
    acked_at_kill = 0
    try:
        time.sleep(3 * blip_every + 1.0)
        # the kill must find acknowledged writes to keep: on a loaded machine a broker's first
        # acknowledgements can come after the three blips (Apache Kafka's, once, 4 s median ack
        # latency and none yet at the kill), so wait for one, 30 s at most
        until = time.monotonic() + 30.0
        while not load.acked and time.monotonic() < until:
            time.sleep(0.1)
        log("controller %d, leader %s, %d blips so far; killing broker %d"
            % (controller, leader(), relay.drops, victim))
        acked_at_kill = len(load.acked)
        kill(victim)
        killed_at = time.monotonic()
        while time.monotonic() - killed_at < session_s + 10.0:
            got = leader(exclude=(victim,))
            if got not in (None, -1, victim):
                new, took = got, time.monotonic() - killed_at
                break
            time.sleep(0.1)
        log("new leader %s after %s s" % (new, None if took is None else "%.1f" % took))
        if new is not None:
            time.sleep(after_s)   # writes go on through the new leader, blips too
    finally:
        relay.stop_blips()
        if new is not None:
            load.stop()   # everything sent ends acknowledged or failed
        else:
            load.kill()   # nobody to flush to: no waiting for message.timeout.ms
    report = Report("zk-blips", 0)
    if new is not None:
        check(report, load, read_back(bootstrap, 1))
    return BlipFailover(controller, victim, new, took, relay.drops, acked_at_kill, report)


def _all_down(cluster, rnd, partitions, interval, stop) -> int:
    if stop(interval / 2):
        return 0
    for b in cluster.brokers:
        cluster.kill(b.broker_id, signal.SIGKILL)
    time.sleep(2.0)
    for b in cluster.brokers:
        b.spawn()
    for b in cluster.brokers:
        b.wait_ready(60)
    return 1


def java_classpath(profile: str = "kafka39") -> str:
    """The classpath of compat/java's scenarios for one kafka-clients profile, built with Maven if
    needed (compat/java/jvm.py)."""
    from compat.java import jvm

    return jvm.build(profile)[0]


SCENARIOS = {"kill-leader": _kill_leader, "bounce": _bounce, "pause-leader": _pause_leader,
             "zookeeper": _zookeeper, "all-down": _all_down, "zk-blips": _zk_blips}
# scenarios whose brokers reach ZooKeeper through a relay that can drop their connections
RELAYED = {"zk-blips"}


def run(scenario: str, seconds: float = 60.0, interval: float = 10.0, partitions: int = 3,
        producers: int = 2, rate: int = 500, data_dir: Optional[str] = None, seed: Optional[int] = None,
        session_timeout_ms: int = 6000, log: Callable[[str], None] = print,
        java_producers: int = 0, java_profile: str = "kafka39") -> Report:
    """One fault run; ``java_producers`` Java producers (``java_profile``: kafka39 or kafka4) write
    beside the ``producers`` confluent-kafka ones, at the same rate each.  ``seed``: the
    nemesis's random schedule (drawn and logged when None; ``Report.seed`` keeps it)."""
    nemesis = SCENARIOS[scenario]
    classpath = java_classpath(java_profile) if java_producers else None
    seed = draw_seed(seed, log)
    rnd = random.Random(seed)
    overrides = {"zookeeper.session.timeout.ms": str(session_timeout_ms), "default.replication.factor": "3",
                 "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
                 "replica.lag.time.max.ms": "10000", "group.initial.rebalance.delay.ms": "0",
                 "unclean.leader.election.enable": "false"}
    report = Report(scenario, seconds, seed=seed)
    with Cluster(3, data_dir, overrides=overrides, zk_tick_time=500,
                 zookeeper_relay=scenario in RELAYED) as cluster:
        log("cluster up: %s (ZooKeeper %s)" % (cluster.bootstrap_servers, cluster.zookeeper_connect))
        # A broker answers ApiVersions before it has registered in ZooKeeper; the controller
        # places 3 replicas only on registered brokers (else INVALID_REPLICATION_FACTOR).
        cluster.wait_registered()
        create_replicated_topic(cluster, TOPIC, partitions)
        load = ProducerLoad(cluster.bootstrap_servers, producers, rate, partitions, java_producers, classpath)
        load.start()
        t_end = time.monotonic() + seconds

        def stop(wait: float) -> bool:
            """Sleep up to ``wait`` s; True once the run is over."""
            left = t_end - time.monotonic()
            time.sleep(max(0.0, min(wait, left)))
            return time.monotonic() >= t_end

        try:
            try:
                report.faults = nemesis(cluster, rnd, partitions, interval, stop)
            finally:
                # heal: every broker and ZooKeeper up again
                if cluster.zookeeper is not None and not cluster.zookeeper.running():
                    cluster.zookeeper.start()
                for b in cluster.brokers:
                    b.resume()
                    if not b.running():
                        cluster.start(b.broker_id)
            log("nemesis done (%d fault(s)); draining producers" % report.faults)
            load.stop()
        except BaseException:
            load.kill()   # no JVM outlives a failed run
            raise
        # A leader elected while the cluster healed starts from its own high watermark, which
        # reaches what was acknowledged once its followers fetch again: a consumer sees those
        # records a moment later (as with Kafka).  Records still missing after a few re-reads
        # are lost.  What the re-reads absorbed is reported (``late``), never dropped.
        first_lost = None
        for attempt in range(4):
            records = read_back(cluster.bootstrap_servers, partitions)
            report.lost = report.inconsistent = 0
            report.examples = []
            check(report, load, records)
            first_lost = report.lost if first_lost is None else first_lost
            if report.lost == 0:
                break
            log("%d acknowledged record(s) not read back yet; reading again" % report.lost)
            time.sleep(5.0)
        report.late = first_lost - report.lost
        if report.late:
            report.examples.append("read late: %d acknowledged record(s) missing from the first read-back "
                                   "were read at their acknowledged offsets by a later one" % report.late)
            log(report.examples[-1])
    return report


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Fault runs against a local pykbroker cluster (ZooKeeper + 3 brokers).")
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS),
                    help="of: %s, and eos-kill-leader (transactional consume-transform-produce, "
                         "compat/chaos/chaos_eos.py)" % ", ".join(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=120.0, help="length of each run (default 120)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between faults (default 10)")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--rate", type=int, default=500, help="records/s per producer")
    ap.add_argument("--java", type=int, nargs="?", const=1, default=0, metavar="N",
                    help="also N idempotent acks=all Java kafka-clients producers (default N 1; needs a JDK and Maven)")
    ap.add_argument("--java-profile", default="kafka39", choices=["kafka39", "kafka4"],
                    help="kafka-clients version of the Java producers (3.9.x or 4.x)")
    ap.add_argument("--json", metavar="FILE", help="also write the reports as JSON")
    ap.add_argument("--seed", type=int, default=None,
                    help="the nemesis's random schedule, to replay a run (default: drawn and printed)")
    args = ap.parse_args(argv)
    reports = []
    eos_ok = True
    if "eos-kill-leader" in args.scenarios:
        from compat.chaos import chaos_eos
        args.scenarios = [x for x in args.scenarios if x != "eos-kill-leader"]
        er = chaos_eos.run(args.seconds, args.interval, seed=args.seed,
                           log=lambda m: print("[eos-kill-leader] %s" % m, flush=True))
        print(er.row())
        for e in er.examples:
            print("   ", e)
        eos_ok = er.ok
    for s in args.scenarios:
        r = run(s, args.seconds, args.interval, args.partitions, args.producers, args.rate,
                log=lambda m: print("[%s] %s" % (s, m), flush=True), java_producers=args.java,
                java_profile=args.java_profile, seed=args.seed)
        reports.append(r)
        for e in r.examples:
            print("   ", e)
    print(Report.HEADER)
    for r in reports:
        print(r.row())
    if args.java:
        print("acknowledged by the Java producers: %s" % ", ".join("%s %d" % (r.scenario, r.java_acked) for r in reports))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dataclasses.asdict(r) for r in reports], fh, indent=1)
    return 0 if eos_ok and all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
