"""``__share_group_state`` records in Kafka's layout (share-coordinator ShareSnapshotKey/Value,
ShareUpdateKey/Value, version 0).

Key: int16 record type (0 ShareSnapshot, 1 ShareUpdate), then GroupId (int16-length string),
TopicId (16 bytes), Partition (int32): not flexible.  Value: int16 version 0, then a flexible
struct: ShareSnapshotValue = SnapshotEpoch, StateEpoch, LeaderEpoch (int32), StartOffset,
CreateTimestamp, WriteTimestamp (int64), StateBatches (compact array of FirstOffset, LastOffset
int64, DeliveryState int8, DeliveryCount int16, each with empty tagged fields), tagged field 0
DeliveryCompleteCount (int32, omitted at its default -1).  ShareUpdateValue = SnapshotEpoch,
LeaderEpoch, StartOffset, StateBatches, the same tagged field.
"""
from __future__ import annotations

import base64
import struct
from typing import Sequence

from ...protocol.primitives import I16 as _H, I32 as _I, read_uvarint, skip_tagged_fields, write_uvarint
from ..group.offsets import java_string_hash

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT, UPDATE = 0, 1

_BATCH = struct.Struct(">qqbh")
_SNAP_HEAD = struct.Struct(">iiiqqq")
_UPD_HEAD = struct.Struct(">iiq")


def _uv(v: int) -> bytes:
    out = bytearray()
    write_uvarint(out, v)
    return bytes(out)


def uuid_str(topic_id: bytes) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(bytes(topic_id)).rstrip(b"=").decode()


def coordinator_key(group_id: str, topic_id: bytes, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey(): what FindCoordinator key type 2 carries."""
    return "%s:%s:%d" % (group_id, uuid_str(topic_id), partition)


def partition_for(group_id: str, topic_id: bytes, partition: int, num_partitions: int) -> int:
    h = java_string_hash(coordinator_key(group_id, topic_id, partition))
    h = 0 if h == -(1 << 31) else abs(h)   # Kafka's Utils.abs
    return h % num_partitions


def key(kind: int, group_id: str, topic_id: bytes, partition: int) -> bytes:
    g = group_id.encode("utf-8")
    return _H.pack(kind) + _H.pack(len(g)) + g + bytes(topic_id) + _I.pack(partition)


def parse_key(buf: bytes) -> tuple[int, str, bytes, int]:
    (kind,) = _H.unpack_from(buf, 0)
    (n,) = _H.unpack_from(buf, 2)
    g = bytes(buf[4:4 + n]).decode("utf-8")
    pos = 4 + n
    tid = bytes(buf[pos:pos + 16])
    (p,) = _I.unpack_from(buf, pos + 16)
    return kind, g, tid, p


def _batches(batches: Sequence[tuple]) -> bytes:
    out = bytearray(_uv(len(batches) + 1))
    for first, last, state, count in batches:
        out += _BATCH.pack(first, last, state, count)
        out += b"\x00"   # no tagged fields
    return bytes(out)


def _tags(delivery_complete_count: int) -> bytes:
    if delivery_complete_count == -1:
        return b"\x00"
    return b"\x01" + _uv(0) + _uv(4) + _I.pack(delivery_complete_count)


def snapshot_value(snapshot_epoch: int, state_epoch: int, leader_epoch: int, start_offset: int, create_ts: int,
                   write_ts: int, batches: Sequence[tuple], delivery_complete_count: int = -1) -> bytes:
    return (_H.pack(0) + _SNAP_HEAD.pack(snapshot_epoch, state_epoch, leader_epoch, start_offset, create_ts, write_ts)
            + _batches(batches) + _tags(delivery_complete_count))


def _read_batches(buf: bytes, pos: int) -> tuple[list, int]:
    n, pos = read_uvarint(buf, pos)
    out = []
    for _ in range(n - 1 if n else 0):
        out.append(_BATCH.unpack_from(buf, pos))
        pos += _BATCH.size
        pos = skip_tagged_fields(buf, pos)
    return out, pos


def _read_tags(buf: bytes, pos: int) -> int:
    dcc = -1
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if tag == 0 and size == 4:
            (dcc,) = _I.unpack_from(buf, pos)
        pos += size
    return dcc


def parse_value(kind: int, buf: bytes) -> dict:
    pos = 2   # the value version (0)
    if kind == SNAPSHOT:
        se, st, le, so, cts, wts = _SNAP_HEAD.unpack_from(buf, pos)
        pos += _SNAP_HEAD.size
        batches, pos = _read_batches(buf, pos)
        return {"snapshot_epoch": se, "state_epoch": st, "leader_epoch": le, "start_offset": so,
                "create_timestamp": cts, "write_timestamp": wts, "state_batches": batches,
                "delivery_complete_count": _read_tags(buf, pos)}
    se, le, so = _UPD_HEAD.unpack_from(buf, pos)
    pos += _UPD_HEAD.size
    batches, pos = _read_batches(buf, pos)
    return {"snapshot_epoch": se, "leader_epoch": le, "start_offset": so, "state_batches": batches,
            "delivery_complete_count": _read_tags(buf, pos)}
