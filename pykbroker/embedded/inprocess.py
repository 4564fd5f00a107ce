"""The embedded broker in this process: :class:`Broker` (``pykbroker.Broker``), on a thread and
trio loop of its own (``with``) or in the caller's trio loop (``async with``); the same code as
``pykbroker serve`` (a :class:`pykbroker.run.runner.BrokerRunner`), nothing mocked.  Its
introspection reads the broker's own objects on the broker's loop (the functions at the end,
called through ``Broker._sync`` / ``_async``); its faults, crash and restart act on the runner
through the logic of the HTTP control endpoint (run/control.py)."""
from __future__ import annotations

import os
import threading
from contextlib import AbstractAsyncContextManager
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Optional, TypeVar, cast

from .base import SecurableFront
from .control import Faults, checked
from .introspection import GroupDescription, GroupMember, Record, decode_assignment, read_range
from .process import SubprocessBroker

if TYPE_CHECKING:
    import trio

    from ..acl.embedded import Acls
    from ..broker import BrokerServer
    from ..clock import BrokerClock
    from ..run.runner import BrokerRunner

T = TypeVar("T")


def _prepare(b: Any) -> None:
    """Each in-process broker incarnation: a halt (every log dir failed: Kafka's Exit.halt)
    crashes the broker instead of ending the test process; restart() recovers it."""
    b.halt_hook = lambda status, message: b.crash()


class Broker(SecurableFront):
    """A broker in this process: ``with Broker(...)`` runs it on its own thread and trio loop;
    ``async with Broker(...)`` in the caller's trio loop (a nursery).  ``start()``/``stop()``
    are the same without a ``with``.  See the module docstring."""

    def __init__(self, port: int = 0, log_dir: Optional[str | os.PathLike[str]] = None, config: Optional[dict] = None,
                 host: str = "127.0.0.1", control_port: Optional[int] = None, clock: Optional[BrokerClock] = None,
                 as_kafka: Optional[str] = None, security: Optional[str] = None,
                 users: Optional[dict] = None, mechanisms: Optional[list] = None) -> None:
        from ..clock import BrokerClock

        # security="SSL" | "SASL_PLAINTEXT" | "SASL_SSL": a throw-away CA and server certificate,
        # the users (PLAIN and SCRAM), and client_config() (pykbroker/local/secure_setup.py);
        # as_kafka: a version profile (pykbroker/profiles.py)
        self._init_security(security, users, mechanisms, host, as_kafka)
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
        self.runner: Optional[BrokerRunner] = None   # the runner (pykbroker/run/runner.py) while started
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self.log_dir = None if log_dir is None else os.path.abspath(str(log_dir))
        self._given_log_dir = log_dir
        self._tmp = None
        self._token: Optional[trio.lowlevel.TrioToken] = None
        self._cancel: Optional[trio.CancelScope] = None
        self._loop_thread: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._nursery_cm: Optional[AbstractAsyncContextManager[trio.Nursery]] = None

    @property
    def broker(self) -> Optional[BrokerServer]:
        """The running ``pykbroker.broker.BrokerServer`` (read it on its loop), None while down."""
        r = self.runner
        return None if r is None else r.broker

    @classmethod
    def subprocess(cls, port: int = 0, log_dir: Optional[str | os.PathLike[str]] = None, config: Optional[dict] = None,
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

    async def _serve(self, task_status: trio.TaskStatus[Any]) -> None:
        """Runs the broker until cancelled; ``task_status.started()`` once it listens."""
        import trio

        from ..clock import BrokerClock
        from ..config import BrokerConfig
        from ..run.runner import BrokerRunner

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
                    await self._secure.install(runner.broker)   # type: ignore[arg-type]  # the SCRAM users; runner.run made the broker
                self.runner = runner
                # made by runner.run before it reported started
                li = cast("BrokerServer", runner.broker).advertised_listener()
                self.port = li.port
                self.advertised_host = li.host
                if self.control_port is not None:
                    from ..run.control import serve_control

                    cport = await nursery.start(serve_control, runner, self.host, self.control_port)
                    self.control_port = cport   # a restart reuses the bound port
                    self.control_url = "http://%s:%d" % (self.host, cport)
                task_status.started(self)
        finally:
            self.runner = None

    def spark_options(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                      password: Optional[str] = None) -> dict:
        """The Java client settings as the Spark Kafka connector's ``kafka.``-prefixed options
        (``spark.read.format("kafka").options(**broker.spark_options("alice"))``), truststore as PEM."""
        props = ({"bootstrap.servers": self.bootstrap_servers} if self._secure is None else
                 self._secure.java_properties(self.bootstrap_servers, user, mechanism, password))
        return {"kafka." + k: str(v) for k, v in props.items()}

    def start(self, timeout: float = 30.0) -> "Broker":
        """Start on a thread of its own; returns once the listener is bound.  After a
        ``stop()`` it starts again on the same port (and log dir, unless temporary)."""
        if self._thread is not None:
            raise RuntimeError("broker already started")
        self._own_log_dir_checked()
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
            from ..run.runner import startup_error
            cause = startup_error(err)
            if cause is not None:
                raise cause from None
            raise RuntimeError("pykbroker did not start: %r" % (err,)) from err
        return self

    def _own_log_dir_checked(self) -> None:
        """The log dir (a temporary one when none was given) and the config checked; a bad
        config removes the temporary dir again."""
        self._own_log_dir(self._given_log_dir)
        try:
            self._check_config()
        except BaseException:
            self._remove_tmp()
            raise

    def _check_config(self) -> None:
        """A bad value raises ConfigError here, in the caller's thread; an unknown key is
        a warning naming it (as Kafka logs supplied-but-unused configs)."""
        from ..config import BrokerConfig

        BrokerConfig(self._values()).warn_unused()

    def _main(self) -> None:
        import trio

        class _Started:   # nursery.start's task_status, for trio.run
            def started(_, value: object = None) -> None:
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

        self._own_log_dir_checked()
        self._nursery_cm = cm = trio.open_nursery()
        nursery = await cm.__aenter__()
        try:
            try:
                await nursery.start(self._serve)
            except BaseException as e:
                await cm.__aexit__(type(e), e, e.__traceback__)
                raise
        except BaseException as e:
            self._remove_tmp()
            from ..run.runner import startup_error
            cause = startup_error(e)
            if cause is not None:   # the OSError / ConfigError itself (see start())
                raise cause from None
            raise
        return self

    async def __aexit__(self, etype: Optional[type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> Optional[bool]:
        self._cancel.cancel()   # type: ignore[union-attr]  # set by __aenter__
        try:
            return await self._nursery_cm.__aexit__(etype, exc, tb)   # type: ignore[union-attr]  # set by __aenter__
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

    def _running(self) -> BrokerServer:
        b = self.broker
        if b is None:
            raise RuntimeError("the broker is not running" if self.runner is None
                               else "the broker is down (crashed or stopped): restart() it")
        return b

    def _on_runner(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(runner, *args)`` on the broker's trio thread (directly when already on it)."""
        import trio

        if self.runner is None or self._token is None:
            raise RuntimeError("the broker is not running")
        if self._on_loop():
            return fn(self.runner, *args)
        return trio.from_thread.run_sync(lambda: fn(self.runner, *args), trio_token=self._token)

    def _sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(broker, *args)`` on the broker's trio thread (directly when already on it)."""
        return self._on_runner(lambda r: fn(self._running(), *args))

    def _async(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        import trio

        if self.runner is None or self._token is None:
            raise RuntimeError("the broker is not running")
        if self._on_loop():
            raise RuntimeError("on the broker's own trio loop: use the *_async method")

        async def call() -> T:
            return await afn(self._running(), *args)
        return trio.from_thread.run(call, trio_token=self._token)

    def _life(self, what: str, clean: bool = True) -> Any:
        import trio

        if self.runner is None or self._token is None:
            raise RuntimeError("the broker is not running")
        if self._on_loop():
            raise RuntimeError("on the broker's own trio loop: use await broker.runner.%s()" % what)

        async def call() -> Any:
            r: BrokerRunner = self.runner   # type: ignore[assignment]  # checked above
            if what == "crash":
                return await r.crash()
            if what == "restart":
                return await r.restart(clean)
            return await r.start()
        return trio.from_thread.run(call, trio_token=self._token)

    def _control(self, method: str, path: str, req: Optional[dict] = None) -> dict:
        """A control request (run/control.py) on the broker's loop, as over HTTP."""
        from ..run.control import handle_sync

        status, answer = self._on_runner(lambda r: handle_sync(r, method, path, req or {}))
        return checked(status, answer)

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
    def acls(self) -> Acls:
        """ACL bindings for tests (pykbroker/acl/embedded.py), with ``authorizer.class.name`` set."""
        from ..acl.embedded import Acls
        return Acls(self)

    def create_topic(self, name: str, partitions: int = 1, config: Optional[dict] = None) -> None:
        """Create a topic (replication factor 1) through the controller, as CreateTopics does;
        raises pykbroker's KafkaError (e.g. TOPIC_ALREADY_EXISTS) when refused."""
        self._async(_create_topic, name, partitions, config)

    async def create_topic_async(self, name: str, partitions: int = 1, config: Optional[dict] = None) -> None:
        await _create_topic(self.broker, name, partitions, config)


# -- read on the broker's loop (called through Broker._sync / _async) ---------------------------
# ``b``: a running BrokerServer, typed Any: its components (Optional until start-up) are all set
def _read_records(b: Any, topic: str, partition: int) -> list[Record]:
    from ..protocol.errors import ErrorCode, KafkaError

    part = b.replica_manager.get_partition(topic, partition)
    if part is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no partition %s-%d" % (topic, partition))

    def read(offset: int) -> bytes:
        r = part.read_records(offset, 8 << 20, True, False)
        if r.error:
            raise KafkaError(r.error, "reading %s-%d at %d" % (topic, partition, offset))
        return b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in r.records.parts) if r.size else b""

    return read_range(part.log_start_offset, part.high_watermark, read)


def _committed(b: Any, group_id: str) -> dict:
    gc = b.group_coordinator
    return {tp: om.offset for tp, om in sorted(gc.fetch_offsets(group_id).items()) if om is not None}


def _describe_group(b: Any, group_id: str) -> Optional[GroupDescription]:
    gc = b.group_coordinator
    g = gc.get_group(group_id)
    if g is None:
        return None
    if g.kind in ("consumer", "share"):   # KIP-848 / KIP-932: assignments are (topic id, partition) sets
        md = b.metadata_cache

        def names(tps: Iterable[tuple[bytes, int]]) -> dict:
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
                           decode_assignment(m.assignment) if consumer else {})
               for m in g.members.values()]
    return GroupDescription(g.group_id, g.state, g.protocol_type or "",
                            (g.protocol_name or "") if stable else "", g.generation, members)


async def _create_topic(b: Any, name: str, partitions: int, config: Optional[dict]) -> None:
    configs = {str(k): None if v is None else str(v) for k, v in (config or {}).items()}
    await b.controller.create_topic(name, partitions, 1, configs)
