"""An in-memory multi-broker cluster for replication tests (no ZooKeeper).

``MemoryCluster`` is the cluster-wide metadata (what ZooKeeper would hold: topics, partition
states, live broker registrations, the controller id); every broker of one trio loop gets a
``MemoryController`` on it through ``BrokerServer(config, controller_factory=cluster.controller_factory)``.
They follow docs/replication-contract.md as the ZooKeeper controller does, with the same rules
(pykbroker/cluster/partition_change.py; tests/replication/test_partition_change_contract.py
holds both to them): every change is published as records to *every* live broker's
``MetadataCache``; a new topic / new partitions are staged on every broker, each ReplicaManager
makes its local replicas, then all publish; ``alter_partition`` is a compare-and-set on the
partition epoch whose new state reaches every broker's cache and partition-change listeners
before it returns.

What the active controller does on a broker failure is a helper here: ``fail_broker(id)``
unregisters it and applies the rule for a broker going away (out of every ISR, a new leader
where it led); ``elect(topic, p, leader)`` moves leadership to another ISR member (a controlled
election); ``reassign(topic, p, replicas)`` is one reassignment step.  ``detach(id)`` forgets a stopped
broker's cache without telling anyone (a hung broker: its followers' ISR shrink must come from
the leader).

``ClusterRunner`` runs N such brokers on their own thread and trio loop for blocking tests
(real clients): start, stop (clean), restart on the same log dir, and ``call(fn, *args)`` /
``acall(afn, *args)`` to read or change broker state on the trio thread.
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, Optional

import trio

from ..cluster import partition_change as PC
from ..cluster.controller import Controller
from ..cluster.topic_validator import TopicValidator
from ..cluster.metadata import TopicInfo
from ..cluster.metadata_cache import (BrokerRegistration, ConfigRecord, ControllerRecord,
                                      PartitionChangeRecord, PartitionState,
                                      RegisterBrokerRecord, RemoveTopicRecord, UnregisterBrokerRecord)
from ..cluster.topic_records import new_partition_records, topic_records
from ..protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from ..cluster.metadata_cache import Endpoint, MetadataCache, Record
    from ..config import BrokerConfig
    from ..storage.fs import FileSystem

log = logging.getLogger("pykbroker.memory_cluster")

__all__ = ["MemoryCluster", "MemoryController", "ClusterRunner"]


class MemoryCluster:
    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.members: dict[int, "MemoryController"] = {}
        self.controller_id = -1
        self.next_producer_id_block = 0

    def controller_factory(self, cache: MetadataCache, config: BrokerConfig, node_id: int, log_dir: Optional[str] = None,
                           fs: Optional[FileSystem] = None) -> "MemoryController":
        return MemoryController(self, cache, config, node_id)

    # ------------------------------------------------------------------ fan-out
    def broadcast(self, records: list[Record]) -> None:
        for m in list(self.members.values()):
            m.cache.apply(records)

    def notify(self, topic: str, partition: int, state: PartitionState) -> None:
        for m in list(self.members.values()):
            m._notify_partition_changed(topic, partition, state)

    def image(self) -> list:
        records: list = [RegisterBrokerRecord(r) for r in self.brokers.values()]
        for name, info in self.topics.items():
            states = {p: self.states[(name, p)] for p in info.replica_assignment}
            records += topic_records(info, states)
        records.append(ControllerRecord(self.controller_id))
        return records

    def change(self, topic: str, partition: int, new: PartitionState) -> PartitionState:
        """Publish a partition's new state everywhere (records, then listeners)."""
        self.states[(topic, partition)] = new
        info = self.topics[topic]
        self.broadcast([PartitionChangeRecord(info.topic_id, partition, new)])
        self.notify(topic, partition, new)
        return new

    # ------------------------------------------------------------------ controller helpers
    # The rules are cluster/partition_change.py's; here only where the states live.
    def unclean_allowed(self, topic: str) -> bool:
        m = next(iter(self.members.values()), None)
        return m is not None and bool(m.cache.effective_config(topic).get("unclean.leader.election.enable"))

    def fail_broker(self, broker_id: int) -> None:
        """The broker's registration is gone (a crash): what the active controller does."""
        self.members.pop(broker_id, None)
        self.brokers.pop(broker_id, None)
        self.broadcast([UnregisterBrokerRecord(broker_id)])
        if self.controller_id == broker_id:
            self.controller_id = min(self.brokers) if self.brokers else -1
            self.broadcast([ControllerRecord(self.controller_id)])
        for (topic, p), st in list(self.states.items()):
            new = PC.on_brokers_changed(st, self.brokers, self.unclean_allowed(topic))
            if new is not None:
                self.change(topic, p, new)

    def elect(self, topic: str, partition: int, leader: Optional[int] = None) -> PartitionState:
        """Move leadership to ``leader`` (default: the next live ISR member), epoch bumped."""
        st = self.states[(topic, partition)]
        try:
            new = PC.move_leader(st, self.brokers, leader)
        except ValueError as e:
            raise RuntimeError("%s-%d: %s" % (topic, partition, e)) from None
        return self.change(topic, partition, new) if new is not None else st

    def reassign(self, topic: str, partition: int, replicas: Iterable[int]) -> PartitionState:
        """A new replica set (one step of Kafka's reassignment, cluster/partition_change.py)."""
        new = PC.reassign(self.states[(topic, partition)], replicas, self.brokers)
        self.topics[topic].replica_assignment[partition] = list(new.replicas)
        return self.change(topic, partition, new)

    def detach(self, broker_id: int) -> None:
        """A stopped broker whose registration stays (a hung process)."""
        self.members.pop(broker_id, None)

    def state(self, topic: str, partition: int) -> PartitionState:
        return self.states[(topic, partition)]


class MemoryController(Controller):
    """One broker's handle on a ``MemoryCluster`` (see the module docstring)."""

    def __init__(self, cluster: MemoryCluster, cache: MetadataCache, config: BrokerConfig, node_id: int) -> None:
        super().__init__(cache)
        self.cluster = cluster
        self.config = config
        self.node_id = node_id
        self.validator = TopicValidator(cache, config)

    async def load(self) -> None:
        c = self.cluster
        c.members[self.node_id] = self
        self.cache.apply(c.image())

    async def shutdown(self) -> None:
        self.cluster.detach(self.node_id)

    def _members(self) -> list:
        return list(self.cluster.members.values())

    # ------------------------------------------------------------------ brokers
    async def register_broker(self, broker_id: int, endpoints: tuple[Endpoint, ...] = (), rack: Optional[str] = None) -> None:
        c = self.cluster
        c.brokers[broker_id] = BrokerRegistration(broker_id, tuple(endpoints), rack)
        c.broadcast([RegisterBrokerRecord(c.brokers[broker_id])])
        if c.controller_id == -1:
            c.controller_id = broker_id
            c.broadcast([ControllerRecord(broker_id)])
        # partitions without a leader whose last ISR member is back (Kafka's onBrokerStartup)
        for (topic, p), st in list(c.states.items()):
            new = PC.on_broker_returned(st, broker_id, c.brokers, c.unclean_allowed(topic))
            if new is not None:
                c.change(topic, p, new)

    allocates_producer_ids = True

    async def allocate_producer_id_block(self, broker_id: int) -> int:
        """Kafka's AllocateProducerIds: the start of a block of 1000 ids unique in the cluster."""
        from ..cluster.producer_ids import BLOCK_SIZE
        c = self.cluster
        start = c.next_producer_id_block
        c.next_producer_id_block += BLOCK_SIZE
        return start

    # ------------------------------------------------------------------ topics
    async def _make_staged(self, records: list[Record], partition_ids: Iterable[int], name: str) -> None:
        members = self._members()
        for m in members:
            m.cache.stage(records)
        try:
            for m in members:
                info = m.cache.including_staged(name)
                await m._replica_manager.make_partitions(info, partition_ids)
        except BaseException:
            for m in members:
                m.cache.discard_staged(records)
            raise
        for m in members:
            m.cache.publish_staged(records)

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, Optional[str]] | None = None, assignments: Any = None,
                           validate_only: bool = False, internal: bool = False,
                           timeout_s: Optional[float] = None) -> TopicInfo:
        # ``timeout_s`` unused: an in-memory creation is made before the answer, however long
        info = self.validator.new_topic(name, num_partitions, replication_factor, configs or {},
                                        assignments, internal)
        if validate_only:
            return info
        records = topic_records(info)
        await self._make_staged(records, info.partition_ids(), name)
        c = self.cluster
        c.topics[name] = info
        for p, r in info.replica_assignment.items():
            c.states[(name, p)] = PartitionState.initial(r)
        created = self.cache.get(name)
        assert created is not None      # published by _make_staged
        return created

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self._existing(name)
        c = self.cluster
        c.topics.pop(name, None)
        for p in range(info.num_partitions):
            c.states.pop((name, p), None)
        members = self._members()
        infos = [(m, m.cache.get(name)) for m in members]
        c.broadcast([RemoveTopicRecord(info.topic_id)])
        with trio.CancelScope(shield=True):
            for m, mi in infos:
                if mi is not None:
                    await m._replica_manager.delete_partitions(mi)
        for m in members:
            m._notify_topic_deleted(name)
        return info

    async def create_partitions(self, name: str, new_total: int, assignments: Any = None,
                                validate_only: bool = False, timeout_s: Optional[float] = None) -> TopicInfo:
        info, current, placed = self._plan_partitions(name, new_total, assignments)
        if validate_only:
            return info
        records = new_partition_records(info.topic_id, placed)
        await self._make_staged(records, list(range(current, new_total)), name)
        c = self.cluster
        for p, r in placed.items():
            c.states[(name, p)] = PartitionState.initial(r)
            c.topics[name].replica_assignment[p] = list(r)
        c.topics[name].num_partitions = new_total
        grown = self.cache.get(name)
        assert grown is not None        # the topic exists (checked above)
        return grown

    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        info = self._existing(name)
        c = self.cluster
        c.topics[name].configs = dict(new_overrides)
        c.broadcast([ConfigRecord(name, dict(new_overrides))])
        for m in self._members():
            mi = m.cache.get(name)
            if mi is not None:
                res = m._replica_manager.on_config_change(mi)
                if hasattr(res, "__await__"):
                    await res
        return info

    # ------------------------------------------------------------------ partitions
    async def alter_partition(self, topic: str, partition: int, partition_epoch: int, leader: Optional[int] = None,
                              isr: Optional[list[int]] = None, leader_epoch: Optional[int] = None) -> PartitionState:
        c = self.cluster
        st = c.states.get((topic, partition))
        if st is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        new = PC.alter_partition(st, partition_epoch=partition_epoch, eligible=c.brokers, isr=isr,
                                 leader=leader, leader_epoch=leader_epoch, where="%s-%d" % (topic, partition))
        if new is None:
            return st
        await trio.sleep(0)   # a controller round trip is never synchronous
        if c.states.get((topic, partition)) is not st:
            raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION)
        return c.change(topic, partition, new)

    def _reported(self, broker_id: int, partitions: Iterable[tuple[str, int]],
                  rule: Callable[[PartitionState, int, Collection[int]], Optional[PartitionState]]) -> None:
        c = self.cluster
        for topic, p in partitions:
            st = c.states.get((topic, p))
            new = rule(st, broker_id, c.brokers) if st is not None else None
            if new is not None:
                c.change(topic, p, new)

    def replicas_offline(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        self._reported(broker_id, partitions, PC.replicas_offline)

    def replicas_online(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        self._reported(broker_id, partitions, PC.replicas_online)


# ---------------------------------------------------------------------- threaded runner
class ClusterRunner:
    """N in-process brokers (ids 1..N) on one trio loop in a thread of their own, sharing a
    ``MemoryCluster``; for blocking tests with real clients."""

    def __init__(self, base_dir: str, n: int = 3, config: Optional[dict] = None) -> None:
        self.base_dir = base_dir
        self.n = n
        self.config = dict(config or {})
        self.cluster = MemoryCluster()
        # one cluster id for every broker (Kafka's brokers share it through the metadata)
        self.cluster_id = "pykbroker-memory-cluster"
        self.brokers: dict[int, Any] = {}
        self._scopes: dict[int, tuple] = {}
        self._ports: dict[int, int] = {}
        self._token: Optional[trio.lowlevel.TrioToken] = None   # set when the loop runs
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._stop: Optional[trio.Event] = None

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = 60.0) -> "ClusterRunner":
        self._thread = threading.Thread(target=self._main, name="memory-cluster", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            raise RuntimeError("cluster did not start: %r" % (self._error,)) from self._error
        return self

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as e:
            self._error = e
            log.exception("memory cluster loop failed")
        finally:
            self._ready.set()

    async def _run(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for i in range(1, self.n + 1):
                await self._start_broker(i)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def _values(self, node_id: int) -> dict:
        values = {"node.id": str(node_id), "cluster.id": self.cluster_id,
                  "listeners": "PLAINTEXT://127.0.0.1:%d" % self._ports.get(node_id, 0),
                  "log.dirs": os.path.join(self.base_dir, "broker-%d" % node_id)}
        values.update(self.config)
        return values

    async def _start_broker(self, node_id: int) -> None:
        from ..broker import BrokerServer
        from ..config import BrokerConfig

        scope = trio.CancelScope()
        done = trio.Event()
        self._scopes[node_id] = (scope, done)
        broker = BrokerServer(BrokerConfig(self._values(node_id)), controller_factory=self.cluster.controller_factory)

        async def runner(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await broker.run(task_status=task_status)
            finally:
                done.set()
        await self._nursery.start(runner)
        self.brokers[node_id] = broker
        self._ports[node_id] = broker.advertised_listener().port

    async def _stop_broker(self, node_id: int) -> None:
        entry = self._scopes.pop(node_id, None)
        self.brokers.pop(node_id, None)
        if entry is None:
            return
        scope, done = entry
        self.cluster.detach(node_id)
        scope.cancel()
        await done.wait()   # its listeners closed, its logs flushed

    def close(self, timeout: float = 60.0) -> None:
        if self._thread is None:
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> "ClusterRunner":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ from the test thread
    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the trio thread (sync)."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def acall(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await afn(*args)`` on the trio thread."""
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    @property
    def bootstrap(self) -> str:
        return ",".join("127.0.0.1:%d" % self._ports[i] for i in sorted(self.brokers))

    def address(self, node_id: int) -> str:
        return "127.0.0.1:%d" % self._ports[node_id]

    def stop_broker(self, node_id: int, fail: bool = True) -> None:
        """Stop a broker (clean shutdown of its process-equivalent).  ``fail``: the controller
        notices (registration gone: ISR shrink, new leaders); else it hangs unnoticed."""
        self.acall(self._stop_broker, node_id)
        if fail:
            self.call(self.cluster.fail_broker, node_id)

    def start_broker(self, node_id: int) -> None:
        self.acall(self._start_broker, node_id)

    def fail_broker(self, node_id: int) -> None:
        self.call(self.cluster.fail_broker, node_id)

    def elect(self, topic: str, partition: int, leader: Optional[int] = None) -> PartitionState:
        return self.call(self.cluster.elect, topic, partition, leader)

    def state(self, topic: str, partition: int) -> PartitionState:
        return self.call(self.cluster.state, topic, partition)

    def reassign(self, topic: str, partition: int, replicas: Iterable[int]) -> PartitionState:
        return self.call(self.cluster.reassign, topic, partition, replicas)

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: Optional[dict] = None,
                     via: Optional[int] = None) -> TopicInfo:
        b = self.brokers[via or min(self.brokers)]
        return self.acall(b.controller.create_topic, name, partitions, rf, configs or {})

    def partition(self, node_id: int, topic: str, partition: int) -> Any:
        return self.brokers[node_id].replica_manager.get_partition(topic, partition)

    def log_bytes(self, node_id: int, topic: str, partition: int, end: Optional[int] = None) -> bytes:
        """The raw batches of a replica's log from its log start up to ``end`` (default LEO)."""
        def read() -> bytes:
            part = self.partition(node_id, topic, partition)
            lg = part.log
            stop = lg.log_end_offset if end is None else end
            out = bytearray()
            off = lg.log_start_offset
            while off < stop:
                regions = lg.read(off, 1 << 20, stop, True, whole_batches=True)
                if not regions:
                    break
                for r in regions:
                    out += os.pread(r.fd, r.length, r.position)
                from ..protocol.records import iter_batches
                last = None
                for h in iter_batches(bytes(out)):
                    last = h
                off = last.next_offset if last is not None else stop
            return bytes(out)
        return self.call(read)

    def offsets(self, node_id: int, topic: str, partition: int) -> tuple[int, int, int]:
        """(log start, high watermark, log end) of a replica."""
        def get() -> tuple[int, int, int]:
            part = self.partition(node_id, topic, partition)
            return part.log_start_offset, part.high_watermark, part.log_end_offset
        return self.call(get)
