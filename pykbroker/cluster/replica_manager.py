"""``ReplicaManager``: the partitions hosted by this broker (Kafka's ReplicaManager).

It owns the ``Partition`` objects and routes produce/fetch to them (``get_partition``); their
logs belong to the ``LogManager`` (storage/manager.py: log dirs, opening and recovering,
deleting, flushing, checkpoints — high watermarks included —, retention, the cleaner, log dir
failure).  The controller's metadata changes reach it through ``make_partitions``,
``delete_partitions`` and ``on_config_change``.

Start-up (``startup``, after the LogManager's): one ``Partition`` per partition of every topic
in the metadata image, wrapping the log the LogManager opened; a partition whose log dir is
offline (or whose log could not be opened) is an ``OfflinePartition``.

Log dir failure: the LogManager tells it which partitions the failed dir held; each becomes
offline (KAFKA_STORAGE_ERROR to Produce, Fetch, ListOffsets; Metadata shows no leader and this
node as offline replica).  The partitions of the other dirs keep serving.

Replication (Kafka's LeaderAndIsr handling, ``becomeLeaderOrFollower``): the controller's
partition-change listener (``_on_partition_change``, registered when a controller is handed
in) and ``make_partitions`` / ``startup`` make each *local* replica (this node in
``state.replicas``) leader or follower.  A follower is added to the ``ReplicaFetcher`` of its
leader (cluster/replica_fetcher.py; one per source broker, started lazily, so a single node has
none); a leader's ISR changes go to ``controller.alter_partition`` (a spawned task per
request), and ``_isr_shrink_loop`` checks every half ``replica.lag.time.max.ms`` for followers
that fell behind.  Leadership changes are told to ``add_leadership_listener`` callbacks
(``cb(topic, partition, is_leader, leader_epoch)``): the broker wires the group coordinator's
``on_become_leader`` / ``on_resign`` for ``__consumer_offsets`` through it.

The partition dict is only mutated on the trio thread.
"""
from __future__ import annotations

import logging
from typing import Callable

import trio

from ..protocol.errors import ErrorCode, KafkaError
from ..config import inter_broker_listener
from .fetch_session import FetchSessionCache
from .partition import OfflinePartition, Partition, PartitionHooks
from .producer_ids import ProducerIdManager

log = logging.getLogger("pykbroker.replica_manager")


class ReplicaManager:
    """``metadata``: ``.topics`` (name -> TopicInfo) and ``.effective_config(name)``."""

    def __init__(self, node_id: int, log_manager, metadata, controller=None, config=None, versions=None):
        self.node_id = node_id
        # the request versions this broker's own code sends to others (cluster/interbroker.py)
        self.interbroker_versions = versions
        # TLS and SASL of this broker's connections to the others' inter-broker listener
        # (security/client.py; None: PLAINTEXT), read once: a bad setting stops the start-up
        self.interbroker_security = None
        if config is not None and config["zookeeper.connect"]:
            from ..security.client import InterBrokerSecurity
            self.interbroker_security = InterBrokerSecurity.from_config(config)
        self.log_manager = log_manager
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], Partition] = {}
        # a cluster's controller hands out producer id blocks (unique across brokers)
        alloc = getattr(controller, "allocate_producer_id_block", None)
        self.producer_ids = ProducerIdManager(log_manager.log_dirs[0], log_manager.fs,
                                              (lambda: alloc(node_id)) if alloc is not None else None)
        self._hooks = None
        self._nursery = None
        # set by the broker: tells the controller which replicas went offline (a failed dir)
        self.on_replicas_offline = None
        log_manager.add_dir_failure_listener(self._on_dir_offline)
        log_manager.add_log_replaced_listener(self._on_log_replaced)
        # replication: ISR changes go to the controller; its partition changes come back
        self.controller = controller
        self.config = config
        self._fetchers: dict[int, "ReplicaFetcher"] = {}
        self._fetcher_config = None
        self._fetcher_of: dict[tuple[str, int], int] = {}
        self._leadership_listeners: list[Callable[[str, int, bool, int], None]] = []
        # incremental fetch sessions (KIP-227) of consumers and followers (handlers/k01_fetch.py)
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"] if config is not None else 1000)
        if controller is not None:
            controller.add_partition_change_listener(self._on_partition_change)

    # ------------------------------------------------------------------ queries
    def get_partition(self, topic: str, partition: int):
        return self.partitions.get((topic, partition))

    def partitions_of(self, topic: str) -> list[Partition]:
        return [p for (t, _), p in self.partitions.items() if t == topic]

    # ------------------------------------------------------------------ start-up
    def add_leadership_listener(self, callback: Callable[[str, int, bool, int], None]) -> None:
        """``callback(topic, partition, is_leader, leader_epoch)`` when a local replica becomes
        leader (True) or stops leading (False).  Sync; it must not raise."""
        self._leadership_listeners.append(callback)

    def _is_local(self, state) -> bool:
        return state is not None and self.node_id in state.replicas

    async def startup(self, nursery) -> None:
        """Wrap the logs the LogManager opened (its ``startup`` ran first) and make each local
        replica leader or follower as the metadata says."""
        lm = self.log_manager
        self._nursery = nursery
        self._hooks = PartitionHooks(lm.on_storage_error, lm.request_checkpoint,
                                     lm.delete_below_log_start, nursery.start_soon,
                                     self._alter_isr if self.controller is not None else None)
        meta = self.metadata
        for info in list(meta.topics.values()):
            cfg = meta.effective_config(info.name)
            for p in info.partition_ids():
                tp = (info.name, p)
                state = meta.partition_state(info.name, p)
                if not self._is_local(state):
                    continue
                if lm.is_online(tp):
                    part = self.partitions[tp] = self._partition(info, p, lm.get_log(*tp), cfg)
                    self._started(part)
                else:
                    self.partitions[tp] = OfflinePartition(info.name, info.topic_id, p, cfg, state=state)
        self._report_offline([tp for tp, part in self.partitions.items() if part.offline])
        if self.config is not None and self.controller is not None:
            nursery.start_soon(self._isr_shrink_loop)

    def _partition(self, info, p: int, lg, cfg: dict) -> Partition:
        return Partition(info.name, info.topic_id, p, lg, cfg, hooks=self._hooks,
                         state=self.metadata.partition_state(info.name, p), node_id=self.node_id)

    def _started(self, part: Partition) -> None:
        """A new local replica: a follower starts fetching, a leader is announced."""
        if part.is_leader:
            self._notify_leadership(part, True)
        elif part.leader_id >= 0:
            self._add_to_fetcher(part)

    # ------------------------------------------------------------------ leader / follower
    def _on_partition_change(self, topic: str, partition: int, state) -> None:
        """The controller published a new state (Kafka's LeaderAndIsr).  Sync: the work that
        needs an await (creating or deleting a replica) is spawned."""
        tp = (topic, partition)
        part = self.partitions.get(tp)
        if part is None:
            if self._is_local(state) and self._nursery is not None and self.metadata.get(topic) is not None:
                self._nursery.start_soon(self._add_replica, topic, partition)
            return
        if not self._is_local(state):
            if self._nursery is not None:
                self._nursery.start_soon(self._remove_replica, tp)
            return
        if part.offline or state.partition_epoch <= part.partition_epoch:
            return   # already applied (or our own ISR change reported back)
        self.become_leader_or_follower(part, state)

    def become_leader_or_follower(self, part: Partition, state) -> None:
        tp = (part.topic, part.partition_id)
        if state.leader == self.node_id:
            if part.make_leader(state):
                self._remove_from_fetcher(tp)
                log.info("%s: leader at epoch %d, ISR %s", part, part.leader_epoch, part.isr)
                self._notify_leadership(part, True)
        else:
            was_leader = part.is_leader
            if part.make_follower(state):
                self._remove_from_fetcher(tp)
                if state.leader >= 0:
                    self._add_to_fetcher(part)
                log.info("%s: follower of %d at epoch %d", part, state.leader, state.leader_epoch)
            if was_leader:
                self._notify_leadership(part, False)

    def _notify_leadership(self, part: Partition, is_leader: bool) -> None:
        for cb in self._leadership_listeners:
            try:
                cb(part.topic, part.partition_id, is_leader, part.leader_epoch)
            except Exception:
                log.exception("leadership listener failed for %s", part)

    async def _add_replica(self, topic: str, partition: int) -> None:
        info = self.metadata.get(topic)
        if info is not None:
            await self.make_partitions(info, [partition])

    async def _remove_replica(self, tp) -> None:
        """StopReplica(delete=true): this node is no longer a replica of ``tp``."""
        part = self.partitions.pop(tp, None)
        if part is None:
            return
        self._remove_from_fetcher(tp)
        if part.is_leader:
            self._notify_leadership(part, False)
        part.mark_deleted()
        await self.log_manager.delete_logs([tp])

    # ------------------------------------------------------------------ fetchers
    def _listener_name(self) -> str:
        """Kafka's inter-broker listener: ``inter.broker.listener.name``, else the listener named
        after ``security.inter.broker.protocol`` (PLAINTEXT by default); pykbroker falls back to
        the first listener when there is no such name."""
        if self.config is None:
            return "PLAINTEXT"
        return inter_broker_listener(self.config).name

    def _address_of(self, broker_id: int):
        reg = self.metadata.broker(broker_id)
        if reg is None:
            return None
        e = reg.endpoint(self._fetcher_config.listener_name)
        return (e.host, e.port) if e is not None else None

    def _add_to_fetcher(self, part: Partition) -> None:
        src = part.leader_id
        f = self._fetchers.get(src)
        if f is None:
            # imported by the first follower: a single node never fetches, so its start-up
            # does not pay for the fetcher (tests/install/test_startup_imports.py)
            from .replica_fetcher import FetcherConfig, ReplicaFetcher
            if self._fetcher_config is None:
                self._fetcher_config = FetcherConfig(self.config, self._listener_name(), self.node_id,
                                                    self.interbroker_versions, self.interbroker_security)
            f = self._fetchers[src] = ReplicaFetcher(self.node_id, src, self._address_of, self._fetcher_config)
            self._nursery.start_soon(f.run)
        tp = (part.topic, part.partition_id)
        f.add_partition(part)
        self._fetcher_of[tp] = src

    def _remove_from_fetcher(self, tp) -> None:
        src = self._fetcher_of.pop(tp, None)
        if src is not None and src in self._fetchers:
            self._fetchers[src].remove_partition(tp)

    def fetcher_of(self, tp):
        """The ReplicaFetcher copying ``tp`` (tests, introspection), or None."""
        src = self._fetcher_of.get(tp)
        return self._fetchers.get(src) if src is not None else None

    # ------------------------------------------------------------------ ISR
    def _alter_isr(self, part: Partition, new_isr: list) -> None:
        self._nursery.start_soon(self._send_alter_isr, part, list(new_isr))

    async def _send_alter_isr(self, part: Partition, new_isr: list) -> None:
        new = None
        try:
            new = await self.controller.alter_partition(part.topic, part.partition_id,
                                                        part.partition_epoch, isr=new_isr)
            log.info("%s: ISR now %s (partition epoch %d)", part, list(new.isr), new.partition_epoch)
        except KafkaError as e:
            # INVALID_UPDATE_VERSION: a newer state is on its way through the listener; other
            # errors (controller unavailable): the next fetch / shrink check asks again
            log.info("%s: ISR change to %s refused: %s", part, new_isr, ErrorCode(e.code).name)
        except Exception:
            log.exception("%s: ISR change to %s failed", part, new_isr)
        finally:
            part.isr_change_done(new)

    async def _isr_shrink_loop(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms."""
        lag_s = self.config["replica.lag.time.max.ms"] / 1000.0
        while True:
            await trio.sleep(max(lag_s / 2, 0.01))
            for part in list(self.partitions.values()):
                if part.is_leader and len(part.isr) > 1:
                    part.maybe_shrink_isr(lag_s)

    def _on_dir_offline(self, d: str, tps) -> None:
        gone = []
        for tp in tps:
            part = self.partitions.get(tp)
            if part is not None:
                part.mark_offline()
                gone.append(tp)
        self._report_offline(gone)

    def _report_offline(self, tps) -> None:
        if tps and self.on_replicas_offline is not None:
            self.on_replicas_offline(tps)

    def _on_log_replaced(self, tp, new_log) -> None:
        """A move between log dirs finished (LogManager.alter_log_dir): the partition now
        appends to and reads from the log in its new dir."""
        part = self.partitions.get(tp)
        if part is not None:
            part.log = new_log

    # ------------------------------------------------------------------ topic changes
    async def make_partitions(self, topic_info, partition_ids) -> None:
        """Create the local replicas (this node in the staged state's replicas) of new
        partitions, each leader or follower as the state says."""
        cfg = self.metadata.effective_config(topic_info.name)
        for p in partition_ids:
            tp = (topic_info.name, p)
            if tp in self.partitions or not self._is_local(self.metadata.partition_state(topic_info.name, p)):
                continue
            lg = await self.log_manager.create_log(topic_info.name, p, cfg)
            if tp in self.partitions:
                continue   # created concurrently (a listener's replica addition)
            part = self.partitions[tp] = self._partition(topic_info, p, lg, cfg)
            self._started(part)

    async def delete_partitions(self, topic_info) -> None:
        doomed = [tp for tp in self.partitions if tp[0] == topic_info.name]
        for tp in doomed:
            self._remove_from_fetcher(tp)
            part = self.partitions.pop(tp)
            if part.is_leader:
                self._notify_leadership(part, False)
            part.mark_deleted()
        await self.log_manager.delete_logs(doomed)

    def on_config_change(self, topic_info) -> None:
        cfg = self.metadata.effective_config(topic_info.name)
        self.log_manager.update_config(topic_info.name, cfg)
        for part in self.partitions_of(topic_info.name):
            part.update_config(cfg)

