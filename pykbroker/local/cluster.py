"""A local multi-broker cluster on a real ZooKeeper: ``pykbroker cluster up`` as a library.

``Cluster(n_brokers=3, data_dir=None, overrides={...})`` starts a standalone ZooKeeper
(:class:`pykbroker.local.zookeeper.ZooKeeperServer`, unless ``zookeeper="host:port"`` names
one already running) and N ``pykbroker serve`` child processes on loopback, broker ids 1..N,
each given ``zookeeper.connect`` and ``broker.id`` as ``--override`` (Kafka's names), exactly as a
user starts them.  A broker counts as started when it answers ApiVersions.

Layout under ``data_dir`` (a temporary directory removed by ``close()`` when none is given)::

    zookeeper/          zoo.cfg, zookeeper.log, data/
    broker-1/           broker.log (its stdout+stderr), kafka-logs/ (its log.dirs)
    broker-2/ ...

For tests and fault tools: ``kill(id, sig)``, ``stop(id)`` (SIGTERM and wait), ``start(id)`` (same
port, same data), ``pause(id)``/``resume(id)`` (SIGSTOP/SIGCONT), ``restart_zookeeper(down)``,
``stop_all()`` then ``start()`` (everything down and up), ``wait_registered()`` (the brokers'
ZooKeeper registrations, read with kazoo).  One controlling thread: the methods are not
thread-safe.  Standard library only, but for kazoo in the two ZooKeeper reads.

``zookeeper_relay=True`` puts a :class:`pykbroker.local.relay.TcpRelay` between the brokers and
ZooKeeper (``cluster.zk_relay``: ``drop()``, ``hold(s)``, ``blip_every(s)``): network blips on
the brokers' ZooKeeper links, sessions kept.  ``zookeeper_connect`` stays ZooKeeper's own
address (what tests read it through).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, Optional

from .zookeeper import ChildProcess, ZooKeeperServer, child_setup, free_port, stop_signals_deferred, tail
from ..healthcheck import probe

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .secure_setup import SecureSetup
    from .relay import TcpRelay

HOST = "127.0.0.1"


def _listens(pid: int, port: int) -> Optional[bool]:
    """Whether process ``pid`` holds a listening TCP socket on ``port`` (Linux's /proc: the
    socket inodes among its descriptors, looked up in its network namespace's socket tables);
    None without a /proc to read (then the caller trusts the probe alone); False also when the
    process is gone (a zombie's descriptors cannot be listed)."""
    if not os.path.exists("/proc/self/net/tcp"):
        return None
    try:
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        for table in ("tcp", "tcp6"):
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    # local address "HEXIP:HEXPORT", state 0A = LISTEN, inode in column 10
                    if (len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes
                            and int(fields[1].rsplit(":", 1)[1], 16) == port):
                        return True
        return False
    except (OSError, ValueError):
        return False


class BrokerNode(ChildProcess):
    """One ``pykbroker serve`` child: ``broker_id``, ``port``, ``pid``, ``data_dir`` (its
    directory: log file and log.dirs), ``log_dir`` (log.dirs), ``log_path``."""

    STOP_TIMEOUT = 30.0   # a clean shutdown flushes and checkpoints every partition
    # The address it listens on and advertises, and a prefix for its command line: loopback and
    # none here; a broker in a network namespace (compat/chaos/netns.py) gets the namespace's address
    # and ``ip netns exec <ns>`` (which execs: ``pid`` stays the broker's, signals reach it).
    host = HOST
    launcher: tuple = ()
    # a secured cluster's SecureSetup (pykbroker/local/secure_setup.py): the listener's protocol,
    # and the TLS/SASL of the readiness probe; None: PLAINTEXT
    security: Optional["SecureSetup"] = None

    def __init__(self, broker_id: int, data_dir: str, zookeeper_connect: Optional[str],
                 overrides: Optional[dict] = None, port: int = 0, log_level: str = "INFO",
                 die_with_parent: bool = False, metrics_port: Optional[int] = None,
                 as_kafka: Optional[str] = None, trace: bool = False, control_port: Optional[int] = None) -> None:
        self.broker_id = int(broker_id)
        # ``serve --as-kafka`` (a version profile, pykbroker/profiles.py) and ``serve --trace``
        # (every request served, decoded, appended to ``trace_path`` as JSON lines)
        self.as_kafka = as_kafka
        self.trace_path = os.path.join(os.path.abspath(data_dir), "trace.jsonl") if trace else None
        self.data_dir = os.path.abspath(data_dir)
        self.log_dir = os.path.join(self.data_dir, "kafka-logs")
        self.log_path = os.path.join(self.data_dir, "broker.log")
        self.zookeeper_connect = zookeeper_connect
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.port = int(port)
        self.log_level = log_level
        self.die_with_parent = die_with_parent
        self.proc: Optional[subprocess.Popen] = None
        self._log_offset = 0
        self.ever_ready = False   # from then on its port is fixed: clients and ZooKeeper know it
        # Prometheus metrics (``serve --metrics``): None off, 0 a free port chosen at the first
        # spawn and kept across restarts (a scraper's target list stays valid)
        self.metrics_port = metrics_port
        # the HTTP control endpoint (``serve --control``: faults, the broker's clock), on this
        # broker's host; None off, 0 a free port chosen at the first spawn and kept
        self.control_port = control_port

    @property
    def control_url(self) -> Optional[str]:
        return "http://%s:%d" % (self.host, self.control_port) if self.control_port else None

    @property
    def bootstrap(self) -> str:
        return "%s:%d" % (self.host, self.port)

    def command(self) -> list:
        cmd = [*self.launcher, sys.executable, "-m", "pykbroker", "serve",
               "--listeners", "%s://%s:%d" % (self.security.protocol if self.security else "PLAINTEXT",
                                               self.host, self.port),
               "--log-dirs", self.log_dir, "--log-level", self.log_level]
        values = {"broker.id": str(self.broker_id)}
        if self.zookeeper_connect:
            values["zookeeper.connect"] = self.zookeeper_connect
        values.update(self.overrides)   # the caller's word wins (e.g. a chroot in zookeeper.connect)
        for k, v in values.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        if self.metrics_port is not None:
            cmd += ["--metrics", "%s:%d" % (self.host, self.metrics_port)]
        if self.control_port is not None:
            cmd += ["--control", "%s:%d" % (self.host, self.control_port)]
        if self.as_kafka:
            cmd += ["--as-kafka", self.as_kafka]
        if self.trace_path:
            cmd += ["--trace", self.trace_path]
        return cmd

    def spawn(self) -> None:
        """Start the process without waiting (see :meth:`wait_ready`)."""
        if self.running():
            return
        os.makedirs(self.log_dir, exist_ok=True)
        if self.port == 0:
            self.port = free_port(HOST)
        if self.metrics_port == 0:
            self.metrics_port = free_port(HOST)
        if self.control_port == 0:
            # in a namespace of its own (compat/chaos/netns.py) any port is free there
            self.control_port = free_port(HOST) if self.host == HOST else 7070
        env = dict(os.environ)
        # The child imports the same pykbroker as this process: a source checkout (a worktree
        # on PYTHONPATH, or the current directory) goes first on its path.  An installed package
        # needs nothing (and site-packages on PYTHONPATH would come before the standard library).
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if os.path.exists(os.path.join(pkg_root, "pyproject.toml")):
            env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as log:
            log.write(b"--- pykbroker: starting broker %d on %s ---\n" % (self.broker_id, self.bootstrap.encode()))
            log.flush()
            self._log_offset = log.tell()
            with stop_signals_deferred():
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env, cwd=self.data_dir,
                                             preexec_fn=child_setup(self.die_with_parent),
                                             start_new_session=self.die_with_parent)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until it answers ApiVersions; RuntimeError with the log's tail if it exits or times out."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                rc = None if self.proc is None else self.proc.returncode
                self.proc = None
                raise _BrokerExited("broker %d exited with status %s before answering; last lines of %s:\n%s"
                                    % (self.broker_id, rc, self.log_path, self.log_tail()))
            try:
                if self.security is not None:
                    self.security.probe(self.host, self.port, timeout=1.0)
                else:
                    probe(self.host, self.port, timeout=1.0)
                # The answer must come from this child: a port picked free can be taken by another
                # broker before this one binds it (then this one exits, "Address already in use",
                # and the probe was answered by the other).  Only on the shared loopback: in a
                # network namespace of its own (a launcher) nothing else holds its port.
                if self.launcher or _listens(self.proc.pid, self.port) is not False:
                    self.ever_ready = True
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("broker %d did not answer ApiVersions on %s within %ss; last lines of %s:\n%s"
                                   % (self.broker_id, self.bootstrap, timeout, self.log_path, self.log_tail()))
            time.sleep(0.05)

    def log_tail(self, lines: int = 40) -> str:
        """The end of this run's part of its log file."""
        return tail(self.log_path, lines, self._log_offset)

    def port_taken(self) -> bool:
        return "Address already in use" in self.log_tail(60)

    def start(self, timeout: float = 60.0) -> "BrokerNode":
        self.spawn()
        self.wait_ready(timeout)
        return self

    def describe(self) -> dict:
        return {"broker_id": self.broker_id, "host": self.host, "port": self.port, "pid": self.pid,
                "data_dir": self.data_dir, "log": self.log_path,
                "metrics": "http://%s:%d/metrics" % (self.host, self.metrics_port) if self.metrics_port else None}

    def __repr__(self) -> str:
        return "BrokerNode(%d, %s, pid=%s)" % (self.broker_id, self.bootstrap, self.pid)


class _BrokerExited(RuntimeError):
    pass


class Cluster:
    """ZooKeeper + N brokers as child processes; a context manager (``with Cluster(3) as c:``).

    ``brokers`` is the list of :class:`BrokerNode` (``brokers[0]`` is broker id 1); ``broker(id)``
    finds one by id.  ``zookeeper`` is the :class:`ZooKeeperServer` (None when an external one
    was given as ``zookeeper="host:port"``).  ``overrides`` go to every broker; ``broker_overrides``
    maps a broker id to its own extra settings.  ``die_with_parent=True`` (what ``cluster up``
    uses; only from the main thread) puts the children in their own session and has the kernel
    SIGTERM them when this process dies.  ``metrics_port`` (None: off) serves each broker's
    Prometheus metrics: broker ``i`` on ``metrics_port + i - 1``, or on free ports when 0.
    ``as_kafka`` runs every broker with that version profile (``serve --as-kafka``); ``trace=True``
    has each broker record the requests it serves in ``trace.jsonl`` of its directory
    (``BrokerNode.trace_path``).
    """

    def __init__(self, n_brokers: int = 3, data_dir: Optional[str] = None,
                 overrides: Optional[dict] = None, zookeeper: Optional[str] = None,
                 broker_overrides: Optional[dict] = None, log_level: str = "INFO",
                 zk_tick_time: int = 2000, die_with_parent: bool = False,
                 start_timeout: float = 60.0, metrics_port: Optional[int] = None,
                 as_kafka: Optional[str] = None, trace: bool = False, zookeeper_relay: bool = False,
                 security: Optional[str] = None, users: Optional[dict] = None,
                 mechanisms: Optional[list] = None) -> None:
        if n_brokers < 1:
            raise ValueError("n_brokers must be at least 1")
        self._tmp = None
        if data_dir is None:
            self._tmp = data_dir = tempfile.mkdtemp(prefix="pykbroker-cluster-")
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self.start_timeout = start_timeout
        self._started = False
        self.zookeeper: Optional[ZooKeeperServer] = None
        self._want_relay = zookeeper_relay
        self.zk_relay: Optional[TcpRelay] = None   # the TcpRelay, once started
        self.zookeeper_connect: Optional[str]
        if zookeeper:
            self.zookeeper_connect = zookeeper
        else:
            self.zookeeper = ZooKeeperServer(os.path.join(self.data_dir, "zookeeper"),
                                             tick_time=zk_tick_time, die_with_parent=die_with_parent)
            self.zookeeper_connect = None   # known once it has a port
        per_broker = broker_overrides or {}
        # security="SASL_SSL" | "SASL_PLAINTEXT" | "SSL" (or a SecureSetup): every broker's one
        # listener has it and is the inter-broker listener; a throw-away CA, the users, the
        # brokers' own SCRAM user seeded in ZooKeeper before they start (local/secure_setup.py)
        self.security = None
        if security is not None and str(security).upper() != "PLAINTEXT":
            from .secure_setup import SecureSetup
            self.security = security if isinstance(security, SecureSetup) else SecureSetup(security, users, mechanisms)
            secured = self.security.cluster_broker_config(overrides)
            # the caller's settings win, but for super.users, which the setup extends with the
            # broker principal (CLUSTER_ACTION between brokers) rather than replaces
            overrides = {**secured, **(overrides or {}),
                         **({"super.users": secured["super.users"]} if "super.users" in secured else {})}
        self.brokers = [BrokerNode(i, os.path.join(self.data_dir, "broker-%d" % i), None,
                                   {**(overrides or {}), **per_broker.get(i, {})},
                                   log_level=log_level, die_with_parent=die_with_parent,
                                   metrics_port=None if metrics_port is None else
                                   (metrics_port + i - 1 if metrics_port else 0),
                                   as_kafka=as_kafka, trace=trace)
                        for i in range(1, n_brokers + 1)]
        for b in self.brokers:
            b.security = self.security

    # -- addresses ------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, broker_id: int) -> BrokerNode:
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        raise KeyError("no broker with id %r" % broker_id)

    def describe(self) -> dict:
        """What ``pykbroker cluster up`` prints (its ``--json`` form)."""
        zk = self.zookeeper
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper": {"connect": self.zookeeper_connect, "pid": zk.pid if zk else None,
                          "port": zk.port if zk else None, "data_dir": zk.data_dir if zk else None,
                          "log": zk.log_path if zk else None, "managed": zk is not None},
            "data_dir": self.data_dir,
            "brokers": [b.describe() for b in self.brokers],
        }

    # -- life cycle -----------------------------------------------------------------------

    def start(self, broker_id: Optional[int] = None, timeout: Optional[float] = None) -> Any:   # the Cluster, or the broker started
        """``start()``: the whole cluster (ZooKeeper, then every broker), returns the Cluster.
        ``start(id)``: that stopped or killed broker again, same port and data; returns it."""
        if broker_id is not None:
            return self.broker(broker_id).start(timeout or self.start_timeout)
        try:
            if self.zookeeper is not None:
                self.zookeeper.start(self.start_timeout)
                self.zookeeper_connect = self.zookeeper.connect_string
            if self.security is not None and not self._started and self.zookeeper_connect:
                self.security.seed_zookeeper(self.zookeeper_connect)
            for b in self.brokers:
                b.zookeeper_connect = self._brokers_zookeeper_connect()
            # all spawned first, then waited for: N Python start-ups overlap
            for b in self.brokers:
                b.spawn()
            for b in self.brokers:
                self._wait_or_retry(b)
            if self.zookeeper_connect:
                self.wait_cluster_view(timeout=self.start_timeout)
        except BaseException:
            if not self._started:
                self.close()   # a failed first start leaves nothing behind
            raise
        self._started = True
        return self

    def _brokers_zookeeper_connect(self) -> str:
        """What the brokers are given: ZooKeeper's address, or the relay's in front of it."""
        connect = self.zookeeper_connect
        assert connect is not None   # start() knows it (given, or ZooKeeper started) before this
        if not self._want_relay:
            return connect
        hosts, slash, chroot = connect.partition("/")
        if self.zk_relay is None:
            from .relay import TcpRelay
            host, _, port = hosts.split(",")[0].rpartition(":")
            self.zk_relay = TcpRelay(host or HOST, int(port))
        return self.zk_relay.address + slash + chroot

    def _wait_or_retry(self, b: BrokerNode) -> None:
        # A port picked free may be taken by another process before the broker binds it: a
        # first start then moves to another port (later starts keep theirs: clients know it).
        for attempt in range(3):
            try:
                b.wait_ready(self.start_timeout)
                return
            except _BrokerExited:
                if attempt == 2 or b.ever_ready or not b.port_taken():
                    raise
                b.port = 0
                b.spawn()

    def stop_all(self, timeout: float = 30.0, zookeeper: bool = True) -> None:
        """SIGTERM every broker (together), wait, then stop ZooKeeper (unless ``zookeeper`` is
        false): brokers shut down while ZooKeeper still answers (a controlled shutdown needs
        it).  ``start()`` brings back whatever is not running, on the same ports and data."""
        for b in self.brokers:
            p = b.proc
            if p is not None and p.poll() is None:   # b.running()
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for b in self.brokers:
            b.stop(timeout)
        if zookeeper and self.zookeeper is not None:
            self.zookeeper.stop()

    def close(self) -> None:
        """Stop everything; remove the data directory if it was a temporary one."""
        try:
            self.stop_all()
        finally:
            if self.zk_relay is not None:
                self.zk_relay.close()
                self.zk_relay = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- clients of a secured cluster -------------------------------------------------------

    def client_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                      password: Optional[str] = None) -> dict:
        """confluent-kafka settings (bootstrap, security.protocol, CA, SASL user) for this cluster."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap_servers}
        return self.security.client_config(self.bootstrap_servers, user, mechanism, password)

    # -- ZooKeeper's view ------------------------------------------------------------------

    def registered_broker_ids(self, timeout: float = 10.0) -> set:
        """The broker ids registered under ``/brokers/ids`` (Kafka's ZooKeeper layout: one
        ephemeral znode per live broker), read with kazoo; empty before any registration."""
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoNodeError

        zk = KazooClient(hosts=self.zookeeper_connect, timeout=timeout)
        zk.start(timeout=timeout)
        try:
            try:
                return {int(c) for c in zk.get_children("/brokers/ids") if c.lstrip("-").isdigit()}
            except NoNodeError:
                return set()
        finally:
            zk.stop()
            zk.close()

    def wait_registered(self, broker_ids: Optional[Iterable[int]] = None, timeout: float = 30.0) -> set:
        """Until exactly ``broker_ids`` (default: the brokers running now) are registered in
        ZooKeeper, e.g. after ``start(id)``, or after a kill once the session has expired."""
        want = set(broker_ids) if broker_ids is not None else {b.broker_id for b in self.brokers if b.running()}
        deadline = time.monotonic() + timeout
        while True:
            got = self.registered_broker_ids()
            if got == want:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError("registered broker ids %s, want %s (after %ss)" % (sorted(got), sorted(want), timeout))
            time.sleep(0.1)

    def wait_cluster_view(self, timeout: float = 30.0) -> None:
        """Until every running broker's Metadata lists every running broker: a broker answers
        ApiVersions before the others' registrations reached it, and a CreateTopics sent then
        would count too few brokers (INVALID_REPLICATION_FACTOR, as Kafka answers too)."""
        from ..protocol.wire import metadata
        want = {b.broker_id for b in self.brokers if b.running()}
        deadline = time.monotonic() + timeout
        for b in self.brokers:
            if not b.running():
                continue
            while True:
                try:
                    if self.security is not None:
                        with self.security.wire_client(b.host, b.port) as c:
                            got = {x["node_id"] for x in metadata(c, [])["brokers"]}
                    else:
                        got = {x["node_id"] for x in metadata((b.host, b.port), [])["brokers"]}
                except (OSError, ValueError):
                    got = set()
                if want <= got:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("broker %d sees brokers %s, want %s" % (b.broker_id, sorted(got), sorted(want)))
                time.sleep(0.05)

    # -- faults ---------------------------------------------------------------------------

    def kill(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        self.broker(broker_id).kill(sig)

    def stop(self, broker_id: int, timeout: float = 30.0) -> Optional[int]:
        return self.broker(broker_id).stop(timeout)

    def pause(self, broker_id: int) -> None:
        self.broker(broker_id).pause()

    def resume(self, broker_id: int) -> None:
        self.broker(broker_id).resume()

    def restart_zookeeper(self, down_seconds: float = 0.0, sig: int = signal.SIGKILL) -> None:
        if self.zookeeper is None:
            raise RuntimeError("ZooKeeper is external (%s): not ours to restart" % self.zookeeper_connect)
        self.zookeeper.restart(down_seconds, sig, timeout=self.start_timeout)

    def __repr__(self) -> str:
        return "Cluster(%s, zookeeper=%s)" % (self.bootstrap_servers, self.zookeeper_connect)
