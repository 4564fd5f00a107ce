"""pykbroker embedded in a program or a test: ``pykbroker.Broker``.

    with pykbroker.Broker() as broker:                # its own thread and trio loop
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        assert [r.value for r in broker.records("t")] == [b"v"]

    async with pykbroker.Broker() as broker:          # trio: runs in the caller's loop
        ...

    with pykbroker.Broker.subprocess() as broker:     # a child process, same interface
        ...

A real broker on a real TCP listener (``port=0``: a free loopback port), so any client in any
language can use ``bootstrap_servers``.  ``log_dir=None`` means a temporary directory, removed
when the broker stops; ``config`` holds broker settings (``server.properties`` keys) on top of
Kafka's defaults (:data:`TEST_CONFIG` holds the test-friendly ones the pytest plugin uses).

Introspection, for tests to assert on what the broker holds: :meth:`records`,
:meth:`committed_offsets`, :meth:`group`, :meth:`wait_for_group_stable`, :meth:`create_topic`.
In-process they read the broker's own objects on its trio thread (``trio.from_thread``), never
from another thread; over a subprocess or an external cluster (:class:`WireBroker`) they go
through the Kafka protocol (Fetch, OffsetFetch, DescribeGroups or ConsumerGroupDescribe,
CreateTopics), so they see what a client would see; there ``group().generation`` is -1 for a
classic group (DescribeGroups does not carry it).

Faults, crashes and time (docs/testing-and-faults.md): ``broker.faults`` (errors,
latency, dropped connections, lost responses, offline partitions), ``broker.crash()`` /
``broker.restart()``, and ``broker.clock`` (pykbroker/clock.py).  In-process they act on the
``BrokerRunner`` (pykbroker/run/runner.py) through the same ``run/control.py`` logic the HTTP
endpoint serves; a subprocess broker is driven over that endpoint (``crash`` there is a real
``kill -9``).

The in-process broker is the same code as ``pykbroker serve``: one trio loop, nothing mocked.
"""
from __future__ import annotations

import os
import shutil
import struct
import tempfile
import threading
import time
from typing import NamedTuple, Optional

__all__ = ["Broker", "SubprocessBroker", "WireBroker", "Record", "GroupDescription", "GroupMember",
           "TEST_CONFIG"]

# What the pytest plugin starts its broker with (documented there and in the README): a group's
# first join answers at once instead of after Kafka's 3 s delay; small segments and a small
# __consumer_offsets keep the data dir and the first group request cheap.
TEST_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": str(1 << 20),
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": str(1 << 20),
}


class Record(NamedTuple):
    """One record as the log holds it (control records excluded)."""
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list          # [(str, bytes | None), ...]


class GroupMember(NamedTuple):
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    assignment: dict       # topic -> sorted partitions (consumer protocol; {} otherwise)


class GroupDescription(NamedTuple):
    group_id: str
    state: str             # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, ...
    protocol_type: str     # "consumer" for consumers
    protocol: str          # the chosen assignor ("range", ...); "" while not Stable
    generation: int        # the classic generation, or the KIP-848 group epoch
    members: list          # [GroupMember, ...]


def _decode_assignment(data) -> dict:
    """Kafka's ConsumerProtocolAssignment (version, [(topic, [partition])], user data); {} when
    empty or not in that format."""
    try:
        buf = bytes(data or b"")
        if not buf:
            return {}
        pos = 2
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        out = {}
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            topic = buf[pos:pos + ln].decode()
            pos += ln
            (np_,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            parts = list(struct.unpack_from(">%di" % max(np_, 0), buf, pos))
            pos += 4 * max(np_, 0)
            out.setdefault(topic, []).extend(parts)
        return {t: sorted(ps) for t, ps in out.items()}
    except (struct.error, UnicodeDecodeError):
        return {}


def _decode_batches(data, start: int) -> tuple[list, int]:
    """Records of the whole batches in ``data`` at or above ``start``; and the offset after the
    last whole batch (a trailing partial batch is left for the next read, as clients do)."""
    from .protocol.records import HEADER_SIZE, decode_records, parse_header

    out = []
    nxt = start
    mv = memoryview(bytes(data))
    pos = 0
    while len(mv) - pos >= HEADER_SIZE:
        h = parse_header(mv, pos)
        if pos + h.size > len(mv):
            break
        if not h.is_control:
            out.extend(Record(r.offset, r.timestamp, r.key, r.value, list(r.headers))
                       for r in decode_records(mv[pos:pos + h.size]) if r.offset >= start)
        nxt = max(nxt, h.next_offset)
        pos += h.size
    return out, nxt


def _prepare(b) -> None:
    """Each in-process broker incarnation: a halt (every log dir failed: Kafka's Exit.halt)
    crashes the broker instead of ending the test process; restart() recovers it."""
    b.halt_hook = lambda status, message: b.crash()


class _BrokerBase:
    """What every variant shares: the bootstrap string, the context manager, the temporary log
    dir, and waiting for a group (by polling :meth:`group`)."""

    host = "127.0.0.1"
    port = 0

    advertised_host = None   # where a wildcard bind (0.0.0.0) is reached (loopback)

    @property
    def bootstrap_servers(self) -> str:
        return "%s:%d" % (self.advertised_host or self.host, self.port)

    # BrokerProcess and pykbroker.protocol.wire read ``bootstrap``
    bootstrap = bootstrap_servers

    def _own_log_dir(self, log_dir) -> None:
        self._tmp = None
        if log_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="pykbroker-")
            log_dir = self._tmp
        self.log_dir = os.path.abspath(str(log_dir))

    def _remove_tmp(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def group(self, group_id: str) -> Optional[GroupDescription]:
        raise NotImplementedError

    @staticmethod
    def _is_stable(g: Optional[GroupDescription], members: Optional[int]) -> bool:
        return g is not None and g.state == "Stable" and (members is None or len(g.members) == members)

    def wait_for_group_stable(self, group_id: str, members: Optional[int] = None,
                              timeout: float = 30.0) -> GroupDescription:
        """Until the group is Stable (with ``members`` members when given); its description.
        Raises TimeoutError with the last state seen."""
        deadline = time.monotonic() + timeout
        while True:
            g = self.group(group_id)
            if self._is_stable(g, members):
                return g
            if time.monotonic() > deadline:
                raise TimeoutError("group %r not stable%s after %ss: %r" % (
                    group_id, "" if members is None else " with %d members" % members, timeout, g))
            time.sleep(0.02)


class Broker(_BrokerBase):
    """A broker in this process: ``with Broker(...)`` runs it on its own thread and trio loop;
    ``async with Broker(...)`` in the caller's trio loop (a nursery).  ``start()``/``stop()``
    are the same without a ``with``.  See the module docstring."""

    def __init__(self, port: int = 0, log_dir=None, config: Optional[dict] = None,
                 host: str = "127.0.0.1", control_port: Optional[int] = None, clock=None,
                 as_kafka: Optional[str] = None, security: Optional[str] = None,
                 users: Optional[dict] = None, mechanisms: Optional[list] = None):
        from .clock import BrokerClock

        # security="SSL" | "SASL_PLAINTEXT" | "SASL_SSL": a throw-away CA and server certificate,
        # the users (PLAIN and SCRAM), and client_config() (pykbroker/local/secure_setup.py)
        self._secure = None
        if security is not None and str(security).upper() != "PLAINTEXT":
            from .local.secure_setup import SecureSetup
            self._secure = SecureSetup(security, users, mechanisms, host)

        # a version profile (pykbroker/profiles.py): "2.8", "3.9", "4.0", "4.4"/"4.x"; None: all
        self.as_kafka = None
        if as_kafka is not None:
            from .profiles import profile_name
            self.as_kafka = profile_name(as_kafka)
        self.host = host
        self.port = int(port)
        # The HTTP control endpoint (run/control.py): off unless a port (0: free) is given.
        self.control_port = control_port
        self.control_url: Optional[str] = None
        # The broker's clock (pykbroker/clock.py), kept across restarts.  With ``with Broker()``
        # it is the trio clock of the broker's loop; with ``async with`` it is the caller's
        # trio clock when that is a BrokerClock (trio.run(..., clock=pykbroker.BrokerClock())),
        # otherwise only the wall-clock readings follow it (see docs/testing-and-faults.md).
        self.clock = clock if clock is not None else BrokerClock()
        self.runner = None          # the BrokerRunner (pykbroker/run/runner.py) while started
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self.log_dir = None if log_dir is None else os.path.abspath(str(log_dir))
        self._given_log_dir = log_dir
        self._tmp = None
        self._token = None
        self._cancel = None
        self._loop_thread: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._nursery_cm = None

    @property
    def broker(self):
        """The running ``pykbroker.broker.Broker`` (read it on its loop), None while down."""
        r = self.runner
        return None if r is None else r.broker

    @classmethod
    def subprocess(cls, port: int = 0, log_dir=None, config: Optional[dict] = None,
                   host: str = "127.0.0.1", control_port: int = 0,
                   as_kafka: Optional[str] = None, security: Optional[str] = None,
                   users: Optional[dict] = None, mechanisms: Optional[list] = None) -> "SubprocessBroker":
        """The same interface over ``pykbroker serve`` in a child process (isolated: its own
        interpreter, killable); introspection goes through the Kafka protocol, faults, clock,
        crash and restart through its HTTP control endpoint (``control_port``, 0: a free one;
        None: none).  ``security``/``users``/``mechanisms`` as for :class:`Broker`."""
        return SubprocessBroker(port=port, log_dir=log_dir, config=config, host=host,
                                control_port=control_port, as_kafka=as_kafka, security=security,
                                users=users, mechanisms=mechanisms)

    # -- life cycle ----------------------------------------------------------------------------
    def _values(self) -> dict:
        values = {"listeners": "PLAINTEXT://%s:%d" % (self.host, self.port), "log.dirs": self.log_dir}
        if self._secure is not None:
            values["listeners"] = "%s://%s:%d" % (self._secure.protocol, self.host, self.port)
            values.update(self._secure.broker_config())
        values.update(self.config)
        return values

    async def _serve(self, task_status) -> None:
        """Runs the broker until cancelled; ``task_status.started()`` once it listens."""
        import trio

        from .clock import BrokerClock
        from .config import BrokerConfig
        from .run.runner import BrokerRunner

        self._token = trio.lowlevel.current_trio_token()
        self._loop_thread = threading.get_ident()
        trio_clock = trio.lowlevel.current_clock()
        if isinstance(trio_clock, BrokerClock):   # async with, in a run started with one
            self.clock = trio_clock
        try:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                runner = BrokerRunner(BrokerConfig(self._values()), clock=self.clock, prepare=_prepare,
                                      as_kafka=self.as_kafka)
                await nursery.start(runner.run)
                if self._secure is not None:
                    await self._secure.install(runner.broker)   # the SCRAM users
                self.runner = runner
                li = runner.broker.advertised_listener()
                self.port = li.port
                self.advertised_host = li.host
                if self.control_port is not None:
                    from .run.control import serve_control

                    cport = await nursery.start(serve_control, runner, self.host, self.control_port)
                    self.control_port = cport   # a restart reuses the bound port
                    self.control_url = "http://%s:%d" % (self.host, cport)
                task_status.started(self)
        finally:
            self.runner = None

    # -- client settings of a secured broker (security=...) ---------------------------------------
    def client_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                      password: Optional[str] = None) -> dict:
        """confluent-kafka settings reaching this broker as ``user`` (default: the first user)
        with ``mechanism`` (default: the first enabled); ``password`` overrides the user's."""
        if self._secure is None:
            return {"bootstrap.servers": self.bootstrap_servers}
        return self._secure.client_config(self.bootstrap_servers, user, mechanism, password)

    def java_properties_file(self, path: str, user: Optional[str] = None, mechanism: Optional[str] = None,
                             password: Optional[str] = None) -> str:
        """Writes the Java client settings (``--command-config`` / ``Properties.load`` form,
        truststore as PEM) to ``path`` and returns it."""
        props = ({"bootstrap.servers": self.bootstrap_servers} if self._secure is None else
                 self._secure.java_properties(self.bootstrap_servers, user, mechanism, password))
        with open(path, "w") as fh:
            for k, v in props.items():
                # java.util.Properties escaping of the value's backslashes
                fh.write("%s=%s\n" % (k, str(v).replace("\\", "\\\\")))
        return path

    def spark_options(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                      password: Optional[str] = None) -> dict:
        """The Java client settings as the Spark Kafka connector's ``kafka.``-prefixed options
        (``spark.read.format("kafka").options(**broker.spark_options("alice"))``), truststore as PEM."""
        props = ({"bootstrap.servers": self.bootstrap_servers} if self._secure is None else
                 self._secure.java_properties(self.bootstrap_servers, user, mechanism, password))
        return {"kafka." + k: str(v) for k, v in props.items()}

    def kafka_python_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                            password: Optional[str] = None) -> dict:
        """The same as kafka-python keyword arguments."""
        if self._secure is None:
            return {"bootstrap_servers": self.bootstrap_servers}
        return self._secure.kafka_python_config(self.bootstrap_servers, user, mechanism, password)

    def aiokafka_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                        password: Optional[str] = None) -> dict:
        """The same as aiokafka keyword arguments (with an ``ssl_context``)."""
        if self._secure is None:
            return {"bootstrap_servers": self.bootstrap_servers}
        return self._secure.aiokafka_config(self.bootstrap_servers, user, mechanism, password)

    def start(self, timeout: float = 30.0) -> "Broker":
        """Start on a thread of its own; returns once the listener is bound.  After a
        ``stop()`` it starts again on the same port (and log dir, unless temporary)."""
        if self._thread is not None:
            raise RuntimeError("broker already started")
        self._own_log_dir(self._given_log_dir)
        try:
            self._check_config()
        except BaseException:
            self._remove_tmp()
            raise
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._main, name="pykbroker-%d" % id(self), daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            err = self._error
            self.stop()
            if err is None:
                raise RuntimeError("pykbroker did not start within %ss" % timeout)
            # what the caller can catch and act on (an address in use, a log dir that is a
            # file): the OSError itself, not trio's exception groups around it
            from .run.runner import startup_error
            cause = startup_error(err)
            if cause is not None:
                raise cause from None
            raise RuntimeError("pykbroker did not start: %r" % (err,)) from err
        return self

    def _check_config(self) -> None:
        """A bad value raises ConfigError here, in the caller's thread; an unknown key is
        a warning naming it (as Kafka logs supplied-but-unused configs)."""
        from .config import BrokerConfig

        BrokerConfig(self._values()).warn_unused()

    def _main(self) -> None:
        import trio

        class _Started:   # nursery.start's task_status, for trio.run
            def started(_, value=None):
                self._ready.set()

        try:
            # the broker clock is this loop's trio clock: advancing it fires trio deadlines
            trio.run(self._serve, _Started(), clock=self.clock)
        except BaseException as e:   # reported by start(); a later failure ends the thread
            self._error = e
        finally:
            self._ready.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Clean shutdown (logs flushed, clean-shutdown marker written); the temporary log dir
        is removed."""
        import trio

        t = self._thread
        if t is not None and t.is_alive() and self._cancel is not None:
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
            t.join(timeout)
        self._thread = None
        self._remove_tmp()

    async def __aenter__(self) -> "Broker":
        import trio

        self._own_log_dir(self._given_log_dir)
        try:
            self._check_config()
        except BaseException:
            self._remove_tmp()
            raise
        self._nursery_cm = trio.open_nursery()
        nursery = await self._nursery_cm.__aenter__()
        try:
            try:
                await nursery.start(self._serve)
            except BaseException as e:
                await self._nursery_cm.__aexit__(type(e), e, e.__traceback__)
                raise
        except BaseException as e:
            self._remove_tmp()
            from .run.runner import startup_error
            cause = startup_error(e)
            if cause is not None:   # the OSError / ConfigError itself (see start())
                raise cause from None
            raise
        return self

    async def __aexit__(self, etype, exc, tb):
        self._cancel.cancel()
        try:
            return await self._nursery_cm.__aexit__(etype, exc, tb)
        except BaseExceptionGroup as eg:
            # the nursery wraps the body's exception in a group (trio's strict exception groups):
            # the user's own exception propagates as it is instead
            if exc is not None and len(eg.exceptions) == 1 and eg.exceptions[0] is exc:
                return False
            raise
        finally:
            self._remove_tmp()

    # -- running code on the broker's loop -----------------------------------------------------
    def _on_loop(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _running(self):
        b = self.broker
        if b is None:
            raise RuntimeError("the broker is not running" if self.runner is None
                               else "the broker is down (crashed or stopped): restart() it")
        return b

    def _on_runner(self, fn, *args):
        """``fn(runner, *args)`` on the broker's trio thread (directly when already on it)."""
        import trio

        if self.runner is None or self._token is None:
            raise RuntimeError("the broker is not running")
        if self._on_loop():
            return fn(self.runner, *args)
        return trio.from_thread.run_sync(lambda: fn(self.runner, *args), trio_token=self._token)

    def _sync(self, fn, *args):
        """``fn(broker, *args)`` on the broker's trio thread (directly when already on it)."""
        return self._on_runner(lambda r: fn(self._running(), *args))

    def _async(self, afn, *args):
        import trio

        if self.runner is None or self._token is None:
            raise RuntimeError("the broker is not running")
        if self._on_loop():
            raise RuntimeError("on the broker's own trio loop: use the *_async method")

        async def call():
            return await afn(self._running(), *args)
        return trio.from_thread.run(call, trio_token=self._token)

    def _life(self, what: str, clean: bool = True):
        import trio

        if self.runner is None or self._token is None:
            raise RuntimeError("the broker is not running")
        if self._on_loop():
            raise RuntimeError("on the broker's own trio loop: use await broker.runner.%s()" % what)

        async def call():
            r = self.runner
            if what == "crash":
                return await r.crash()
            if what == "restart":
                return await r.restart(clean)
            return await r.start()
        return trio.from_thread.run(call, trio_token=self._token)

    def _control(self, method: str, path: str, req: Optional[dict] = None) -> dict:
        """A control request (run/control.py) on the broker's loop, as over HTTP."""
        from .run.control import handle_sync

        status, answer = self._on_runner(lambda r: handle_sync(r, method, path, req or {}))
        return _checked(status, answer)

    # -- fault injection, crash and restart ----------------------------------------------------
    @property
    def faults(self) -> "Faults":
        """Injected errors, latency, dropped connections, offline partitions (:class:`Faults`)."""
        return Faults(self)

    @property
    def running(self) -> bool:
        """Whether the broker is up (False after :meth:`crash` until :meth:`restart`)."""
        return self.broker is not None

    def crash(self) -> None:
        """Stop the broker at once without a clean shutdown, as ``kill -9`` would (no flush,
        no checkpoint, no clean-shutdown marker; connections dropped).  It stays down until
        :meth:`restart`; faults, clock and ports are kept."""
        self._life("crash")

    def restart(self, clean: bool = True) -> "Broker":
        """Stop it (cleanly, or as a crash with ``clean=False``; nothing when it is down) and
        start it again from its data dir on the same port (recovery after a crash)."""
        self._life("restart", clean)
        return self

    # -- introspection -------------------------------------------------------------------------
    def records(self, topic: str, partition: int = 0) -> list[Record]:
        """Every record the partition's log holds (up to the high watermark), decoded."""
        return self._sync(_read_records, topic, partition)

    def committed_offsets(self, group_id: str) -> dict:
        """{(topic, partition): committed offset} of the group."""
        return self._sync(_committed, group_id)

    def group(self, group_id: str) -> Optional[GroupDescription]:
        """The group's state and members (with their assignments), or None if there is none."""
        return self._sync(_describe_group, group_id)

    def wait_for_group_stable(self, group_id: str, members: Optional[int] = None,
                              timeout: float = 30.0) -> GroupDescription:
        if self._on_loop():
            raise RuntimeError("on the broker's own trio loop: use await wait_for_group_stable_async(...)")
        return super().wait_for_group_stable(group_id, members, timeout)

    async def wait_for_group_stable_async(self, group_id: str, members: Optional[int] = None,
                                          timeout: float = 30.0) -> GroupDescription:
        """:meth:`wait_for_group_stable` for ``async with Broker()`` users (on the broker's loop)."""
        import trio

        g = None
        with trio.move_on_after(timeout):
            while True:
                g = self.group(group_id)
                if self._is_stable(g, members):
                    return g
                await trio.sleep(0.02)
        raise TimeoutError("group %r not stable after %ss: %r" % (group_id, timeout, g))

    @property
    def acls(self):
        """ACL bindings for tests (pykbroker/acl/embedded.py), with ``authorizer.class.name`` set."""
        from .acl.embedded import Acls
        return Acls(self)

    def create_topic(self, name: str, partitions: int = 1, config: Optional[dict] = None) -> None:
        """Create a topic (replication factor 1) through the controller, as CreateTopics does;
        raises pykbroker's KafkaError (e.g. TOPIC_ALREADY_EXISTS) when refused."""
        self._async(_create_topic, name, partitions, config)

    async def create_topic_async(self, name: str, partitions: int = 1, config: Optional[dict] = None) -> None:
        await _create_topic(self.broker, name, partitions, config)


# -- faults and clock, in-process or over HTTP ----------------------------------------------------
def _checked(status: int, answer: dict) -> dict:
    """A control answer, or the exception a Python caller expects for a refused one."""
    if status == 404:
        raise KeyError(answer.get("error"))
    if status >= 400:
        raise ValueError(answer.get("error"))
    return answer


class Faults:
    """``broker.faults``: rules the broker applies to the requests it decodes
    (``pykbroker/server/faults.py``), the same in-process and over a subprocess's HTTP control
    endpoint.  ``api`` is an API name ("Produce", "ListOffsets") or key; ``error`` an
    ``ErrorCode`` name ("NOT_LEADER_OR_FOLLOWER") or number; ``topic`` (and ``partition``)
    narrow a rule to those partitions of Produce / Fetch / ListOffsets / DeleteRecords /
    OffsetForLeaderEpoch requests, the other partitions of the same request being served
    normally; ``count`` is how many matching requests the rule touches (``None``: until
    :meth:`clear`).  Rules survive a crash and restart (they are the test's, not the broker's).
    Coordinator errors are rules on the group APIs, e.g. ``fail("JoinGroup",
    "COORDINATOR_LOAD_IN_PROGRESS")`` or ``fail("FindCoordinator", "COORDINATOR_NOT_AVAILABLE")``."""

    def __init__(self, owner):
        self._owner = owner   # has _control(method, path, req) -> answer

    def _add(self, req: dict) -> dict:
        return self._owner._control("POST", "/faults", req)

    def fail(self, api, error, topic: Optional[str] = None, partition: Optional[int] = None,
             count: Optional[int] = 1) -> None:
        """Answer the next ``count`` matching requests with ``error``."""
        self._add({"action": "fail", "api": api, "error": error, "topic": topic,
                   "partition": partition, "count": count})

    def delay(self, api, seconds: float, topic: Optional[str] = None,
              partition: Optional[int] = None, count: Optional[int] = None) -> None:
        """Wait ``seconds`` (real time) before serving each of the next ``count`` matching
        requests."""
        self._add({"action": "delay", "api": api, "seconds": seconds, "topic": topic,
                   "partition": partition, "count": count})

    def drop_connection(self, api, topic: Optional[str] = None, partition: Optional[int] = None,
                        count: Optional[int] = 1) -> None:
        """Close the connection, without answering, of the next ``count`` matching requests."""
        self._add({"action": "drop_connection", "api": api, "topic": topic,
                   "partition": partition, "count": count})

    def drop_response(self, api, topic: Optional[str] = None, partition: Optional[int] = None,
                      count: Optional[int] = 1) -> None:
        """Serve the next ``count`` matching requests, then close their connection without
        answering: the response is lost after the broker acted (a producer's retry then meets
        its own earlier append, which idempotence must not duplicate)."""
        self._add({"action": "drop_response", "api": api, "topic": topic,
                   "partition": partition, "count": count})

    def partition_offline(self, topic: str, partition: int = 0) -> None:
        """Take the partition offline, as when its only replica's log dir fails: Produce,
        Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch answer KAFKA_STORAGE_ERROR,
        Metadata shows no leader (LEADER_NOT_AVAILABLE, the node in ``offline_replicas``), until
        :meth:`partition_online`.  KeyError for an unknown partition."""
        self._owner._control("POST", "/partitions/offline", {"topic": topic, "partition": partition})

    def partition_online(self, topic: str, partition: int = 0) -> None:
        """Bring an offline partition back: its leader again, requests served."""
        self._owner._control("POST", "/partitions/online", {"topic": topic, "partition": partition})

    def clear(self) -> None:
        """Remove every rule and bring every offline partition back."""
        self._owner._control("DELETE", "/faults")

    @property
    def rules(self) -> list:
        """The active rules (JSON objects, as ``GET /faults`` shows them), for assertions."""
        return self._owner._control("GET", "/faults")["rules"]

    @property
    def offline(self) -> list:
        """The offline partitions, [(topic, partition), ...]."""
        return [tuple(tp) for tp in self._owner._control("GET", "/faults")["offline"]]


class RemoteClock:
    """``broker.clock`` of a subprocess broker: :class:`pykbroker.clock.BrokerClock`'s control
    methods over the HTTP control endpoint."""

    def __init__(self, owner):
        self._owner = owner

    def advance(self, seconds: float) -> None:
        self._owner._control("POST", "/clock", {"advance_ms": float(seconds) * 1000.0})

    def freeze(self) -> None:
        self._owner._control("POST", "/clock", {"freeze": True})

    def unfreeze(self) -> None:
        self._owner._control("POST", "/clock", {"freeze": False})

    def state(self) -> dict:
        return self._owner._control("GET", "/clock")

    def time_ms(self) -> int:
        return self.state()["time_ms"]

    @property
    def frozen(self) -> bool:
        return self.state()["frozen"]


# -- read on the broker's loop (called through Broker._sync / _async) ---------------------------
def _read_range(start: int, end: int, read) -> list[Record]:
    """The records from ``start`` up to ``end`` (the high watermark), ``read(offset)`` giving the
    bytes of whole batches from there (in-process: the log; subprocess: Fetch)."""
    out: list[Record] = []
    offset = start
    while offset < end:
        data = read(offset)
        if not data:
            break
        recs, nxt = _decode_batches(data, offset)
        out.extend(recs)
        if nxt <= offset:
            break
        offset = nxt
    return out


def _read_records(b, topic: str, partition: int) -> list[Record]:
    from .protocol.errors import ErrorCode, KafkaError

    part = b.replica_manager.get_partition(topic, partition)
    if part is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no partition %s-%d" % (topic, partition))

    def read(offset):
        r = part.read_records(offset, 8 << 20, True, False)
        if r.error:
            raise KafkaError(r.error, "reading %s-%d at %d" % (topic, partition, offset))
        return b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in r.records.parts) if r.size else b""

    return _read_range(part.log_start_offset, part.high_watermark, read)


def _committed(b, group_id: str) -> dict:
    gc = b.group_coordinator
    return {tp: om.offset for tp, om in sorted(gc.fetch_offsets(group_id).items()) if om is not None}


def _describe_group(b, group_id: str) -> Optional[GroupDescription]:
    gc = b.group_coordinator
    g = gc.get_group(group_id)
    if g is None:
        return None
    if g.kind in ("consumer", "share"):   # KIP-848 / KIP-932: assignments are (topic id, partition) sets
        md = b.metadata_cache

        def names(tps) -> dict:
            out: dict = {}
            for tid, p in tps:
                out.setdefault(md.name_of(tid) or "", []).append(p)
            return {t: sorted(ps) for t, ps in sorted(out.items())}
        members = [GroupMember(m.member_id, getattr(m, "instance_id", None), m.client_id, m.client_host,
                               names(m.assigned)) for m in g.members.values()]
        assignor = g.assignor_name() if g.kind == "consumer" else "simple"
        return GroupDescription(g.group_id, g.state, g.protocol_type, assignor, g.group_epoch, members)
    stable = g.state == "Stable"
    consumer = g.protocol_type == "consumer"
    members = [GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                           _decode_assignment(m.assignment) if consumer else {})
               for m in g.members.values()]
    return GroupDescription(g.group_id, g.state, g.protocol_type or "",
                            (g.protocol_name or "") if stable else "", g.generation, members)


async def _create_topic(b, name: str, partitions: int, config: Optional[dict]) -> None:
    configs = {str(k): None if v is None else str(v) for k, v in (config or {}).items()}
    await b.controller.create_topic(name, partitions, 1, configs)


# -- over the Kafka protocol ----------------------------------------------------------------------
# ListOffsets errors a client retries: Apache Kafka lists a new partition's leader in Metadata a
# moment before that broker serves it (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
# LEADER_NOT_AVAILABLE), as Kafka's own clients see after CreateTopics.
_RETRIABLE_OFFSET_ERRORS = (3, 5, 6)


def _offset(c, topic: str, partition: int, timestamp: int, timeout: float = 15.0) -> int:
    """ListOffsets of one partition (-2 earliest, -1 latest), retried as Kafka's clients do."""
    from .protocol.wire import list_offsets

    deadline = time.monotonic() + timeout
    while True:
        p = list_offsets(c, topic, partition, timestamp)
        if p["error_code"] == 0:
            return p["offset"]
        if p["error_code"] not in _RETRIABLE_OFFSET_ERRORS or time.monotonic() > deadline:
            raise RuntimeError("ListOffsets %s-%d: error %d" % (topic, partition, p["error_code"]))
        time.sleep(0.05)


class WireBroker(_BrokerBase):
    """Introspection of any Kafka endpoint through the protocol (pykbroker.protocol.wire): what
    the subprocess broker and the pytest plugin's ``--kafka-bootstrap`` mode use.  Works against
    Apache Kafka too (records are read from the partition's leader)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def start(self, timeout: float = 30.0):
        return self

    def stop(self, timeout: float = 30.0) -> None:
        pass

    def _client(self, target=None):
        from .protocol.wire import WireClient

        secure = getattr(self, "_secure", None)
        if secure is not None:   # a secured subprocess broker: authenticated as its first user
            host, port = target or (self.host, self.port)
            return secure.wire_client(host, port)
        return WireClient(target or (self.host, self.port), client_id="pykbroker-introspection")

    def _leader(self, topic: str, partition: int):
        from .protocol.wire import metadata

        with self._client() as c:
            m = metadata(c, [topic])
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in m["brokers"]}
        for t in m["topics"]:
            for p in t["partitions"]:
                if p["partition_index"] == partition and p["error_code"] == 0:
                    return brokers[p["leader_id"]]
        raise KeyError("%s-%d has no leader: %r" % (topic, partition, m["topics"]))

    def _coordinator(self, group_id: str):
        deadline = time.monotonic() + 15
        with self._client() as c:
            while True:
                r = c.request(10, 3, {"key": group_id, "key_type": 0})
                if r["error_code"] == 0:
                    return r["host"], r["port"]
                if time.monotonic() > deadline:
                    raise RuntimeError("no coordinator for group %r: %r" % (group_id, r))
                time.sleep(0.05)

    def records(self, topic: str, partition: int = 0) -> list[Record]:
        from .protocol.wire import fetch, fetch_part

        with self._client(self._leader(topic, partition)) as c:
            def read(offset):
                p = fetch_part(fetch(c, topic, partition, offset, partition_max_bytes=8 << 20))
                if p["error_code"]:
                    raise RuntimeError("fetch %s-%d at %d: error %d" % (topic, partition, offset, p["error_code"]))
                return p["records"] or b""

            return _read_range(_offset(c, topic, partition, -2), _offset(c, topic, partition, -1), read)

    def committed_offsets(self, group_id: str) -> dict:
        with self._client(self._coordinator(group_id)) as c:
            r = c.request(9, 8, {"groups": [{"group_id": group_id, "topics": None}], "require_stable": False})
        g = r["groups"][0]
        if g["error_code"]:
            raise RuntimeError("OffsetFetch %r: error %d" % (group_id, g["error_code"]))
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in g["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}

    def group(self, group_id: str) -> Optional[GroupDescription]:
        with self._client(self._coordinator(group_id)) as c:
            r = c.request(15, 5, {"groups": [group_id], "include_authorized_operations": False})
        g = r["groups"][0]
        if g["error_code"] or g["group_state"] == "Dead":
            # not a classic group: a KIP-848 one is described by ConsumerGroupDescribe
            return self._consumer_group(group_id)
        consumer = g["protocol_type"] == "consumer"
        members = [GroupMember(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                               _decode_assignment(m["member_assignment"]) if consumer else {})
                   for m in g["members"]]
        # DescribeGroups carries no generation
        return GroupDescription(group_id, g["group_state"], g["protocol_type"], g["protocol_data"], -1, members)

    def _consumer_group(self, group_id: str) -> Optional[GroupDescription]:
        try:
            with self._client(self._coordinator(group_id)) as c:
                r = c.request(69, 0, {"group_ids": [group_id], "include_authorized_operations": False})
        except (OSError, ConnectionError):   # a broker without KIP-848 closes the connection
            return None
        g = r["groups"][0]
        if g["error_code"]:
            return None
        members = [GroupMember(m["member_id"], m["instance_id"], m["client_id"], m["client_host"],
                               {t["topic_name"]: sorted(t["partitions"])
                                for t in m["assignment"]["topic_partitions"]})
                   for m in g["members"]]
        return GroupDescription(group_id, g["group_state"], "consumer", g["assignor_name"],
                                g["group_epoch"], members)

    def create_topic(self, name: str, partitions: int = 1, config: Optional[dict] = None) -> None:
        """CreateTopics (replication factor 1), then wait until every partition has a leader."""
        from .protocol.wire import wait_for_topic

        with self._client() as c:
            r = c.request(19, 5, {"topics": [{
                "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                "configs": [{"name": str(k), "value": None if v is None else str(v)}
                            for k, v in (config or {}).items()]}],
                "timeout_ms": 15000, "validate_only": False})
            t = r["topics"][0]
            if t["error_code"]:
                raise RuntimeError("CreateTopics %r: error %d %s" % (name, t["error_code"], t.get("error_message")))
            wait_for_topic(c, name, partitions)


class SubprocessBroker(WireBroker):
    """``pykbroker serve`` in a child process (:class:`pykbroker.local.broker_process.BrokerProcess`), with
    :class:`Broker`'s interface; introspection through the Kafka protocol."""

    # the client settings of a secured broker, as Broker's (they read _secure and the bootstrap)
    client_config = Broker.client_config
    java_properties_file = Broker.java_properties_file
    kafka_python_config = Broker.kafka_python_config
    aiokafka_config = Broker.aiokafka_config

    def __init__(self, port: int = 0, log_dir=None, config: Optional[dict] = None, host: str = "127.0.0.1",
                 control_port: Optional[int] = 0, as_kafka: Optional[str] = None, security: Optional[str] = None,
                 users: Optional[dict] = None, mechanisms: Optional[list] = None):
        # security=...: as Broker's (local/secure_setup.py); the SCRAM users are written into the
        # new log dir's metadata file before the child starts (it has no in-process controller)
        self._secure = None
        if security is not None and str(security).upper() != "PLAINTEXT":
            from .local.secure_setup import SecureSetup
            self._secure = SecureSetup(security, users, mechanisms, host)
        self.as_kafka = None
        if as_kafka is not None:
            from .profiles import profile_name
            self.as_kafka = profile_name(as_kafka)
        if host != "127.0.0.1":
            raise ValueError("the subprocess broker listens on 127.0.0.1")
        self.host, self.port = host, int(port)
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self._given_log_dir = log_dir
        self._tmp = None
        self.log_dir = None
        self.process = None    # the BrokerProcess
        self.control_port = control_port
        self.control_url: Optional[str] = None

    def start(self, timeout: float = 30.0) -> "SubprocessBroker":
        self._own_log_dir(self._given_log_dir)
        try:
            self._spawn(timeout)
        except BaseException:
            self._remove_tmp()
            raise
        return self

    def _spawn(self, timeout: float) -> None:
        from .local.broker_process import BrokerProcess

        config = dict(self.config)
        if self._secure is not None:
            config = {"listeners": "%s://127.0.0.1:%d" % (self._secure.protocol, self.port),
                      **self._secure.broker_config(), **config}
            self._secure.seed_metadata_file(self.log_dir)
        self.process = BrokerProcess(self.log_dir, config, port=self.port, control_port=self.control_port,
                                     extra_args=["--as-kafka", self.as_kafka] if self.as_kafka else [])
        self.process.start(timeout)
        # a restart (after kill -9) binds the same ports
        self.port = self.process.port
        if self.control_port is not None:
            self.control_port = self.process.control_port
            self.control_url = "http://127.0.0.1:%d" % self.control_port

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is not None:
            try:
                self.process.stop(timeout)
            except Exception:
                self.process.kill()
            self.process = None
        self._remove_tmp()

    # -- faults, clock, crash: the HTTP control endpoint (and the process itself) ----------------
    def _control(self, method: str, path: str, req: Optional[dict] = None) -> dict:
        return _checked(*http_control(self.control_url, method, path, req))

    @property
    def faults(self) -> Faults:
        if self.control_url is None:
            raise RuntimeError("started without a control endpoint (control_port=None)")
        return Faults(self)

    @property
    def clock(self) -> RemoteClock:
        if self.control_url is None:
            raise RuntimeError("started without a control endpoint (control_port=None)")
        return RemoteClock(self)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.proc is not None and self.process.proc.poll() is None

    def crash(self) -> None:
        """``kill -9`` the broker process (faults set over HTTP die with it)."""
        if self.process is not None:
            self.process.kill()

    def restart(self, clean: bool = True, timeout: float = 30.0) -> "SubprocessBroker":
        """Stop it (SIGTERM, or ``kill -9`` with ``clean=False``; nothing once crashed) and
        start a new process on the same data dir and ports."""
        if self.running:
            if clean:
                self.process.stop()
            else:
                self.process.kill()
        self._spawn(timeout)
        return self


def http_control(url: str, method: str, path: str, req: Optional[dict] = None) -> tuple[int, dict]:
    """One request to a control endpoint (run/control.py): (status, JSON answer)."""
    import json
    import urllib.error
    import urllib.request

    data = None if req is None and method != "POST" else json.dumps(req or {}).encode()
    r = urllib.request.Request(url.rstrip("/") + path, method=method, data=data,
                               headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # loopback: no proxy
    try:
        with opener.open(r, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
