"""One client connection over trio: move bytes between the socket and the sans-IO ``Dispatcher``.

Every decision about a request (framing limits, which handler, closing on bad input, the error
answer when a handler raises, encoding) lives in ``dispatch.py`` and is tested without sockets;
this module only reads, awaits handlers, and writes.

Kafka processes a connection's requests one at a time and answers strictly in request order
(the channel is muted while a request is in flight), and clients rely on it: an idempotent
producer's pipelined Produce requests must be appended in the order they were sent.  We do the
same with one task per connection: it reads what the socket holds (at most 64 KB), carries out
every complete request in it in order (runs the handler, writes the response the dispatcher
encoded, or closes the connection), and only then reads on.  Pipelined requests wait in the
socket's buffer meanwhile, as they do behind Kafka's muted channel, so a connection holds at
most one read plus the frame being assembled.

That is also the per-connection back-pressure Kafka gets from muting and
``queued.max.requests``: an answer is written before the next request is carried out, and a
client that does not read its answers leaves the task waiting in ``send_all`` with one answer
in hand, not reading on.  Such a client costs one answer's memory, never a queue of them
(tests/protocol/test_resource_abuse.py::test_client_that_never_reads_its_answers).

On a PLAINTEXT listener the task does not always wait for its socket itself: once the last
request it carried out was one that never suspends (a fast-path Produce), it parks on the
listener's poller (server/poller.py), which runs such requests for many connections from one
trio task and hands the connection back, where its bytes are, for anything else.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
import types
from typing import TYPE_CHECKING, Any, Coroutine, Generator, Optional

import trio

from . import malloc
from .dispatch import (  # noqa: F401  (CloseConnection, RequestContext, error_response: re-exported)
    Close, CloseConnection, Delayed, Dispatcher, HandleRequest, RequestContext, SendResponse,
    error_response)
from .poller import BUFFERED, ENDED, WriteRest

if TYPE_CHECKING:
    from ..security.authenticator import SaslAuthenticator
    from ..security.listeners import ListenerSecurity
    from ..storage.segment import FileRegion
    from .poller import Poller

log = logging.getLogger("pykbroker.connection")


_DISCONNECTS = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError, OSError)


@types.coroutine
def _timed(coro: Coroutine[Any, Any, Any], spent: list[float]) -> Generator[Any, Any, Any]:
    """Run ``coro`` in this task, adding to ``spent[0]`` the time each of its steps takes on the
    event loop, not the time it waits (a replication wait, a Fetch's long poll, a lock):
    request_percentage's measure (docs/quotas.md).  Trio's traps pass through unchanged."""
    value, exc = None, None
    perf = time.perf_counter
    while True:
        t = perf()
        try:
            trap = coro.send(value) if exc is None else coro.throw(exc)
        except StopIteration as stop:
            spent[0] += perf() - t
            return stop.value
        except BaseException:
            spent[0] += perf() - t
            raise
        spent[0] += perf() - t
        try:
            value, exc = (yield trap), None
        except BaseException as e:   # delivered into the handler, as trio would
            value, exc = None, e


def _only_disconnects(exc: BaseException) -> bool:
    """True if ``exc`` (or every leaf of an exception group) is a peer disconnect."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_disconnects(e) for e in exc.exceptions)
    return isinstance(exc, _DISCONNECTS)


class Connection:
    """What handlers read of a connection (through ``ctx.connection``): ``listener_name``,
    ``peer``, ``principal``, ``authenticator``, ``token_authenticated`` and ``sec``, all
    declared here with a plain listener's values; a secured listener's (server/secure.py) has
    its own."""
    # Kafka's principal of an unauthenticated connection (PLAINTEXT listeners); secured
    # listeners' connections (server/secure.py) replace it once the client is known.
    principal = "User:ANONYMOUS"
    authenticator: Optional[SaslAuthenticator] = None   # SASL listeners' (server/secure.py)
    # the listener's TLS/SASL setup (security/listeners.py); None on a PLAINTEXT listener
    sec: Optional[ListenerSecurity] = None
    authz = None
    # when something was last read from or written to the socket (time.monotonic): Kafka's idle
    # expiry and its least-recently-used order (quota/connections.py)
    last_active = 0.0

    # broker: the BrokerServer (or a test's stand-in), read for its components and settings
    # poller: the listener's (server/poller.py), on which the task parks instead of waiting on
    # trio for its socket; None: it waits on trio (and on secured listeners, whose bytes are
    # not the socket's)
    def __init__(self, broker: Any, stream: trio.SocketStream, listener_name: str,
                 poller: Optional[Poller] = None) -> None:
        self.broker = broker
        self.stream = stream
        self.last_active = time.monotonic()
        self._fd = stream.socket.fileno()
        self.listener_name = listener_name
        try:
            peer = stream.socket.getpeername()
            self.peer = "%s:%s" % (peer[0], peer[1])
        except OSError:
            self.peer = "?"
        # the authorization checks of this connection's requests (acl/check.py); None without
        # an authorizer, and then every check allows
        authorizer = getattr(broker, "authorizer", None)
        if authorizer is not None:
            from ..acl.check import AuthSession
            self.authz = AuthSession(authorizer, self)
        # Only while no authorizer looks at the requests: with one, no Produce takes the fast
        # path (Dispatcher._fast_produce_ok) and the poller would hand every request back.
        self.poller = poller if self.authz is None else None
        self.dispatcher = Dispatcher(broker.handlers, broker.config["socket.request.max.bytes"],
                                     broker, self, self.peer, getattr(broker, "faults", None))
        # metrics / trace / JSON request logs (pykbroker/observability); None: off, and the
        # request path below is the plain one
        self.observer = getattr(broker, "observer", None)
        # client quotas (quota/manager.py): while none is stored, ``active`` is False and
        # reading it is the whole cost per request
        self.quotas: Any = getattr(broker, "client_quotas", None)
        self.quota_session: Any = None   # quota/manager.QuotaSession, made by the first accounted request
        self.decode_seconds = 0.0        # the last request's decoding time, kept while request quotas are stored

    @property
    def token_authenticated(self) -> bool:
        """Authenticated with a delegation token (Kafka's KafkaPrincipal.tokenAuthenticated):
        never on a plain connection (server/secure.py's SASL/SCRAM connections may be)."""
        return False

    async def run(self) -> None:
        if self.observer is not None:
            self.observer.connection_opened(self)
        try:
            await self._serve()
        except Exception as e:
            # A peer that went away is routine; anything else is a bug worth a traceback.  Either
            # way only this connection ends: one client must never take the broker down.
            if _only_disconnects(e):
                log.debug("connection %s closed: %s", self.peer, e)
            else:
                log.exception("connection %s failed", self.peer)
        finally:
            if self.observer is not None:
                self.observer.connection_closed(self)
            spm = getattr(self.broker, "existing_share_partition_manager", None)   # none created: no sessions
            if spm is not None:
                spm.connection_closed(self)   # KIP-932: its share sessions end, their records are released
            with trio.CancelScope(shield=True):
                await self._close_stream()

    async def _close_stream(self) -> None:
        await self.stream.aclose()

    async def _serve(self) -> None:
        # One task reads and carries out, instead of a reader task feeding a processor task
        # through a channel: the channel's send, receive and the two tasks' wake-ups cost more
        # than a small Produce's handler (the 100-connection profile, compat/bench/profiles/),
        # and read-ahead bought nothing since requests run one at a time in order anyway.
        dispatcher = self.dispatcher
        # the dispatcher's frame buffer's own methods (what dispatcher.read_target, received_into
        # and receive_data delegate to), bound once
        frames = dispatcher.frames
        read_target, received_into, receive_data = frames.read_target, frames.received_into, frames.receive_data
        quotas = self.quotas
        fd, sock = self._fd, self.stream.socket
        checkpoint = trio.lowlevel.checkpoint
        schedule_point = trio.lowlevel.cancel_shielded_checkpoint
        reads = 0
        monotonic = time.monotonic
        poller = self.poller
        handed: Any = None   # what the poller handed back, to carry out before anything else
        # Whether the last request this task carried out was one the poller carries out too (its
        # handler has a handle_now): only then does the task park on the poller.  A connection
        # whose requests the poller would only hand back (a consumer's Fetch, an acks=all
        # producer, an admin client) keeps waiting on trio, without the hand-back's extra
        # scheduling round in its latency; one that sends the poller's requests (acks=0/1
        # producers) parks there after the first of them.
        pollable = False
        while True:
            # straight from the non-blocking socket, waiting only when it is empty: the
            # same as trio's receive_some without its per-call overhead (see _write).  A large
            # request's body is read straight into its frame's buffer (no bytes object per
            # read, no joining them afterwards).
            target = read_target()
            if target is not None and not malloc._done:
                malloc.tune_for_large_requests()
            try:
                if target is not None:
                    n = os.readv(fd, (target,))
                    if not n:
                        return
                    received_into(n)
                else:
                    data = os.read(fd, 65536)
                    if not data:
                        return
                    receive_data(data)
                self.last_active = monotonic()
            except BlockingIOError:
                # Parked on the listener's poller while it can carry out this connection's
                # requests (server/poller.py: why); on trio while a large frame streams in,
                # a client quota or observer is active, or the poller has ended.
                if (not pollable or poller is None or target is not None or poller.closed
                        or (quotas is not None and quotas.active) or self.observer is not None):
                    await trio.lowlevel.wait_readable(sock)
                    continue
                handed = await poller.park(self)
                if handed is None:
                    continue   # readable: read here
                if handed is ENDED:
                    return
                if handed is BUFFERED:
                    handed = None   # no first event: the buffer's requests below, then a read
            except OSError as e:
                raise trio.BrokenResourceError(str(e)) from e
            finally:
                if target is not None:
                    target.release()
            if handed is not None:
                # where the poller stopped: the rest of an answer, or the first request it did
                # not carry out (the rest of the buffer follows below, in order)
                first, handed = handed, None
                if first.__class__ is WriteRest:
                    await self.stream.send_all(first.data)
                else:
                    if first.__class__ is Delayed:
                        await trio.sleep(first.seconds)
                        first = first.event
                    if first.__class__ is HandleRequest:
                        pollable = hasattr(first.handler, "handle_now")
                    if not await self._carry_out(first):
                        return
            # The common case inline (no client quota stored, no observer): each request's
            # handler awaited and its one-buffer answer written here, without the two
            # coroutine levels of _carry_out_received and _carry_out per read (the
            # 100-connection cell, compat/bench/results/conns-100-per-request.md).  Every
            # other case, checked before each request as _carry_out checks it, goes the
            # general way, in the same order.
            while True:
                if (quotas is not None and quotas.active) or self.observer is not None:
                    if not await self._carry_out_received(dispatcher, quotas):
                        return
                    break
                event = dispatcher.next_event()
                if event is None:
                    if dispatcher.closed:
                        return
                    break
                if event.__class__ is HandleRequest:
                    handler = event.handler
                    pollable = hasattr(handler, "handle_now")
                    try:
                        response = await handler.handle(event.ctx, event.request)
                    except Exception as e:  # a handler bug must still answer the client
                        event = dispatcher.fail(event, e)
                    else:
                        if response.__class__ is bytearray:
                            # already framed (the Produce fast path): what finish would wrap in
                            # a SendResponse, written here as it is (_write_now inline)
                            self.last_active = monotonic()
                            try:
                                n = os.write(fd, response)
                            except BlockingIOError:
                                n = 0
                            except OSError as e:
                                raise trio.BrokenResourceError(str(e)) from e
                            if n < len(response):
                                await self.stream.send_all(memoryview(response)[n:])
                            continue
                        event = dispatcher.finish(event, response)
                    if event is None:
                        continue   # acks=0 Produce: Kafka sends nothing back
                    if event.__class__ is SendResponse:
                        parts = event.parts
                        if len(parts) == 1 and not hasattr(parts[0], "length"):
                            data = parts[0]
                            n = self._write_now(data)
                            if n < len(data):
                                await self.stream.send_all(memoryview(data)[n:])
                            continue
                elif event.__class__ is Delayed:
                    # fault injection's added latency, then the event it holds
                    await trio.sleep(event.seconds)
                    event = event.event
                if not await self._carry_out(event):
                    return
            # Let other connections run before reading on: a handler and the direct socket
            # write need not yield, so a client that keeps the socket full (or a large request
            # streaming in) must not monopolize the loop.  One schedule point per read, not per
            # request.  It is trio's cancel-shielded one (the schedule point without the
            # cancellation check, about 10 % cheaper) but for every 16th read, which is a full
            # checkpoint: a cancellation (shutdown, the connection's end) still reaches a
            # connection whose socket never runs dry within 16 reads, and any other within its
            # next wait_readable (compat/bench/results/conns-100-per-request.md).
            reads += 1
            if reads & 15:
                await schedule_point()
            else:
                await checkpoint()

    async def _carry_out_received(self, dispatcher: Dispatcher, quotas: Any) -> bool:
        """Carry out, in order, every decision the bytes received so far make (one call per
        read, whatever the transport); False once the connection is to be closed."""
        while True:
            if quotas is not None and quotas.request_enabled:
                # request_percentage counts the decoding too (docs/quotas.md)
                t0 = time.perf_counter()
                event = dispatcher.next_event()
                self.decode_seconds = time.perf_counter() - t0
            else:
                event = dispatcher.next_event()
            if event is None:
                return not dispatcher.closed
            if event.__class__ is Delayed:
                # fault injection's added latency, then the event it holds
                await trio.sleep(event.seconds)
                event = event.event
            if not await self._carry_out(event):
                return False

    async def _carry_out(self, event: Any) -> bool:
        """Carry out one decision of the dispatcher, in request order; False once the
        connection is to be closed."""
        # ``event`` is an Event (server/dispatch.py), told apart by class identity: cheaper than
        # isinstance on every request, but the type checker does not narrow on it (hence Any)
        if event.__class__ is HandleRequest:
            q = self.quotas
            if q is not None and q.active:
                key = event.ctx.api_key
                if q.request_enabled:
                    return await self._carry_out_request_quota(event)
                if key <= 1 and q.enabled:
                    return await self._carry_out_quota(event)
                if key in (19, 20, 37) and q.mutation_enabled:
                    return await self._carry_out_mutation(event)
            if self.observer is not None:
                return await self._carry_out_observed(event)
            try:
                response = await event.handler.handle(event.ctx, event.request)
            except Exception as e:  # a handler bug must still answer the client
                event = self.dispatcher.fail(event, e)
            else:
                event = self.dispatcher.finish(event, response)
            if event is None:
                return True   # acks=0 Produce: Kafka sends nothing back
        if event.__class__ is SendResponse:
            parts = event.parts
            if len(parts) == 1 and not hasattr(parts[0], "length"):
                # one buffer (nearly every answer): written here, awaiting only if it did not
                # all fit; the coroutines of _write/_send_bytes cost more than the write
                data = parts[0]
                n = self._write_now(data)
                if n < len(data):
                    await self.stream.send_all(memoryview(data)[n:])
                return True
            await self._write(parts)
            return True
        log.log(event.level, "closing connection from %s: %s", self.peer, event.reason,
                exc_info=event.exc_info)
        return False

    async def _carry_out_quota(self, event: HandleRequest) -> bool:
        """``_carry_out`` of a Produce or Fetch while client quotas are stored (Kafka's
        KafkaApis.handleProduceRequest / handleFetchRequest and KIP-219): the request's bytes
        (Produce) or the answer's (Fetch) are added to the rate of the quota that applies; over
        the quota, the answer carries ``throttle_time_ms`` (a Fetch is answered empty and its
        bytes taken back) and the connection reads nothing more for that long: answered at once
        and then muted when the client throttles itself at that version, held for the throttle
        time first otherwise."""
        from ..quota.manager import (CLIENT_THROTTLES_FROM, FETCH, PRODUCE, QuotaSession, fetch_quota_cap,
                                     throttled_fetch_response)
        ctx, request = event.ctx, event.request
        fetch = ctx.api_key == 1
        rs = request.get("replica_state") if fetch else None
        if fetch and (rs["replica_id"] if rs else request.get("replica_id", -1)) >= 0:
            found = None   # follower fetches: replication, not client quotas (Kafka)
        else:
            qs = self.quota_session
            if qs is None:
                qs = self.quota_session = QuotaSession(self.quotas, self)
            found = qs.lookup(FETCH if fetch else PRODUCE, ctx.client_id)
        if found is None:
            if self.observer is not None:
                return await self._carry_out_observed(event)
            return await self._carry_out_plain(event)
        bound, sensor = found
        manager = self.quotas
        if fetch:
            cap = fetch_quota_cap(bound, manager)
            if request["max_bytes"] > cap:
                request["max_bytes"] = cap
                request["min_bytes"] = min(request["min_bytes"], cap)
            ctx.on_throttled = []
        obs = self.observer
        t0 = time.perf_counter()
        response = error = None
        with (obs.request_context(self, ctx, event.spec) if obs is not None else contextlib.nullcontext()):
            try:
                response = await event.handler.handle(ctx, request)
            except Exception as e:
                error = e
        now_ms = int(trio.current_time() * 1000)
        if not fetch:
            # Kafka records the request's size whatever the outcome, and answers with the throttle
            throttle = manager.record(sensor, bound, ctx.size, now_ms)
            if throttle > 0 and response is not None:
                response["throttle_time_ms"] = throttle
        out = self.dispatcher.fail(event, error) if error is not None else self.dispatcher.finish(event, response)
        if fetch:
            throttle = 0
            if out.__class__ is SendResponse:
                # the answer's size, header and body (Kafka's FetchContext.getResponseSize)
                size = sum(p.length if hasattr(p, "length") else len(p) for p in out.parts) - 4
                throttle = manager.record(sensor, bound, size, now_ms)
                if throttle > 0 and response is not None:
                    # answered empty, so its bytes are taken back (Kafka's unrecordQuotaSensor);
                    # the discarded answer's file regions were never opened (read at send time)
                    manager.unrecord(sensor, size, now_ms)
                    # nor does the fetch session learn what the client was not told (Kafka
                    # answers from getThrottledResponse without updateAndGenerateResponseData:
                    # no new session, no cached partition updated)
                    for undo in ctx.on_throttled or ():   # (set for a Fetch under a quota)
                        undo()
                    out = self.dispatcher.finish(event, throttled_fetch_response(ctx.api_version, request,
                                                                                 response, throttle))
        client_side = throttle > 0 and ctx.api_version >= CLIENT_THROTTLES_FROM[ctx.api_key]
        # KIP-219's mute runs from the throttle's decision, not from the end of the answer's
        # write: Kafka starts its ThrottledChannel before it sends the answer
        muted_until = trio.current_time() + throttle / 1000.0
        if throttle > 0:
            manager.throttled(FETCH if fetch else PRODUCE, sensor, throttle, now_ms)
            if not client_side:
                await trio.sleep(throttle / 1000.0)   # older clients: the broker holds the answer
        t1 = time.perf_counter()
        if out is None:
            ok = True
        elif isinstance(out, SendResponse):
            await self._write(out.parts)
            ok = True
        else:
            log.log(out.level, "closing connection from %s: %s", self.peer, out.reason, exc_info=out.exc_info)
            ok = False
        if obs is not None:
            obs.request_done(self, event, response, out.parts if isinstance(out, SendResponse) else None, error,
                             t0, t1, time.perf_counter())
        if ok and client_side:
            # KIP-219: muted, nothing read or carried out, until the throttle time is over
            await trio.sleep_until(muted_until)
        return ok

    async def _carry_out_request_quota(self, event: HandleRequest) -> bool:
        """``_carry_out`` of any request while a ``request_percentage`` is stored (Kafka's
        KafkaApis with ``quotas.request``, KIP-124): the loop time of decoding and handling the
        request is recorded in the rate of the request quota that applies and decides its
        throttle; the encoding's time is recorded after, for the next requests (as Kafka records
        its network thread's time).  Produce and Fetch also take their byte-rate quota, CreateTopics
        / DeleteTopics / CreatePartitions their mutation quota: the answer carries the largest
        throttle, a throttled Fetch is answered empty.  The connection is then muted for that
        long (KIP-219), or the answer held first for versions whose client does not throttle
        itself.  Exempt (recorded in ``exempt-request-time`` only): Kafka's cluster actions, a
        follower's Fetch, and what comes before SASL authentication (Kafka's authenticator
        serves it outside its quotas)."""
        from ..quota.manager import (FETCH, MUTATION, PRODUCE, REQUEST, REQUEST_EXEMPT_APIS, QuotaSession,
                                     client_throttles, fetch_quota_cap, throttled_fetch_response)
        ctx, request = event.ctx, event.request
        key = ctx.api_key
        manager = self.quotas
        dispatcher = self.dispatcher
        spent = [self.decode_seconds]
        self.decode_seconds = 0.0
        fetch = key == 1
        follower = False
        if fetch:
            rs = request.get("replica_state")
            follower = (rs["replica_id"] if rs else request.get("replica_id", -1)) >= 0
        auth = getattr(dispatcher, "auth", None)
        exempt = key in REQUEST_EXEMPT_APIS or follower or (auth is not None and not auth.complete)
        qs = self.quota_session
        if qs is None:
            qs = self.quota_session = QuotaSession(manager, self)
        found = None if exempt else qs.lookup(REQUEST, ctx.client_id)
        bandwidth = None
        if key <= 1 and manager.enabled and not follower:
            bandwidth = qs.lookup(FETCH if fetch else PRODUCE, ctx.client_id)
            if bandwidth is not None and fetch:
                cap = fetch_quota_cap(bandwidth[0], manager)
                if request["max_bytes"] > cap:
                    request["max_bytes"] = cap
                    request["min_bytes"] = min(request["min_bytes"], cap)
        if fetch and (found is not None or bandwidth is not None):
            ctx.on_throttled = []   # what the fetch session undoes if the answer is throttled
        obs = self.observer
        t0 = time.perf_counter()
        response = error = None
        with (obs.request_context(self, ctx, event.spec) if obs is not None else contextlib.nullcontext()):
            try:
                response = await _timed(event.handler.handle(ctx, request), spent)
            except Exception as e:
                error = e
        now_ms = int(trio.current_time() * 1000)
        t = time.perf_counter()
        answer = response if error is None else dispatcher.error_answer(event, error)
        spent[0] += time.perf_counter() - t
        throttle, by = 0, None
        if answer is not None and not isinstance(answer, Close):
            if key in (19, 20, 37):
                throttle = answer.get("throttle_time_ms", 0) or 0   # the handler's mutation quota
                by = MUTATION if throttle > 0 else None
            if found is not None:
                # Kafka does not record nor enforce the request quota of an acks=0 Produce (no
                # answer: the branch is not taken)
                req = manager.record_request_time(found[1], found[0], spent[0], now_ms)
                if req > throttle:
                    throttle, by = req, REQUEST
        if bandwidth is not None and not fetch:
            # Kafka records the request's size whatever the outcome
            bw = manager.record(bandwidth[1], bandwidth[0], ctx.size, now_ms)
            if bw > throttle:
                throttle, by = bw, PRODUCE
        out: SendResponse | Close | None
        if answer is None:
            out = None
            encode = 0.0
        elif isinstance(answer, Close):
            out, encode = answer, 0.0
        else:
            if throttle > 0 and not fetch:
                # a copy: a handler may answer with a shared dict (an unchanging answer)
                answer = {**answer, "throttle_time_ms": throttle}
            t = time.perf_counter()
            out = dispatcher.finish(event, answer)
            encode = time.perf_counter() - t
            if fetch and out.__class__ is SendResponse and (throttle > 0 or bandwidth is not None):
                bw = 0
                size = sum(p.length if hasattr(p, "length") else len(p) for p in out.parts) - 4
                if bandwidth is not None:
                    bw = manager.record(bandwidth[1], bandwidth[0], size, now_ms)
                    if bw > throttle:
                        throttle, by = bw, FETCH
                if throttle > 0:
                    if bandwidth is not None:
                        # answered empty: its bytes are taken back (Kafka's unrecordQuotaSensor)
                        manager.unrecord(bandwidth[1], size, now_ms)
                    # nor does the fetch session learn what the client was not told (Kafka's
                    # getThrottledResponse; see _carry_out_quota)
                    for undo in ctx.on_throttled or ():
                        undo()
                    t = time.perf_counter()
                    out = dispatcher.finish(event, throttled_fetch_response(ctx.api_version, request, answer,
                                                                            throttle))
                    encode += time.perf_counter() - t
        if found is not None:
            manager.record_request_time_no_throttle(found[1], encode, now_ms)
        elif exempt:
            manager.record_exempt(spent[0] + encode, now_ms)
        client_side = throttle > 0 and client_throttles(key, ctx.api_version)
        muted_until = trio.current_time() + throttle / 1000.0   # from the decision, as above
        if throttle > 0:
            if by == MUTATION:
                manager.throttled_requests[MUTATION] += 1
            else:
                throttler = found if by == REQUEST else bandwidth
                assert throttler is not None   # the quota that set the throttle
                manager.throttled(by, throttler[1], throttle, now_ms)
            if not client_side:
                await trio.sleep(throttle / 1000.0)   # older clients: the broker holds the answer
        t1 = time.perf_counter()
        sent = None
        if out is None:
            ok = True
        elif isinstance(out, SendResponse):
            await self._write(out.parts)
            ok, sent = True, out.parts
        else:
            log.log(out.level, "closing connection from %s: %s", self.peer, out.reason, exc_info=out.exc_info)
            ok = False
        if obs is not None:
            obs.request_done(self, event, response, sent, error, t0, t1, time.perf_counter())
        if ok and client_side:
            await trio.sleep_until(muted_until)       # KIP-219: muted
        return ok

    async def _carry_out_mutation(self, event: HandleRequest) -> bool:
        """``_carry_out`` of CreateTopics / DeleteTopics / CreatePartitions while a controller
        mutation quota is stored: the handler counted the mutations (quota/manager.py
        MutationQuota) and put the throttle in its answer; as for the byte rates, the
        connection is then muted for it (KIP-219), or the answer held for older versions."""
        from ..quota.manager import CLIENT_THROTTLES_FROM, MUTATION
        ctx = event.ctx
        obs = self.observer
        t0 = time.perf_counter()
        response = error = None
        with (obs.request_context(self, ctx, event.spec) if obs is not None else contextlib.nullcontext()):
            try:
                response = await event.handler.handle(ctx, event.request)
            except Exception as e:
                error = e
        if error is not None:
            out, throttle = self.dispatcher.fail(event, error), 0
        else:
            out = self.dispatcher.finish(event, response)
            throttle = response.get("throttle_time_ms", 0) if response is not None else 0
        client_side = throttle > 0 and ctx.api_version >= CLIENT_THROTTLES_FROM[ctx.api_key]
        muted_until = trio.current_time() + throttle / 1000.0   # from the decision, as above
        if throttle > 0:
            self.quotas.throttled_requests[MUTATION] += 1
            if not client_side:
                await trio.sleep(throttle / 1000.0)   # older clients: the broker holds the answer
        t1 = time.perf_counter()
        ok = True if out is None else await self._carry_out(out)
        if obs is not None:
            obs.request_done(self, event, response, out.parts if ok and out.__class__ is SendResponse else None,
                             error, t0, t1, time.perf_counter())
        if ok and client_side:
            await trio.sleep_until(muted_until)       # KIP-219: muted
        return ok

    async def _carry_out_plain(self, event: HandleRequest) -> bool:
        try:
            response = await event.handler.handle(event.ctx, event.request)
        except Exception as e:
            out = self.dispatcher.fail(event, e)
        else:
            out = self.dispatcher.finish(event, response)
        if out is None:
            return True
        return await self._carry_out(out)

    async def _carry_out_observed(self, event: HandleRequest) -> bool:
        """``_carry_out`` of a ``HandleRequest`` while an observer is installed: the same steps,
        timed, inside the observer's request context, then reported to it."""
        obs = self.observer
        assert obs is not None   # only called with an observer installed (see _carry_out)
        with obs.request_context(self, event.ctx, event.spec):
            t0 = time.perf_counter()
            response = error = None
            try:
                response = await event.handler.handle(event.ctx, event.request)
            except Exception as e:
                error = e
                out = self.dispatcher.fail(event, e)
            else:
                out = self.dispatcher.finish(event, response)
            t1 = time.perf_counter()
            if out is None:
                obs.request_done(self, event, response, None, error, t0, t1, t1)
                return True
            if isinstance(out, SendResponse):
                await self._write(out.parts)
                obs.request_done(self, event, response, out.parts, error, t0, t1, time.perf_counter())
                return True
            obs.request_done(self, event, response, None, error, t0, t1, t1)
            log.log(out.level, "closing connection from %s: %s", self.peer, out.reason, exc_info=out.exc_info)
            return False

    async def _write(self, parts: list) -> None:
        if len(parts) == 1 and not hasattr(parts[0], "length"):
            # Most answers (Produce among them) are one buffer: sent as is, no copy.
            await self._send_bytes(parts[0])
            return
        # A Fetch answer: its header and framing bytes, then file regions sent with sendfile
        buf = bytearray()
        for p in parts:
            if isinstance(p, (bytes, bytearray, memoryview)):
                buf += p
                continue
            if buf:
                await self._send_bytes(buf)
                buf = bytearray()
            await self._send_region(p)
        if buf:
            await self._send_bytes(buf)

    async def _send_bytes(self, data: bytes | bytearray | memoryview) -> None:
        """Straight to the non-blocking socket first: a small answer nearly always fits the
        socket buffer, and trio's send_all costs several times the write itself (its conflict
        check, checkpoints and retry loop; the profile of 100 connections each with one
        Produce in flight, and a cluster leader's answers to its followers' and consumers'
        Fetches, compat/bench/profiles/).  send_all only for what did not fit.  Only this
        connection's one task writes to the socket, and it checkpoints once per read."""
        n = self._write_now(data)
        if n < len(data):
            await self.stream.send_all(memoryview(data)[n:])

    def _write_now(self, data: bytes | bytearray | memoryview) -> int:
        """What of ``data`` the socket takes without waiting (0 when its buffer is full)."""
        self.last_active = time.monotonic()
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0
        except OSError as e:
            raise trio.BrokenResourceError(str(e)) from e

    async def _send_region(self, region: FileRegion) -> None:
        """Zero-copy: os.sendfile from the segment file straight to the socket."""
        sock = self.stream.socket
        offset, remaining = region.position, region.length
        try:
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
        finally:
            # sent: its file may be closed again to stay in the fd budget (storage/fdpool.py),
            # so a Fetch over thousands of partitions keeps one of them open at a time
            unpin = getattr(region, "unpin", None)
            if unpin is not None:
                unpin()

