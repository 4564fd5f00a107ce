"""The brokers under test, started the same way for every run of the benchmark.

Four targets, each with ``start()``, ``stop()``, ``bootstrap``, ``pids()`` (the broker processes
the sampler reads) and ``start_seconds`` (time to the first served request):

* ``pykbroker`` single node: one ``pykbroker serve`` child (:class:`BrokerNode` without ZooKeeper).
* ``pykbroker`` cluster: :class:`pykbroker.local.cluster.Cluster` (3 brokers on a managed
  ZooKeeper; ZooKeeper's JVM is not counted in RSS/CPU/fds, as Kafka's KRaft controller runs in
  its combined nodes and is counted: say so next to the numbers).
* Apache Kafka single node and 3 nodes: compat/kafka/oracle.py, with the JVM flags of Kafka's own
  start scripts (``kafka-server-start.sh``: 1 GiB fixed heap; ``kafka-run-class.sh``: G1 with
  20 ms pause target) instead of the oracle's small-heap, C1-only test flags.

Both log at WARNING/WARN: a benchmark should not measure logging.  Both start the first rebalance
of a new consumer group at once (``group.initial.rebalance.delay.ms=0``, the oracle's setting):
ConsumerPerformance's group join is not part of what it reports, only of the wall time.  Data directories are fresh
(a new temporary directory per target per run of the harness).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(ROOT), str(ROOT / "compat" / "kafka")):
    if p not in sys.path:
        sys.path.insert(0, p)

from oracle import KafkaClusterOracle, KafkaOracle, OracleUnavailable  # noqa: E402,F401
from pykbroker.local.cluster import BrokerNode, Cluster  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PYK_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}

# kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
KAFKA_PROD_JVM = ["-server", "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]


def _prod_java(k: KafkaOracle, spawn_times: list):
    """Replace the oracle's test JVM command line with production flags; records when each
    JVM is launched (the last one before readiness is the broker: time to first request)."""
    def java(cp: str) -> list:
        spawn_times.append(time.monotonic())
        return (["java"] + KAFKA_PROD_JVM +
                ["-Dkafka.logs.dir=%s" % (k.dir / "logs"),
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp])
    k._java = java


def pin(pids, cpus) -> None:
    """Pin every thread of each process (threads created later inherit their creator's mask)."""
    if not cpus:
        return
    for pid in pids:
        try:
            for tid in os.listdir("/proc/%d/task" % pid):
                try:
                    os.sched_setaffinity(int(tid), cpus)
                except OSError:
                    pass
        except OSError:
            pass


class Target:
    broker = ""      # "pykbroker" or "kafka"
    topology = ""    # "single" or "cluster"
    start_seconds = 0.0
    bootstrap = ""

    @property
    def name(self) -> str:
        return "%s-%s" % (self.broker, self.topology)

    def pids(self) -> list:
        raise NotImplementedError


class PyKSingle(Target):
    broker, topology = "pykbroker", "single"

    def __init__(self, data_dir: str):
        self.node = BrokerNode(1, data_dir, None, dict(PYK_OVERRIDES), log_level="WARNING")

    def start(self):
        t0 = time.monotonic()
        self.node.start(timeout=120)
        self.start_seconds = time.monotonic() - t0   # spawn to first answered ApiVersions
        self.bootstrap = self.node.bootstrap
        return self

    def pids(self):
        return [self.node.pid] if self.node.pid else []

    def stop(self):
        self.node.stop()


class PyKCluster(Target):
    broker, topology = "pykbroker", "cluster"

    def __init__(self, data_dir: str, n: int = 3, overrides: dict | None = None):
        self.cluster = Cluster(n, data_dir, overrides={**PYK_OVERRIDES, **(overrides or {})},
                               log_level="WARNING", start_timeout=180)

    def start(self):
        zk = self.cluster.zookeeper
        zk_seconds = [0.0]
        orig = zk.start

        def timed_start(*a, **kw):
            t = time.monotonic()
            try:
                return orig(*a, **kw)
            finally:
                zk_seconds[0] = time.monotonic() - t
        zk.start = timed_start
        t0 = time.monotonic()
        self.cluster.start()
        # brokers spawned to every broker answering and agreeing on the cluster (ZooKeeper's own
        # start-up excluded: Kafka's controllers start inside its nodes, counted there)
        self.start_seconds = time.monotonic() - t0 - zk_seconds[0]
        self.bootstrap = self.cluster.bootstrap_servers
        return self

    def pids(self):
        return [b.pid for b in self.cluster.brokers if b.pid]

    def stop(self):
        self.cluster.close()


class KafkaSingle(Target):
    broker, topology = "kafka", "single"

    def __init__(self, data_dir: str):
        self.k = KafkaOracle(data_dir)
        self.spawns: list = []
        _prod_java(self.k, self.spawns)

    def start(self):
        self.k.start(timeout=240)
        self.start_seconds = time.monotonic() - self.spawns[-1]
        self.bootstrap = self.k.bootstrap
        return self

    def pids(self):
        return [self.k.proc.pid] if self.k.proc else []

    def stop(self):
        self.k.stop()


class KafkaCluster(Target):
    broker, topology = "kafka", "cluster"

    def __init__(self, data_dir: str, n: int = 3):
        self.c = KafkaClusterOracle(data_dir, n)
        self.spawns: list = []
        for k in self.c.nodes:
            _prod_java(k, self.spawns)
        self.n = n

    def start(self):
        self.c.start(timeout=300)
        # n formats, then n broker JVMs: first broker spawned to all nodes listing all brokers
        self.start_seconds = time.monotonic() - self.spawns[self.n]
        self.bootstrap = self.c.bootstrap
        return self

    def pids(self):
        return [k.proc.pid for k in self.c.nodes if k.proc]

    def stop(self):
        self.c.stop()


class PyKScaleOut(PyKCluster):
    """The multi-core deployment of pykbroker: one broker per broker core (a Python process uses
    one core), partitions spread over them by the controller, RF 1; against :class:`KafkaScaleOut`,
    one Kafka broker using every core."""
    topology = "scaleout"

    def __init__(self, data_dir: str, n: int = 0):
        n = n or scaleout_brokers()
        # A ZooKeeper-mode broker defaults its internal topics to RF 3 as Kafka does; with
        # fewer brokers __consumer_offsets cannot be created and no group can form (a group
        # consumer such as ConsumerPerformance read nothing).  RF 1 like the topics here and
        # like the one Kafka broker on the other side.
        super().__init__(data_dir, n=n, overrides={"offsets.topic.replication.factor": 1,
                                                   "transaction.state.log.replication.factor": 1})


class KafkaScaleOut(KafkaSingle):
    topology = "scaleout"


def scaleout_brokers(cpus=None) -> int:
    """Brokers of the scale-out target: one per core the brokers may use (at least 2)."""
    return max(2, len(cpus if cpus else os.sched_getaffinity(0)))


def make(broker: str, topology: str, data_dir: str) -> Target:
    cls = {("pykbroker", "single"): PyKSingle, ("pykbroker", "cluster"): PyKCluster,
           ("kafka", "single"): KafkaSingle, ("kafka", "cluster"): KafkaCluster,
           ("pykbroker", "scaleout"): PyKScaleOut, ("kafka", "scaleout"): KafkaScaleOut}[(broker, topology)]
    return cls(data_dir)


def proc_cpu_split(pid: int) -> tuple:
    """(user, system) CPU seconds of a process, all threads (utime, stime of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def proc_cpu(pid: int) -> float:
    return sum(proc_cpu_split(pid))


def _proc_rss(pid: int) -> int:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _proc_fds(pid: int) -> int:
    return len(os.listdir("/proc/%d/fd" % pid))


class Sampler:
    """Broker-side numbers over one run: CPU seconds (utime+stime, summed over the target's
    processes), peak RSS and peak open fds (sums over processes, sampled every 0.2 s)."""

    def __init__(self, pids):
        self.pids = list(pids)
        self.rss_peak = 0
        self.fds_peak = 0
        self._stop = threading.Event()
        self._cpu0 = self._cpu()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _cpu(self) -> float:
        total = 0.0
        for p in self.pids:
            try:
                total += proc_cpu(p)
            except OSError:
                pass
        return total

    def _sample(self) -> None:
        rss = fds = 0
        for p in self.pids:
            try:
                rss += _proc_rss(p)
                fds += _proc_fds(p)
            except OSError:
                pass
        self.rss_peak = max(self.rss_peak, rss)
        self.fds_peak = max(self.fds_peak, fds)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.2)

    def finish(self) -> dict:
        self._stop.set()
        self._t.join()
        self._sample()
        return {"cpu_seconds": self._cpu() - self._cpu0, "rss_peak_mb": self.rss_peak / 1e6,
                "fds_peak": self.fds_peak}
