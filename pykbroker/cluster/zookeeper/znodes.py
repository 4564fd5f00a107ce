"""``ZnodeStore``: reading Kafka's pre-KRaft znode layout into pykbroker's values.

cluster/zk.py holds the layout itself (paths, JSON, ``ZkSession``); this module holds the reads
every role makes of it: one znode or none, many znodes pipelined in one round trip, a broker's
registration, a topic (assignment, config overrides, partition states) and the znodes of a
topic, leaf first, for its deletion.

Owns no state: ZooKeeper is the state; the store only reads it through the session it is given.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Optional

import trio

from ...config import ConfigError, validate_topic_configs
from .. import zk as Z
from ..metadata import TopicInfo, is_internal
from ..metadata_cache import BrokerRegistration, MetadataCache, PartitionState

if TYPE_CHECKING:
    from .events import EventTask

log = logging.getLogger("pykbroker.controller")


def reassignments_of(data: bytes) -> tuple[dict[int, tuple[list[int], list[int]]], dict[int, list[int]]]:
    """The ongoing reassignments a topic znode holds ({p: (adding, removing)}) and the full
    replica sets of those partitions, read from the same znode (empty when none)."""
    ongoing = Z.decode_reassignments(data)
    if not ongoing:
        return {}, {}
    assignment = Z.decode_assignment(data)[1]
    return ongoing, {p: assignment.get(p, []) for p in ongoing}


def parse_configs(name: str, data: Optional[bytes]) -> dict:
    """A topic's stored config overrides, parsed; an invalid one is logged and ignored."""
    overrides = {}
    for k, v in Z.decode_topic_config(data).items():
        try:
            overrides.update(validate_topic_configs({k: v}))
        except ConfigError as e:
            log.warning("ignoring stored config of topic %s: %s", name, e)
    return overrides


class ZnodeStore:
    def __init__(self, zk: Z.ZkSession) -> None:
        self.zk = zk

    async def get_or_none(self, path: str) -> tuple[Optional[bytes], Any]:
        from kazoo.exceptions import NoNodeError
        try:
            return await self.zk.call("get", path)
        except NoNodeError:
            return None, None

    async def get_many(self, paths: list[str]) -> list:
        """``get`` of many znodes pipelined in one worker thread (kazoo's async calls): one
        round trip's latency for all of them, not one each; (None, None) for a missing one."""
        from kazoo.exceptions import NoNodeError
        client = self.zk.client

        def run() -> list:
            pending = [client.get_async(path) for path in paths]
            out = []
            for a in pending:
                try:
                    out.append(a.get())
                except NoNodeError:
                    out.append((None, None))
            return out
        from kazoo.exceptions import ConnectionLoss
        while paths:
            try:
                return await self.zk.run(run)
            except ConnectionLoss:   # reads: redone once reconnected, as ZkSession.call does
                await trio.sleep(0.1)
        return []

    async def exists(self, path: str) -> bool:
        return (await self.get_or_none(path))[1] is not None

    async def read_broker(self, broker_id: int) -> Optional[BrokerRegistration]:
        data, _ = await self.get_or_none(Z.broker_path(broker_id))
        if data is None:
            return None
        try:
            return Z.decode_broker(broker_id, data)
        except (ValueError, KeyError) as e:
            log.warning("unreadable registration of broker %d: %s", broker_id, e)
            return None

    async def read_topic(self, name: str, only: Optional[Iterable[int]] = None
                         ) -> tuple[Optional[TopicInfo], dict[int, PartitionState], Optional[bytes]]:
        """A topic's assignment, config and partition states (``only``: these partitions):
        ``(info, states, topic znode's data)``; ``(None, {}, None)`` when there is none."""
        data, _ = await self.get_or_none(Z.topic_path(name))
        if data is None:
            return None, {}, None
        topic_id, assignment = Z.decode_assignment(data)
        if topic_id is None:
            log.warning("topic %s has no topic id in ZooKeeper; ignored", name)
            return None, {}, None
        cfg_data, _ = await self.get_or_none(Z.config_path(name))
        info = TopicInfo(name=name, topic_id=topic_id, num_partitions=len(assignment),
                         replica_assignment=assignment, configs=parse_configs(name, cfg_data),
                         internal=is_internal(name))
        states = {}
        wanted = [(p, r) for p, r in sorted(assignment.items()) if only is None or p in only]
        got = await self.get_many([Z.state_path(name, p) for p, _ in wanted])
        for (p, replicas), (sdata, stat) in zip(wanted, got):
            if sdata is None:
                # assignment written without states (not by pykbroker): the first replica leads
                states[p] = PartitionState.initial(replicas)
            else:
                states[p] = Z.decode_state(sdata, stat.version, replicas)[0]
        return info, states, data

    async def topic_znodes_leaf_first(self, name: str) -> list[str]:
        """The znodes of a topic that exist, leaf first (a transaction deletes them in this
        order): partition states, partitions, the partitions folder, the topic, its config."""
        from kazoo.exceptions import NoNodeError
        out = []
        children = []
        try:
            children = await self.zk.call("get_children", Z.partitions_path(name))
        except NoNodeError:
            pass
        for c in children:
            if await self.exists(Z.state_path(name, int(c))):
                out.append(Z.state_path(name, int(c)))
            out.append(Z.partition_path(name, int(c)))
        if children or await self.exists(Z.partitions_path(name)):
            out.append(Z.partitions_path(name))
        out.append(Z.topic_path(name))
        if await self.exists(Z.config_path(name)):
            out.append(Z.config_path(name))
        return out


class ZnodeRole:
    """What each role of the ZooKeeper controller (listener, active controller, membership,
    admin writer) holds: the metadata cache, the znode store and its session, and the event
    task that runs the watch callbacks one at a time."""

    def __init__(self, cache: MetadataCache, store: ZnodeStore, events: EventTask) -> None:
        self.cache = cache
        self.store = store
        self.zk = store.zk
        self.events = events
