"""The metadata records that describe a topic, built the same way by every controller.

A controller publishes a topic to a ``MetadataCache`` as Kafka's KRaft metadata log would
carry it: one ``TopicRecord``, one ``ConfigRecord`` with its overrides, one ``PartitionRecord``
per partition.  The local controller (its JSON file), the ZooKeeper controller (the znodes) and
the in-memory test cluster all build these records here, so a topic looks the same in every
broker's cache whichever controller made it.

``render_configs`` turns parsed overrides back into the strings Kafka shows and stores (the
JSON file, ``/config/topics/<t>``, log lines).
"""
from __future__ import annotations

from typing import Optional

from ..config import TOPIC_CONFIGS
from .metadata import TopicInfo
from .metadata_cache import ConfigRecord, PartitionRecord, PartitionState, TopicRecord

__all__ = ["topic_records", "new_partition_records", "render_configs"]


def render_configs(configs: dict) -> dict:
    """Parsed topic config overrides as Kafka's strings, sorted by name."""
    return {k: TOPIC_CONFIGS[k].render(v) for k, v in sorted(configs.items())}


def topic_records(info: TopicInfo, states: Optional[dict[int, PartitionState]] = None) -> list:
    """The records of a whole topic; a partition missing from ``states`` is new (its first
    replica leads, every replica in sync, epochs 0)."""
    states = states or {}
    recs = [TopicRecord(info.name, info.topic_id, info.internal), ConfigRecord(info.name, dict(info.configs))]
    for p, replicas in sorted(info.replica_assignment.items()):
        recs.append(PartitionRecord(info.topic_id, p, states.get(p) or PartitionState.initial(replicas)))
    return recs


def new_partition_records(topic_id: bytes, placed: dict[int, list[int]]) -> list:
    """The records of partitions added to an existing topic (CreatePartitions)."""
    return [PartitionRecord(topic_id, p, PartitionState.initial(r)) for p, r in sorted(placed.items())]
