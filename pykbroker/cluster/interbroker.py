"""The versions of the requests one broker sends another (follower Fetch and its ListOffsets,
WriteTxnMarkers, AddPartitionsToTxn verification), negotiated as Kafka's NetworkClient does.

A Kafka broker asks each broker it connects to for its ApiVersions and sends every request at
the highest version both know: its own code's newest (what that release builds) and what the
receiver advertises.  pykbroker's "own code" is the broker's handler table: the versions it
serves itself, limited by ``--as-kafka`` (pykbroker/profiles.py), so a broker run as Kafka 4.0
sends what a Kafka 4.0 broker sends (WriteTxnMarkers v1, Fetch up to v17) whatever the other
brokers offer, and any broker stays within what the receiving broker offers (a cluster mixing
profiles, or a rolling upgrade).  No common version: ``usable`` answers None and the caller
does what Kafka does then (verification skipped, markers retried).

Sans-IO apart from :func:`api_versions`, which asks one connection.
"""
from __future__ import annotations

import socket

import ssl
import struct
from typing import TYPE_CHECKING, Optional, cast

from ..protocol.codec import APIS
from ..protocol.framing import FrameBuffer
from ..protocol.primitives import ProtocolError

API_VERSIONS = 18
# SaslHandshake and SaslAuthenticate: the re-authentication itself, never preceded by one
_SASL_APIS = frozenset((17, 36))
ApiRanges = dict   # api key -> (min, max) as one broker advertises them

if TYPE_CHECKING:
    import trio

    from ..security.client import InterBrokerSecurity
    from ..security.tls_transport import TlsTransport


class InterBrokerVersions:
    """What this broker's own code sends: for each API, the range it serves itself."""

    def __init__(self, handlers: dict) -> None:
        self._own = {key: (h.MIN_VERSION, h.MAX_VERSION) for key, h in handlers.items()}

    def own(self, api_key: int) -> Optional[tuple]:
        return self._own.get(api_key)

    def usable(self, api_key: int, theirs: ApiRanges, lo: int = 0, hi: int = 1 << 15) -> Optional[int]:
        """The highest version within [lo, hi] (the range the caller can build) that this broker
        and the receiver (``theirs``) both know; None when there is none."""
        their = theirs.get(api_key)
        own = self._own.get(api_key)
        if their is None or own is None:
            return None
        low = max(lo, their[0], own[0])
        high = min(hi, their[1], own[1])
        return high if low <= high else None


async def api_versions(chan: Channel, software_name: str) -> ApiRanges:
    """The receiver's advertised ranges, asked on ``chan`` (any object with ``call``) as the first
    request of a connection, as Kafka's clients do (ConnectionError if it refuses)."""
    resp = await chan.call(API_VERSIONS, 3, {"client_software_name": software_name, "client_software_version": "1"})
    if resp["error_code"]:
        raise ConnectionError("ApiVersions refused: error %d" % resp["error_code"])
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]}


# KIP-368 on this broker's own connections: a session the other broker limits
# (``connections.max.reauth.ms``) is re-authenticated on the same connection between two requests
# once this share of its lifetime has passed, as Kafka's NetworkClient does (it draws 85-95 %)...
REAUTH_SHARE = 0.85
# ...and at least this long before the end, so a request sent just before the threshold (a
# follower's Fetch waits up to replica.fetch.wait.max.ms, 500 ms by default) is answered and the
# next one still goes out inside the session: the other broker closes a connection whose next
# request arrives after its session ended (Kafka's SocketServer).
REAUTH_MARGIN_S = 1.0


class Channel:
    """A request/response connection to another broker (one request in flight at a time)."""

    def __init__(self, stream: trio.abc.Stream | TlsTransport, client_id: str, max_frame: int,
                 tls: Optional[TlsTransport] = None) -> None:
        self.stream = stream
        # the connection's TLS (``stream`` itself, security/tls_transport.py), None on a plain one
        self.tls = tls
        self.client_id = client_id.encode()
        self.corr = 0
        # the broker's own framing: a large answer's pieces are joined once (protocol/framing.py)
        self.frames = FrameBuffer(max_frame)
        self.max_frame = max_frame
        self.security: Optional[InterBrokerSecurity] = None   # of a SASL connection
        self.reauth_at: Optional[float] = None    # trio time to re-authenticate at (KIP-368)
        self.reauthentications = 0

    def session_granted(self, lifetime_ms: int) -> None:
        """The other broker's ``session_lifetime_ms`` for the authentication just made."""
        import trio
        if lifetime_ms <= 0:
            self.reauth_at = None
            return
        life = lifetime_ms / 1000.0
        self.reauth_at = trio.current_time() + max(min(life * REAUTH_SHARE, life - REAUTH_MARGIN_S), life * 0.5)

    async def call(self, api_key: int, version: int, body: dict) -> dict:
        if self.reauth_at is not None and api_key not in _SASL_APIS:
            import trio
            if trio.current_time() >= self.reauth_at:
                await self._reauthenticate()
        self.corr += 1
        api = APIS[api_key]
        flexible = api.flexible(version)
        hdr = struct.pack(">hhih", api_key, version, self.corr, len(self.client_id)) + self.client_id
        if flexible:
            hdr += b"\x00"
        payload = hdr + api.encode_bytes("request", version, body)
        await self.stream.send_all(struct.pack(">i", len(payload)) + payload)
        frame = await self._read_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != self.corr:
            raise ConnectionError("correlation id %d, expected %d" % (corr, self.corr))
        # response header v1 (one empty tagged-field byte) for flexible versions, except
        # ApiVersions, whose response header is always v0 (KIP-511: a client must read it
        # before knowing the versions)
        pos = 5 if flexible and api_key != API_VERSIONS else 4
        return api.decode("response", version, frame, pos)

    async def _reauthenticate(self) -> None:
        from ..security.client import authenticate
        from ..security.errors import AuthenticationFailed
        self.reauth_at = None
        assert self.security is not None   # reauth_at is set only on a SASL connection
        try:
            lifetime = await authenticate(self, self.security)
        except AuthenticationFailed as e:
            # the other broker closes the connection after a refused re-authentication; the
            # caller's reconnection authenticates afresh (and logs a refusal there)
            raise ConnectionError("re-authentication refused: %s" % e) from None
        self.reauthentications += 1
        self.session_granted(lifetime)

    async def _read_frame(self) -> bytearray:
        frames = self.frames
        while True:
            try:
                frame = frames.next_frame()
            except ProtocolError as e:
                raise ConnectionError("bad response: %s" % e) from None
            if frame is not None:
                if len(frame) < 4:   # not even a correlation id
                    raise ConnectionError("bad response size %d" % len(frame))
                return frame
            target = frames.read_target()
            if self.tls is not None:
                await self._receive_tls(self.tls, target)
                continue
            sock = getattr(self.stream, "socket", None)
            if target is not None and sock is not None:
                # the rest of a large answer (a Fetch of up to replica.fetch.response.max.bytes)
                # goes from the socket straight into its frame's buffer: one copy, not a bytes
                # object per read copied again into the frame (the follower's profile)
                try:
                    n = await sock.recv_into(target)
                finally:
                    target.release()
                if not n:
                    raise ConnectionError("leader closed the connection")
                frames.received_into(n)
                continue
            if target is not None:
                target.release()
            # 64 KiB, as a client connection reads: enough for a small answer whole, and a
            # large one moves to its own buffer (and the direct reads above) after this
            # (not TLS here: that went through _receive_tls above)
            data = await cast("trio.abc.Stream", self.stream).receive_some(1 << 16)
            if not data:
                raise ConnectionError("leader closed the connection")
            frames.receive_data(data)


    async def _receive_tls(self, tls: TlsTransport, target: Optional[memoryview]) -> None:
        """The next TLS record already received, decrypted straight into ``target`` (the rest of
        a large answer's frame) or as up to 64 KiB; one socket read (of several records) when
        no whole record is left.  As a client listener's connection reads
        (server/secure.py): trio's SSLStream gave one record per call through its retry loop and
        copied each once more into the frame, the follower's old cost over TLS."""
        obj = tls.ssl_object
        try:
            if target is not None:
                # SSLObject.read given a buffer returns the count (typeshed says bytes)
                n: int = obj.read(len(target), target)  # type: ignore[assignment]
                if not n:
                    raise ConnectionError("leader closed the TLS session")
                self.frames.received_into(n)
            else:
                data = obj.read(1 << 16)
                if not data:
                    raise ConnectionError("leader closed the TLS session")
                self.frames.receive_data(data)
        except ssl.SSLWantReadError:
            if tls.pending_output:
                await tls.flush()   # a TLS 1.3 KeyUpdate answer
            if not await tls.fill():
                raise ConnectionError("leader closed the connection") from None
        finally:
            if target is not None:
                target.release()


async def open_channel(host: str, port: int, client_id: str, max_frame: int,
                       security: Optional[InterBrokerSecurity] = None,
                       receive_buffer_bytes: int = -1) -> tuple[trio.abc.AsyncResource, Channel]:
    """A connection to another broker's inter-broker listener: TCP, then (``security``:
    security/client.py ``InterBrokerSecurity``, None on a PLAINTEXT listener) TLS with the
    listener's trust and the SASL exchange with the broker's own credentials, as Kafka's
    inter-broker NetworkClient does before its first request.  TLS goes through the broker's own
    transport (security/tls_transport.py), as its client listeners do.  Returns ``(stream,
    chan)``; the caller closes the stream.  ``AuthenticationFailed`` (a ConnectionError here) names the
    refusal; the stream is closed then.  ``receive_buffer_bytes`` above 0 sizes the socket's
    SO_RCVBUF (Kafka's follower: ``replica.socket.receive.buffer.bytes``); -1 keeps the OS's
    autotuned buffer."""
    import trio

    from ..security.errors import AuthenticationFailed
    from ..security.tls_transport import TlsTransport
    tcp = await trio.open_tcp_stream(host, port)
    if receive_buffer_bytes > 0:
        # Set once connected (trio connects inside open_tcp_stream): the kernel still caps the
        # receive window at the new size; the window scale agreed in the handshake, from the
        # larger default, only allows more than that, never less.
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
    stream: trio.SocketStream | TlsTransport = tcp
    tls = None
    try:
        if security is not None and security.ssl_context is not None:
            stream = tls = TlsTransport(tcp, security.ssl_context, server_side=False,
                                        server_hostname=host if security.check_hostname else None)
            await tls.do_handshake()
        chan = Channel(stream, client_id, max_frame, tls)
        if security is not None and security.mechanism is not None:
            from ..security.client import authenticate
            try:
                chan.security = security
                chan.session_granted(await authenticate(chan, security))
            except AuthenticationFailed as e:
                raise InterBrokerAuthenticationError(
                    "authentication as %s with %s on listener %s of %s:%d failed: %s"
                    % (security.principal, security.mechanism, security.listener, host, port, e)) from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return stream, chan


class InterBrokerAuthenticationError(ConnectionError):
    """The other broker refused this broker's credentials (logged as a warning by callers)."""
