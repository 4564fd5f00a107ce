"""Connections of SSL, SASL_PLAINTEXT and SASL_SSL listeners.

PLAINTEXT listeners keep ``connection.Connection`` and ``dispatch.Dispatcher`` untouched: TLS
and SASL cost them nothing.  Here:

- ``SaslDispatcher``: the sans-IO dispatcher with the SASL gate of security/authenticator.py in
  front (what may be asked before authentication, the v0 raw-token frames, the close after an
  answer that ends the exchange), and the ``sasl.server.max.receive.size`` frame limit until
  authentication completes.  Once authenticated it is the plain dispatcher.  An error the
  fault plan injects on SaslHandshake / SaslAuthenticate is answered and ends the exchange as
  Kafka's authenticator ends a failed one (``SaslAuthenticator.inject_failure``).
- ``SecureConnection``: on SASL_PLAINTEXT the plain socket path with a ``SaslDispatcher``; on
  SSL/SASL_SSL a ``TlsTransport`` (security/tls_transport.py: OpenSSL's memory BIOs on the non-blocking
  socket; the handshake under a timeout; the principal from the client certificate).  Fetch answers cannot use ``sendfile``
  over TLS: their file regions are read into large buffers (one per ~1 MiB, never per record)
  and written as few TLS records as possible.
"""
from __future__ import annotations

import logging
import os
import ssl
import struct
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

import trio

from ..protocol.errors import ErrorCode, KafkaError
from ..security.authenticator import AUTHENTICATE, AUTHENTICATE_RAW, SaslAuthenticator
from ..security.errors import AuthenticationFailed
from .connection import Connection
from .dispatch import Delayed, Dispatcher, Event, HandleRequest, SendResponse
from .faults import FaultPlan
from ..security.tls_transport import TlsTransport

if TYPE_CHECKING:
    from ..security.listeners import ListenerSecurity
    from ..storage.segment import FileRegion

log = logging.getLogger("pykbroker.connection")

# A client that opens a TLS connection and stalls must not hold it forever; Kafka's equivalent is
# the idle-connection reaper.  10 s is far above any loopback or LAN handshake.
TLS_HANDSHAKE_TIMEOUT = 10.0
# How long a failed handshake's alert may take to leave (the peer may not read at all).
TLS_ALERT_FLUSH_TIMEOUT = 1.0


# Fetch answers over TLS are written in buffers of this size (file regions read into them).
_TLS_WRITE_BUFFER = 1 << 20

_HEADER_KEY = struct.Struct(">h")


class SaslDispatcher(Dispatcher):
    def __init__(self, handlers: dict, max_frame_bytes: int, broker: Any, connection: Any, peer: str,
                 faults: Optional[FaultPlan], auth: SaslAuthenticator, max_receive_size: int) -> None:
        super().__init__(handlers, max_frame_bytes, broker, connection, peer, faults)
        self.auth = auth
        self._authenticated_limit = max_frame_bytes
        # Kafka's sasl.server.max.receive.size: the largest frame accepted before authentication
        self._frames.max_frame_bytes = min(max_frame_bytes, max_receive_size)

    def next_event(self) -> Optional[Event]:
        auth = self.auth
        if auth.complete and self._frames.max_frame_bytes != self._authenticated_limit:
            # authenticated (the SaslAuthenticate handler just ran): the next frame's size is
            # checked against socket.request.max.bytes again, before it is dispatched
            self._frames.max_frame_bytes = self._authenticated_limit
        if auth.close_after is not None and not self.closed:
            reason, delay = auth.close_after
            auth.close_after = None
            # DEBUG: the authenticator already logged the failure once, with peer and mechanism
            event = self._close("SASL: %s" % reason, logging.DEBUG)
            return Delayed(delay, event) if delay > 0 else event
        return super().next_event()

    def _injected_error(self, ctx: Any, request: dict, code: int) -> Optional[dict]:
        # an injected SaslHandshake / SaslAuthenticate error ends the exchange as a real one
        # does (security/authenticator.py inject_failure); other APIs: the handler's answer
        if ctx.api_key in (17, 36):
            return self.auth.inject_failure(ctx.api_key, code)
        return None

    def _dispatch(self, frame: bytearray) -> Optional[Event]:
        auth = self.auth
        if auth.complete:
            if auth.session_expiry_ms is not None and len(frame) >= 2 \
                    and _HEADER_KEY.unpack_from(frame)[0] != 17 and auth.expired():
                # KIP-368: a session past its lifetime is closed on its next request (Kafka's
                # SocketServer); a SaslHandshake still starts a re-authentication
                return self._close("SASL session of %s expired" % auth.principal, logging.INFO)
            return super()._dispatch(frame)
        if auth.state == AUTHENTICATE_RAW:
            # SaslHandshake v0: a raw token, answered with a raw (size-prefixed) token
            try:
                out = auth.evaluate(bytes(frame))
            except AuthenticationFailed:
                return self.next_event()   # the delayed close (Kafka sends nothing on v0)
            if auth.complete:
                self._frames.max_frame_bytes = self._authenticated_limit
            return SendResponse([struct.pack(">i", len(out)) + out])
        if len(frame) < 8:
            return super()._dispatch(frame)   # too short: closes
        (api_key,) = _HEADER_KEY.unpack_from(frame)
        if auth.allows(api_key):
            return super()._dispatch(frame)
        if auth.state == AUTHENTICATE:
            # Kafka answers another request during the SaslAuthenticate exchange with its error
            # response (ILLEGAL_SASL_STATE), then closes
            event = super()._dispatch(frame)
            if event.__class__ is HandleRequest:
                auth.close_after = ("request of API %d during SASL authentication" % api_key, 0.0)
                auth.state = "failed"
                return self.fail(event, KafkaError(ErrorCode.ILLEGAL_SASL_STATE))
            return event
        return self._close("request of API %d before SASL authentication (state %s)" % (api_key, auth.state),
                           logging.INFO)


def _token_lookup(broker: Any) -> Optional[Callable[[str, str], Optional[str]]]:
    """SCRAM ``tokenauth=true`` credentials of the broker's delegation tokens, or None when they
    are disabled (no ``delegation.token.secret.key``)."""
    tm = getattr(broker, "token_manager", None)
    return tm.scram_lookup if tm is not None and tm.enabled else None


class SecureConnection(Connection):
    """A connection of a listener with security (``sec``: security/listeners.ListenerSecurity)."""

    sec: ListenerSecurity   # never None here

    def __init__(self, broker: Any, stream: trio.SocketStream, listener_name: str, sec: Any) -> None:
        super().__init__(broker, stream, listener_name)
        self.sec = sec
        self._tls_principal = "User:ANONYMOUS"   # the client certificate's, on SSL listeners
        self.authenticator = None
        if sec.sasl:
            controller = broker.controller
            cfg = broker.config
            self.authenticator = SaslAuthenticator(
                sec, controller.scram_credential, self.peer, cfg["connection.failed.authentication.delay.ms"],
                broker.clock.time_ms, getattr(broker, "auth_stats", None),
                _token_lookup(broker))
            self.dispatcher = SaslDispatcher(broker.handlers, cfg["socket.request.max.bytes"], broker, self,
                                             self.peer, getattr(broker, "faults", None), self.authenticator,
                                             cfg["sasl.server.max.receive.size"])

    @property
    def token_authenticated(self) -> bool:
        """Authenticated with a delegation token (SCRAM tokenauth=true): Kafka's
        KafkaPrincipal.tokenAuthenticated."""
        a = self.authenticator
        return a is not None and a.token_authenticated

    # a plain connection's principal is a constant class attribute (never assigned); a secured
    # one computes it from the authentication, hence the read-only property over it
    @property
    def principal(self) -> str:  # type: ignore[override]
        """Kafka's principal of this connection (DefaultKafkaPrincipalBuilder): the SASL
        authorization id on SASL listeners, the mapped certificate DN on SSL (ANONYMOUS without
        a client certificate); what authorization will check."""
        a = self.authenticator
        if a is not None:
            return a.principal or "User:ANONYMOUS"
        return self._tls_principal

    async def _serve(self) -> None:
        if not self.sec.tls:
            await super()._serve()   # SASL_PLAINTEXT: the plain socket path
            return
        # From here on the connection's stream is the TLS transport (its close sends close_notify).
        # Connection types it as the plain socket stream its own socket-level paths (direct
        # reads, sendfile) use; those never run on a TLS connection, which reads below.
        context = self.sec.ssl_context
        assert context is not None   # built with every TLS listener's security (security/listeners.py)
        self.stream = tls = TlsTransport(self.stream, context)  # type: ignore[assignment]
        try:
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT):
                await tls.do_handshake()
        except trio.TooSlowError:
            log.info("TLS handshake with %s timed out", self.peer)
            return
        except (ssl.SSLError, trio.BrokenResourceError) as e:
            # plaintext on a TLS port, an untrusted client certificate, a reset: no crash, one line
            log.info("TLS handshake with %s failed: %s", self.peer, e)
            if isinstance(e, ssl.SSLError):
                await tls.flush_alert(TLS_ALERT_FLUSH_TIMEOUT, isinstance(e, ssl.SSLCertVerificationError))
            return
        der = tls.getpeercert(binary_form=True)
        if der:
            try:
                from ..security.tls import certificate_dn
                rules = self.sec.principal_rules
                assert rules is not None   # built with every TLS listener's security
                self._tls_principal = "User:" + rules.name(certificate_dn(der))
            except Exception as e:   # no rule matches / unreadable certificate: Kafka fails the connection
                log.info("closing connection from %s: no principal for its certificate (%s)", self.peer, e)
                return
        log.debug("TLS connection from %s on %s, principal %s", self.peer, self.listener_name, self.principal)
        dispatcher = self.dispatcher
        obj = tls.ssl_object
        checkpoint = trio.lowlevel.checkpoint
        while True:
            # The next TLS record already in the incoming buffer, decrypted straight into the
            # frame's buffer when the dispatcher offers one (a large request's body), as the
            # PLAINTEXT path reads it; a socket read only when no whole record is left
            # (security/tls_transport.py: why not trio's SSLStream).
            target = dispatcher.read_target()
            try:
                if target is not None:
                    n = obj.read(len(target), target)
                    if not n:
                        return   # the client's close_notify (OpenSSL's read answers 0 from then on)
                    # SSLObject.read given a buffer returns the count (typeshed says bytes)
                    dispatcher.received_into(n)  # type: ignore[arg-type]
                else:
                    data = obj.read(65536)
                    if not data:
                        return   # the client's close_notify
                    dispatcher.receive_data(data)
            except ssl.SSLWantReadError:
                if tls.pending_output:
                    await tls.flush()   # a TLS 1.3 KeyUpdate answer
                if not await tls.fill():
                    return
                self.last_active = time.monotonic()
                await checkpoint()   # one per socket read, as the PLAINTEXT path
                continue
            except ssl.SSLError as e:
                log.info("TLS connection from %s failed: %s", self.peer, e)
                return
            finally:
                if target is not None:
                    target.release()
            if not await self._carry_out_received(dispatcher, self.quotas):
                return

    def _write_now(self, data: bytes | bytearray | memoryview) -> int:
        if self.sec.tls:
            self.last_active = time.monotonic()
            return 0   # everything goes through TlsTransport.send_all (encrypted first)
        return super()._write_now(data)

    async def _write(self, parts: list) -> None:
        if not self.sec.tls:
            await super()._write(parts)
            return
        self.last_active = time.monotonic()
        buf = bytearray()
        for p in parts:
            if isinstance(p, (bytes, bytearray, memoryview)):
                buf += p
            else:
                self._read_region(p, buf)
            if len(buf) >= _TLS_WRITE_BUFFER:
                await self.stream.send_all(buf)
                buf = bytearray()
        if buf:
            await self.stream.send_all(buf)

    @staticmethod
    def _read_region(region: FileRegion, buf: bytearray) -> None:
        """A Fetch answer's file region appended to ``buf`` (no sendfile through TLS)."""
        try:
            offset, remaining = region.position, region.length
            while remaining > 0:
                chunk = os.pread(region.fd, min(remaining, _TLS_WRITE_BUFFER), offset)
                if not chunk:
                    # the file shrank (truncation): the answer is already sized, close (as sendfile does)
                    raise trio.BrokenResourceError("segment truncated while reading for TLS")
                buf += chunk
                offset += len(chunk)
                remaining -= len(chunk)
        finally:
            unpin = getattr(region, "unpin", None)
            if unpin is not None:
                unpin()
