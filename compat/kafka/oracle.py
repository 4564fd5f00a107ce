#!/usr/bin/env python3
"""Real Apache Kafka as the oracle: fetch the broker from Maven Central, run one KRaft node.

    python3 compat/kafka/oracle.py fetch            # jars into ~/.cache/pykbroker/kafka-<version>/libs
    python3 compat/kafka/oracle.py run              # start a broker+controller node, print its
                                                    # bootstrap address, stop it on Ctrl-C / SIGTERM
    python3 compat/kafka/oracle.py run --nodes 3    # three nodes (ids 1..3, all controller voters)

From Python (the differential suite in tests/differential uses this)::

    k = KafkaOracle(data_dir).start()   # fetches the jars if needed, formats, starts, waits
    k.bootstrap                          # "127.0.0.1:<port>"
    k.stop()
    c = KafkaClusterOracle(data_dir, 3).start()   # tests/differential/test_cluster.py
    c.node(3).kill()                               # SIGKILL one node; c.restart(3) brings it back
    c.quorum_leader(); c.pause(2); c.resume(2)     # the active controller's id; SIGSTOP / SIGCONT

The Kafka version is the ``kafka.version`` property of ``compat/kafka/pom.xml`` (the newest 4.x on
Central). ``mvn dependency:copy-dependencies`` resolves the broker's runtime classpath through the
local repository ``~/.m2`` (offline first, so a warm cache needs no network) and copies it into
the cache directory; a ``.complete`` stamp marks a finished copy. The node is a combined
``process.roles=broker,controller`` KRaft node on 127.0.0.1 with two free ephemeral ports (client
and controller listener), a fresh data directory formatted by ``kafka.tools.StorageTool`` with a
random cluster id (the format of an identical configuration cached and copied, see
``_storage_from_template``), a 512 MiB heap, and the single-node settings Kafka's own quickstart uses
(internal topics with replication factor 1) plus ``group.initial.rebalance.delay.ms=0``.
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
# The readiness probe uses the tests' wire client of this checkout (two levels up), also when
# the file is run as a script or another pykbroker is installed.
if (HERE.parents[1] / "pykbroker").is_dir() and str(HERE.parents[1]) not in sys.path:
    sys.path.insert(0, str(HERE.parents[1]))
from pykbroker.protocol.primitives import ProtocolError  # noqa: E402
from pykbroker.local.zookeeper import free_port  # noqa: E402
from pykbroker.protocol.wire import WireClient  # noqa: E402

CACHE_ROOT = Path(os.environ.get("PYKBROKER_CACHE", Path.home() / ".cache" / "pykbroker"))


class OracleUnavailable(RuntimeError):
    """Java/Maven missing or the Kafka jars could not be fetched."""


def kafka_version() -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not m:
        raise OracleUnavailable("no <kafka.version> in %s" % POM)
    return m.group(1).strip()


def cache_dir(version: str | None = None) -> Path:
    return CACHE_ROOT / ("kafka-%s" % (version or kafka_version()))


def fetch(version: str | None = None, quiet: bool = True) -> Path:
    """Make sure the broker's jars are in the cache; returns the libs directory."""
    version = version or kafka_version()
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        raise OracleUnavailable(
            "running Apache Kafka as the oracle needs %s on PATH (Java 17+ and Maven 3.8+; "
            "tools/test.sh installs default-jdk-headless and maven)" % " and ".join(missing))
    root = cache_dir(version)
    libs = root / "libs"
    stamp = root / ".complete"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".fetch.lock", "w") as lock:   # several sessions may fetch at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return libs
        if libs.exists():
            shutil.rmtree(libs)
        base = ["mvn", "-B", "-Dstyle.color=never", "-f", str(POM), "-Dkafka.version=%s" % version,
                "dependency:copy-dependencies", "-DincludeScope=runtime",
                "-DoutputDirectory=%s" % libs]
        if quiet:
            base.insert(1, "-q")
        # Offline first: CI keeps ~/.m2 warm; online (Maven Central) only when something is missing.
        r = subprocess.run(base[:1] + ["-o"] + base[1:], capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(base, capture_output=True, text=True)
        if r.returncode != 0:
            raise OracleUnavailable("could not fetch Apache Kafka %s from Maven Central:\n%s\n%s"
                                    % (version, r.stdout[-4000:], r.stderr[-4000:]))
        jar = libs / ("kafka_2.13-%s.jar" % version)
        if not jar.exists():
            raise OracleUnavailable("Maven finished but %s is missing" % jar)
        stamp.write_text(version + "\n")
    return libs


def classpath(libs: Path) -> str:
    return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))


# -- formatted storage, cached -------------------------------------------------------------------
# ``kafka-storage format`` is a JVM of its own (about 1 s idle, several seconds on a loaded
# machine) before every node start. What it writes depends on the Kafka version and the node's
# configuration (node id, roles, the voters, the features and metadata.version it derives), not
# on the ports or the data path: meta.properties (version, node.id, cluster.id, a random
# directory.id) and the bootstrap metadata checkpoint (feature levels; no cluster id in it, its
# batches stamped with the format's time). So each (version, configuration with ports and the
# log dir blanked) is formatted once into a template under the version's cache directory;
# later starts copy it and write meta.properties with their own cluster id and a fresh
# directory id, as format would. PYKBROKER_ORACLE_FORMAT_CACHE=0 formats every time.
FORMAT_CACHE = os.environ.get("PYKBROKER_ORACLE_FORMAT_CACHE", "1") != "0"
# the checkpoint's timestamps are those of the template's format: renewed daily so that no
# start sees bootstrap metadata older than Kafka's metadata retention (7 days by default)
FORMAT_TEMPLATE_MAX_AGE_S = 24 * 3600


def _format_key(version: str, props: dict) -> str | None:
    """The template's name for this configuration; None when it cannot be one (several log
    directories or a separate metadata directory: formatted each time)."""
    if "metadata.log.dir" in props or "log.dir" in props or "," in props.get("log.dirs", ""):
        return None
    norm = {}
    for k, v in props.items():
        if k == "log.dirs":
            continue
        if k.endswith("listeners") or k.startswith("controller.quorum."):
            v = re.sub(r":\d+", ":0", v)   # the ports, not the node ids or listener names
        norm[k] = v
    return hashlib.sha256(json.dumps([version, sorted(norm.items())]).encode()).hexdigest()[:24]


def _random_uuid() -> str:
    """Kafka's Uuid.randomUuid(): 16 random bytes in URL-safe base64 without padding, never
    the reserved all-zero / ...01 ids (and not starting with '-', which would read as a flag)."""
    while True:
        b = uuid.uuid4().bytes
        s = base64.urlsafe_b64encode(b).decode().rstrip("=")
        if int.from_bytes(b, "big") > 100 and not s.startswith("-"):
            return s


def _write_meta(data: Path, node_id: str, cluster_id: str) -> None:
    """meta.properties as format writes it (version 1; java.util.Properties layout)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    text = "#\n#%s\nnode.id=%s\ndirectory.id=%s\nversion=1\ncluster.id=%s\n" % (
        stamp, node_id, _random_uuid(), cluster_id)
    (data / "meta.properties").write_text(text)


def _storage_from_template(version: str, props: dict, cluster_id: str) -> bool:
    """Copy the cached format for ``props`` into its log dir; False when there is none."""
    key = _format_key(version, props) if FORMAT_CACHE else None
    if key is None:
        return False
    tpl = cache_dir(version) / "formatted" / key
    try:
        if time.time() - tpl.stat().st_mtime > FORMAT_TEMPLATE_MAX_AGE_S:
            return False
    except FileNotFoundError:
        return False
    data = Path(props["log.dirs"])
    if data.exists():
        shutil.rmtree(data)
    shutil.copytree(tpl, data)
    _write_meta(data, props["node.id"], cluster_id)
    return True


def _save_template(version: str, props: dict) -> None:
    """Keep what format just wrote into ``props``' log dir as the template for its configuration
    (written aside and renamed: other test runs may save the same one at the same time)."""
    key = _format_key(version, props) if FORMAT_CACHE else None
    if key is None:
        return
    root = cache_dir(version) / "formatted"
    root.mkdir(parents=True, exist_ok=True)
    # configurations with a path of their own (a test's key store) make a template per run:
    # the stale ones go
    for old in root.iterdir():
        try:
            if time.time() - old.stat().st_mtime > FORMAT_TEMPLATE_MAX_AGE_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    tmp = root / ("%s.%d.%d.tmp" % (key, os.getpid(), threading.get_ident()))
    shutil.copytree(props["log.dirs"], tmp)
    (tmp / "meta.properties").unlink()   # written per start
    final = root / key
    if final.exists():   # an old one (too old to use): replaced
        old = root / ("%s.%d.old" % (key, os.getpid()))
        try:
            final.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    try:
        tmp.rename(final)
    except OSError:   # another run saved it first
        shutil.rmtree(tmp, ignore_errors=True)


def _metadata_brokers(host: str, port: int, timeout: float = 2.0) -> int:
    """Send Metadata v1 (all topics) with the tests' wire client; returns how many brokers it
    lists."""
    with WireClient((host, port), timeout=timeout, client_id="oracle") as c:
        return len(c.request(3, 1, {"topics": None})["brokers"])


class KafkaOracle:
    """One single-node Apache Kafka (KRaft, combined broker+controller) on loopback."""

    def __init__(self, data_dir: str | os.PathLike, overrides: dict | None = None,
                 heap: str = "512m", version: str | None = None):
        self.dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.version = version or kafka_version()
        self.port = 0
        self.controller_port = 0
        self.node_id = 1
        self.cluster_id = ""
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.start_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:%d" % self.port

    def properties(self) -> dict:
        p = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": "%d@127.0.0.1:%d" % (self.node_id, self.controller_port),
            "listeners": "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d"
                         % (self.port, self.controller_port),
            "advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        p.update(self.overrides)
        return p

    def _java(self, cp: str) -> list[str]:
        log_dir = self.dir / "logs"
        return ["java", "-Xms128m", "-Xmx%s" % self.heap, "-XX:+UseSerialGC",
                # C1 only: starts faster on a shared 2-core machine; the tests move little data.
                "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true", "-Dkafka.logs.dir=%s" % log_dir,
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=%s" % os.environ.get("PYKBROKER_ORACLE_LOG", "info"),
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp", cp]

    def start(self, timeout: float = 90.0) -> "KafkaOracle":
        t0 = time.monotonic()
        libs = fetch(self.version)
        cp = classpath(libs)
        self.dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):   # a freed ephemeral port can be taken before Kafka binds it
            self.port, self.controller_port = free_port(), free_port()
            if self.port == self.controller_port:
                continue
            data = self.dir / "data"
            if data.exists():
                shutil.rmtree(data)
            cfg = self.dir / "server.properties"
            props = self.properties()
            cfg.write_text("".join("%s=%s\n" % kv for kv in props.items()))
            # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            if not _storage_from_template(self.version, props, self.cluster_id):
                r = subprocess.run(self._java(cp) + ["kafka.tools.StorageTool", "format",
                                                     # one form: an id starting with '-' must not read as a flag
                                                     "--cluster-id=" + self.cluster_id,
                                                     "-c", str(cfg)], capture_output=True, text=True)
                if r.returncode != 0:
                    raise OracleUnavailable("kafka-storage format failed:\n%s\n%s" % (r.stdout, r.stderr[-4000:]))
                _save_template(self.version, props)
            if self._launch(cp, cfg, t0, timeout):
                return self
            bind_failed = "Address already in use" in self.log_text()
            self.kill()
            if not bind_failed:
                break
        raise OracleUnavailable("Apache Kafka %s did not become ready within %ss:\n%s"
                                % (self.version, timeout, "".join(self.lines[-60:])))

    def _launch(self, cp: str, cfg, t0: float, timeout: float) -> bool:
        """Start ``kafka.Kafka`` on the properties file ``cfg`` (its output pumped into
        ``self.lines``); True once it is ready within ``timeout`` of ``t0`` (``start_seconds`` then
        says how long it took), False else (the process left running for the caller to kill)."""
        self.lines = []
        self.proc = subprocess.Popen(self._java(cp) + ["kafka.Kafka", str(cfg)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     bufsize=1, start_new_session=True)
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
        if not self._wait_ready(t0 + timeout):
            return False
        self.start_seconds = time.monotonic() - t0
        return True

    def _pump(self, proc) -> None:
        for line in proc.stdout:
            self.lines.append(line)
            if os.environ.get("PYKBROKER_TEST_ECHO"):
                sys.stderr.write("[kafka] " + line)

    def _wait_ready(self, deadline: float) -> bool:
        """Ready = the client listener answers Metadata and lists this broker (it is unfenced)."""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if _metadata_brokers("127.0.0.1", self.port) >= 1:
                    return True
            except (OSError, struct.error, ProtocolError):   # not answering (well) yet
                pass
            time.sleep(0.2)
        return False

    def log_text(self) -> str:
        return "".join(self.lines)

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown (SIGTERM); SIGKILL if it hangs."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# QuorumState's INFO line when a node becomes the quorum's leader (Kafka 4.x wording)
_RAFT_LEADER = re.compile(r"\[RaftManager id=(\d+)\] Completed transition to Leader\(.*?epoch=(\d+)")


class KafkaClusterOracle:
    """N Apache Kafka KRaft nodes on loopback, each a combined broker+controller (node ids
    1..N, all N voters of the controller quorum), formatted with one cluster id.

    ``nodes[i]`` are :class:`KafkaOracle` objects (their ``port``, ``proc``, ``kill()``); the
    cluster counts as ready when every node's Metadata lists all N brokers.  Small heaps
    (``heap``, 256 MiB by default) and C1 only keep three JVMs affordable on a 2-core machine.
    ``overrides`` go to every node (e.g. ``broker.session.timeout.ms`` for quicker fencing)."""

    def __init__(self, data_dir: str | os.PathLike, n: int = 3, overrides: dict | None = None,
                 heap: str = "256m", version: str | None = None):
        self.dir = Path(data_dir)
        self.n = n
        self.version = version or kafka_version()
        base = {"offsets.topic.replication.factor": str(min(3, n)),
                "transaction.state.log.replication.factor": str(min(3, n)),
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": str(min(3, n)),
                "share.coordinator.state.topic.min.isr": "1"}
        base.update(overrides or {})
        self.nodes = [KafkaOracle(self.dir / ("node-%d" % i), dict(base), heap=heap, version=self.version)
                      for i in range(1, n + 1)]
        for i, k in enumerate(self.nodes, 1):
            k.node_id = i
        self.cluster_id = ""
        self.start_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        return ",".join(k.bootstrap for k in self.nodes)

    def node(self, node_id: int) -> KafkaOracle:
        return self.nodes[node_id - 1]

    def _voters(self) -> str:
        return ",".join("%d@127.0.0.1:%d" % (k.node_id, k.controller_port) for k in self.nodes)

    def start(self, timeout: float = 180.0) -> "KafkaClusterOracle":
        t0 = time.monotonic()
        cp = classpath(fetch(self.version))
        ports: set[int] = set()
        for k in self.nodes:
            while True:
                a, b = free_port(), free_port()
                if a != b and not ({a, b} & ports):
                    break
            ports |= {a, b}
            k.port, k.controller_port = a, b
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        voters = self._voters()
        # the nodes' storage formatted side by side: one short JVM each (about 2 s, more on a
        # loaded machine), which one after the other only added up
        # (or copied from the cached format of the same configuration, see _storage_from_template)
        formats = []
        for k in self.nodes:
            k.dir.mkdir(parents=True, exist_ok=True)
            k.cluster_id = self.cluster_id
            props = k.properties()
            props["controller.quorum.voters"] = voters
            cfg = k.dir / "server.properties"
            cfg.write_text("".join("%s=%s\n" % kv for kv in props.items()))
            if _storage_from_template(self.version, props, self.cluster_id):
                continue
            formats.append((props, subprocess.Popen(k._java(cp) + ["kafka.tools.StorageTool", "format",
                                                                   "--cluster-id=" + self.cluster_id, "-c", str(cfg)],
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        for props, f, (out, err) in [(props, f, f.communicate()) for props, f in formats]:
            if f.returncode != 0:
                raise OracleUnavailable("kafka-storage format failed:\n%s\n%s" % (out, err[-4000:]))
            _save_template(self.version, props)
        for k in self.nodes:
            self._spawn(k, cp)
        try:
            self.wait_ready(t0 + timeout)
        except BaseException:
            self.kill_all()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    @staticmethod
    def _spawn(k: KafkaOracle, cp: str) -> None:
        k.lines = []
        k.proc = subprocess.Popen(k._java(cp) + ["kafka.Kafka", str(k.dir / "server.properties")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  bufsize=1, start_new_session=True)
        threading.Thread(target=k._pump, args=(k.proc,), daemon=True).start()

    def wait_ready(self, deadline: float, nodes=None) -> None:
        """Until every running node (or ``nodes``) lists every running node as a broker."""
        want = [k for k in self.nodes if k.proc is not None] if nodes is None else nodes
        expect = sum(1 for k in self.nodes if k.proc is not None)
        for k in want:
            while True:
                if k.proc is None or k.proc.poll() is not None:
                    raise OracleUnavailable("Kafka node %d exited:\n%s" % (k.node_id, "".join(k.lines[-60:])))
                try:
                    if _metadata_brokers("127.0.0.1", k.port) >= expect:
                        break
                except (OSError, struct.error, ProtocolError):
                    pass
                if time.monotonic() > deadline:
                    raise OracleUnavailable("Kafka node %d not ready in time:\n%s"
                                            % (k.node_id, "".join(k.lines[-60:])))
                time.sleep(0.2)

    def quorum_leader(self) -> int | None:
        """The node id of the active controller (the KRaft quorum's leader), read from the
        nodes' logs: the ``Completed transition to Leader`` line of the highest epoch (the
        client listeners have no API that names it: DescribeCluster answers a random broker)."""
        best = (-1, None)
        for k in self.nodes:
            for m in _RAFT_LEADER.finditer(k.log_text()):
                best = max(best, (int(m.group(2)), int(m.group(1))))
        return best[1]

    def pause(self, node_id: int) -> None:
        """SIGSTOP one node (it neither fetches nor heartbeats until ``resume``)."""
        self.node(node_id).proc.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self.node(node_id).proc.send_signal(signal.SIGCONT)

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Start a stopped or killed node again (same ports and data)."""
        k = self.node(node_id)
        if k.proc is not None:
            return
        self._spawn(k, classpath(fetch(self.version)))
        self.wait_ready(time.monotonic() + timeout)

    def stop(self) -> None:
        for k in self.nodes:
            if k.proc is not None:
                k.proc.send_signal(signal.SIGTERM)
        for k in self.nodes:
            k.stop()

    def kill_all(self) -> None:
        for k in self.nodes:
            k.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# The last Apache Kafka release line with ZooKeeper mode: the oracle for pykbroker's ZooKeeper
# controller (cluster/zk_controller.py), whose rules (a controller elected through /controller,
# sessions, ISR in the state znodes) differ from KRaft's.
ZK_MODE_VERSION = "3.9.1"


class KafkaZkBroker(KafkaOracle):
    """One Apache Kafka broker in ZooKeeper mode (``ZK_MODE_VERSION``) on a running ZooKeeper
    (``zookeeper_connect``), broker id ``broker_id``: several of them on one ZooKeeper are a
    ZooKeeper-era cluster, one of them its controller.  No storage format step (ZooKeeper mode
    has none); ``start()`` again after a kill keeps its port and data (a restart)."""

    def __init__(self, data_dir: str | os.PathLike, broker_id: int, zookeeper_connect: str,
                 overrides: dict | None = None, heap: str = "256m", version: str = ZK_MODE_VERSION):
        super().__init__(data_dir, overrides, heap=heap, version=version)
        self.node_id = broker_id
        self.zookeeper_connect = zookeeper_connect

    def properties(self) -> dict:
        p = {
            "broker.id": str(self.node_id),
            "zookeeper.connect": self.zookeeper_connect,
            "listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "log.dirs": str(self.dir / "data"),
            "group.initial.rebalance.delay.ms": "0",
        }
        p.update(self.overrides)
        return p

    def start(self, timeout: float = 120.0) -> "KafkaZkBroker":
        t0 = time.monotonic()
        cp = classpath(fetch(self.version))
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        cfg = self.dir / "server.properties"
        cfg.write_text("".join("%s=%s\n" % kv for kv in self.properties().items()))
        if self._launch(cp, cfg, t0, timeout):
            return self
        self.kill()
        raise OracleUnavailable("Apache Kafka %s (ZooKeeper mode, broker %d) did not become ready within %ss:\n%s"
                                % (self.version, self.node_id, timeout, "".join(self.lines[-60:])))


def main(argv=None) -> int:
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the broker jars into the cache")
    f.add_argument("--version", default=None)
    r = sub.add_parser("run", help="start a single-node KRaft broker and keep it running")
    r.add_argument("--version", default=None)
    r.add_argument("--data-dir", default=None, help="default: a fresh temporary directory")
    r.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("--nodes", type=int, default=1,
                   help="N > 1: a cluster of N combined broker+controller nodes (ids 1..N, 256 MiB heaps)")
    args = ap.parse_args(argv)
    if args.cmd == "fetch":
        print(fetch(args.version, quiet=False))
        return 0
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="kafka-oracle-")
    overrides = dict(o.split("=", 1) for o in args.override)
    if args.nodes > 1:
        k = KafkaClusterOracle(data_dir, args.nodes, overrides, version=args.version)
    else:
        k = KafkaOracle(data_dir, overrides, version=args.version)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    k.start()
    print("Apache Kafka %s ready on %s (cluster id %s, data in %s, started in %.1fs)"
          % (k.version, k.bootstrap, k.cluster_id, data_dir, k.start_seconds), flush=True)
    procs = [n.proc for n in k.nodes] if args.nodes > 1 else [k.proc]
    try:
        while not stop.is_set() and all(p.poll() is None for p in procs):
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        k.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
