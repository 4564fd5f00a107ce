"""Topic vocabulary shared by the controller, the metadata cache and the handlers: ``TopicInfo``,
topic ids (Kafka's Uuid rendering), topic-name validation (Kafka's Topic.validate) and limits.

Who owns what: the ``Controller`` (cluster/controller.py) is the only writer of topic metadata
and keeps it durable; the ``MetadataCache`` (cluster/metadata_cache.py) is every reader's view of
it, changed only by the controller's records.
"""
from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ..protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)
# Kafka's internal topics (Topic.isInternal in 4.x); each is created by its coordinator (group,
# transaction, share).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# KRaft's own metadata log is never a user topic.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
# Kafka refuses a single CreateTopics/CreatePartitions asking for more partitions than this
# (QuorumController MAX_RECORDS_PER_USER_OP guard), with POLICY_VIOLATION.
MAX_PARTITIONS_PER_REQUEST = 10000


@dataclass
class TopicInfo:
    name: str
    topic_id: bytes
    num_partitions: int
    replica_assignment: dict[int, list[int]]
    configs: dict[str, Any] = field(default_factory=dict)  # overrides only, parsed values
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        first = self.replica_assignment.get(0)
        return len(first) if first else 1

    def partition_ids(self) -> list[int]:
        return list(range(self.num_partitions))


def topic_id_str(tid: bytes) -> str:
    """Kafka's Uuid.toString: url-safe base64 without padding."""
    return base64.urlsafe_b64encode(tid).decode().rstrip("=")


def topic_id_from_str(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def new_topic_id() -> bytes:
    # Kafka's Uuid.randomUuid never returns the zero id, the metadata topic's id (1) nor an id
    # whose string form starts with '-' (it would look like a command-line flag).
    while True:
        tid = os.urandom(16)
        if tid == ZERO_UUID or tid == bytes(15) + b"\x01" or topic_id_str(tid).startswith("-"):
            continue
        return tid


def validate_topic_name(name: Optional[str]) -> None:
    """Kafka's Topic.validate, with Apache Kafka 4.4's messages."""
    if name is None or name == "":
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '%s' is not allowed" % name)
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         "Topic name is invalid: the length of '%s' is longer than the max allowed length %d"
                         % (name, MAX_NAME_LENGTH))
    if not _LEGAL.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         "Topic name is invalid: '%s' contains one or more characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'" % name)


def is_valid_topic_name(name: Optional[str]) -> bool:
    try:
        validate_topic_name(name)
        return True
    except KafkaError:
        return False


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def _unify(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses topics differing only by them.
    return name.replace(".", "_")
