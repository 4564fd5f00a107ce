"""Sans-IO framing: 4-byte big-endian size prefix and request header parsing.  (A response is
framed as it is encoded: ``ApiSpec.encode_framed`` in codec.py.)

``FrameBuffer`` follows h11's shape: ``receive_data(bytes)`` then ``next_frame()`` until it
returns ``None``.  The size prefix is checked against ``socket.request.max.bytes`` before any
buffer for the body is kept, so an attacker's 2 GiB prefix costs nothing (Kafka closes such a
connection with InvalidReceiveException; so do we).
"""
from __future__ import annotations

import struct

from . import primitives as P
from .primitives import ProtocolError


# api_key, api_version, correlation_id: the fixed start of every request header
_HEADER_START = struct.Struct(">hhi")


class FrameTooLarge(ProtocolError):
    pass


# From this much of a body on, the frame gets its own buffer of its full size (below, a body
# collects in the shared read buffer): 64 KB is one read.  A prefix alone never allocates the
# size it announces (Kafka's NetworkReceive does, which a client can abuse with idle prefixes),
# and a body must have sent a sixteenth of itself first (LARGE_BODY_SHARE): a client that
# announces 100 MB and stops must have sent 6.25 MB, so memory stays within 16x of what it sent.
LARGE_BODY = 65536
LARGE_BODY_SHARE = 4   # need >> 4


class FrameBuffer:
    """A frame is handed out as a ``bytearray`` of its body, which the Produce path validates and
    patches in place (its records are a writable view into it: no private copy).

    A large body (a 1 MB Produce comes in many reads) gets one buffer of its announced size once
    ``LARGE_BODY`` bytes of it (and a sixteenth of it) have arrived; ``read_target()`` then
    gives the free part of it, so the connection reads from the socket straight into the frame
    (``received_into``): one copy from the kernel and no more, where collecting the reads and
    joining them cost two more (a flat-out producer's profile had them at about 30 % of the
    broker's time).  ``receive_data`` (for callers that have bytes in hand) copies into the same
    buffer.  Small frames, and the bytes of the next frame, stay in one shared bytearray."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need: int | None = None
        self._body: bytearray | None = None   # the current large frame, being filled
        self._view: memoryview | None = None  # over _body, for the reads into it
        self._have = 0                        # bytes of _body filled

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        view = self._view   # set with _body, over the whole of it (len(view) == _need)
        if view is None:
            self._buf += data
            return
        mv = memoryview(data)
        take = min(len(mv), len(view) - self._have)
        view[self._have:self._have + take] = mv[:take]
        self._have += take
        if take < len(mv):   # the start of the next frame
            self._buf += mv[take:]

    def read_target(self) -> memoryview | None:
        """The writable rest of a large frame's buffer, for a read straight into it (never past
        the frame's end: the next frame's bytes go through ``receive_data``); else ``None``."""
        if self._view is None:
            return None
        return self._view[self._have:]

    def received_into(self, n: int) -> None:
        """``n`` bytes were read into ``read_target()``."""
        self._have += n

    def next_frame(self) -> bytearray | None:
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
        if self._view is not None:
            if self._have < need:
                return None
            frame = self._body
            self._view.release()
            self._body = self._view = None
            self._have = 0
            self._need = None
            return frame
        if len(self._buf) < need:
            if len(self._buf) >= LARGE_BODY and len(self._buf) >= need >> LARGE_BODY_SHARE:
                # a large body is on its way: its own buffer from here on
                self._body = bytearray(need)
                self._view = memoryview(self._body)
                self._have = len(self._buf)
                self._view[:self._have] = self._buf
                self._buf = bytearray()
            return None
        if len(self._buf) == need:
            # exactly this frame buffered (one request per read: the common case): the buffer
            # becomes the frame, no copy
            frame = self._buf
            self._buf = bytearray()
        else:
            frame = self._buf[:need]   # one copy
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
                 body_offset: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body_offset = body_offset

    def _fields(self) -> tuple:
        return (self.api_key, self.api_version, self.correlation_id, self.client_id, self.body_offset)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if type(other) is RequestHeader else NotImplemented

    def __repr__(self) -> str:
        return ("RequestHeader(api_key=%r, api_version=%r, correlation_id=%r, client_id=%r, body_offset=%r)"
                % self._fields())


def parse_request_header(frame: bytes | bytearray, flexible: bool) -> RequestHeader:
    """Request header v1 (v2 adds tagged fields when the API version is flexible).

    client_id is always a classic int16-length string, even in header v2, so any broker can
    read an ApiVersions request of any version."""
    try:
        api_key, api_version, corr = _HEADER_START.unpack_from(frame, 0)
    except Exception as e:  # struct.error: shorter than the header's start
        raise ProtocolError("malformed request header: %s" % e) from None
    client_id, pos = read_header_rest(frame, flexible)
    return RequestHeader(api_key, api_version, corr, client_id, pos)


def read_header_rest(frame: bytes | bytearray, flexible: bool) -> tuple[str | None, int]:
    """The request header after its first 8 bytes (api key, version, correlation id, which
    the caller has read): the client id and where the body starts.  ``parse_request_header``
    without the ``RequestHeader``: the broker's dispatcher builds its request context from
    these directly (one object fewer per request)."""
    try:
        # the client id: P.read_nullable_string's steps inline (every request reads it)
        (n,) = P.I16.unpack_from(frame, 8)
        if n < 0:
            client_id, pos = None, 10
        else:
            pos = 10 + n
            if pos > len(frame):
                raise ProtocolError("length %d exceeds the %d remaining bytes" % (n, len(frame) - 10))
            client_id = str(frame[10:pos], "utf-8")
        if flexible:
            if frame[pos] == 0:   # no tagged fields: nearly every request
                return client_id, pos + 1
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
    return client_id, pos
