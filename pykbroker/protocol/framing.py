"""Sans-IO framing: 4-byte big-endian size prefix, request header parsing, response framing.

``FrameBuffer`` follows h11's shape: ``receive_data(bytes)`` then ``next_frame()`` until it
returns ``None``.  The size prefix is checked against ``socket.request.max.bytes`` before any
buffer for the body is kept, so an attacker's 2 GiB prefix costs nothing (Kafka closes such a
connection with InvalidReceiveException; so do we).
"""
from __future__ import annotations

from . import primitives as P
from .primitives import ProtocolError


class FrameTooLarge(ProtocolError):
    pass


class FrameBuffer:
    """A frame's body that arrives in many reads (a 1 MB Produce comes in 64 KB pieces) is kept
    as the list of those pieces and joined once when complete: appending each piece to one
    growing buffer and slicing the frame out of it copied the body several times over (a
    flat-out producer's profile showed framing as the broker's largest cost after the
    system calls).  Small frames, and the bytes of the next frame, stay in one bytearray."""

    def __init__(self, max_frame_bytes: int):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need: int | None = None
        self._chunks: list = []   # the pieces of the current body, once it outgrew _buf
        self._have = 0            # their total length

    def receive_data(self, data: bytes) -> None:
        if self._chunks:
            self._chunks.append(data)   # kept as is (os.read's bytes are immutable): no copy
            self._have += len(data)
        else:
            self._buf += data

    def next_frame(self) -> bytes | None:
        if self._need is None:
            if len(self._buf) < 4:
                return None
            (n,) = P.I32.unpack_from(self._buf, 0)
            if n < 0 or n > self.max_frame_bytes:
                raise FrameTooLarge("frame of %d bytes exceeds socket.request.max.bytes=%d"
                                    % (n, self.max_frame_bytes))
            del self._buf[:4]
            self._need = n
        need = self._need
        if self._chunks:
            if self._have < need:
                return None
            over = self._have - need
            if over:   # the last piece also holds the start of the next frame
                last = self._chunks[-1]
                self._chunks[-1] = last[:len(last) - over]
                self._buf = bytearray(last[len(last) - over:])
            frame = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            self._need = None
            return frame
        if len(self._buf) < need:
            if len(self._buf) >= 65536:
                # a large body is on its way: collect its pieces from here on
                self._chunks = [bytes(self._buf)]
                self._have = len(self._buf)
                self._buf = bytearray()
            return None
        with memoryview(self._buf) as mv:
            frame = bytes(mv[:need])   # one copy (a slice of the bytearray would be two)
        del self._buf[:need]
        self._need = None
        return frame

    @property
    def pending(self) -> int:
        return len(self._buf) + self._have


class RequestHeader:
    # A plain slotted class rather than a dataclass: the same fields, without generating and
    # exec'ing the dataclass methods at import (start-up time).
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "body_offset")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                 body_offset: int):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body_offset = body_offset

    def _fields(self) -> tuple:
        return (self.api_key, self.api_version, self.correlation_id, self.client_id, self.body_offset)

    def __eq__(self, other):
        return self._fields() == other._fields() if type(other) is RequestHeader else NotImplemented

    def __repr__(self):
        return ("RequestHeader(api_key=%r, api_version=%r, correlation_id=%r, client_id=%r, body_offset=%r)"
                % self._fields())


def parse_request_header(frame: bytes, flexible: bool) -> RequestHeader:
    """Request header v1 (v2 adds tagged fields when the API version is flexible).

    client_id is always a classic int16-length string, even in header v2, so any broker can
    read an ApiVersions request of any version."""
    try:
        api_key, api_version, corr = P.I16.unpack_from(frame, 0)[0], P.I16.unpack_from(frame, 2)[0], P.I32.unpack_from(frame, 4)[0]
        client_id, pos = P.read_nullable_string(frame, 8)
        if flexible:
            ntag, pos = P.read_uvarint(frame, pos)
            for _ in range(ntag):
                _tag, pos = P.read_uvarint(frame, pos)
                size, pos = P.read_uvarint(frame, pos)
                pos += size
                if pos > len(frame):
                    raise ProtocolError("request header tagged field overruns the frame")
    except ProtocolError:
        raise
    except Exception as e:  # struct.error, IndexError, UnicodeDecodeError
        raise ProtocolError("malformed request header: %s" % e) from None
    return RequestHeader(api_key, api_version, corr, client_id, pos)


def frame_response(correlation_id: int, flexible_header: bool, body_parts: list) -> list:
    """Prefix body parts with the size and response header (v1 = v0 + empty tagged fields)."""
    header = P.I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    size = len(header) + sum(p.length if hasattr(p, "length") else len(p) for p in body_parts)
    first = P.I32.pack(size) + header
    if body_parts and isinstance(body_parts[0], (bytes, bytearray)):
        return [first + body_parts[0]] + body_parts[1:]
    return [first] + body_parts
