"""Committed offsets and group metadata as records on the internal topic ``__consumer_offsets``.

Layout (as Apache Kafka lays it out, so the topic's content is meaningful to Kafka tooling):

- a group lives in partition ``abs(javaStringHashCode(group_id)) % offsets.topic.num.partitions``;
- record keys start with an int16 key version: 1 = OffsetCommitKey (group, topic, partition),
  2 = GroupMetadataKey (group); values start with an int16 value version.  pykbroker writes
  OffsetCommitValue v3 (offset, leader epoch, metadata, commit timestamp) — v1 when the commit
  carried an explicit retention (OffsetCommit v2-4) — and GroupMetadataValue v3 (protocol type,
  generation, protocol, leader, state timestamp, members with subscription and assignment); it
  reads every older version too.  A null value (tombstone) deletes the key; the topic is
  compacted, so the latest record per key is the state.
- each OffsetCommit request is one batch (all its partitions commit atomically).

Reading back is a straight replay of a partition in offset order, when this broker becomes its
leader (the coordinator runtime loads the shard; a single broker loads every one at start-up).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:   # annotations only (classic.py imports this module)
    import builtins   # _Reader's str()/bytes() methods shadow the builtin names in its body

    from .classic import ClassicGroup

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode: over UTF-16 code units, wrapped to a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


# -- tiny writers/readers for Kafka's non-flexible record schemas ---------------------------------
def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + bytes(b)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: Union[bytes, memoryview]) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _fmt(self, fmt: builtins.str, n: int) -> int:
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return v

    def i16(self) -> int:
        return self._fmt(">h", 2)

    def i32(self) -> int:
        return self._fmt(">i", 4)

    def i64(self) -> int:
        return self._fmt(">q", 8)

    def str(self) -> Optional[builtins.str]:
        n = self.i16()
        if n < 0:
            return None
        v = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return v

    def bytes(self) -> Optional[builtins.bytes]:
        n = self.i32()
        if n < 0:
            return None
        v = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return v


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", OFFSET_COMMIT_KEY_VERSION) + _str(group) + _str(topic) + struct.pack(">i", partition)


def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:
        # v1 is the only version with an explicit expire timestamp (OffsetCommit v2-4 retention).
        return (struct.pack(">hq", 1, om.offset) + _str(om.metadata)
                + struct.pack(">qq", om.commit_timestamp, om.expire_timestamp))
    return (struct.pack(">hqi", 3, om.offset, om.leader_epoch) + _str(om.metadata)
            + struct.pack(">q", om.commit_timestamp))


def group_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_METADATA_KEY_VERSION) + _str(group)


def group_value(g: ClassicGroup, assignment: dict | None = None) -> bytes:
    """GroupMetadataValue v3 of a classic group (``assignment``: member id -> bytes, replacing
    the members' current assignments, for SyncGroup's record of the leader's assignment)."""
    out = [struct.pack(">h", 3), _str(g.protocol_type or ""), struct.pack(">i", g.generation),
           _str(g.protocol_name), _str(g.leader), struct.pack(">q", g.state_timestamp),
           struct.pack(">i", len(g.members))]
    for m in g.members.values():
        out += [_str(m.member_id), _str(m.group_instance_id), _str(m.client_id), _str(m.client_host),
                struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms),
                _bytes(m.metadata(g.protocol_name)),
                _bytes(m.assignment if assignment is None else assignment.get(m.member_id, b""))]
    return b"".join(out)


def parse_key(key: bytes) -> tuple:
    """('offset', group, topic, partition) | ('group', group) | ('consumer', record type, group,
    member or None) for KIP-848 consumer group records (types 3-8, see :mod:`.consumer_records`)
    | ('share', record type, group, member or None) for KIP-932 share group records (types 10-15,
    :mod:`.share_records`) | (None,) for other record kinds (streams groups, regex resolution)."""
    r = _Reader(key)
    v = r.i16()
    if v in (0, 1):
        return ("offset", r.str(), r.str(), r.i32())
    if v == 2:
        return ("group", r.str())
    if 3 <= v <= 8:
        from .consumer_records import parse_key as cg_parse_key
        return ("consumer",) + cg_parse_key(v, key)
    if 10 <= v <= 15:
        from .share_records import parse_key as sg_parse_key
        return ("share",) + sg_parse_key(v, key)
    if 17 <= v <= 23:
        from .streams_records import parse_key as sg_parse_key
        return ("streams",) + sg_parse_key(v, key)
    return (None,)


def parse_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _Reader(value)
    v = r.i16()
    if v >= 4:
        raise ValueError("flexible OffsetCommitValue v%d not supported" % v)
    offset = r.i64()
    epoch = r.i32() if v == 3 else -1
    meta = r.str() or ""
    ts = r.i64()
    expire = r.i64() if v == 1 else None
    return OffsetAndMetadata(offset, epoch, meta, ts, expire if expire is not None and expire >= 0 else None)


@dataclass
class LoadedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class LoadedGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: list


def parse_group_value(value: bytes) -> LoadedGroup:
    r = _Reader(value)
    v = r.i16()
    if v >= 4:
        raise ValueError("flexible GroupMetadataValue v%d not supported" % v)
    ptype = r.str() or ""
    gen = r.i32()
    proto = r.str()
    leader = r.str()
    ts = r.i64() if v >= 2 else -1
    members = []
    for _ in range(r.i32()):
        mid = r.str()
        inst = r.str() if v >= 3 else None
        cid = r.str()
        host = r.str()
        session = r.i32()
        rebalance = session
        if v >= 1:
            rebalance, session = session, r.i32()
        sub = r.bytes() or b""
        asg = r.bytes() or b""
        members.append(LoadedMember(mid, inst, cid or "", host or "", rebalance, session, sub, asg))  # type: ignore[arg-type]  # a member id is never null
    return LoadedGroup(ptype, gen, proto, leader, ts, members)
