"""What the embedded broker's introspection answers with, the same for every back-end: a
:class:`Record` per record of a partition, a :class:`GroupDescription` (with its
:class:`GroupMember` s) per group; and the decoding they share: batches read from a log or a Fetch
response (:func:`read_range`, :func:`decode_batches`), a classic consumer's assignment
(:func:`decode_assignment`)."""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple, Optional, cast


class Record(NamedTuple):
    """One record as the log holds it (control records excluded)."""
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list          # [(str, bytes | None), ...]


class GroupMember(NamedTuple):
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    assignment: dict       # topic -> sorted partitions (consumer protocol; {} otherwise)


class GroupDescription(NamedTuple):
    group_id: str
    state: str             # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, ...
    protocol_type: str     # "consumer" for consumers
    protocol: str          # the chosen assignor ("range", ...); "" while not Stable
    generation: int        # the classic generation, or the KIP-848 group epoch
    members: list          # [GroupMember, ...]


def decode_assignment(data: bytes | None) -> dict:
    """Kafka's ConsumerProtocolAssignment (version, [(topic, [partition])], user data); {} when
    empty or not in that format."""
    try:
        buf = bytes(data or b"")
        if not buf:
            return {}
        pos = 2
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            topic = buf[pos:pos + ln].decode()
            pos += ln
            (np_,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            parts = list(struct.unpack_from(">%di" % max(np_, 0), buf, pos))
            pos += 4 * max(np_, 0)
            out.setdefault(topic, []).extend(parts)
        return {t: sorted(ps) for t, ps in out.items()}
    except (struct.error, UnicodeDecodeError):
        return {}


def decode_batches(data: bytes, start: int) -> tuple[list[Record], int]:
    """Records of the whole batches in ``data`` at or above ``start``; and the offset after the
    last whole batch (a trailing partial batch is left for the next read, as clients do)."""
    from ..protocol.records import HEADER_SIZE, decode_records, parse_header

    out: list[Record] = []
    nxt = start
    mv = memoryview(bytes(data))
    pos = 0
    while len(mv) - pos >= HEADER_SIZE:
        h = parse_header(mv, pos)
        if pos + h.size > len(mv):
            break
        if not h.is_control:
            for r in decode_records(mv[pos:pos + h.size]):
                # a decoded record's offset and timestamp are always set (protocol.records types
                # them Optional for the records a client builds)
                offset, timestamp = cast(int, r.offset), cast(int, r.timestamp)
                if offset >= start:
                    out.append(Record(offset, timestamp, r.key, r.value, list(r.headers)))
        nxt = max(nxt, h.next_offset)
        pos += h.size
    return out, nxt



def read_range(start: int, end: int, read: Callable[[int], bytes]) -> list[Record]:
    """The records from ``start`` up to ``end`` (the high watermark), ``read(offset)`` giving the
    bytes of whole batches from there (in-process: the log; subprocess: Fetch)."""
    out: list[Record] = []
    offset = start
    while offset < end:
        data = read(offset)
        if not data:
            break
        recs, nxt = decode_batches(data, offset)
        out.extend(recs)
        if nxt <= offset:
            break
        offset = nxt
    return out


