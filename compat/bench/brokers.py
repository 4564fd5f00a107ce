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

import contextlib
import json
import os
import shutil
import sys
import tempfile
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
        # the last n JVMs are the brokers (storage formats before them are JVMs too, unless the
        # oracle copied an already formatted template): first broker spawned to all brokers up
        self.start_seconds = time.monotonic() - self.spawns[-self.n]
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
           ("pykbroker", "scaleout"): PyKScaleOut, ("kafka", "scaleout"): KafkaScaleOut,
           ("pykbroker", "secure"): PyKSecure, ("kafka", "secure"): KafkaSecure,
           ("pykbroker", "acl"): PyKAcl, ("kafka", "acl"): KafkaAcl,
           ("pykbroker-noauth", "acl"): PyKNoAuth, ("pykbroker-noauth-b", "acl"): PyKNoAuthB}[(broker, topology)]
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


# -- secured targets: the TLS / SASL_SSL cells and the authorizer cells ------------------------
#
# ``secure``: a single node with three listeners, PLAINTEXT (the harness's admin client creates
# and deletes the topics there), SSL and SASL_SSL with SCRAM-SHA-512 only, both TLS listeners on
# the same certificate (one SecureSetup per run of the harness: a throw-away CA and a server key,
# Kafka's PEM keystore format, which both brokers read).  The SCRAM user ``bench`` is stored
# before the first client comes: in pykbroker's metadata file before the start (as
# AlterUserScramCredentials would have), in Kafka with AlterUserScramCredentials over PLAINTEXT.
#
# ``acl``: a single node with Kafka's StandardAuthorizer on (pykbroker: the same class name) and
# BINDINGS bindings created with CreateAcls before the first cell: the three the clients need
# (User:ANONYMOUS on the PLAINTEXT listener: ALL on TOPIC PREFIXED ``bench-``, ALL on GROUP ``*``,
# ALL on the CLUSTER) and the rest for other principals and other resources (LITERAL and PREFIXED
# topics and groups, a few PREFIXED on ``bench`` for other users: they match the resource and are
# looked at, as in a shared cluster).  ``allow.everyone.if.no.acl.found=true`` only lets the
# first CreateAcls in (no binding yet on the cluster resource); every resource the cells touch
# has a matching binding, so it plays no part in their decisions.  The ``acl`` topology also
# runs a third target, pykbroker without the authorizer, for the "authorizer on / off" ratio.

SECURE_USER, SECURE_PASSWORD, SECURE_MECHANISM = "bench", "bench-secret", "SCRAM-SHA-512"
BINDINGS = 10000
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_CONFIG = {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
_SECURE = []


def secure_setup():
    """One SecureSetup for the run (the same certificate on both brokers)."""
    if not _SECURE:
        from pykbroker.local.secure_setup import SecureSetup
        _SECURE.append(SecureSetup("SASL_SSL", users={SECURE_USER: SECURE_PASSWORD},
                                   mechanisms=[SECURE_MECHANISM]))
    return _SECURE[0]


def secure_client_config(protocol: str, bootstrap: str) -> dict:
    """confluent-kafka settings of the SSL or SASL_SSL clients."""
    s = secure_setup()
    conf = s.client_config(bootstrap)
    if protocol == "SSL":
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": s.ca_file}
    return conf


def _secure_broker_config(ssl_port: int, sasl_port: int, host: str = "127.0.0.1") -> dict:
    s = secure_setup()
    cfg = dict(s.broker_config())
    cfg["listener.name.sasl_ssl.%s.sasl.jaas.config" % SECURE_MECHANISM.lower()] = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    return cfg


class _MultiListenerNode(BrokerNode):
    """A ``pykbroker serve`` child listening on PLAINTEXT (``port``: the readiness probe and the
    admin client), SSL and SASL_SSL."""
    ssl_port = sasl_port = 0

    def command(self):
        cmd = super().command()
        i = cmd.index("--listeners")
        cmd[i + 1] = "PLAINTEXT://%s:%d,SSL://%s:%d,SASL_SSL://%s:%d" % (
            self.host, self.port, self.host, self.ssl_port, self.host, self.sasl_port)
        return cmd


class _SecureMixin:
    def secure_bootstrap(self, protocol: str) -> str:
        return "127.0.0.1:%d" % (self.ssl_port if protocol == "SSL" else self.sasl_port)

    def client_config(self, protocol: str) -> dict:
        return secure_client_config(protocol, self.secure_bootstrap(protocol))


class PyKSecure(_SecureMixin, Target):
    broker, topology = "pykbroker", "secure"

    def __init__(self, data_dir: str):
        from pykbroker.local.zookeeper import free_port
        self.ssl_port, self.sasl_port = free_port(), free_port()
        self.node = _MultiListenerNode(1, data_dir, None, {**PYK_OVERRIDES, **_secure_broker_config(
            self.ssl_port, self.sasl_port)}, log_level="WARNING")
        self.node.ssl_port, self.node.sasl_port = self.ssl_port, self.sasl_port
        secure_setup().seed_metadata_file(self.node.log_dir)

    start, pids, stop = PyKSingle.start, PyKSingle.pids, PyKSingle.stop


class KafkaSecure(_SecureMixin, KafkaSingle):
    topology = "secure"

    def __init__(self, data_dir: str):
        super().__init__(data_dir)
        from pykbroker.local.zookeeper import free_port
        self.ssl_port, self.sasl_port = free_port(), free_port()
        k, extra = self.k, _secure_broker_config(self.ssl_port, self.sasl_port)
        base = k.properties

        def properties():
            p = base()
            more = "SSL://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d" % (self.ssl_port, self.sasl_port)
            p["listeners"] += "," + more
            p["advertised.listeners"] += "," + more
            p["listener.security.protocol.map"] += ",SSL:SSL,SASL_SSL:SASL_SSL"
            p.update(extra)
            return p
        k.properties = properties

    def start(self):
        super().start()
        from confluent_kafka.admin import AdminClient, UserScramCredentialUpsertion, ScramCredentialInfo, ScramMechanism
        a = AdminClient({"bootstrap.servers": self.bootstrap})
        up = UserScramCredentialUpsertion(SECURE_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          SECURE_PASSWORD.encode())
        for f in a.alter_user_scram_credentials([up]).values():
            f.result()
        # the credential reaches the broker through the metadata log: wait until a login works
        deadline = time.monotonic() + 60
        while True:
            try:
                secure_setup().wire_client("127.0.0.1", self.sasl_port, SECURE_USER, SECURE_PASSWORD,
                                           SECURE_MECHANISM).close()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def acl_bindings(n: int = BINDINGS) -> list:
    """The ``acl`` topology's bindings: the clients' three, then other principals' up to ``n``."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    A, ALLOW, DENY = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY
    LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    me = "User:ANONYMOUS"
    out = [AclBinding(ResourceType.BROKER, "kafka-cluster", LIT, me, "*", A.ALL, ALLOW),
           AclBinding(ResourceType.TOPIC, "bench-", PRE, me, "*", A.ALL, ALLOW),
           AclBinding(ResourceType.GROUP, "*", LIT, me, "*", A.ALL, ALLOW)]
    i = 0
    while len(out) < n:
        user = "User:svc-%d" % i
        kind = i % 10
        if kind == 0:   # one in ten: another principal's binding that matches the bench topics
            out.append(AclBinding(ResourceType.TOPIC, "bench", PRE, user, "*",
                                  A.WRITE if i % 20 else A.READ, DENY if i % 40 == 0 else ALLOW))
        elif kind < 5:
            out.append(AclBinding(ResourceType.TOPIC, "app-%d" % i, LIT, user, "*", A.WRITE, ALLOW))
        elif kind < 8:
            out.append(AclBinding(ResourceType.TOPIC, "team-%d." % i, PRE, user, "*", A.READ, ALLOW))
        else:
            out.append(AclBinding(ResourceType.GROUP, "grp-%d" % i, PRE if i % 2 else LIT, user, "10.0.0.%d" % (i % 250),
                                  A.READ, ALLOW))
        i += 1
    return out


def install_bindings(bootstrap: str, n: int = BINDINGS) -> None:
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": bootstrap})
    bs = acl_bindings(n)
    # the clients' own first (on their own: the cluster binding lets the rest in)
    for chunk in [bs[:1], bs[1:3]] + [bs[i:i + 1000] for i in range(3, len(bs), 1000)]:
        for f in a.create_acls(chunk, request_timeout=120).values():
            f.result()


class PyKAcl(PyKSingle):
    topology = "acl"

    def __init__(self, data_dir: str):
        self.node = BrokerNode(1, data_dir, None, {**PYK_OVERRIDES, **ACL_CONFIG}, log_level="WARNING")

    def start(self):
        super().start()
        install_bindings(self.bootstrap)
        return self


class PyKNoAuth(PyKSingle):
    """pykbroker without the authorizer, beside the ``acl`` targets."""
    broker, topology = "pykbroker-noauth", "acl"


# --- an A/B of the authorizer: the same pykbroker with it ("on") and without it ("off")
ON, OFF = "on", "off"


@contextlib.contextmanager
def acl_on_off(prefix: str, bindings: int | None):
    """Both brokers of an A/B of the authorizer, each in a fresh directory under a temporary one
    named ``prefix``: ``{OFF: PyKNoAuth, ON: PyKAcl with the first ``bindings`` of acl_bindings()}``
    (``bindings`` None: ``ON`` is a PyKNoAuth too, the A/A control of the noise).  Both are
    stopped and the directory removed on the way out, whatever happened."""
    work = tempfile.mkdtemp(prefix=prefix)
    on = (PyKNoAuth if bindings is None else PyKAcl)(os.path.join(work, ON))
    off = PyKNoAuth(os.path.join(work, OFF))
    try:
        off.start()
        on.node.start(timeout=120)   # not on.start(): that installs the default bindings
        on.bootstrap = on.node.bootstrap
        if bindings is not None:
            install_bindings(on.bootstrap, bindings)
        yield {OFF: off, ON: on}   # in the order they started
    finally:
        for t in (on, off):
            t.stop()   # a broker never started: nothing to stop
        shutil.rmtree(work, ignore_errors=True)


def pair_orders(pairs: int) -> list:
    """``(i, order)`` of each of ``pairs`` A/B pairs: ON first in the even ones, OFF first in the
    odd ones (neither side always runs on a warmer or a busier machine)."""
    return [(i, (ON, OFF) if i % 2 == 0 else (OFF, ON)) for i in range(pairs)]


def ab_result(settings: dict) -> dict:
    """The JSON record of a run of an A/B: its start (UTC), the load average then, its settings."""
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "loadavg_start": os.getloadavg(),
            "settings": settings}


def ab_report(result: dict, table: str, out: str | None) -> int:
    """The end of a run of an A/B: the load average now, the table and both load averages printed,
    the record written to ``out`` (if given); the script's exit status (0)."""
    result["loadavg_end"] = os.getloadavg()
    print(table)
    print("load average at start %s, at end %s" % (result["loadavg_start"], result["loadavg_end"]))
    if out:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


class PyKNoAuthB(PyKSingle):
    """A second, identical pykbroker without the authorizer: the A/A control of the ``acl`` cells."""
    broker, topology = "pykbroker-noauth-b", "acl"


class KafkaAcl(KafkaSingle):
    topology = "acl"

    def __init__(self, data_dir: str):
        super().__init__(data_dir)
        self.k.overrides.update(ACL_CONFIG)

    def start(self):
        super().start()
        install_bindings(self.bootstrap)
        return self
