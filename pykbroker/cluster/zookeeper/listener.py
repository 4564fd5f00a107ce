"""``MetadataListener``: every broker's watcher, ZooKeeper turned into ``MetadataCache`` records.

ZooKeeper watches on ``/brokers/ids``, ``/brokers/topics`` (and each topic's assignment,
partition states and config), the dynamic broker and group configs feed this broker's
``MetadataCache`` with records, and call the ReplicaManager (``make_partitions`` /
``delete_partitions`` / ``on_config_change``) and the partition-change listeners (Kafka's
LeaderAndIsr: the ReplicaManager becomes leader or follower).  This replaces Kafka's
controller-to-broker LeaderAndIsr / UpdateMetadata / StopReplica requests: each broker reads the
facts from ZooKeeper itself, so a stale controller can only reach brokers by writing ZooKeeper,
which its fenced writes prevent (cluster/zookeeper/active.py).  Its handlers run on the event
task (cluster/zookeeper/events.py), so the cache is only ever changed there, or by this broker's
own successful writes, published at once through ``publish_state`` and ignored when their watch
arrives (the state znode's version is not newer).

Owns: the watches (topics, partition states, topic configs, group configs); the mirror of the
ongoing reassignments read from the topic znodes (every broker answers
ListPartitionReassignments from it; the active controller's own writes update it through
``set_reassignments``); the replicas this broker reported offline (each broker's own
knowledge: ZooKeeper stores no offline marks).  Publishes to the cache and to the
``Controller``'s listeners it is given; the broker and group config stores stay the
``Controller``'s (cluster/controller.py).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Optional

import trio

from ...config import redacted
from .. import zk as Z
from ..controller import Controller
from ..metadata import TopicInfo, topic_id_str
from ..metadata_cache import (ConfigRecord, ControllerRecord, PartitionChangeRecord, PartitionRecord,
                              PartitionState, Record, RegisterBrokerRecord, RemoveTopicRecord,
                              UnregisterBrokerRecord)
from ..topic_records import render_configs, topic_records
from .events import EventTask
from .znodes import ZnodeRole, ZnodeStore, parse_configs, reassignments_of

log = logging.getLogger("pykbroker.controller")


class MetadataListener(ZnodeRole):
    def __init__(self, owner: Controller, store: ZnodeStore, events: EventTask, node_id: int) -> None:
        super().__init__(owner.cache, store, events)
        self.owner = owner          # the Controller: its listeners and config stores
        self.node_id = node_id
        self._topic_watches: dict[str, list] = {}
        self._state_watches: dict[tuple[str, int], list] = {}
        self._config_watches: dict[str, list] = {}
        self._group_watches: dict[str, list] = {}
        # ongoing reassignments, every broker (from the topic znodes): topic -> {p: (adding, removing)}
        self._reassigning: dict[str, dict[int, tuple[list[int], list[int]]]] = {}
        # the full replica sets of those partitions, read from the same topic znode as their
        # adding/removing lists (ListPartitionReassignments answers from this pair, never from a
        # partition state that may not have caught up with the znode yet)
        self._reassign_replicas: dict[str, dict[int, list[int]]] = {}
        # this broker's replicas reported offline (a failed log dir): listed offline in its own
        # view; the ISR and leader consequences are the active controller's (replicas_offline)
        self._offline_here: set[tuple[str, int]] = set()

    # ================================================================== the image at start
    async def load(self) -> None:
        """Read the whole image into the cache (before the logs are opened)."""
        records: list = []
        data, _ = await self.store.get_or_none(Z.CONTROLLER)
        records.append(ControllerRecord(Z.decode_controller(data)))
        for bid in await self.zk.call("get_children", Z.BROKER_IDS):
            reg = await self.store.read_broker(int(bid))
            if reg is not None:
                records.append(RegisterBrokerRecord(reg))
        for name in sorted(await self.zk.call("get_children", Z.TOPICS)):
            info, states = await self._read_topic(name)
            if info is not None:
                records += topic_records(info, states)
        for entity in ("", str(self.node_id)):   # dynamic broker configs first: logs open with them
            data, _ = await self.store.get_or_none(Z.broker_config_path(entity))
            self.owner._publish_broker_configs(entity, Z.decode_topic_config(data))
        await self.zk.call("ensure_path", Z.CONFIG_GROUPS)
        for group_id in await self.zk.call("get_children", Z.CONFIG_GROUPS):
            data, _ = await self.store.get_or_none("%s/%s" % (Z.CONFIG_GROUPS, group_id))
            self.owner._store_group_configs(group_id, Z.decode_topic_config(data))
        self.cache.apply(records)
        log.info("loaded %d topic(s) and %d live broker(s) from ZooKeeper",
                 len(self.cache.topics), len(self.cache.alive_brokers()))

    async def _read_topic(self, name: str, only: Optional[Iterable[int]] = None
                          ) -> tuple[Optional[TopicInfo], dict[int, PartitionState]]:
        info, states, data = await self.store.read_topic(name, only)
        if info is not None:
            self.note_reassignments(name, data)  # type: ignore[arg-type]  # data is set when info is
        return info, states

    async def watch_known_topics(self) -> None:
        for name in list(self.cache.topics):
            self._watch_topic(name)
            # a name of cache.topics: get() finds it
            await self._watch_states(name, self.cache.get(name).partition_ids())  # type: ignore[union-attr]

    # ================================================================== watches
    def _watch_topic(self, name: str) -> None:
        if name in self._topic_watches:
            return
        post = self.events.post
        self._topic_watches[name] = self.zk.data_watch(
            Z.topic_path(name), lambda data, stat: post(("topic", name, data)))
        self._config_watches[name] = self.zk.data_watch(
            Z.config_path(name), lambda data, stat: post(("config", name, data)))

    async def _watch_states(self, name: str, partitions: Iterable[int]) -> None:
        """Watch the state znodes of these partitions.  kazoo's DataWatch reads its znode
        synchronously when created: all of them are created in one worker thread, so a topic
        of 1,000 partitions does not block the event loop for 1,000 round trips."""
        ps = [p for p in partitions if (name, p) not in self._state_watches]
        if not ps:
            return
        post = self.events.post

        def handler(p: int) -> Callable[..., Any]:
            return lambda data, stat: post(("state", name, p, data, stat))

        def register() -> list:
            return [self.zk.data_watch(Z.state_path(name, p), handler(p)) for p in ps]
        handles = await self.zk.run(register)
        for p, h in zip(ps, handles):
            if name not in self._topic_watches or (name, p) in self._state_watches:
                Z.ZkSession.stop_watch(h)   # unwatched (deleted) or watched again meanwhile
            else:
                self._state_watches[(name, p)] = h

    def _unwatch_topic(self, name: str) -> None:
        for d in (self._topic_watches, self._config_watches):
            h = d.pop(name, None)
            if h is not None:
                Z.ZkSession.stop_watch(h)
        for tp in [tp for tp in self._state_watches if tp[0] == name]:
            Z.ZkSession.stop_watch(self._state_watches.pop(tp))

    # ================================================================== events
    async def on_brokers(self, children: list) -> None:
        ids = {int(c) for c in children}
        known = {b.broker_id for b in self.cache.alive_brokers()}
        records: list[Record] = [UnregisterBrokerRecord(b) for b in sorted(known - ids)]
        for b in sorted(ids - known):
            reg = await self.store.read_broker(b)
            if reg is not None:
                records.append(RegisterBrokerRecord(reg))
        if records:
            self.cache.apply(records)
            gone = sorted(known - ids)
            new = sorted(ids - known)
            if gone or new:
                log.info("live brokers now %s (gone %s, new %s)", sorted(ids), gone, new)

    def publish_controller(self, controller_id: int) -> None:
        self.cache.apply([ControllerRecord(controller_id)])

    async def on_topics(self, children: list) -> None:
        names = set(children)
        for name in sorted(set(self.cache.topics) - names):
            await self._remove_topic(name)
        for name in sorted(names - set(self.cache.topics)):
            if not self.cache.is_staged(name):
                self._watch_topic(name)   # its topic event creates it

    async def on_topic_hint(self, name: str) -> None:
        if name not in self.cache.topics and not self.cache.is_staged(name):
            self._watch_topic(name)

    async def on_topic(self, name: str, data: Optional[bytes]) -> None:
        if data is None:
            if name in self.cache.topics:
                await self._remove_topic(name)
            return
        topic_id, assignment = Z.decode_assignment(data)
        self.note_reassignments(name, data)
        info = self.cache.get(name)
        if info is not None and topic_id is not None and info.topic_id != topic_id:
            await self._remove_topic(name)   # deleted and re-created while we looked away
            info = None
        if info is None:
            await self._create_local(name)
            return
        new_ids = sorted(set(assignment) - set(info.partition_ids()))
        if new_ids:
            _, states = await self._read_topic(name, only=set(new_ids))
            records = [PartitionRecord(info.topic_id, p, st) for p, st in sorted(states.items())]
            self.cache.stage(records)
            rm: Any = self.owner._replica_manager   # the Controller declares it None until wired
            try:
                await rm.make_partitions(info, new_ids)
            except BaseException:
                self.cache.discard_staged(records)
                raise
            self.cache.publish_staged(records)
            await self._watch_states(name, new_ids)
            log.info("topic %s now has %d partition(s)", name, info.num_partitions)

    async def _create_local(self, name: str) -> None:
        info, states = await self._read_topic(name)
        if info is None:
            return
        records = topic_records(info, states)
        staged = self.cache.stage(records)
        assert staged is not None   # topic_records holds the TopicRecord
        rm: Any = self.owner._replica_manager   # the Controller declares it None until wired
        try:
            await rm.make_partitions(staged, staged.partition_ids())
        except BaseException:
            self.cache.discard_staged(records)
            raise
        self.cache.publish_staged(records)
        self._watch_topic(name)
        await self._watch_states(name, info.partition_ids())
        log.info("topic %s (id %s, %d partition(s)) is here", name, topic_id_str(info.topic_id),
                 info.num_partitions)

    async def _remove_topic(self, name: str) -> None:
        info = self.cache.get(name)
        self._unwatch_topic(name)
        self._reassigning.pop(name, None)
        self._reassign_replicas.pop(name, None)
        if info is None:
            return
        self.cache.apply([RemoveTopicRecord(info.topic_id)])
        rm: Any = self.owner._replica_manager   # the Controller declares it None until wired
        with trio.CancelScope(shield=True):
            await rm.delete_partitions(info)
        log.info("deleted topic %s (id %s)", name, topic_id_str(info.topic_id))
        self.owner._notify_topic_deleted(name)

    async def on_state(self, name: str, p: int, data: Optional[bytes], stat: Any) -> bool:
        """A state znode changed: published unless not ours yet or already applied (our own
        write).  True when published."""
        if data is None:
            return False
        info = self.cache.get(name)
        old = self.cache.partition_state(name, p)
        if info is None or old is None or stat.version <= old.partition_epoch:
            return False   # not ours yet, or already applied (our own write)
        new, _ = Z.decode_state(data, stat.version, old.replicas)
        self.publish_state(info, p, new)
        return True

    def publish_state(self, info: TopicInfo, p: int, new: PartitionState) -> None:
        # offline marks are each broker's own knowledge (ZooKeeper stores none)
        offline = (self.node_id,) if (info.name, p) in self._offline_here else ()
        if new.offline_replicas != offline:
            new = PartitionState(new.leader, new.leader_epoch, new.partition_epoch, new.replicas, new.isr, offline)
        self.cache.apply([PartitionChangeRecord(info.topic_id, p, new)])
        self.owner._notify_partition_changed(info.name, p, new)
        self.events.notify_changed()

    async def on_config(self, name: str, data: Optional[bytes]) -> None:
        info = self.cache.get(name)
        if info is None:
            return
        new = parse_configs(name, data)
        if new == info.configs:
            return
        self.cache.apply([ConfigRecord(name, new)])
        rm: Any = self.owner._replica_manager   # the Controller declares it None until wired
        res = rm.on_config_change(info)
        if hasattr(res, "__await__"):
            await res
        log.info("topic %s config overrides now %s", name, render_configs(new))

    async def on_broker_configs(self, entity: str, data: Optional[bytes]) -> None:
        configs = Z.decode_topic_config(data)
        if configs != self.owner.broker_configs(entity):
            self.owner._publish_broker_configs(entity, configs)
            log.info("dynamic broker configs of %s now %s", Z.broker_config_entity(entity), redacted(configs))

    async def on_group_children(self, children: list) -> None:
        for group_id in children:
            if group_id not in self._group_watches:
                on_change: Callable[..., Any] = (
                    lambda data, stat, g=group_id: self.events.post(("group_config", g, data)))
                self._group_watches[group_id] = self.zk.data_watch(
                    "%s/%s" % (Z.CONFIG_GROUPS, group_id), on_change)
        for group_id in [g for g in self._group_watches if g not in children]:
            self.zk.stop_watch(self._group_watches.pop(group_id))
            self.owner._store_group_configs(group_id, {})

    async def on_group_config(self, group_id: str, data: Optional[bytes]) -> None:
        self.owner._store_group_configs(group_id, Z.decode_topic_config(data))

    # ================================================================== after a reconnection
    async def resync(self) -> None:
        """After a reconnection: what an event interrupted by the connection loss may have missed
        (kazoo's watches re-read their znodes on the reconnection, but report only what changed
        since their last read, not what a failed handler never applied): the live brokers and
        topics not yet here."""
        children = await self.zk.call("get_children", Z.BROKER_IDS)
        await self.on_brokers(children)
        for name in sorted(await self.zk.call("get_children", Z.TOPICS)):
            if (name not in self.cache.topics and name in self._topic_watches
                    and not self.cache.is_staged(name)):
                await self._create_local(name)

    async def refresh_all_states(self) -> None:
        """Every partition state read again (one pipelined round): the controller decides on
        fresh states after a reconnection."""
        tps = [(info, p) for info in list(self.cache.topics.values()) for p in info.partition_ids()]
        got = await self.store.get_many([Z.state_path(info.name, p) for info, p in tps])
        for (info, p), (data, stat) in zip(tps, got):
            old = self.cache.partition_state(info.name, p)
            if (data is not None and old is not None and self.cache.get(info.name) is info
                    and stat.version > old.partition_epoch):
                self.publish_state(info, p, Z.decode_state(data, stat.version, old.replicas)[0])

    async def refresh_state(self, info: TopicInfo, p: int) -> None:
        data, stat = await self.store.get_or_none(Z.state_path(info.name, p))
        old = self.cache.partition_state(info.name, p)
        if data is not None and old is not None and stat.version > old.partition_epoch:
            self.publish_state(info, p, Z.decode_state(data, stat.version, old.replicas)[0])

    # ================================================================== reassignments (mirror)
    def note_reassignments(self, name: str, data: bytes) -> None:
        ongoing, replicas = reassignments_of(data)
        self.set_reassignments(name, ongoing, replicas)

    def set_reassignments(self, name: str, ongoing: dict, replicas: dict) -> None:
        """The ongoing reassignments of a topic as its znode now holds them (empty: none)."""
        if ongoing:
            self._reassigning[name] = ongoing
            self._reassign_replicas[name] = replicas
        else:
            self._reassigning.pop(name, None)
            self._reassign_replicas.pop(name, None)

    def ongoing(self, topic: str) -> dict[int, tuple[list[int], list[int]]]:
        """{p: (adding, removing)} of a topic's ongoing reassignments."""
        return self._reassigning.get(topic, {})

    def reassigning_partitions(self) -> list[tuple[str, int]]:
        return [(name, p) for name, parts in sorted(self._reassigning.items()) for p in sorted(parts)]

    def original_replicas(self, topic: str, p: int, st: PartitionState) -> list[int]:
        adding, _ = self._reassigning.get(topic, {}).get(p, ([], []))
        return [b for b in st.replicas if b not in adding]

    def reassignments(self, wanted: Optional[Iterable[tuple[str, int]]] = None) -> dict:
        """Ongoing reassignments: {(topic, p): (replicas, adding, removing)}; ``wanted``: a set
        of (topic, p) to restrict to, or None for all."""
        out = {}
        for name, parts in self._reassigning.items():
            for p, (adding, removing) in parts.items():
                if wanted is not None and (name, p) not in wanted:
                    continue
                st = self.cache.partition_state(name, p)
                if st is not None:
                    full = self._reassign_replicas.get(name, {}).get(p) or st.replicas
                    out[(name, p)] = (list(full), list(adding), list(removing))
        return out

    # ================================================================== offline replicas
    def replicas_offline(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """This broker lists its own replicas offline in its own view at once; returns the
        partitions that exist here (the report the active controller acts on)."""
        tps = [(t, p) for t, p in partitions if self.cache.partition_state(t, p) is not None]
        if broker_id == self.node_id:
            for t, p in tps:
                self._offline_here.add((t, p))
                # tps holds only partitions the cache knows (both lookups find them)
                self.publish_state(self.cache.get(t), p, self.cache.partition_state(t, p))  # type: ignore[arg-type]
        return tps
