"""``pykbroker trace proxy --listen HOST:PORT --upstream HOST:PORT[,HOST:PORT...] --out FILE``: a
transparent recording TCP proxy in front of a Kafka broker or cluster (pykbroker, Apache Kafka,
any other).

One listener per upstream broker: the first on ``--listen``'s port, the next ones on the ports
after it (or on free ports when that port is 0).  Every exchange of a cluster's trace names the
broker it went to (``"broker": "HOST:PORT"``, upstream); a single upstream's lines have no such
field, as before.

Each client connection gets its own upstream connection.  Requests are forwarded byte for byte;
each is decoded with the project's generated codecs (``protocol/codec.py``) and kept by
correlation id until its response arrives, then the exchange is appended to the trace as one JSON
line (the format of ``trace.py``, the same as ``pykbroker serve --trace``).  An acks=0 Produce gets
no response, so it is written at once with ``"response": null``.

Responses are forwarded unchanged except where the client would otherwise leave the proxy:

- Metadata, FindCoordinator (v0-3 and v4+ ``coordinators``), DescribeCluster and Produce v10+
  ``node_endpoints`` carry broker addresses: each becomes the address of the proxy's listener for
  that broker (``Router``).  A broker is recognised by the host and port it advertises, or by its
  port alone when one upstream has it; with a single upstream every address maps to its listener
  (a broker may advertise a name other than the one given).  An address no upstream matches is
  left as it is, with one warning: the client then talks to that broker directly, unrecorded, so
  name every broker of a cluster in ``--upstream``.
- ApiVersions: each API's ``max_version`` is capped at the newest version the codecs decode, and
  APIs they do not know are left out, so that every later request can be decoded.  This changes
  what the client picks (Kafka 4 offers newer versions of some APIs than pykbroker): the trace
  shows the conversation the client has through the proxy, which is the one to compare.  An
  ApiVersions request newer than the codecs is answered by the proxy itself (``_answer_itself``).

A request or response that cannot be decoded is still forwarded; its line carries
``"request_error"`` / ``"response_error"`` instead of the body.
"""
from __future__ import annotations

import functools
import logging
import sys
import time
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable

import trio

from ..protocol import primitives as P
from ..protocol.codec import APIS
from ..protocol.framing import FrameBuffer, parse_request_header
from .trace import TraceFile, decode_response, exchange

if TYPE_CHECKING:
    import argparse

log = logging.getLogger("pykbroker.trace.proxy")

MAX_FRAME = 200 * 1024 * 1024   # no limit of its own: the broker behind enforces its own
# how long a connection whose client left waits for the answers to its requests in flight (a
# consumer's long-poll fetch waits up to fetch.max.wait.ms, 500 ms by default)
DRAIN_SECONDS = 5.0
API_VERSIONS, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, PRODUCE = 18, 3, 10, 60, 0


def _frame(body: bytes | bytearray) -> bytes:
    return P.I32.pack(len(body)) + body


class Router:
    """Which proxy listener stands for which upstream broker: ``upstreams[i]`` is served on
    ``advertised[i]``."""

    def __init__(self, upstreams: list[tuple[str, int]], advertised: list[tuple[str, int]]) -> None:
        self.upstreams = list(upstreams)
        self.advertised = list(advertised)
        self._warned: set = set()

    def route(self, host: str, port: int) -> tuple[str, int] | None:
        """The listener for the broker advertised at ``host:port``, None when no upstream is it."""
        if len(self.upstreams) == 1:
            return self.advertised[0]
        for i, u in enumerate(self.upstreams):
            if u == (host, port):
                return self.advertised[i]
        # the same broker under another name (localhost for 127.0.0.1, a hostname for its
        # address): its port, when only one upstream has that port
        same_port = [i for i, u in enumerate(self.upstreams) if u[1] == port]
        if len(same_port) == 1:
            return self.advertised[same_port[0]]
        if (host, port) not in self._warned:
            self._warned.add((host, port))
            log.warning("broker %s:%d is not among the upstreams: its address is passed on unchanged "
                        "and clients will talk to it directly, unrecorded", host, port)
        return None


def rewrite_response(api_key: int, version: int, body: dict, router: Router) -> bool:
    """Rewrite ``body`` in place so the client keeps talking through the proxy; True if changed."""
    changed = False

    def point(d: dict) -> None:
        nonlocal changed
        if d.get("host") is None:
            return
        to = router.route(d["host"], d.get("port", -1))
        if to is not None and (d["host"], d.get("port")) != to:
            d["host"], d["port"] = to
            changed = True

    if api_key in (METADATA, DESCRIBE_CLUSTER):
        for b in body.get("brokers") or ():
            point(b)
    elif api_key == FIND_COORDINATOR:
        if body.get("host"):
            point(body)
        for c in body.get("coordinators") or ():
            if c.get("host"):
                point(c)
    elif api_key == PRODUCE:
        for b in body.get("node_endpoints") or ():
            point(b)
    elif api_key == API_VERSIONS and not body.get("error_code"):
        keep = []
        for a in body.get("api_keys") or ():
            spec = APIS.get(a["api_key"])
            if spec is None or a["min_version"] > spec.max_version or a["max_version"] < spec.min_version:
                changed = True
                continue
            if a["max_version"] > spec.max_version:
                a["max_version"] = spec.max_version
                changed = True
            keep.append(a)
        body["api_keys"] = keep
    return changed


class ProxyConnection:
    def __init__(self, client: trio.abc.Stream, upstream: trio.abc.Stream, trace: TraceFile,
                 router: Router, peer: str, broker: str | None = None) -> None:
        self.client = client
        self.upstream = upstream
        self.trace = trace
        self.router = router
        self.peer = peer
        # the upstream's HOST:PORT on every line of a cluster's trace
        self.tag: dict = {"broker": broker} if broker is not None else {}
        self.pending: dict[int, tuple] = {}
        self._client_send = trio.StrictFIFOLock()   # both directions may answer the client

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._client_to_upstream, nursery.cancel_scope)
                nursery.start_soon(self._upstream_to_client, nursery.cancel_scope)
        finally:
            with trio.CancelScope(shield=True):
                await self.client.aclose()
                await self.upstream.aclose()

    async def _client_to_upstream(self, scope: trio.CancelScope) -> None:
        try:
            async for frames in _frames_read(self.client):
                out = bytearray()
                for frame in frames:
                    answer = self._answer_itself(frame)
                    if answer is not None:
                        if out:
                            await self.upstream.send_all(out)
                            out = bytearray()
                        async with self._client_send:
                            await self.client.send_all(answer)
                        continue
                    self._on_request(frame)
                    out += _frame(frame)
                if out:
                    await self.upstream.send_all(out)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        # The client left with requests in flight (a consumer closing during a long-poll fetch):
        # the broker still answers them, and the trace should have those answers too.
        with trio.move_on_after(DRAIN_SECONDS):
            while self.pending:
                await trio.sleep(0.02)
        scope.cancel()

    async def _upstream_to_client(self, scope: trio.CancelScope) -> None:
        client_gone = False
        try:
            async for frames in _frames_read(self.upstream):
                out = bytearray()
                for frame in frames:
                    out += _frame(self._on_response(frame))
                if not client_gone:
                    try:
                        async with self._client_send:
                            await self.client.send_all(out)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        client_gone = True   # keep recording what the broker still answers
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        scope.cancel()

    def _answer_itself(self, frame: bytes | bytearray) -> bytes | None:
        """An ApiVersions request newer than the codecs decode, first on its connection: answered
        here as a broker answers a too-new ApiVersions (KIP-511: a v0 body, UNSUPPORTED_VERSION,
        and the ApiVersions range it knows), so the client retries with a version the proxy
        decodes, and caps, instead of going on with the upstream's versions unseen."""
        if len(frame) < 8 or P.I16.unpack_from(frame, 0)[0] != API_VERSIONS or self.pending:
            return None
        spec = APIS[API_VERSIONS]
        version, corr = P.I16.unpack_from(frame, 2)[0], P.I32.unpack_from(frame, 4)[0]
        if version <= spec.max_version:
            return None
        body = {"error_code": 35, "api_keys": [{"api_key": API_VERSIONS, "min_version": spec.min_version,
                                                "max_version": spec.max_version}]}
        self.trace.write(exchange(self.peer, API_VERSIONS, version, corr, None, None, body, time.time(), 0.0,
                                  **self.tag, request_error="ApiVersions v%d is newer than the codecs: answered by the "
                                                "proxy with UNSUPPORTED_VERSION" % version))
        return _frame(P.I32.pack(corr) + spec.encode_bytes("response", 0, body))

    def _on_request(self, frame: bytes | bytearray) -> None:
        t0 = time.time()
        api_key, version, corr = P.I16.unpack_from(frame, 0)[0], P.I16.unpack_from(frame, 2)[0], \
            P.I32.unpack_from(frame, 4)[0]
        spec = APIS.get(api_key)
        client_id, request, extra = None, None, {}
        try:
            if spec is None:
                raise ValueError("API key %d unknown to the codecs" % api_key)
            flexible = min(version, spec.max_version) >= spec.flexible_from
            header = parse_request_header(frame, flexible)
            client_id = header.client_id
            request = spec.decode("request", version, memoryview(frame)[header.body_offset:], exact=False)
        except Exception as e:
            extra["request_error"] = "undecodable: %s" % e
        if api_key == PRODUCE and request is not None and request.get("acks") == 0:
            self.trace.write(exchange(self.peer, api_key, version, corr, client_id, request, None, t0, 0.0,
                                      **self.tag, **extra))
            return
        self.pending[corr] = (api_key, version, client_id, request, t0, time.perf_counter(), extra)

    def _on_response(self, frame: bytes | bytearray) -> bytes | bytearray:
        corr = P.I32.unpack_from(frame, 0)[0]
        entry = self.pending.pop(corr, None)
        if entry is None:
            return frame   # a response to nothing we saw: forward it as it is
        api_key, version, client_id, request, t0, p0, extra = entry
        body = None
        try:
            _corr, body = decode_response(frame, api_key, version)  # type: ignore[arg-type]  # reads a bytearray alike
        except Exception as e:
            extra = {**extra, "response_error": "undecodable: %s" % e}
        if body is not None and rewrite_response(api_key, version, body, self.router):
            spec = APIS[api_key]
            enc_version = version
            flexible_header = api_key != API_VERSIONS and version >= spec.flexible_from
            header = P.I32.pack(corr) + (b"\x00" if flexible_header else b"")
            frame = header + spec.encode_bytes("response", enc_version, body)
        self.trace.write(exchange(self.peer, api_key, version, corr, client_id, request, body, t0,
                                  (time.perf_counter() - p0) * 1000.0, **self.tag, **extra))
        return frame


def _host_port(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("expected HOST:PORT, got %r" % text)
    return host.strip("[]") or default_host, int(port)


async def drain(connections: set, seconds: float = DRAIN_SECONDS) -> None:
    """Wait (at most ``seconds``) until every connection's requests in flight are answered, so
    that stopping the proxy right after a client finished loses no exchange of the trace."""
    with trio.move_on_after(seconds):
        while any(c.pending for c in connections):
            await trio.sleep(0.02)


def _upstreams(text: str) -> list[tuple[str, int]]:
    out = [_host_port(part.strip()) for part in text.split(",") if part.strip()]
    if not out:
        raise ValueError("expected HOST:PORT[,HOST:PORT...], got %r" % text)
    if len(set(out)) != len(out):
        raise ValueError("an upstream is named twice in %r" % text)
    return out


async def run_proxy(listen: tuple[str, int], upstream: tuple[str, int] | list[tuple[str, int]], out: str,
                    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
                    connections: set | None = None) -> None:
    """Serve until cancelled; ``task_status.started`` gets the first listener's port (the one to
    bootstrap from).  ``upstream``: one broker's (host, port) or a list of them, one listener
    each.  ``connections``: a set the live ``ProxyConnection``s are kept in (for ``drain``)."""
    upstreams = [upstream] if isinstance(upstream, tuple) else list(upstream)
    trace = TraceFile(out)
    if connections is None:
        connections = set()
    host = listen[0] if listen[0] not in ("", "0.0.0.0", "::") else "127.0.0.1"
    listener_sets = []
    for i in range(len(upstreams)):
        listener_sets.append(await trio.open_tcp_listeners(listen[1] + i if listen[1] else 0, host=listen[0]))
    router = Router(upstreams, [(host, ls[0].socket.getsockname()[1]) for ls in listener_sets])
    cluster = len(upstreams) > 1

    def handler(up_addr: tuple[str, int]) -> Callable[[trio.SocketStream], Awaitable[None]]:
        async def on_conn(client: trio.SocketStream) -> None:
            try:
                peer = "%s:%s" % client.socket.getpeername()[:2]
            except OSError:
                peer = "?"
            try:
                up = await trio.open_tcp_stream(*up_addr)
            except OSError as e:
                log.warning("upstream %s:%d unreachable: %s", up_addr[0], up_addr[1], e)
                await client.aclose()
                return
            conn = ProxyConnection(client, up, trace, router, peer,
                                   broker="%s:%d" % up_addr if cluster else None)
            connections.add(conn)
            try:
                await conn.run()
            except Exception:
                log.exception("proxy connection from %s failed", peer)
            finally:
                connections.discard(conn)
        return on_conn

    try:
        async with trio.open_nursery() as nursery:
            for up_addr, ls in zip(upstreams, listener_sets):
                nursery.start_soon(functools.partial(trio.serve_listeners, handler(up_addr), ls,
                                                     handler_nursery=nursery))
            for (uh, up), (ah, ap) in zip(upstreams, router.advertised):
                log.info("listening on %s:%d for %s:%d", ah, ap, uh, up)
            task_status.started(router.advertised[0][1])
    finally:
        trace.close()


def main(args: argparse.Namespace) -> int:
    import signal

    try:
        listen = _host_port(args.listen)
        upstream = _upstreams(args.upstream)
    except ValueError as e:
        print("pykbroker: %s" % e, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")

    async def serve() -> None:
        connections: set = set()
        async with trio.open_nursery() as nursery:
            port = await nursery.start(functools.partial(run_proxy, connections=connections),
                                       listen, upstream, args.out)
            # the line scripts and tests wait for (port 0 chose a free one)
            print("proxy listening on %s:%d, upstream %s, trace in %s"
                  % (listen[0], port, ",".join("%s:%d" % u for u in upstream), args.out), flush=True)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    await drain(connections)
                    nursery.cancel_scope.cancel()
                    break

    trio.run(serve)
    return 0


async def _frames_read(stream: trio.abc.ReceiveStream) -> AsyncIterator[list]:
    """Per read from ``stream``, until it ends, the frames that read completed (maybe none)."""
    frames = FrameBuffer(MAX_FRAME)
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        frames.receive_data(data)
        done = []
        while (frame := frames.next_frame()) is not None:
            done.append(frame)
        yield done
