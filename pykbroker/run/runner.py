"""``BrokerRunner``: runs one broker in a trio nursery and can crash and restart it.

What the embedded ``pykbroker.Broker`` and ``pykbroker serve`` run, so that a test (in Python,
or in any language through the HTTP control endpoint, ``run/control.py``) can:

- crash the broker (:meth:`crash`: ``Broker.crash``, no clean shutdown, as ``kill -9``) and
  start it again from its data dir on the same ports (:meth:`start`); :meth:`restart` is a clean
  stop (or a crash) and a start;
- take a partition offline and back (:meth:`set_partition_offline`): KAFKA_STORAGE_ERROR from
  Produce/Fetch/ListOffsets/DeleteRecords/OffsetForLeaderEpoch (the fault plan) and no leader
  in Metadata (the controller), as Kafka shows a partition whose only replica's log dir failed;
- move the broker's clock (``clock``, pykbroker/clock.py).

The runner owns what outlives one broker incarnation: the config (its listeners pinned to the
ports bound first, so a restart binds the same ones), the clock and the fault plan (rules and
offline partitions survive a crash: they are the test's, not the broker's).  Everything here
runs on the runner's trio loop.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import trio

from ..clock import BrokerClock
from ..server.faults import FaultPlan

if TYPE_CHECKING:   # imported when a broker starts (start-up time of the CLI)
    from ..broker import BrokerServer
    from ..config import BrokerConfig

log = logging.getLogger("pykbroker.runner")


def _noop() -> None:
    pass


def startup_error(exc: BaseException) -> Optional[BaseException]:
    """The error a failed start-up is the user's to fix, out of trio's exception groups: the one
    OSError (a listener's address in use, a log dir that is a file or not writable),
    LogDirInUseError (another broker holds the data dir) or ConfigError it ended with; None for
    anything else (a bug of ours: its traceback helps)."""
    from ..config import ConfigError
    from ..storage.dirlock import LogDirInUseError

    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for x in e.exceptions:
                walk(x)
        elif not isinstance(e, trio.Cancelled):
            leaves.append(e)
    walk(exc)
    if len(leaves) == 1 and isinstance(leaves[0], (OSError, ConfigError, LogDirInUseError)):
        return leaves[0]
    return None


def error_line(err: BaseException) -> str:
    """``err`` as one line for a person (an OSError's own text, without its ``[Errno N]``)."""
    if isinstance(err, OSError) and err.strerror:
        return "%s: %s" % (err.strerror, err.filename) if err.filename else err.strerror
    return str(err)


class BrokerBusy(RuntimeError):
    """A crash, stop or start asked for while another one is under way."""


class BrokerRunner:
    def __init__(self, config: BrokerConfig, clock: Optional[BrokerClock] = None,
                 prepare: Optional[Callable] = None, as_kafka: Optional[str] = None) -> None:
        """``config``: a BrokerConfig (its ``listeners`` are pinned after the first start);
        ``prepare(broker)``: called on each new ``pykbroker.broker.BrokerServer`` before it runs (the
        embedded broker sets its halt hook there); ``as_kafka``: a version profile
        (pykbroker/profiles.py), None for everything built."""
        self.config = config
        self.as_kafka = None
        if as_kafka is not None:   # (the tables are imported only then: start-up time)
            from ..profiles import profile_name
            self.as_kafka = profile_name(as_kafka)
        self.clock = clock if clock is not None else BrokerClock()
        self.faults = FaultPlan()
        self.prepare = prepare
        self.broker: Optional[BrokerServer] = None  # the running pykbroker.broker.BrokerServer, None while down
        self.incarnation = 0        # how many times a broker was started
        self._nursery: Optional[trio.Nursery] = None    # set by run
        self._done: Optional[trio.Event] = None
        self._scope: Optional[trio.CancelScope] = None
        self.drives_trio = False
        self._changing = False   # a start or stop is under way (no lock across its awaits)

    @property
    def running(self) -> bool:
        return self.broker is not None

    async def run(self, task_status: trio.TaskStatus[BrokerRunner] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the broker; ``task_status.started(self)`` once it listens; run until cancelled
        (a cancellation stops the broker cleanly)."""
        # advance() from another thread wakes this loop so passed deadlines fire at once
        token = trio.lowlevel.current_trio_token()
        self.clock.wake = lambda: token.run_sync_soon(_noop)
        # whether this loop's trio clock is the broker clock: then advancing it fires the trio
        # deadlines too (session timeouts, delayed requests, the background loops)
        self.drives_trio = trio.lowlevel.current_clock() is self.clock
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.start()
            task_status.started(self)
            await trio.sleep_forever()

    def _begin_change(self) -> None:
        if self._changing:
            raise BrokerBusy("the broker is being started or stopped")
        self._changing = True

    async def start(self) -> bool:
        """Start a broker from the data dir (after a crash or stop); False if one runs.
        BrokerBusy while another start or stop is under way."""
        if self.broker is not None:
            return False
        self._begin_change()
        try:
            return await self._start()
        finally:
            self._changing = False

    async def _start(self) -> bool:
        from ..broker import BrokerServer
        b = BrokerServer(self.config, clock=self.clock)
        b.faults = self.faults
        if self.as_kafka is not None:
            from ..profiles import apply

            b.handlers = apply(b.handlers, self.as_kafka)
        if self.prepare is not None:
            self.prepare(b)
        done = trio.Event()
        scope = trio.CancelScope()

        async def body(task_status: trio.TaskStatus[None]) -> None:
            try:
                with scope:
                    await b.run(task_status=task_status)
            finally:
                done.set()
                if self.broker is b:
                    self.broker = None

        assert self._nursery is not None    # run() starts the first broker
        await self._nursery.start(body)
        if self.incarnation == 0:
            # a restart binds the ports bound now (port 0 chose them)
            self.config.set("listeners", ",".join(str(li) for li in b.bound))
        self.incarnation += 1
        self.broker, self._done, self._scope = b, done, scope
        # offline partitions stay offline across a restart (the fault plan survives it; the
        # new controller learns them again)
        if self.faults.offline:
            controller: Any = b.controller  # (the BrokerServer declares it None until it runs)
            controller.replicas_offline(b.node_id, self.faults.offline)
        return True

    async def stop(self, clean: bool = True) -> bool:
        """Stop the broker: cleanly, or as a crash (``clean=False``); False if none runs.
        BrokerBusy while another start or stop is under way."""
        b = self.broker
        if b is None:
            return False
        assert self._scope is not None and self._done is not None   # set with self.broker
        self._begin_change()
        try:
            if clean:
                self._scope.cancel()
            else:
                b.crash()
            await self._done.wait()
            self.broker = None
            return True
        finally:
            self._changing = False

    async def crash(self) -> bool:
        """``kill -9`` in-process: no flush, checkpoint or clean-shutdown marker; connections
        dropped.  The broker stays down until :meth:`start`."""
        return await self.stop(clean=False)

    async def restart(self, clean: bool = True) -> None:
        """Stop (cleanly, or crash) and start again from the same data dir and ports."""
        await self.stop(clean)
        await self.start()

    def set_partition_offline(self, topic: str, partition: int, offline: bool = True) -> bool:
        """Take ``topic``-``partition`` offline (or back online); False if nothing changed.
        Raises KeyError for an unknown partition."""
        b: Any = self.broker    # (the BrokerServer declares its metadata_cache and controller None)
        if b is not None and b.metadata_cache.partition_state(topic, partition) is None:
            raise KeyError("unknown partition %s-%d" % (topic, partition))
        changed = self.faults.set_offline(topic, partition) if offline else self.faults.set_online(topic, partition)
        if changed and b is not None:
            if offline:
                b.controller.replicas_offline(b.node_id, [(topic, partition)])
            else:
                _online(b, [(topic, partition)])
        return changed

    def clear_faults(self) -> None:
        """Every rule removed and every offline partition back online."""
        offline = self.faults.offline
        self.faults.clear()
        b = self.broker
        if offline and b is not None:
            _online(b, offline)


def _online(b: Any, tps: Iterable[tuple[str, int]]) -> None:
    b.controller.replicas_online(b.node_id, tps)
