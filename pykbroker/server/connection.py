"""One client connection: read frames, run handlers in request order, write responses.

Kafka processes a connection's requests one at a time and answers strictly in request order
(the channel is muted while a request is in flight), and clients rely on it: an idempotent
producer's pipelined Produce requests must be appended in the order they were sent.  We do the
same: a reader task keeps decoding frames ahead (pipelining, bounded by
``queued.max.requests``), and a processor task handles them in order and writes each response.

Bad input: an unknown API key, an unsupported version (other than ApiVersions), a malformed
header or body, or a frame above ``socket.request.max.bytes`` closes this connection with a
log line, as Kafka does; the broker goes on serving everyone else.  A handler that raises
still answers, with UNKNOWN_SERVER_ERROR (or the error the handler raised) in every error
field of the response, so the client never hangs.
"""
from __future__ import annotations

import logging
import os

import trio

from ..protocol.codec import APIS
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.framing import FrameBuffer, frame_response, parse_request_header, peek_api
from ..protocol.primitives import ProtocolError

log = logging.getLogger("pykbroker.connection")

API_VERSIONS_KEY = 18


_DISCONNECTS = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError, OSError)


def _only_disconnects(exc: BaseException) -> bool:
    """True if ``exc`` (or every leaf of an exception group) is a peer disconnect."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_disconnects(e) for e in exc.exceptions)
    return isinstance(exc, _DISCONNECTS)


class CloseConnection(Exception):
    """Raised by a handler to close the connection without answering (Kafka does this when an
    acks=0 Produce fails: closing is the only signal such a client gets)."""


class RequestContext:
    """What a handler knows about the request besides its body."""

    __slots__ = ("broker", "connection", "api_key", "api_version", "correlation_id", "client_id")

    def __init__(self, broker, connection, header):
        self.broker = broker
        self.connection = connection
        self.api_key = header.api_key
        self.api_version = header.api_version
        self.correlation_id = header.correlation_id
        self.client_id = header.client_id


class Connection:
    def __init__(self, broker, stream: trio.SocketStream, listener_name: str):
        self.broker = broker
        self.stream = stream
        self.listener_name = listener_name
        try:
            peer = stream.socket.getpeername()
            self.peer = "%s:%s" % (peer[0], peer[1])
        except OSError:
            self.peer = "?"
        self.frames = FrameBuffer(broker.config["socket.request.max.bytes"])

    async def run(self) -> None:
        send, recv = trio.open_memory_channel(self.broker.config["queued.max.requests"])
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader, send, nursery.cancel_scope)
                await self._processor(recv)
                nursery.cancel_scope.cancel()
        except Exception as e:
            # Trio >= 0.25 wraps errors from the reader/processor tasks in an ExceptionGroup.
            # A peer that went away is routine; anything else is a bug worth a traceback.  Either
            # way only this connection ends: one client must never take the broker down.
            if _only_disconnects(e):
                log.debug("connection %s closed: %s", self.peer, e)
            else:
                log.exception("connection %s failed", self.peer)
        finally:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()

    async def _reader(self, send, scope) -> None:
        async with send:
            while True:
                data = await self.stream.receive_some(65536)
                if not data:
                    return
                self.frames.receive_data(data)
                while True:
                    try:
                        frame = self.frames.next_frame()
                    except ProtocolError as e:
                        log.warning("closing connection from %s: %s", self.peer, e)
                        return
                    if frame is None:
                        break
                    await send.send(frame)

    async def _processor(self, recv) -> None:
        async with recv:
            async for frame in recv:
                parts = await self._handle_frame(frame)
                if parts is None:
                    return  # close the connection
                if parts:
                    await self._write(parts)

    async def _handle_frame(self, frame: bytes):
        peek = peek_api(frame)
        if peek is None:
            log.warning("closing connection from %s: request of %d bytes is too short for a header",
                        self.peer, len(frame))
            return None
        api_key, api_version, corr = peek
        handler = self.broker.handlers.get(api_key)
        spec = APIS.get(api_key)
        if handler is None or spec is None:
            log.warning("closing connection from %s: unknown or unsupported API key %d (v%d)",
                        self.peer, api_key, api_version)
            return None
        supported = handler.MIN_VERSION <= api_version <= handler.MAX_VERSION
        if not supported and api_key != API_VERSIONS_KEY:
            # Kafka closes the connection on an unsupported version of any API but ApiVersions.
            log.warning("closing connection from %s: %s v%d is not supported (supported %d-%d)",
                        self.peer, spec.name, api_version, handler.MIN_VERSION, handler.MAX_VERSION)
            return None
        # An ApiVersions request newer than we know is read with the newest header (v2).
        flexible = spec.flexible(min(api_version, handler.MAX_VERSION))
        try:
            header = parse_request_header(frame, flexible)
        except ProtocolError as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            return None
        ctx = RequestContext(self.broker, self, header)
        if not supported:
            # KIP-511: answer a too-new ApiVersions with a v0 body: UNSUPPORTED_VERSION and our range.
            body = handler.unsupported_version_response(ctx)
            return frame_response(corr, False, spec.encode("response", 0, body))
        try:
            # Kafka's generated readers stop at the last field and ignore trailing bytes; clients
            # rely on it (librdkafka's all-topics Metadata v9+ leaves 3 stray bytes after the
            # null topic array), so trailing bytes are not an error here either.
            request = spec.decode("request", api_version, memoryview(frame)[header.body_offset:],
                                  exact=False)
        except ProtocolError as e:
            if api_key == API_VERSIONS_KEY:
                # Kafka answers an undecodable ApiVersions with INVALID_REQUEST rather than closing.
                body = handler.invalid_request_response(ctx)
                return frame_response(corr, False, spec.encode("response", api_version, body))
            log.warning("closing connection from %s: malformed %s v%d request: %s",
                        self.peer, spec.name, api_version, e)
            return None
        try:
            response = await handler.handle(ctx, request)
        except CloseConnection as e:
            log.info("closing connection from %s: %s", self.peer, e)
            return None
        except Exception as e:  # a handler bug must still answer the client
            code = e.code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            if not isinstance(e, KafkaError):
                log.exception("handler for %s v%d failed (client %s)", spec.name, api_version, self.peer)
            builder = getattr(handler, "error_response", None)
            response = builder(ctx, request, code) if builder else error_response(spec, api_version, request, code)
        if response is None:
            return []  # acks=0 Produce: Kafka sends nothing back
        flexible_header = api_key != API_VERSIONS_KEY and spec.flexible(api_version)
        try:
            body = spec.encode("response", api_version, response)
        except Exception:
            log.exception("encoding %s v%d response failed; closing %s", spec.name, api_version, self.peer)
            return None
        return frame_response(corr, flexible_header, body)

    async def _write(self, parts) -> None:
        buf = bytearray()
        for p in parts:
            if isinstance(p, (bytes, bytearray, memoryview)):
                buf += p
                continue
            if buf:
                await self.stream.send_all(buf)
                buf = bytearray()
            await self._send_region(p)
        if buf:
            await self.stream.send_all(buf)

    async def _send_region(self, region) -> None:
        """Zero-copy: os.sendfile from the segment file straight to the socket."""
        sock = self.stream.socket
        offset, remaining = region.position, region.length
        while remaining > 0:
            try:
                n = os.sendfile(sock.fileno(), region.fd, offset, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            if n == 0:
                # The file shrank under us (truncation): the response is already sized, so the
                # connection cannot be kept consistent; close it and let the client retry.
                raise trio.BrokenResourceError("segment truncated during sendfile")
            offset += n
            remaining -= n


def error_response(spec, version: int, request: dict, code: int) -> dict:
    """Fallback for handlers without their own ``error_response``: those APIs (Heartbeat,
    LeaveGroup, ListGroups, ApiVersions, DescribeCluster) carry a top-level error code, which
    is where Kafka reports a request-level failure.  Handlers whose responses list topics and
    partitions define ``error_response`` to answer per item."""
    return {"error_code": int(code)}
