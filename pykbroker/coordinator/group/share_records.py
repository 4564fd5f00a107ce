"""KIP-932 share group state as records on ``__consumer_offsets`` (Apache Kafka 4.4's layout).

Keys: int16 record type, then the group id (and member id) as non-flexible strings, like the
KIP-848 records (:mod:`.consumer_records`).  Values: int16 version 0, then the flexible encoding:

====  ==========================================  =============================================
key   record                                      value (v0)
====  ==========================================  =============================================
10    ShareGroupMemberMetadata (group, member)    rack, client id/host, subscribed topic names
11    ShareGroupMetadata (group)                  group epoch, metadata hash (int64, not tagged)
12    ShareGroupTargetAssignmentMetadata (group)  assignment epoch; tag 0: assignment timestamp
13    ShareGroupTargetAssignmentMember            the member's target partitions
14    ShareGroupCurrentMemberAssignment           member epoch, previous epoch, state (0),
                                                  assigned partitions
15    ShareGroupStatePartitionMetadata (group)    initializing / initialized / deleting topics:
                                                  written by Kafka's coordinator, read and skipped
====  ==========================================  =============================================
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Iterable

from .consumer_records import _R, _W, GroupRecordKeys
# The target assignment values have the consumer group's layout (Kafka's share group schemas
# copy it: assignment epoch with the timestamp in tag 0; the member's topic partitions).
from .consumer_records import parse_target_member_value, target_member_value, target_metadata_value  # noqa: F401

if TYPE_CHECKING:   # annotations only (share.py imports this module)
    from .share import SMember

SG_MEMBER_METADATA = 10
SG_METADATA = 11
SG_TARGET_METADATA = 12
SG_TARGET_MEMBER = 13
SG_CURRENT_ASSIGNMENT = 14
SG_STATE_PARTITION_METADATA = 15
MEMBER_KEYS = (SG_MEMBER_METADATA, SG_TARGET_MEMBER, SG_CURRENT_ASSIGNMENT)
KEY_TYPES = (SG_MEMBER_METADATA, SG_METADATA, SG_TARGET_METADATA, SG_TARGET_MEMBER, SG_CURRENT_ASSIGNMENT,
             SG_STATE_PARTITION_METADATA)


_KEYS = GroupRecordKeys(MEMBER_KEYS)
key = _KEYS.key
parse_key = _KEYS.parse_key


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    w = _W()
    w.i32(epoch)
    w.b += struct.pack(">q", metadata_hash)
    return w.done()


def parse_group_metadata_value(buf: bytes) -> tuple[int, int]:
    r = _R(buf)
    epoch = r.i32()
    h = struct.unpack_from(">q", r.buf, r.pos)[0]
    return epoch, h


def member_metadata_value(m: SMember) -> bytes:
    w = _W()
    w.str(m.rack_id)
    w.str(m.client_id or "")
    w.str(m.client_host or "")
    w.strs(m.topics)
    return w.done()


def parse_member_metadata_value(buf: bytes) -> dict:
    r = _R(buf)
    d: dict[str, Any] = {"rack_id": r.str(), "client_id": r.str() or "", "client_host": r.str() or ""}
    d["topics"] = [r.str() for _ in range(r.count())]
    return d


def parse_target_metadata_value(buf: bytes) -> int:
    return _R(buf).i32()


def current_assignment_value(epoch: int, prev_epoch: int, assigned: Iterable[tuple[bytes, int]]) -> bytes:
    w = _W()
    w.i32(epoch)
    w.i32(prev_epoch)
    w.i8(0)   # MemberState.STABLE: share group members never hold partitions to revoke
    w.topic_partitions(assigned)
    return w.done()


def parse_current_assignment_value(buf: bytes) -> dict:
    r = _R(buf)
    return {"epoch": r.i32(), "prev_epoch": r.i32(), "state": r.i8(), "assigned": r.topic_partitions()}
