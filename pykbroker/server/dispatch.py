"""Sans-IO request dispatch for one connection: bytes in, decisions out.

In the style of h11, a ``Dispatcher`` does no I/O and knows nothing of trio or sockets: the
connection feeds it what it read (``receive_data``), then asks for events (``next_event``) until
there is none.  Each event is a decision the connection carries out:

- ``HandleRequest``: a well-formed request; run ``handler.handle(ctx, request)`` (handlers are
  async, so the caller awaits it) and hand the outcome back with ``finish(event, response)`` or
  ``fail(event, exc)``, which return a ``SendResponse``, a ``Close``, or ``None`` (nothing to send:
  acks=0 Produce).
- ``SendResponse``: answer without running a handler (ApiVersions edge cases); ``parts`` are
  ``bytes`` and file regions (``.fd``, ``.position``, ``.length``), written in order.
- ``Close``: close the connection without answering; ``reason`` is the log line, ``level`` its
  logging level.  After a ``Close``, ``next_event`` returns ``None`` for good.
- ``Delayed``: fault injection's added latency: wait ``seconds``, then carry out ``event``.

Fault injection (``faults.py``): when the broker's ``FaultPlan`` has rules, each decoded request
is matched against them (``_inject``); with none, the cost is one check of ``plan.rules``.

Events come out in request order and must be carried out in that order: Kafka answers a
connection's requests strictly in order, and clients rely on it (an idempotent producer's
pipelined Produce requests).  The decisions are Kafka's: an unknown API key, an unsupported
version of any API but ApiVersions, a malformed header or body, or a frame above
``socket.request.max.bytes`` (checked before the body is buffered) closes the connection; a
too-new ApiVersions is answered with a v0 UNSUPPORTED_VERSION body (KIP-511) and an undecodable
one with INVALID_REQUEST; a handler that raises still answers, with its error (or
UNKNOWN_SERVER_ERROR for a bug) in every error field, so the client never hangs.
"""
from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any, Optional, Union

from ..protocol.codec import APIS
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.framing import FrameBuffer, read_header_rest
from ..protocol.primitives import ProtocolError
from .faults import FaultPlan

if TYPE_CHECKING:
    from ..handlers.support.services import BrokerServices
    from ..protocol.codec import ApiSpec
    from .connection import Connection

log = logging.getLogger("pykbroker.connection")

API_VERSIONS_KEY = 18

# api_key, api_version, correlation_id: the fixed start of every request header, read in one
# call to pick the handler and header version before the rest of the header is parsed.
_HEADER_START = struct.Struct(">hhi")
# Kafka's ApiKeys names ("InitProducerId") for the authorizer's decision log (acl/check.py)
_API_NAMES = {k: "".join(w.capitalize() for w in a.name.split("_")) for k, a in APIS.items()}


class CloseConnection(Exception):
    """Raised by a handler to close the connection without answering (Kafka does this when an
    acks=0 Produce fails: closing is the only signal such a client gets)."""


class RequestContext:
    """What a handler knows about the request besides its body."""

    __slots__ = ("broker", "connection", "api_key", "api_version", "correlation_id", "client_id", "size",
                 "on_throttled")

    # broker and connection are opaque to the dispatcher (the BrokerServer and the Connection,
    # or a test's stand-ins).  Handlers read the broker's components through ``services`` only,
    # never ``broker`` (tests/install/test_handler_services.py); the connection is None where a
    # test or benchmark dispatches without one.
    # The header's fields are given one by one (read_header_rest, protocol/framing.py), not as
    # a RequestHeader: one object fewer per request (compat/bench/results/conns-100-per-request.md).
    def __init__(self, broker: Any, connection: Any, api_key: int, api_version: int, correlation_id: int,
                 client_id: Optional[str], size: int = 0) -> None:
        self.broker = broker
        self.connection: Optional[Connection] = connection
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        # the request's size (header and body, Kafka's RequestChannel.Request.sizeInBytes):
        # what a producer's byte-rate quota counts (quota/manager.py)
        self.size = size
        # a Fetch under a client quota: a list the handler fills with what to undo should its
        # answer be replaced by the empty throttled one (KIP-219; server/connection.py); else None
        self.on_throttled: Optional[list] = None

    @property
    def services(self) -> BrokerServices:
        """The broker's components a handler may use (handlers/support/services.py: BrokerServices)."""
        return self.broker.services

    @property
    def listener_name(self) -> str:
        """The listener the request came in on: the endpoints a handler answers with (Metadata,
        FindCoordinator, a NOT_LEADER's current leader) are those of this listener, as Kafka's.
        Without a connection (a test's or benchmark's dispatcher) PLAINTEXT, the default listener."""
        c = self.connection
        return c.listener_name if c is not None else "PLAINTEXT"


class HandleRequest:
    """Run ``handler.handle(ctx, request)``, then give the outcome to ``Dispatcher.finish``/``fail``."""

    __slots__ = ("ctx", "handler", "spec", "request")

    # handler: a kNN_* module, or a fault-injection wrapper with the same handle/error_response
    def __init__(self, ctx: RequestContext, handler: Any, spec: ApiSpec, request: dict) -> None:
        self.ctx = ctx
        self.handler = handler
        self.spec = spec
        self.request = request

    def __repr__(self) -> str:
        return "HandleRequest(%s v%d, correlation_id=%d)" % (
            self.spec.name, self.ctx.api_version, self.ctx.correlation_id)


class SendResponse:
    """Write ``parts`` (a framed response: bytes and file regions) to the client."""

    __slots__ = ("parts",)

    def __init__(self, parts: list) -> None:
        self.parts = parts

    def __repr__(self) -> str:
        return "SendResponse(%d parts)" % len(self.parts)


class Close:
    """Close the connection without answering; log ``reason`` at ``level`` (with ``exc_info``)."""

    __slots__ = ("reason", "level", "exc_info")

    def __init__(self, reason: str, level: int = logging.WARNING, exc_info: BaseException | None = None) -> None:
        self.reason = reason
        self.level = level
        self.exc_info = exc_info

    def __repr__(self) -> str:
        return "Close(%r)" % self.reason


class Delayed:
    """Injected latency: sleep ``seconds``, then carry out ``event`` (any other event)."""

    __slots__ = ("seconds", "event")

    def __init__(self, seconds: float, event: Event) -> None:
        self.seconds = seconds
        self.event = event

    def __repr__(self) -> str:
        return "Delayed(%gs, %r)" % (self.seconds, self.event)


class _NotNow:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_NOW"


# A handler may also offer ``handle_now(ctx, request)``: ``handle`` as far as it goes without
# awaiting, for the connection poller (server/poller.py), which carries out such requests
# without waking the connection's task.  It returns the answer (what ``handle`` returns), or
# NOT_NOW (nothing done: ``handle`` is to be awaited instead, by the connection's task), or a
# ``Remainder``.
NOT_NOW = _NotNow()


class Remainder:
    """``handle_now``'s: part of the request is carried out and the rest may await; the
    ``Remainder`` is the handler of that rest (``handle(ctx, request)`` and, should it raise,
    ``error_response``), run by the connection's task in the request's place."""

    __slots__ = ()

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        raise NotImplementedError


# what next_event decides (Delayed wraps one of the others)
Event = Union[HandleRequest, SendResponse, Close, Delayed]


class _PartitionFaults:
    """The handler of a request some of whose partitions get an injected error: the real
    handler serves the request without them (``HandleRequest.request`` is that reduced
    request), then their error entries are put back where the client asked for them.  Splitting
    here keeps the handlers (and their per-partition hot loops) unaware of fault injection."""

    __slots__ = ("handler", "layout", "request", "errors")

    def __init__(self, handler: Any, layout: Any, request: dict, errors: dict[tuple[str, int], int]) -> None:
        self.handler = handler
        self.layout = layout
        self.request = request   # the client's whole request
        self.errors = errors     # {(topic, partition): code}

    def served_request(self) -> dict:
        lay, errors = self.layout, self.errors
        topics = []
        for t in self.request[lay.req_topics]:
            name = t[lay.req_topic]
            parts = [p for p in t[lay.req_parts] if (name, p[lay.req_index]) not in errors]
            if parts:
                topics.append({**t, lay.req_parts: parts})
        return {**self.request, lay.req_topics: topics}

    async def handle(self, ctx: RequestContext, served: dict) -> Optional[dict]:
        response = await self.handler.handle(ctx, served)
        if response is None or response.get("error_code"):
            return response  # acks=0 Produce / a request-level error: nothing to merge into
        lay, errors = self.layout, self.errors
        entries: dict[tuple[str, int], dict] = {}
        for t in response[lay.topics]:
            for p in t[lay.parts]:
                entries[(t[lay.topic], p[lay.index])] = p
        topics = []
        for t in self.request[lay.req_topics]:
            name = t[lay.req_topic]
            parts = []
            for p in t[lay.req_parts]:
                idx = p[lay.req_index]
                code = errors.get((name, idx))
                parts.append(lay.error(idx, code) if code else entries[(name, idx)])
            entry = {lay.topic: name, lay.parts: parts}
            if "topic_id" in t:
                entry["topic_id"] = t["topic_id"]   # versions that name topics by id
            topics.append(entry)
        return {**response, lay.topics: topics}

    def error_response(self, ctx: RequestContext, request: dict, code: int) -> dict:
        # The handler raised: answer the client's whole request with that error.
        builder = getattr(self.handler, "error_response", None)
        if builder is None:
            return {"error_code": int(code)}
        return builder(ctx, self.request, code)


class _LoseResponse:
    """The handler of a request whose response fault injection loses: served, then the
    connection is closed without an answer (``CloseConnection``)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def handle(self, ctx: RequestContext, request: dict) -> None:
        await self.handler.handle(ctx, request)
        raise CloseConnection("fault injection: response to %s lost after serving it" % ctx.api_key)


class Dispatcher:
    """Per-connection dispatch state: the frame buffer, and whether the connection is closing.

    ``broker`` and ``connection`` are opaque here: they are only handed to handlers in their
    ``RequestContext``.  ``peer`` names the client in log lines."""

    def __init__(self, handlers: dict, max_frame_bytes: int, broker: Any = None, connection: Any = None,
                 peer: str = "?", faults: FaultPlan | None = None) -> None:
        self.handlers = handlers
        self.faults = faults if faults is not None else FaultPlan()
        self.broker = broker
        self.connection = connection
        self.peer = peer
        self._frames = FrameBuffer(max_frame_bytes)
        # the same FrameBuffer, for a connection loop that reads into it without the three
        # delegating methods below (server/connection.py: a call fewer per read)
        self.frames = self._frames
        self.closed = False

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.receive_data(data)

    def read_target(self) -> memoryview | None:
        """Where the next read should go: the rest of a large frame's buffer, or ``None`` for a
        plain read handed to ``receive_data`` (FrameBuffer.read_target)."""
        return self._frames.read_target()

    def received_into(self, n: int) -> None:
        self._frames.received_into(n)

    def next_event(self) -> Optional[Event]:
        """The decision for the next complete frame, or ``None`` until more bytes arrive."""
        if self.closed:
            return None
        try:
            frame = self._frames.next_frame()
        except ProtocolError as e:  # the size prefix is over the limit (or negative)
            return self._close(str(e))
        if frame is None:
            return None
        return self._dispatch(frame)

    def _close(self, reason: str, level: int = logging.WARNING, exc_info: BaseException | None = None) -> Close:
        self.closed = True
        return Close(reason, level, exc_info)

    def _dispatch(self, frame: bytearray) -> Optional[Event]:
        if len(frame) < 8:
            return self._close("request of %d bytes is too short for a header" % len(frame))
        api_key, api_version, corr = _HEADER_START.unpack_from(frame)
        handler = self.handlers.get(api_key)
        spec = APIS.get(api_key)
        if handler is None or spec is None:
            return self._close("unknown or unsupported API key %d (v%d)" % (api_key, api_version))
        supported = handler.MIN_VERSION <= api_version <= handler.MAX_VERSION
        if not supported and api_key != API_VERSIONS_KEY:
            # Kafka closes the connection on an unsupported version of any API but ApiVersions.
            return self._close("%s v%d is not supported (supported %d-%d)"
                               % (spec.name, api_version, handler.MIN_VERSION, handler.MAX_VERSION))
        # An ApiVersions request newer than we know is read with the newest header (v2).
        flexible = min(api_version, handler.MAX_VERSION) >= spec.flexible_from
        try:
            client_id, body_offset = read_header_rest(frame, flexible)
        except ProtocolError as e:
            return self._close(str(e))
        ctx = RequestContext(self.broker, self.connection, api_key, api_version, corr, client_id, len(frame))
        if api_key == 0 and supported and self._fast_produce_ok():
            # the common Produce without the codec's dicts (handlers/support/produce_fast.py);
            # None: not the common shape, decoded below as any request
            fast = getattr(handler, "FAST_PATH", None)
            if fast is not None:
                req = fast.decode(frame, body_offset, api_version)
                if req is not None:
                    return HandleRequest(ctx, fast, spec, req)
        if not supported:
            # KIP-511: answer a too-new ApiVersions with a v0 body: UNSUPPORTED_VERSION and our range.
            body = handler.unsupported_version_response(ctx)
            return SendResponse(spec.encode_framed(0, body, corr, False))
        try:
            # Kafka's generated readers stop at the last field and ignore trailing bytes; clients
            # rely on it (librdkafka's all-topics Metadata v9+ leaves 3 stray bytes after the
            # null topic array), so trailing bytes are not an error here either.
            request = spec.decode("request", api_version, memoryview(frame)[body_offset:],
                                  exact=False)
        except ProtocolError as e:
            if api_key == API_VERSIONS_KEY:
                # Kafka answers an undecodable ApiVersions with INVALID_REQUEST rather than closing.
                body = handler.invalid_request_response(ctx)
                return SendResponse(spec.encode_framed(api_version, body, corr, False))
            return self._close("malformed %s v%d request: %s" % (spec.name, api_version, e))
        authz = getattr(self.connection, "authz", None)
        if authz is not None:   # the decision log names the request (Kafka's "for request = X")
            authz.begin(_API_NAMES[api_key])
        if self.faults.rules:  # the only cost of fault injection while no rule is set
            return self._inject(ctx, handler, spec, request)
        return HandleRequest(ctx, handler, spec, request)

    def _fast_produce_ok(self) -> bool:
        """Whether a Produce may take the fast path: nothing else looks at the request (no fault
        rule, authorizer session, observer or client quota of the connection), so the fast path
        and the general one are told apart by nothing but their cost."""
        if self.faults.rules:
            return False
        c = self.connection
        if c is None:
            return True
        if getattr(c, "authz", None) is not None or getattr(c, "observer", None) is not None:
            return False
        q = getattr(c, "quotas", None)
        return q is None or not q.active

    def _inject(self, ctx: RequestContext, handler: Any, spec: ApiSpec, request: dict) -> Optional[Event]:
        """The event for a request the fault plan may touch (see ``faults.py``)."""
        layout = getattr(handler, "RESPONSES", None)
        resolve = getattr(handler, "resolve_request", None)
        if resolve is not None:
            resolve(ctx, request)   # e.g. Produce v13: topic ids -> the names fault rules name
        d = self.faults.decide(ctx.api_key, request, layout)
        handle = HandleRequest(ctx, handler, spec, request)
        if not d:
            return handle
        event: Optional[Event] = handle
        if d.drop:
            return self._close("fault injection: dropped on %s v%d" % (spec.name, ctx.api_version),
                               logging.INFO)
        if d.error:
            if ctx.api_key == 0 and request.get("acks") == 0:
                # An acks=0 producer reads no answers: Kafka closes on a failed acks=0 Produce.
                return self._close("fault injection: acks=0 Produce failed", logging.INFO)
            body = self._injected_error(ctx, request, d.error)
            if body is None:
                builder = getattr(handler, "error_response", None)
                body = (builder(ctx, request, d.error) if builder
                        else error_response(spec, ctx.api_version, request, d.error))
            event = self.finish(handle, body)
        elif d.partition_errors:
            split = _PartitionFaults(handler, layout, request, d.partition_errors)
            event = HandleRequest(ctx, split, spec, split.served_request())
        if d.drop_response and isinstance(event, HandleRequest):
            event = HandleRequest(ctx, _LoseResponse(event.handler), spec, event.request)
        if d.delay > 0 and event is not None:   # (an answer is always built above: never None)
            return Delayed(d.delay, event)
        return event

    def _injected_error(self, ctx: RequestContext, request: dict, code: int) -> Optional[dict]:
        """The body answering an injected whole-request error, or None for the handler's
        ``error_response``; a dispatcher whose connection has more state than the request
        (server/secure.py: the SASL exchange) answers here as its state machine would."""
        return None

    def finish(self, event: HandleRequest, response: Optional[dict | bytearray]) -> SendResponse | Close | None:
        """The handler returned ``response``: encode and frame it (``None``: acks=0, no answer)."""
        if response is None:
            return None  # acks=0 Produce: Kafka sends nothing back
        if isinstance(response, bytearray):
            return SendResponse([response])   # already encoded and framed (the Produce fast path)
        ctx, spec = event.ctx, event.spec
        api_version = ctx.api_version
        # ApiVersions always answers with header v0, so a client that does not know our
        # versions can still read it (KIP-511).
        flexible_header = ctx.api_key != API_VERSIONS_KEY and api_version >= spec.flexible_from
        try:
            parts = spec.encode_framed(api_version, response, ctx.correlation_id, flexible_header)
        except Exception as e:
            return self._close("encoding %s v%d response failed" % (spec.name, api_version),
                               logging.ERROR, e)
        return SendResponse(parts)

    def fail(self, event: HandleRequest, exc: Exception) -> SendResponse | Close | None:
        """The handler raised ``exc``: close on ``CloseConnection``, else answer with the error
        (``KafkaError``'s code, or UNKNOWN_SERVER_ERROR for a bug) in the response's error fields."""
        answer = self.error_answer(event, exc)
        if isinstance(answer, Close):
            return answer
        return self.finish(event, answer)

    def error_answer(self, event: HandleRequest, exc: Exception) -> dict | Close:
        """``fail`` before encoding: the error response (a dict, so a quota can still set its
        ``throttle_time_ms``), or the ``Close``."""
        if isinstance(exc, CloseConnection):
            return self._close(str(exc), logging.INFO)
        ctx, handler, spec = event.ctx, event.handler, event.spec
        if isinstance(exc, KafkaError):
            code = exc.code
        else:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
            log.error("handler for %s v%d failed (client %s)", spec.name, ctx.api_version, self.peer,
                      exc_info=exc)
        request = event.request
        builder = getattr(handler, "error_response", None)
        return builder(ctx, request, code) if builder else error_response(spec, ctx.api_version, request, code)


def error_response(spec: ApiSpec, version: int, request: dict, code: int) -> dict:
    """Fallback for handlers without their own ``error_response``: those APIs (Heartbeat,
    LeaveGroup, ListGroups, ApiVersions, DescribeCluster) carry a top-level error code, which
    is where Kafka reports a request-level failure.  Handlers whose responses list topics and
    partitions define ``error_response`` to answer per item."""
    return {"error_code": int(code)}
