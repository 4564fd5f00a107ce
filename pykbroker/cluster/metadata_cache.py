"""``MetadataCache``: this broker's read-only view of the cluster metadata (Kafka's
KRaftMetadataCache / ZK-era MetadataCache): topics, per-partition state, registered brokers,
controller id and cluster id.

Every handler that needs leadership, brokers or topics reads this one object; nothing computes a
leader by itself.  Nobody but the controller's event stream changes it: the only mutators are
``apply`` (a batch of records) and the creation staging below, and only a ``Controller``
(cluster/controller.py) calls them.

Events: KRaft-like metadata records
-----------------------------------
Changes arrive as batches of records named after Kafka's KRaft metadata records (chosen over the
ZK-era LeaderAndIsr/UpdateMetadata requests because they describe one fact each and replay the
same way from a file, a ZooKeeper watch or a log).  Differences from Kafka's records, kept simple
on purpose:
- ``TopicRecord(name, topic_id, internal)``; ``RemoveTopicRecord(topic_id)``.
- ``PartitionRecord(topic_id, partition, state)`` creates a partition;
  ``PartitionChangeRecord(topic_id, partition, state)`` carries the *whole* new
  ``PartitionState`` (Kafka's carries only the changed fields).
- ``ConfigRecord(topic, configs)``: the topic's whole override set, parsed values (Kafka's has
  one record per key, with deletions as null values).
- ``RegisterBrokerRecord(BrokerRegistration(id, endpoints, rack))`` (a re-registration replaces
  the old one) and ``UnregisterBrokerRecord(broker_id)``; ``ControllerRecord(controller_id)``.
A batch is applied with no await, so a reader never sees half of it.

Staging (topic and partition creation)
--------------------------------------
A new topic (or new partitions) must not be visible to clients before its logs exist, yet the
ReplicaManager needs its configs and partition states to create them.  So the controller first
``stage``s the creation records: ``effective_config`` and ``partition_state`` see staged
topics/partitions, ``topics``/``get``/``by_id``/``leader_of`` do not.  ``publish_staged``
makes them visible (one step), ``discard_staged`` forgets them after a failed creation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple, Optional, Union

from .metadata import TopicInfo


@dataclass(frozen=True)
class PartitionState:
    """What the controller decided for one partition (Kafka's PartitionRegistration)."""
    leader: int                   # -1: no leader (every replica offline)
    leader_epoch: int
    partition_epoch: int          # bumped on every change (compare-and-set version)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @classmethod
    def initial(cls, replicas: Iterable[int]) -> "PartitionState":
        """A new partition: the first replica leads, every replica in sync, epochs 0."""
        replicas = tuple(replicas)
        return cls(leader=replicas[0] if replicas else -1, leader_epoch=0, partition_epoch=0,
                   replicas=replicas, isr=replicas)


class Endpoint(NamedTuple):
    listener: str
    host: str
    port: int


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: Optional[str] = None

    def endpoint(self, listener_name: str = "PLAINTEXT") -> Optional[Endpoint]:
        """The endpoint of ``listener_name``, else the first one (as the broker did before)."""
        for e in self.endpoints:
            if e.listener == listener_name:
                return e
        return self.endpoints[0] if self.endpoints else None


# ---------------------------------------------------------------------- records
@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: bytes
    internal: bool = False


@dataclass(frozen=True)
class PartitionRecord:
    topic_id: bytes
    partition: int
    state: PartitionState


@dataclass(frozen=True)
class PartitionChangeRecord(PartitionRecord):
    """A partition's new (whole) state; applied like a PartitionRecord, never staged."""


@dataclass(frozen=True)
class ConfigRecord:
    topic: str
    configs: dict = field(default_factory=dict)   # the whole override set, parsed values


# One-field records.
RemoveTopicRecord = NamedTuple("RemoveTopicRecord", [("topic_id", bytes)])
RegisterBrokerRecord = NamedTuple("RegisterBrokerRecord", [("registration", BrokerRegistration)])
UnregisterBrokerRecord = NamedTuple("UnregisterBrokerRecord", [("broker_id", int)])
ControllerRecord = NamedTuple("ControllerRecord", [("controller_id", int)])


Record = Union[TopicRecord, RemoveTopicRecord, PartitionRecord, PartitionChangeRecord, ConfigRecord,
               RegisterBrokerRecord, UnregisterBrokerRecord, ControllerRecord]


def _new_topic(r: TopicRecord) -> TopicInfo:
    return TopicInfo(name=r.name, topic_id=r.topic_id, num_partitions=0, replica_assignment={},
                     configs={}, internal=r.internal)


class MetadataCache:
    """Read-only for everyone but the controller (see the module docstring)."""

    def __init__(self, node_id: int, cluster_id: str, effective_topic_config: Callable[[dict], dict]) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.controller_id = -1
        # name -> TopicInfo and topic id -> TopicInfo, published topics only.
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[bytes, TopicInfo] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._brokers: dict[int, BrokerRegistration] = {}
        self._effective = effective_topic_config   # broker defaults + a topic's overrides
        # being created: name -> TopicInfo (new topics), (name, p) -> state (new partitions too)
        self._staged_topics: dict[str, TopicInfo] = {}
        self._staged_states: dict[tuple[str, int], PartitionState] = {}

    # ------------------------------------------------------------------ queries
    def get(self, name: str) -> Optional[TopicInfo]:
        return self.topics.get(name)

    def name_of(self, topic_id: bytes) -> Optional[str]:
        info = self.by_id.get(topic_id)
        return info.name if info else None

    def effective_config(self, name: str) -> dict:
        info = self.topics.get(name) or self._staged_topics.get(name)
        return self._effective(info.configs if info else {})

    def partition_state(self, topic: str, partition: int) -> Optional[PartitionState]:
        tp = (topic, partition)
        st = self._states.get(tp)
        return st if st is not None else self._staged_states.get(tp)

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader id, or -1 (unknown partition or no leader)."""
        st = self._states.get((topic, partition))
        return st.leader if st is not None else -1

    def alive_brokers(self) -> list[BrokerRegistration]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def broker(self, broker_id: int) -> Optional[BrokerRegistration]:
        return self._brokers.get(broker_id)

    def live_endpoints(self, listener_name: str = "PLAINTEXT") -> list[tuple[BrokerRegistration, Endpoint]]:
        """Each registered broker with its endpoint on ``listener_name`` (Metadata,
        DescribeCluster); a broker not listening yet is left out."""
        out = []
        for b in self.alive_brokers():
            e = b.endpoint(listener_name)
            if e is not None:
                out.append((b, e))
        return out

    def is_staged(self, name: str) -> bool:
        return name in self._staged_topics

    def staged_names(self) -> list[str]:
        return list(self._staged_topics)

    def including_staged(self, name: str) -> Optional[TopicInfo]:
        """The topic as it will be once every staged creation is published (a copy when
        partitions are staged), for the controller's validation and persistence."""
        info = self.topics.get(name) or self._staged_topics.get(name)
        if info is None or name in self._staged_topics:
            return info
        extra = {p: list(st.replicas) for (t, p), st in self._staged_states.items() if t == name}
        if not extra:
            return info
        return TopicInfo(info.name, info.topic_id, max(info.num_partitions, max(extra) + 1),
                         {**info.replica_assignment, **extra}, info.configs, info.internal)

    def all_including_staged(self) -> list[TopicInfo]:
        names = set(self.topics) | set(self._staged_topics)
        # every name is published or staged, so none is None
        return [self.including_staged(n) for n in sorted(names)]  # type: ignore[misc]

    # ------------------------------------------------------------------ the controller's side
    def apply(self, records: Iterable[Record]) -> None:
        """Apply a batch of controller records (no await: atomic for readers)."""
        for r in records:
            if not self._apply_cluster(r):
                self._apply_one(r)

    def stage(self, records: Iterable[Record]) -> Optional[TopicInfo]:
        """Creation records whose logs do not exist yet (see the module docstring): a
        TopicRecord, its ConfigRecord and PartitionRecords, or PartitionRecords of a published
        topic.  Returns the staged new topic's TopicInfo, if any."""
        new = None
        for r in records:
            if isinstance(r, TopicRecord):
                new = self._staged_topics[r.name] = _new_topic(r)
            elif isinstance(r, ConfigRecord) and new is not None and r.topic == new.name:
                new.configs = dict(r.configs)
            elif type(r) is PartitionRecord:
                if new is not None and r.topic_id == new.topic_id:
                    new.replica_assignment[r.partition] = list(r.state.replicas)
                    new.num_partitions = max(new.num_partitions, r.partition + 1)
                    name = new.name
                else:
                    name = self.by_id[r.topic_id].name
                self._staged_states[(name, r.partition)] = r.state
            else:
                raise ValueError("cannot stage %r" % (r,))
        return new

    def publish_staged(self, records: Iterable[Record]) -> None:
        """The staged ``records`` (the batch given to ``stage``) become visible, in one step."""
        records = list(records)
        self.discard_staged(records)
        self.apply(records)

    def discard_staged(self, records: Iterable[Record]) -> None:
        records = list(records)
        names = {r.topic_id: r.name for r in records if isinstance(r, TopicRecord)}
        for r in records:
            if isinstance(r, TopicRecord):
                self._staged_topics.pop(r.name, None)
            elif isinstance(r, PartitionRecord):
                name = names.get(r.topic_id) or self.name_of(r.topic_id)
                self._staged_states.pop((name, r.partition), None)  # type: ignore[arg-type]  # None pops nothing

    def _apply_one(self, r: Record) -> None:
        info: Optional[TopicInfo]
        if isinstance(r, TopicRecord):
            info = _new_topic(r)
            self.topics[r.name] = info
            self.by_id[r.topic_id] = info
        elif isinstance(r, PartitionRecord):     # PartitionChangeRecord too
            info = self.by_id[r.topic_id]
            info.replica_assignment[r.partition] = list(r.state.replicas)
            info.num_partitions = max(info.num_partitions, r.partition + 1)
            self._states[(info.name, r.partition)] = r.state
        elif isinstance(r, ConfigRecord):
            info = self.topics.get(r.topic)
            if info is not None:
                info.configs = dict(r.configs)
        elif isinstance(r, RemoveTopicRecord):
            info = self.by_id.pop(r.topic_id, None)
            if info is not None:
                self.topics.pop(info.name, None)
                for p in range(info.num_partitions):
                    self._states.pop((info.name, p), None)
        else:
            raise ValueError("not a metadata record: %r" % (r,))

    def _apply_cluster(self, r: Record) -> bool:
        if isinstance(r, RegisterBrokerRecord):
            self._brokers[r.registration.broker_id] = r.registration
        elif isinstance(r, UnregisterBrokerRecord):
            self._brokers.pop(r.broker_id, None)
        elif isinstance(r, ControllerRecord):
            self.controller_id = r.controller_id
        else:
            return False
        return True
