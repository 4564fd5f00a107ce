"""``TopicValidator``: Kafka's controller-side checks of new topics and partitions (names,
replication factor, partition counts, manual assignments) and the placement of new replicas,
shared by every controller (cluster/controller.py); only ``registered_brokers`` differs between
them (the cache's live brokers here, ``/brokers/ids`` on ZooKeeper).

Error codes and messages follow Apache Kafka's KRaft controller (ReplicationControlManager,
Topic.validate), so admin clients show the same texts.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from ..config import ConfigError, validate_topic_configs
from ..protocol.errors import ErrorCode, KafkaError
from . import partition_change as PC
from .metadata import CLUSTER_METADATA_TOPIC, TopicInfo, is_internal, new_topic_id, validate_topic_name
from .metadata_cache import MetadataCache

if TYPE_CHECKING:
    from ..config.broker import BrokerConfig


def _unify(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses topics differing only by them.
    return name.replace(".", "_")


class TopicValidator:
    """Kafka's controller-side checks of new topics and partitions (shared by controllers)."""

    def __init__(self, cache: MetadataCache, config: Mapping[str, Any] | BrokerConfig) -> None:
        self.cache = cache
        self.config = config

    def registered_brokers(self) -> set[int]:
        return {b.broker_id for b in self.cache.alive_brokers()}

    def check_new_name(self, name: str) -> None:
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Creation of internal topic %s is prohibited." % CLUSTER_METADATA_TOPIC)
        staged = self.cache.staged_names()
        if name in self.cache.topics or name in staged:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)
        if "." in name or "_" in name:
            u = _unify(name)
            for other in list(self.cache.topics) + staged:
                if other != name and _unify(other) == u:
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     "Topic '%s' collides with existing topic: %s" % (name, other))

    def validate_manual_assignment(self, brokers: list[int], expected_rf: int | None) -> None:
        """Kafka's validateManualPartitionAssignment (cluster/partition_change.py), then the
        replica count against the topic's."""
        error = PC.manual_assignment_error(brokers, self.registered_brokers())
        if error is not None:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
        if expected_rf is not None and len(brokers) != expected_rf:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes a partition with %d replica(s), but "
                             "this is not consistent with previous partitions, which have %d replica(s)."
                             % (len(brokers), expected_rf))

    def place(self, start: int, count: int, rf: int, start_index: int | None = None) -> dict[int, list[int]]:
        """Kafka's rack-unaware placement: partition p's first replica is broker
        ``(p + start_index) % n`` (a random start unless given, so the first partitions of
        different topics do not all lead on one broker); followers come after it at a shift
        that is random too and grows by one every n partitions, so a broker's partitions do
        not all have their followers on the same brokers."""
        brokers = sorted(self.registered_brokers())
        n = len(brokers)
        if rf > n:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Unable to replicate the partition %d time(s): The target replication factor "
                             "of %d cannot be reached because only %d broker(s) are registered or some "
                             "brokers have all their log directories cordoned." % (rf, rf, n))
        first0 = random.randrange(n) if start_index is None else start_index % n
        shift = random.randrange(n)
        out = {}
        for p in range(start, start + count):
            if p > 0 and p % n == 0:
                shift += 1
            first = (p + first0) % n
            replicas = [brokers[first]]
            for j in range(rf - 1):
                replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
            out[p] = replicas
        return out

    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: dict[str, str | None],
                   assignments: Optional[Iterable[tuple[int, list[int]]]] = None) -> tuple[dict, dict[int, list[int]]]:
        """Validate a new topic as Kafka's controller does (in its order) and return the parsed
        config overrides and the replica assignment.  Raises KafkaError."""
        self.check_new_name(name)
        nulls = [k for k, v in (configs or {}).items() if v is None]
        if nulls:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             "Null value not supported for topic configs: %s" % ",".join(nulls))
        try:
            overrides = validate_topic_configs(dict(configs or {}))
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        if assignments:
            if replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                                 "but replication factor was not set to -1.")
            if num_partitions != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                                 "but numPartitions was not set to -1.")
            placed: dict[int, list[int]] = {}
            rf = None
            for p, brokers in assignments:
                if p in placed:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Found multiple manual partition assignments for partition %d" % p)
                self.validate_manual_assignment(list(brokers), rf)
                rf = len(brokers)
                placed[p] = list(brokers)
            for i in range(len(placed)):
                if i not in placed:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "partitions should be a consecutive 0-based integer sequence")
            return overrides, dict(sorted(placed.items()))
        if replication_factor < -1 or replication_factor == 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        if num_partitions < -1 or num_partitions == 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        n = self.config["num.partitions"] if num_partitions == -1 else num_partitions
        rf = self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        return overrides, self.place(0, n, rf)

    def new_topic(self, name: str, num_partitions: int, replication_factor: int,
                  configs: dict[str, str | None], assignments: Optional[Iterable[tuple[int, list[int]]]] = None,
                  internal: bool = False) -> TopicInfo:
        """``plan_topic``, as the topic it describes (a new topic id)."""
        overrides, placement = self.plan_topic(name, num_partitions, replication_factor, configs, assignments)
        return TopicInfo(name=name, topic_id=new_topic_id(), num_partitions=len(placement),
                         replica_assignment=placement, configs=overrides,
                         internal=internal or is_internal(name))

    def plan_partitions(self, info: TopicInfo, new_total: int, assignments: Optional[list[list[int]]]) -> dict[int, list[int]]:
        """Kafka's createPartitions rules; returns the new partitions' placement."""
        name, current = info.name, info.num_partitions
        if new_total == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic already has %d partition(s)." % current)
        if new_total < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "The topic %s currently has %d partition(s); %d would not be an increase."
                             % (name, current, new_total))
        additional = new_total - current
        if assignments is None:
            # new partitions continue the topic's placement from its partition 0 (as Kafka)
            brokers = sorted(self.registered_brokers())
            p0 = info.replica_assignment.get(0)
            first = p0[0] if p0 else None
            start_index = brokers.index(first) if first in brokers else None
            return self.place(current, additional, info.replication_factor, start_index)
        if len(assignments) != additional:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Attempted to add %d additional partition(s), but only %d assignment(s) "
                             "were specified." % (additional, len(assignments)))
        placed = {}
        for i, brokers in enumerate(assignments):
            self.validate_manual_assignment(list(brokers), info.replication_factor)
            placed[current + i] = list(brokers)
        return placed
