"""The SASL state machine of one connection (Kafka's SaslServerAuthenticator), sans-IO.

States and what each accepts (anything else closes the connection, as Kafka does):
- ``handshake``: ApiVersions and SaslHandshake.  A mechanism not enabled on the listener is
  answered UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes.
- ``authenticate`` (after SaslHandshake v1): SaslAuthenticate requests carry the tokens.  Any
  other request is answered with its own error response carrying ILLEGAL_SASL_STATE, then the
  connection closes.
- ``authenticate_raw`` (after SaslHandshake v0): the following frames are raw tokens with no
  Kafka header, and the answers raw tokens (the pre-KIP-152 framing kafka-python and aiokafka
  still use against brokers that advertise SaslHandshake v0 only).
- ``complete``: every request is served.  A new SaslHandshake v1 starts a re-authentication
  (KIP-368) when the session has a lifetime and at least a second has passed since the last
  one began; it must keep its mechanism (another one: the handshake is answered, then the
  connection closes, as Kafka 4.4 does) and its principal (else SASL_AUTHENTICATION_FAILED and a
  close).  Otherwise the
  SaslHandshake / SaslAuthenticate handlers answer ILLEGAL_SASL_STATE.
- the session lifetime (Kafka's SaslServerAuthenticator): ``connections.max.reauth.ms`` of the
  listener and mechanism, capped by an OAUTHBEARER token's expiry, sent as
  ``session_lifetime_ms``; a request other than SaslHandshake on a connection whose session
  has expired closes it (Kafka's SocketServer), times on the broker's clock.
- a failed authentication closes the connection after ``connection.failed.authentication.delay.ms``
  (Kafka delays it so a client retrying bad credentials cannot hammer the broker).

The principal of an authenticated connection is ``User:<authorization id>``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from ..protocol.errors import ErrorCode
from .errors import AuthenticationFailed
from .plain import PlainServer
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramCredential, ScramServer

if TYPE_CHECKING:
    from .kerberos import GssapiServer
    from .oauthbearer import OAuthBearerServer
    from .stats import AuthenticationStats

# (user, mechanism) -> the stored SCRAM credential text, or None
CredentialLookup = Callable[[str, str], Optional[str]]

log = logging.getLogger("pykbroker.security")

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36

HANDSHAKE, AUTHENTICATE, AUTHENTICATE_RAW, COMPLETE, FAILED = (
    "handshake", "authenticate", "authenticate_raw", "complete", "failed")


class SaslAuthenticator:
    """``sec``: the listener's ListenerSecurity (enabled mechanisms, PLAIN users);
    ``scram_lookup(user, mechanism)``: the stored credential text or None; ``peer`` names the
    client in the one log line of a failure."""

    def __init__(self, sec: Any, scram_lookup: CredentialLookup, peer: str = "?", failed_delay_ms: int = 100,
                 now_ms: Optional[Callable[[], int]] = None, stats: Optional[AuthenticationStats] = None,
                 token_lookup: Optional[CredentialLookup] = None) -> None:
        self.sec = sec
        # SCRAM tokenauth=true: DelegationTokenManager.scram_lookup (None: no delegation tokens)
        self._token_lookup = token_lookup
        # the principal authenticated with a delegation token (Kafka's tokenAuthenticated): it
        # may not ask for delegation tokens itself
        self.token_authenticated = False
        self.mechanisms = list(sec.mechanisms)
        self._scram_lookup = scram_lookup
        self.peer = peer
        self.failed_delay = failed_delay_ms / 1000.0
        if now_ms is None:
            import time
            now_ms = lambda: int(time.time() * 1000)   # noqa: E731
        self._now_ms = now_ms   # the broker's clock (token expiry follows broker.clock)
        self._stats = stats     # security/stats.AuthenticationStats, or None
        self.state = HANDSHAKE
        self.session_lifetime_ms = 0
        self.mechanism: str | None = None
        self.principal: str | None = None
        # the mechanism's server side, from the handshake on
        self._server: Union[PlainServer, ScramServer, OAuthBearerServer, GssapiServer, None] = None
        # KIP-368 re-authentication
        self.session_expiry_ms: int | None = None
        self._reauth_begin_ms: int | None = None
        self._previous: tuple[str, str] | None = None   # (mechanism, principal) being re-authenticated
        # set when the connection must close once the current answer is sent: (reason, delay s)
        self.close_after: tuple[str, float] | None = None

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def allows(self, api_key: int) -> bool:
        """May a request of ``api_key`` be served in the current state (before completion)?"""
        if self.state == HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        return self.state == AUTHENTICATE and api_key == SASL_AUTHENTICATE

    # -- SaslHandshake -------------------------------------------------------------------------
    def reauthenticate(self, version: int, mechanism: str) -> dict:
        """SaslHandshake on an authenticated connection (Kafka's maybeBeginServerReauthentication)."""
        now = self._now_ms()
        begun = self._reauth_begin_ms
        # Kafka begins one only on a session that expires (a lifetime was set), at most once a second
        # (whatever framing the client authenticated with: Kafka 4.4 lets a raw-token client
        # re-authenticate too, tests/differential)
        if version < 1 or self.session_expiry_ms is None or (begun is not None and now - begun < 1000):
            # not a re-authentication Kafka would begin: KafkaApis answers it
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        self._reauth_begin_ms = now
        # a session with an expiry is an authenticated one: both are set
        assert self.mechanism is not None and self.principal is not None
        self._previous = (self.mechanism, self.principal)
        self.state = HANDSHAKE
        if mechanism != self.mechanism and mechanism in self.mechanisms:
            # Kafka 4.4 answers the handshake (NONE and the list) and then closes
            self.state = FAILED
            self.close_after = ("re-authentication with another mechanism (%s, was %s)"
                                % (mechanism[:64], self.mechanism), 0.0)
            return {"error_code": ErrorCode.NONE, "mechanisms": self.mechanisms}
        return self.handshake(version, mechanism)

    def _count(self, outcome: str) -> None:
        if self._stats is not None:
            kind = "%s_%sauthentication" % (outcome, "re" if self._previous is not None else "")
            self._stats.record(kind, getattr(self.sec, "name", "?"), self.mechanism or "")

    def expired(self) -> bool:
        """The session has outlived its lifetime (checked per request only when it has one)."""
        return self.session_expiry_ms is not None and self._now_ms() >= self.session_expiry_ms

    def _session_lifetime_ms(self) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: 0 = the session never expires."""
        raw = self.sec.mechanism_get(self.mechanism, "connections.max.reauth.ms") \
            if hasattr(self.sec, "mechanism_get") else None
        try:
            max_reauth = int(raw) if raw is not None else 0
        except ValueError:
            max_reauth = 0
        token_ms = getattr(self._server, "lifetime_ms", None)
        token_expiry = getattr(self._server, "token_expiry_ms", None)
        if token_expiry is not None:   # a delegation token's session ends with the token
            token_ms = token_expiry - self._now_ms()
        if token_ms is None and max_reauth <= 0:
            return 0
        if token_ms is None:
            return max_reauth
        if max_reauth <= 0:
            return max(token_ms, 0)
        return max(min(token_ms, max_reauth), 0)

    def handshake(self, version: int, mechanism: str) -> dict:
        if self.state != HANDSHAKE:
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        if mechanism not in self.mechanisms:
            self.state = FAILED
            self.close_after = ("unsupported SASL mechanism %r (enabled: %s)" % (mechanism[:64], self.mechanisms), 0.0)
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": self.mechanisms}
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.sec.plain_users)
        elif mechanism == "OAUTHBEARER":
            from .oauthbearer import OAuthBearerServer
            self._server = OAuthBearerServer(getattr(self.sec, "oauth_options", {}), self._now_ms,
                                            getattr(self.sec, "oauth_validator", None))
        elif mechanism == "GSSAPI":
            from .kerberos import GssapiServer
            self._server = GssapiServer(self.sec.gssapi_credentials, self.sec.kerberos_namer)
        else:
            self._server = ScramServer(mechanism, self._lookup, self._token_lookup)
        self.state = AUTHENTICATE if version >= 1 else AUTHENTICATE_RAW
        return {"error_code": ErrorCode.NONE, "mechanisms": self.mechanisms}

    def _lookup(self, user: str, mechanism: str) -> Optional[ScramCredential]:
        text = self._scram_lookup(user, mechanism)
        return ScramCredential.from_text(text) if text else None

    # -- tokens --------------------------------------------------------------------------------
    def evaluate(self, token: bytes) -> bytes:
        """One client token -> the server's answer; AuthenticationFailed after which the
        connection closes (``close_after`` is set)."""
        server = self._server
        assert server is not None   # the dispatcher evaluates tokens only after the handshake
        try:
            out = server.evaluate(token)
        except AuthenticationFailed as e:
            self.state = FAILED
            self.close_after = ("authentication failed", self.failed_delay)
            self._count("failed")
            # once per failure, with the peer and mechanism; never the token (it holds the password)
            log.info("Failed authentication with %s (mechanism %s): %s", self.peer, self.mechanism, e.detail or e)
            raise
        if server.complete:
            assert server.authorization_id is not None   # a complete exchange names it
            principal = "User:" + server.authorization_id
            if self._previous is not None and self._previous[1] != principal:
                self._count("failed")
                self.state = FAILED
                self.close_after = ("re-authentication as another principal", self.failed_delay)
                log.info("Failed re-authentication with %s (mechanism %s): principal %s, was %s",
                         self.peer, self.mechanism, principal, self._previous[1])
                # Kafka prints the principals as type.name
                raise AuthenticationFailed("Cannot change principals during re-authentication from %s: %s"
                                           % (self._previous[1].replace(":", ".", 1), principal.replace(":", ".", 1)))
            self.state = COMPLETE
            self.principal = principal
            self.token_authenticated = bool(getattr(self._server, "token_authenticated", False))
            lifetime = self._session_lifetime_ms()
            self.session_lifetime_ms = lifetime
            self.session_expiry_ms = self._now_ms() + lifetime if lifetime > 0 else None
            # which token a token-authenticated principal used: the owner's name alone does not
            # tell an operator (or a test) a delegation token from the owner's own credentials
            token_id = getattr(self._server, "token_id", None) if self.token_authenticated else None
            log.debug("%s %sauthenticated as %s with %s%s", self.peer, "re-" if self._previous else "",
                      self.principal, self.mechanism, "" if token_id is None else " (delegation token %s)" % token_id)
            self._count("successful")
            self._previous = None
        return out

    # -- fault injection (server/faults.py through server/secure.py) --------------------------
    def inject_failure(self, api_key: int, code: int) -> dict:
        """The answer to a SaslHandshake (17) or SaslAuthenticate (36) the fault plan fails with
        ``code``, and the connection's end, as Kafka's SaslServerAuthenticator ends an exchange
        that failed so: SASL_AUTHENTICATION_FAILED carries Kafka's message for bad credentials
        (a client cannot tell it from a wrong password), counts as a failed authentication and
        closes after ``connection.failed.authentication.delay.ms``; any other error (e.g.
        ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM, which lists the enabled mechanisms as
        Kafka's does) is answered and the connection closes at once: Kafka's authenticator never
        goes on with an exchange after an error answer."""
        code = int(code)
        mechanism = self.mechanism or "?"
        self.state = FAILED
        if api_key == SASL_HANDSHAKE:
            self.close_after = ("fault injection: SaslHandshake failed with error %d" % code, 0.0)
            return {"error_code": code,
                    "mechanisms": self.mechanisms if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM else []}
        if code == ErrorCode.SASL_AUTHENTICATION_FAILED:
            self.close_after = ("fault injection: authentication failed", self.failed_delay)
            self._count("failed")
            log.info("Failed authentication with %s (mechanism %s): fault injection", self.peer, mechanism)
            # the text Kafka sends for bad credentials with this mechanism (PlainSaslServer's own
            # message; SCRAM's and OAUTHBEARER's generic one)
            message = "Authentication failed: Invalid username or password" if mechanism == "PLAIN" else \
                ("Authentication failed during authentication due to invalid credentials with SASL "
                 "mechanism %s" % mechanism)
        else:
            self.close_after = ("fault injection: SaslAuthenticate failed with error %d" % code, 0.0)
            message = None
        return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}

    def authenticate(self, version: int, auth_bytes: bytes) -> dict:
        """SaslAuthenticate in the ``authenticate`` state."""
        if self.state != AUTHENTICATE:
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                    "error_message": "Unexpected SaslAuthenticate request in state %s" % self.state,
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        try:
            out = self.evaluate(auth_bytes)
        except AuthenticationFailed as e:
            return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(e),
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        # Kafka answers success with an empty (not null) message
        return {"error_code": ErrorCode.NONE, "error_message": "", "auth_bytes": out,
                "session_lifetime_ms": self.session_lifetime_ms if self.complete else 0}


__all__ = ["SaslAuthenticator", "SCRAM_MECHANISMS"]
