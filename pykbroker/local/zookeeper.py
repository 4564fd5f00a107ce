"""A standalone ZooKeeper 3.8 server in a child process, for ``pykbroker cluster up`` and tests.

It runs the Debian package's jars (``apt-get install zookeeper``: ``/usr/share/java/zookeeper.jar``,
whose manifest names its dependencies) with ``org.apache.zookeeper.server.ZooKeeperServerMain``
and a generated ``zoo.cfg``: client port on loopback only, no admin HTTP server (it would take
port 8080, shared by every ZooKeeper on the machine), and the ``ruok``/``srvr`` four-letter
commands allowed (3.8 allows none but ``srvr`` by default) because readiness is probed with them.
``ZOOKEEPER_CLASSPATH`` replaces the jar lookup (e.g. an Apache tarball's ``lib/*``), ``JAVA`` or
``JAVA_HOME`` the ``java`` on ``PATH``.

``die_with_parent=True`` (what ``pykbroker cluster up`` uses) starts the server in its own
session, so a terminal's Ctrl-C reaches only the launcher, which stops things in order, and
asks the kernel to SIGTERM it if the launcher dies.

The process can be stopped (SIGTERM), killed (SIGKILL), paused (SIGSTOP) and resumed, and started
again on the same port and data directory: what the fault tools do to it.  Standard library only;
nothing here imports kazoo.
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Optional

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
# Logging back end for ZooKeeper's slf4j: without one it logs nothing (and says so once), and the
# log file is what the tail on a failed start shows.
DEBIAN_LOGGER = "/usr/share/java/slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# A small heap and a quick JIT: a test ZooKeeper holds a few hundred znodes, and the machine runs
# several of them next to the brokers.
JVM_FLAGS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true"]


class ZooKeeperUnavailable(RuntimeError):
    """Java or the ZooKeeper jars are missing (the message says what to install)."""


def find_java() -> str:
    java = os.environ.get("JAVA")
    if java:
        found = shutil.which(java)
        if not found:
            raise ZooKeeperUnavailable("JAVA=%s is not an executable java" % java)
        return found
    if os.environ.get("JAVA_HOME"):
        candidate = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        java = candidate if os.access(candidate, os.X_OK) else None
    java = java or shutil.which("java")
    if not java:
        raise ZooKeeperUnavailable(
            "no 'java' found (set JAVA or JAVA_HOME, or install a JRE: apt-get install "
            "default-jre-headless; the Debian 'zookeeper' package pulls one in)")
    return java


def find_classpath() -> str:
    """$ZOOKEEPER_CLASSPATH, else the Debian package's jar (+ slf4j-simple when present)."""
    cp = os.environ.get("ZOOKEEPER_CLASSPATH")
    if cp:
        return cp
    if not os.path.exists(DEBIAN_JAR):
        # an Apache tarball unpacked under $ZOOKEEPER_HOME
        home = os.environ.get("ZOOKEEPER_HOME")
        if home and glob.glob(os.path.join(home, "lib", "zookeeper-*.jar")):
            return os.path.join(home, "lib", "*")
        raise ZooKeeperUnavailable(
            "ZooKeeper jars not found (%s): install the Debian package 'zookeeper' "
            "(apt-get install zookeeper) or set ZOOKEEPER_CLASSPATH" % DEBIAN_JAR)
    parts = [DEBIAN_JAR]
    if os.path.exists(DEBIAN_LOGGER):
        parts.append(DEBIAN_LOGGER)
    return os.pathsep.join(parts)


def available() -> Optional[str]:
    """None when a ZooKeeper can be started here, else why not (for pytest skips)."""
    try:
        find_java()
        find_classpath()
    except ZooKeeperUnavailable as e:
        return str(e)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now on host (the kernel's pick).  Another process may take it before
    ours binds; starters retry on 'Address already in use'."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter(host: str, port: int, word: str, timeout: float = 2.0) -> bytes:
    """Send a ZooKeeper four-letter command; the answer (the server closes after it)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks: list[bytes] = []
        while True:
            b = s.recv(4096)
            if not b:
                return b"".join(chunks)
            chunks.append(b)


def tail(path: str, lines: int = 40, since: int = 0) -> str:
    """The last ``lines`` lines of a log file, from byte ``since`` on (this run's part)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(since, fh.tell() - 64 * 1024))
            return "\n".join(fh.read().decode("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return "(no log at %s)" % path


class ChildProcess:
    """A server run as a child process (``proc``) that tests crash, pause and stop as an
    operator would: ZooKeeper here, pykbroker brokers in ``local/cluster.py``."""

    proc: Optional[subprocess.Popen] = None
    STOP_TIMEOUT = 15.0   # seconds a clean shutdown gets before SIGKILL

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: Optional[float] = None) -> Optional[int]:
        """SIGTERM (clean shutdown) and wait; SIGKILL after ``timeout``.  The exit status, None
        if it was not running."""
        if self.proc is None:
            return None
        p = self.proc
        if p.poll() is None:
            self.resume()   # a paused process must be able to act on SIGTERM
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(self.STOP_TIMEOUT if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.proc = None
        return p.returncode

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL: a crash); a fatal one is waited for and the process
        forgotten."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
                self.proc.wait()
        if self.proc.poll() is not None:
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the port stays open, nothing answers (sessions expire on the clients' side)."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGSTOP)
            wait_stopped(p.pid)

    def resume(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)


class ZooKeeperServer(ChildProcess):
    """``ZooKeeperServer(data_dir=None, port=0)``: ``start()``, ``stop()``, ``kill()``,
    ``pause()``, ``resume()``, ``restart(down_seconds)``; a context manager.

    ``data_dir`` holds ``zoo.cfg``, ``zookeeper.log`` and ZooKeeper's snapshots/transaction
    logs (``data/``); without one a temporary directory is made and removed by ``close()``.
    Port 0 picks a free loopback port at the first start; later starts reuse it, so clients
    (brokers) reconnect to the same address.  ``tick_time`` (ms) bounds session timeouts:
    ZooKeeper grants between 2 and 20 ticks.
    """

    host = "127.0.0.1"
    # a prefix for the java command line: ``ip netns exec <ns>`` for a ZooKeeper in a network
    # namespace (compat/chaos/netns.py), which then listens on that namespace's address
    launcher: tuple = ()

    def __init__(self, data_dir: Optional[str] = None, port: int = 0, tick_time: int = 2000,
                 extra_config: Optional[dict] = None, die_with_parent: bool = False) -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = data_dir = tempfile.mkdtemp(prefix="pykbroker-zk-")
        self.data_dir = os.path.abspath(data_dir)
        self.port = int(port)
        self.tick_time = int(tick_time)
        self.extra_config = dict(extra_config or {})
        self.die_with_parent = die_with_parent
        self.proc: Optional[subprocess.Popen] = None
        self._log_offset = 0
        self.log_path = os.path.join(self.data_dir, "zookeeper.log")
        self.config_path = os.path.join(self.data_dir, "zoo.cfg")

    # -- addresses ------------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        """What brokers get as ``zookeeper.connect``."""
        return "%s:%d" % (self.host, self.port)

    # -- life cycle -----------------------------------------------------------------------

    def _write_config(self) -> None:
        os.makedirs(os.path.join(self.data_dir, "data"), exist_ok=True)
        cfg = {
            "tickTime": self.tick_time,
            "dataDir": os.path.join(self.data_dir, "data"),
            "clientPort": self.port,
            # loopback only: a development cluster must not listen on the network
            "clientPortAddress": self.host,
            # the embedded Jetty admin server would bind 0.0.0.0:8080 (clashes between servers)
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
            # the default 60 connections per client address: brokers, tools and tests all come
            # from 127.0.0.1
            "maxClientCnxns": 0,
            # snapshots kept small on disk for long chaos runs
            "autopurge.snapRetainCount": 3,
            "autopurge.purgeInterval": 1,
        }
        cfg.update(self.extra_config)
        with open(self.config_path, "w") as fh:
            fh.write("# written by pykbroker (pykbroker/local/zookeeper.py)\n")
            for k, v in cfg.items():
                fh.write("%s=%s\n" % (k, v))

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        """Start (or start again, same port and data) and wait until it serves requests."""
        if self.running():
            return self
        java, cp = find_java(), find_classpath()
        given_port = self.port != 0
        for attempt in range(5):
            if not given_port and (self.port == 0 or attempt > 0):
                self.port = free_port(self.host)
            self._write_config()
            with open(self.log_path, "ab") as log:
                log.write(b"--- pykbroker: starting ZooKeeper on %s ---\n" % self.connect_string.encode())
                log.flush()
                self._log_offset = log.tell()
                with stop_signals_deferred():
                    self.proc = subprocess.Popen(
                        [*self.launcher, java, *JVM_FLAGS, "-cp", cp, MAIN_CLASS, self.config_path],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        cwd=self.data_dir, preexec_fn=child_setup(self.die_with_parent),
                        start_new_session=self.die_with_parent)
            try:
                self._wait_ready(timeout)
                return self
            except _PortTaken:
                self._reap()
                if given_port:
                    break
        raise RuntimeError("ZooKeeper did not start on %s; last lines of %s:\n%s"
                           % (self.connect_string, self.log_path, self.log_tail()))

    def _wait_ready(self, timeout: float) -> None:
        # `srvr` answers "This ZooKeeper instance is not currently serving requests" until the
        # database is loaded; once it names the mode the server accepts sessions.
        deadline = time.monotonic() + timeout
        while True:
            p = self.proc
            if p is None or p.poll() is not None:
                rc, self.proc = (None if p is None else p.returncode), None
                if "Address already in use" in self.log_tail(80):
                    raise _PortTaken()
                raise RuntimeError("ZooKeeper exited with status %s; last lines of %s:\n%s"
                                   % (rc, self.log_path, self.log_tail()))
            try:
                if b"Mode:" in four_letter(self.host, self.port, "srvr", timeout=1.0):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("ZooKeeper not serving on %s after %ss; last lines of %s:\n%s"
                                   % (self.connect_string, timeout, self.log_path, self.log_tail()))
            time.sleep(0.05)

    def log_tail(self, lines: int = 40) -> str:
        """The end of this run's part of zookeeper.log."""
        return tail(self.log_path, lines, self._log_offset)

    def _reap(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self, down_seconds: float = 0.0, sig: int = signal.SIGKILL,
                timeout: float = 30.0) -> "ZooKeeperServer":
        """Kill (default SIGKILL), stay down ``down_seconds``, start on the same port and data."""
        if sig == signal.SIGTERM:
            self.stop()
        else:
            self.kill(sig)
        if down_seconds > 0:
            time.sleep(down_seconds)
        return self.start(timeout)

    def close(self) -> None:
        """Stop, and remove the data directory if it was a temporary one."""
        try:
            self.stop()
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __enter__(self) -> "ZooKeeperServer":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "ZooKeeperServer(%s, pid=%s, data_dir=%r)" % (self.connect_string, self.pid, self.data_dir)


def wait_stopped(pid: int, timeout: float = 5.0) -> None:
    """After SIGSTOP, until the kernel shows the process stopped (signals are asynchronous: a
    caller that pauses a server and then probes it must not race the delivery).  Linux /proc;
    elsewhere, returns at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t", "Z", "X"):
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.01)


class _PortTaken(Exception):
    pass


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Around ``self.proc = subprocess.Popen(...)`` (with ``preexec_fn=child_setup(...)``): a
    launcher whose signal handler raises (``pykbroker cluster up`` aborts its start-up that
    way) could otherwise get the exception after the fork and before the assignment, and the
    child would run on, known to nobody.  The stop signals are blocked in this thread inside the
    block and delivered when it ends, once the caller holds the child."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def child_setup(die_with_parent: bool) -> Callable[[], None]:
    """The ``preexec_fn`` for :func:`stop_signals_deferred`: the child unblocks the stop signals
    (the mask survives exec) and, with ``die_with_parent``, gets SIGTERM when we die."""
    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        if die_with_parent:
            _die_with_parent()
    return setup


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG), so
    a killed ``pykbroker cluster up`` leaves no orphan servers.  Only for a parent that starts
    children from its main thread: the signal follows the death of the starting thread."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # 1 = PR_SET_PDEATHSIG
    except Exception:
        pass