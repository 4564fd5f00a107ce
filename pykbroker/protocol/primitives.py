"""Primitive readers for the Kafka wire format (sans-IO, hardened once for every API).

Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``.  ``buf`` is the exact
frame body (a ``bytes`` or ``memoryview``), so reading past its end raises ``struct.error`` /
``IndexError``; the generated codecs turn any such low-level failure into one
:class:`ProtocolError`.  Lengths and counts are checked against the bytes that remain
*before* anything is allocated, so a hostile count can never make the broker allocate
more than the frame it already holds (the frame itself is bounded by
``socket.request.max.bytes``).
"""
from __future__ import annotations

import struct
import uuid as _uuid
from typing import Union


class ProtocolError(Exception):
    """Bytes that do not decode as the message they claim to be."""


I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
F64 = struct.Struct(">d")

ZERO_UUID = bytes(16)

# What the readers take: a frame body, whole or a view of it.
Buf = Union[bytes, bytearray, memoryview]


def read_uvarint(buf: Buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint, at most 5 bytes (Kafka's 32-bit unsigned varint)."""
    b = buf[pos]
    if b < 0x80:
        # one byte: nearly every count, length and tag count on the request path
        return b, pos + 1
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            # Kafka rejects varints longer than 5 bytes for 32-bit values.
            raise ProtocolError("unsigned varint too long")


def write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)   # one byte: nearly every count and length in a response
        return
    if value < 0:
        raise ValueError("negative unsigned varint")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# Signed zig-zag varints appear only inside record batches: records.py reads and writes them.


def skip_tagged_fields(buf: Buf, pos: int) -> int:
    """Past a tagged-field section the reader does not use: a count, then each field's tag,
    size and bytes (KIP-482; unknown tags are skipped, as Kafka's readers do)."""
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def _take(buf: Buf, pos: int, n: int) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise ProtocolError("length %d exceeds the %d remaining bytes" % (n, len(buf) - pos))
    return end


def read_string(buf: Buf, pos: int) -> tuple[str, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise ProtocolError("null string where a string is required")
    end = _take(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: Buf, pos: int) -> tuple[str | None, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = _take(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: Buf, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("null compact string where a string is required")
    end = _take(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: Buf, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise ProtocolError("null bytes where bytes are required")
    end = _take(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _take(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("null compact bytes where bytes are required")
    end = _take(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


# Record sets stay zero-copy views into the frame: Produce validates and copies them once.
def read_records(buf: Buf, pos: int) -> tuple[memoryview | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _take(buf, pos, n)
    return memoryview(buf)[pos:end], end


def read_compact_records(buf: Buf, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return memoryview(buf)[pos:end], end


def read_uuid(buf: Buf, pos: int) -> tuple[bytes, int]:
    end = _take(buf, pos, 16)
    return bytes(buf[pos:end]), end


def read_array_count(buf: Buf, pos: int) -> tuple[int | None, int]:
    """Classic int32 array count; -1 is null.  Each element takes >= 1 byte, so a count
    larger than what remains is malformed (checked before any list is built)."""
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n > len(buf) - pos:
        raise ProtocolError("array count %d exceeds the %d remaining bytes" % (n, len(buf) - pos))
    return (None if n < 0 else n), pos


def read_compact_array_count(buf: Buf, pos: int) -> tuple[int | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    if n > len(buf) - pos:
        raise ProtocolError("array count %d exceeds the %d remaining bytes" % (n, len(buf) - pos))
    return n, pos


def write_string(out: bytearray, s: str | None, compact: bool) -> None:
    if s is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    b = s.encode("utf-8")
    if compact:
        write_uvarint(out, len(b) + 1)
    else:
        out += I16.pack(len(b))
    out += b


def write_bytes(out: bytearray, b: bytes | bytearray | memoryview | None, compact: bool) -> None:
    if b is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    if compact:
        write_uvarint(out, len(b) + 1)
    else:
        out += I32.pack(len(b))
    out += b


def write_array_count(out: bytearray, n: int | None, compact: bool) -> None:
    if n is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
    elif compact:
        write_uvarint(out, n + 1)
    else:
        out += I32.pack(n)


def uuid_to_str(b: bytes) -> str:
    return str(_uuid.UUID(bytes=bytes(b)))
