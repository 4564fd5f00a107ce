"""KIP-848 consumer group state as records on ``__consumer_offsets`` (Apache Kafka's layout).

Kafka persists a consumer group as record kinds whose key starts with an int16 record type (the
key "version"), then the group id (and member id) as non-flexible strings.  Values start with an
int16 value version (0) followed by the flexible (compact, tagged-field) encoding of the value
schema.  The layout below is Apache Kafka 4.4's:

====  ==========================================  =============================================
key   record                                      value (v0)
====  ==========================================  =============================================
3     ConsumerGroupMetadata (group)               group epoch; tag 0: metadata hash (int64)
4     ConsumerGroupPartitionMetadata (group)      subscribed topics (id, name, partitions):
                                                  written by Kafka < 4.1 only; read, never written
5     ConsumerGroupMemberMetadata (group, member) instance id, rack, client id/host, topic
                                                  names, regex, rebalance timeout, assignor
6     ConsumerGroupTargetAssignmentMetadata       assignment epoch; tag 0: assignment timestamp
7     ConsumerGroupTargetAssignmentMember         the member's target partitions
8     ConsumerGroupCurrentMemberAssignment        member epoch, previous epoch, state,
                                                  assigned and pending-revocation partitions
====  ==========================================  =============================================

Since Kafka 4.1 the subscribed topics' metadata is summarised by a hash in the group metadata
record instead of a partition-metadata record; pykbroker does the same, with its own hash
(blake2b over the sorted (name, id, partition count) triples): it only has to detect a change
of the subscribed topics across a restart, and a Kafka coordinator reading it would at worst
recompute the assignment once.
A null value (tombstone) deletes the key.  Readers take the fields they know and ignore unknown
tagged fields, so records written by a newer coordinator still load.  Key types above 8
(share/streams groups, regex resolution) are not ours and are skipped on load.
"""
from __future__ import annotations

import builtins
import hashlib
import struct
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union

from ...protocol.primitives import read_uvarint, write_uvarint

if TYPE_CHECKING:
    from .consumer import CMember

# What the readers accept: a record key or value as read from the log (a slice of a batch).
_Buf = Union[bytes, bytearray, memoryview]
# A (topic id, partition) pair of an assignment; topic ids are 16 raw UUID bytes.
_TP = tuple[bytes, int]

CG_METADATA = 3
CG_PARTITION_METADATA = 4
CG_MEMBER_METADATA = 5
CG_TARGET_METADATA = 6
CG_TARGET_MEMBER = 7
CG_CURRENT_ASSIGNMENT = 8
KEY_TYPES = (CG_METADATA, CG_PARTITION_METADATA, CG_MEMBER_METADATA, CG_TARGET_METADATA,
             CG_TARGET_MEMBER, CG_CURRENT_ASSIGNMENT)
GROUP_KEYS = (CG_METADATA, CG_PARTITION_METADATA, CG_TARGET_METADATA)
MEMBER_KEYS = (CG_MEMBER_METADATA, CG_TARGET_MEMBER, CG_CURRENT_ASSIGNMENT)

# Kafka's MemberState byte values (modern/MemberState.java).
STATE_STABLE = 0
STATE_UNREVOKED_PARTITIONS = 1
STATE_UNRELEASED_PARTITIONS = 2


# -- keys (non-flexible: int16 type + int16-length strings) ------------------------------------
def _s16(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _parse_s16(buf: _Buf, pos: int) -> tuple[str, int]:
    n = struct.unpack_from(">h", buf, pos)[0]
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise ValueError("bad string in key")
    return bytes(buf[pos:pos + n]).decode("utf-8"), pos + n


class GroupRecordKeys:
    """The keys of one group type's records (Kafka's ``*Key`` schemas of consumer, share and
    streams groups, all alike): the int16 record type, the group id, and for the per-member
    records (``member_kinds``) the member id, as int16-length strings."""

    __slots__ = ("member_kinds",)

    def __init__(self, member_kinds: tuple[int, ...]) -> None:
        self.member_kinds = member_kinds

    def key(self, kind: int, group_id: str, member_id: str | None = None) -> bytes:
        out = struct.pack(">h", kind) + _s16(group_id)
        if kind in self.member_kinds:
            out += _s16(member_id or "")
        return out

    def parse_key(self, kind: int, buf: _Buf, pos: int = 2) -> tuple[int, str, str | None]:
        """(kind, group id, member id or None) of a key whose int16 type was already read."""
        gid, pos = _parse_s16(buf, pos)
        mid: str | None = None
        if kind in self.member_kinds:
            mid, pos = _parse_s16(buf, pos)
        return kind, gid, mid


_KEYS = GroupRecordKeys(MEMBER_KEYS)
key = _KEYS.key
parse_key = _KEYS.parse_key


# -- flexible values ---------------------------------------------------------------------------
class _W:
    __slots__ = ("b",)

    def __init__(self) -> None:
        self.b = bytearray(struct.pack(">h", 0))  # value version 0

    def i8(self, v: int) -> None:
        self.b += struct.pack(">b", v)

    def i32(self, v: int) -> None:
        self.b += struct.pack(">i", v)

    def str(self, s: builtins.str | None) -> None:  # compact (nullable) string
        if s is None:
            self.b.append(0)
            return
        e = s.encode("utf-8")
        write_uvarint(self.b, len(e) + 1)
        self.b += e

    def count(self, n: int) -> None:
        write_uvarint(self.b, n + 1)

    def strs(self, items: list[builtins.str]) -> None:
        """A compact array of compact strings (a member's subscribed topic names)."""
        self.count(len(items))
        for s in items:
            self.str(s)

    def tags(self) -> None:
        self.b.append(0)  # no tagged fields

    def topic_partitions(self, tps: Iterable[_TP]) -> None:
        """[]TopicPartitions from a set of (topic id, partition)."""
        by: dict[bytes, list[int]] = {}
        for tid, p in tps:
            by.setdefault(tid, []).append(p)
        self.count(len(by))
        for tid in sorted(by):
            self.b += tid
            ps = sorted(by[tid])
            self.count(len(ps))
            for p in ps:
                self.i32(p)
            self.tags()

    def done(self, tagged: Mapping[int, bytes | None] | None = None) -> bytes:
        """Close the struct with its tagged fields (tag -> bytes; zero/absent ones omitted)."""
        present = {t: v for t, v in (tagged or {}).items() if v is not None}
        write_uvarint(self.b, len(present))
        for t in sorted(present):
            write_uvarint(self.b, t)
            write_uvarint(self.b, len(present[t]))
            self.b += present[t]
        return bytes(self.b)


class _R:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: _Buf) -> None:
        self.buf = memoryview(buf)
        v = struct.unpack_from(">h", self.buf, 0)[0]
        if v != 0:
            # Every KIP-848 value schema so far has only version 0 (evolved by tagged fields).
            raise ValueError("unknown value version %d" % v)
        self.pos = 2

    def i8(self) -> int:
        v = struct.unpack_from(">b", self.buf, self.pos)[0]
        self.pos += 1
        return v

    def i32(self) -> int:
        v = struct.unpack_from(">i", self.buf, self.pos)[0]
        self.pos += 4
        return v

    def uv(self) -> int:
        v, self.pos = read_uvarint(self.buf, self.pos)
        return v

    def str(self) -> builtins.str | None:
        n = self.uv()
        if n == 0:
            return None
        n -= 1
        if self.pos + n > len(self.buf):
            raise ValueError("string past the end")
        v = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return v

    def count(self) -> int:
        n = self.uv() - 1
        if n > len(self.buf) - self.pos:
            raise ValueError("array count past the end")
        return max(n, 0)

    def uuid(self) -> bytes:
        if self.pos + 16 > len(self.buf):
            raise ValueError("uuid past the end")
        v = bytes(self.buf[self.pos:self.pos + 16])
        self.pos += 16
        return v

    def skip_tags(self) -> dict[int, bytes]:
        """Read a tagged-field section: tag -> raw bytes."""
        out: dict[int, bytes] = {}
        for _ in range(self.uv()):
            t = self.uv()
            n = self.uv()
            if self.pos + n > len(self.buf):
                raise ValueError("tagged field past the end")
            out[t] = bytes(self.buf[self.pos:self.pos + n])
            self.pos += n
        return out

    def topic_partitions(self) -> set[_TP]:
        out: set[_TP] = set()
        for _ in range(self.count()):
            tid = self.uuid()
            for _ in range(self.count()):
                out.add((tid, self.i32()))
            self.skip_tags()
        return out


def _i64_tag(v: int) -> bytes | None:
    return struct.pack(">q", v) if v else None


def _tag_i64(tags: Mapping[int, bytes], tag: int) -> int:
    raw = tags.get(tag)
    return struct.unpack(">q", raw)[0] if raw is not None and len(raw) == 8 else 0


def _epoch_value(epoch: int, tag0: int) -> bytes:
    """The shape of the group and target metadata values: an int32 epoch, an int64 in tag 0."""
    w = _W()
    w.i32(epoch)
    return w.done({0: _i64_tag(tag0)})


def _parse_epoch_value(buf: _Buf) -> tuple[int, int]:
    r = _R(buf)
    epoch = r.i32()
    return epoch, _tag_i64(r.skip_tags(), 0)


def group_metadata_value(epoch: int, metadata_hash: int = 0) -> bytes:
    return _epoch_value(epoch, metadata_hash)


def parse_group_metadata_value(buf: _Buf) -> tuple[int, int]:
    """(group epoch, metadata hash or 0)."""
    return _parse_epoch_value(buf)


def parse_partition_metadata_value(buf: _Buf) -> list[tuple[str | None, bytes, int]]:
    """Kafka < 4.1's subscription metadata: [(name, topic id, partition count)]."""
    r = _R(buf)
    out: list[tuple[str | None, bytes, int]] = []
    for _ in range(r.count()):
        tid = r.uuid()
        name = r.str()
        n = r.i32()
        for _ in range(r.count()):
            r.i32()
            for _ in range(r.count()):
                r.str()
            r.skip_tags()
        r.skip_tags()
        out.append((name, tid, n))
    return out


def metadata_hash(topics: Iterable[tuple[str, bytes, int]]) -> int:
    """pykbroker's summary of the subscribed topics ((name, id, partitions) triples), as a
    signed int64; 0 for no topics (as Kafka stores no hash for an empty subscription)."""
    ordered = sorted(topics)
    if not ordered:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name, tid, n in ordered:
        h.update(name.encode("utf-8") + b"\0" + bytes(tid) + struct.pack(">i", n))
    v = struct.unpack(">q", h.digest())[0]
    return v or 1


def member_metadata_value(m: CMember) -> bytes:
    w = _W()
    w.str(m.instance_id)
    w.str(m.rack_id)
    w.str(m.client_id or "")
    w.str(m.client_host or "")
    w.strs(m.topics)
    w.str(m.regex)
    w.i32(m.rebalance_timeout_ms)
    w.str(m.assignor)
    return w.done()


def parse_member_metadata_value(buf: _Buf) -> dict[str, Any]:
    r = _R(buf)
    d: dict[str, Any] = {"instance_id": r.str(), "rack_id": r.str(), "client_id": r.str() or "",
                         "client_host": r.str() or ""}
    d["topics"] = [r.str() for _ in range(r.count())]
    d["regex"] = r.str()
    d["rebalance_timeout_ms"] = r.i32()
    d["assignor"] = r.str()
    return d


def target_metadata_value(assignment_epoch: int, timestamp_ms: int = 0) -> bytes:
    return _epoch_value(assignment_epoch, timestamp_ms)


def parse_target_metadata_value(buf: _Buf) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp or 0)."""
    return _parse_epoch_value(buf)


def target_member_value(tps: Iterable[_TP]) -> bytes:
    w = _W()
    w.topic_partitions(tps)
    return w.done()


def parse_target_member_value(buf: _Buf) -> set[_TP]:
    return _R(buf).topic_partitions()


def current_assignment_value(epoch: int, prev_epoch: int, state: int, assigned: Iterable[_TP],
                             revoking: Iterable[_TP]) -> bytes:
    w = _W()
    w.i32(epoch)
    w.i32(prev_epoch)
    w.i8(state)
    w.topic_partitions(assigned)
    w.topic_partitions(revoking)
    return w.done()


def parse_current_assignment_value(buf: _Buf) -> dict[str, Any]:
    r = _R(buf)
    return {"epoch": r.i32(), "prev_epoch": r.i32(), "state": r.i8(),
            "assigned": r.topic_partitions(), "revoking": r.topic_partitions()}
