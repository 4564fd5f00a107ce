"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured validator (its development default,
OAuthBearerUnsecuredValidatorCallbackHandler), sans-IO.

The client's first token: ``n,[a=<authzid>],\\x01auth=Bearer <jwt>\\x01[key=value\\x01]*\\x01``.
The JWT is unsecured (``"alg":"none"``, an empty signature) and is checked as Kafka checks it:
``exp`` present and numeric and not past (``now - allowable skew``), ``iat`` (if present)
numeric, not in the future and not after ``exp``, the principal claim (``sub`` by default)
a non-empty string, every required scope present in the scope claim (a string is one scope,
a list several).
A refusal is answered, as RFC 7628 §3.2.2 and Kafka do, with a JSON challenge
(``{"status":"invalid_token"}`` or ``{"status":"insufficient_scope", "scope":"[a, b]"}``); the
client acknowledges with ``\\x01`` and only then does authentication fail, with that JSON as the
message.  Extensions are accepted (the unsecured validator validates none).  Options (JAAS of
``listener.name.<l>.oauthbearer.sasl.jaas.config``): ``unsecuredValidatorPrincipalClaimName``,
``unsecuredValidatorScopeClaimName``, ``unsecuredValidatorRequiredScope`` (space-separated),
``unsecuredValidatorAllowableClockSkewMs``.

Signed tokens: with ``[listener.name.<l>.oauthbearer.]sasl.server.callback.handler.class`` set to
Kafka's ``OAuthBearerValidatorCallbackHandler`` the listener validates JWTs as Kafka's broker
validator does (:class:`JwtValidator`, through PyJWT): a signature by a key of the JWKS of
``sasl.oauthbearer.jwks.endpoint.url`` (``file://``, read once at start-up as Kafka's
JwksFileVerificationKeyResolver does, or ``http(s)://``, fetched at start-up and kept fresh as
Kafka's RefreshingHttpsJwks does: :class:`JwksCache`, :class:`JwksRefresher`; ``alg: none``
refused),
``exp`` and ``iat`` required, ``exp``/``nbf`` checked with ``sasl.oauthbearer.clock.skew.seconds``
against the broker's clock (as Kafka's BrokerJwtValidator with jose4j), ``iss`` against ``sasl.oauthbearer.expected.issuer`` and ``aud``
against ``sasl.oauthbearer.expected.audience`` (unset: a token carrying ``aud`` is refused, as
jose4j's default audience check in Kafka's BrokerJwtValidator refuses it), the scope claim
(``sasl.oauthbearer.scope.claim.name``) a string or a list of distinct non-blank strings, the
principal from ``sasl.oauthbearer.sub.claim.name``.  A refusal is the same ``{"status":"invalid_token"}`` challenge
(Kafka's handler answers every validation failure so).
"""
from __future__ import annotations

import base64
import json
import logging
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from .errors import AuthenticationFailed

if TYPE_CHECKING:
    from .listeners import ListenerSecurity

# Kafka's answer to a malformed exchange (a SaslException, not a SaslAuthenticationException, so
# its own text is not passed on; checked against Apache Kafka 4.4, tests/differential)
log = logging.getLogger("pykbroker.security")

_GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"


_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1


def claim_ms(seconds: Any) -> int:
    """A NumericDate claim (seconds, an int or a float) in ms as Kafka's Java long: a value past
    the long range saturates (Math.round of a double: 1e400 or 10**30 is Long.MAX_VALUE, NaN 0),
    so a token with a far-off ``exp`` is valid for a session of at most Long.MAX_VALUE ms, never
    an int64 the SaslAuthenticate answer cannot hold."""
    ms = seconds * 1000   # a float of 1e306 s is infinity once in ms: checked after the product
    if isinstance(ms, float):
        if math.isnan(ms):
            return 0
        if math.isinf(ms):
            return _LONG_MAX if ms > 0 else _LONG_MIN
    return max(_LONG_MIN, min(_LONG_MAX, int(ms)))


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, options: dict, now_ms: Callable[[], int], validator: "JwtValidator | None" = None) -> None:
        self._validator = validator
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName") or "sub"
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName") or "scope"
        self._required = (options.get("unsecuredValidatorRequiredScope") or "").split()
        try:
            self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs") or 0)
        except ValueError:
            self._skew_ms = 0
        self._now_ms = now_ms
        self._error: str | None = None   # the JSON challenge sent, awaiting the client's \x01
        self.complete = False
        self.authorization_id: str | None = None
        self.lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed(_GENERIC)
        if self.complete:
            raise AuthenticationFailed(_GENERIC, internal=True)
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(_GENERIC) from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not rest.endswith("\x01\x01") or not (gs2 == "n,," or gs2.startswith("n,a=")) \
                or not gs2.endswith(","):
            raise AuthenticationFailed(_GENERIC)
        authzid = gs2[4:-1] if gs2.startswith("n,a=") else ""
        kv = {}
        for item in rest[:-2].split("\x01"):
            k, eq, v = item.partition("=")
            if not eq:
                raise AuthenticationFailed(_GENERIC)
            kv[k] = v
        auth = kv.get("auth", "")
        if not auth.startswith("Bearer "):
            raise AuthenticationFailed(_GENERIC)
        jwt = auth[len("Bearer "):].strip()
        failure = self._validate(jwt)
        if failure is not None:
            self._error = failure
            return self._error.encode()
        if authzid and authzid != self.authorization_id:
            principal, self.authorization_id = self.authorization_id, None
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id (%s) that is "
                                       "different from the token's principal name (%s)" % (authzid, principal))
        self.complete = True
        return b""

    def _validate(self, jwt: str) -> Optional[str]:
        """None, or the JSON challenge in Kafka's exact text (OAuthBearerSaslServer.jsonErrorResponse:
        a space after the comma, the required scopes as a Java list)."""
        invalid = '{"status":"invalid_token"}'
        if self._validator is not None:
            now = self._now_ms()
            checked = self._validator.validate(jwt, now)
            if checked is None:
                return invalid
            self.authorization_id, exp_ms = checked
            self.lifetime_ms = exp_ms - now
            return None
        parts = jwt.split(".")
        if len(parts) != 3 or parts[2] != "":
            return invalid   # only unsecured (unsigned) tokens: a signed one is not validated here
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
        except (ValueError, UnicodeDecodeError):
            return invalid
        if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
            return invalid
        now = self._now_ms()
        exp = claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            return invalid
        exp_ms = claim_ms(exp)
        if now - self._skew_ms >= exp_ms:
            return invalid   # expired
        iat = claims.get("iat")
        if iat is not None:
            if isinstance(iat, bool) or not isinstance(iat, (int, float)):
                return invalid
            if claim_ms(iat) > now + self._skew_ms or claim_ms(iat) > exp_ms:
                return invalid
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            return invalid
        scope = claims.get(self._scope_claim)
        # a string claim is one scope (Kafka does not split it); a list holds several
        scopes = [scope] if isinstance(scope, str) else [s for s in scope if isinstance(s, str)] \
            if isinstance(scope, list) else []
        missing = [s for s in self._required if s not in scopes]
        if missing:
            return '{"status":"insufficient_scope", "scope":"[%s]"}' % ", ".join(self._required)
        self.authorization_id = principal
        self.lifetime_ms = exp_ms - now
        return None


# ------------------------------------------------------------------ signed JWTs (JWKS)

# Kafka's secured validator: its class name since 3.7 and the older package (3.1 to 3.6), both
# accepted, as Kafka 3.x still loads the older one.
VALIDATOR_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                      "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
# Kafka accepts what jose4j verifies with a JWKS key (no "none", no HMAC: a JWKS holds public keys)
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]


def oauthbearer_settings(sec: ListenerSecurity) -> Callable[[str], Any]:
    """``get(key)``: listener ``sec``'s OAUTHBEARER setting ``key`` (its
    ``listener.name.<l>.oauthbearer.<key>``, else the listener's; a raw string or the config's
    parsed value)."""
    def get(key: str) -> Any:
        return sec.mechanism_get("OAUTHBEARER", key)
    return get


def configured_endpoint(sec: ListenerSecurity, side: str, known: tuple, url_setting: str, why: str) -> "tuple[str, str] | None":
    """(the handler setting's listener-prefixed name, the endpoint URL) when listener ``sec``
    names one of ``known`` as its OAUTHBEARER ``sasl.<side>.callback.handler.class`` (side:
    "login" or "server"), else None (Kafka's unsecured default).  A handler pykbroker does not
    build, a missing ``url_setting`` (``why`` says what it is for) or a URL other than file,
    http or https is a ConfigError at start-up, worded as Kafka words it."""
    from urllib.parse import urlparse

    from ..config import ConfigError
    get = oauthbearer_settings(sec)
    handler = get("sasl.%s.callback.handler.class" % side)
    if not handler:
        return None
    key = "listener.name.%s.oauthbearer.sasl.%s.callback.handler.class" % (sec.name.lower(), side)
    if handler.strip() not in known:
        raise ConfigError("Invalid value %s for configuration %s: pykbroker knows only %s"
                          % (handler, key, known[0]), key)
    url = get(url_setting)
    if not url:
        raise ConfigError("%s needs %s (%s)" % (key, url_setting, why), url_setting)
    if urlparse(url).scheme.lower() not in ("file", "http", "https"):
        raise ConfigError("Invalid value %s for configuration %s: a file://, http:// or https:// URL"
                          % (url, url_setting), url_setting)
    return key, url


class JwtValidator:
    """Kafka's broker JWT validator (BrokerJwtValidator) over a JWKS; sans-IO after
    construction: ``validate(token, now_ms)`` -> (principal, exp in ms) or None."""

    def __init__(self, jwks: dict, audience: Iterable[str] = (), issuer: Optional[str] = None,
                 sub_claim: str = "sub", scope_claim: str = "scope", skew_seconds: int = 30) -> None:
        import jwt as pyjwt
        self._jwt = pyjwt
        # the keys, replaced by a refresh of an http(s) JWKS (JwksRefresher); a dict is a fixed set
        self.jwks = jwks if isinstance(jwks, JwksCache) else JwksCache(jwks)
        self.refresher: "JwksRefresher | None" = None   # set for an http(s) JWKS (from_listener)
        self._audience = list(audience or [])
        self._issuer = issuer
        self._sub_claim = sub_claim or "sub"
        self._scope_claim = scope_claim or "scope"
        self._skew_ms = int(skew_seconds) * 1000

    @classmethod
    def from_listener(cls, sec: ListenerSecurity) -> "JwtValidator | None":
        """The listener's validator when its OAUTHBEARER callback handler is Kafka's secured one,
        else None (the unsecured validator).  A bad setting is a ConfigError at start-up."""
        from ..config import ConfigError

        get = oauthbearer_settings(sec)
        configured = configured_endpoint(sec, "server", VALIDATOR_HANDLERS, "sasl.oauthbearer.jwks.endpoint.url",
                                         "the keys that sign the tokens")
        if configured is None:
            return None
        key, url = configured
        from urllib.parse import unquote, urlparse
        scheme = urlparse(url).scheme.lower()
        try:
            import jwt  # noqa: F401  (PyJWT[crypto]: the security extra)
        except ImportError:
            raise ConfigError("OAuthBearerValidatorCallbackHandler needs PyJWT: pip install 'PyJWT[crypto]' "
                              "(or pykbroker[security])", key) from None
        try:
            if scheme == "file":
                with open(unquote(urlparse(url).path)) as fh:
                    jwks = json.load(fh)
            else:
                jwks = _fetch_jwks(url)
            audience = get("sasl.oauthbearer.expected.audience") or []
            if isinstance(audience, str):
                audience = [a.strip() for a in audience.split(",") if a.strip()]
            skew = get("sasl.oauthbearer.clock.skew.seconds")
            validator = cls(jwks, audience, get("sasl.oauthbearer.expected.issuer"),
                            get("sasl.oauthbearer.sub.claim.name"), get("sasl.oauthbearer.scope.claim.name"),
                            int(skew) if skew is not None else 30)
            if scheme != "file":
                validator.refresher = JwksRefresher(
                    validator.jwks, url, _long(get, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3600000),
                    _long(get, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100),
                    _long(get, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10000))
            return validator
        except (OSError, ValueError) as e:
            raise ConfigError("Invalid value %s for configuration sasl.oauthbearer.jwks.endpoint.url: %s"
                              % (url, getattr(e, "strerror", None) or e), "sasl.oauthbearer.jwks.endpoint.url") from None
        except Exception as e:   # PyJWKSetError and friends: a JWKS without a usable key
            raise ConfigError("Invalid value %s for configuration sasl.oauthbearer.jwks.endpoint.url: %s"
                              % (url, e), "sasl.oauthbearer.jwks.endpoint.url") from None

    def validate(self, token: str, now_ms: int) -> Optional[tuple[str, int]]:
        """(principal, exp in ms) of a token that passes every check, else None."""
        pyjwt = self._jwt
        try:
            header = pyjwt.get_unverified_header(token)
            kid = header.get("kid")
            key = self.jwks.key(kid)
            if key is None:
                # no key of the JWKS signed it: an http(s) JWKS is fetched again soon, at most
                # once a minute per unknown kid (Kafka's maybeExpediteRefresh); this token is
                # refused all the same, the client's next attempt meets the new keys
                if isinstance(kid, str):
                    self.jwks.missing(kid, now_ms)
                return None
            # times are checked below against the broker's clock (broker.clock), not time.time()
            claims = pyjwt.decode(token, key.key, algorithms=ALGORITHMS,
                                  audience=self._audience or None, issuer=self._issuer,
                                  options={"verify_exp": False, "verify_nbf": False, "verify_iat": False,
                                           "verify_aud": bool(self._audience),
                                           "verify_iss": self._issuer is not None,
                                           "require": ["exp", "iat"]})
        except Exception:
            return None   # PyJWTError, a malformed header, a key of the wrong type
        if not self._audience and "aud" in claims:
            # jose4j's default audience check, which Kafka's BrokerJwtValidator leaves on: a
            # token naming an audience is refused when the broker expects none
            return None
        scope = claims.get(self._scope_claim)
        scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
        # Kafka's ClaimValidationUtils.validateScopes: every scope a non-blank string, no
        # duplicates once trimmed (no scope at all is fine)
        if any(not isinstance(x, str) or not x.strip() for x in scopes) or \
                len({x.strip() for x in scopes}) != len(scopes):
            return None
        exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        for v in (exp, iat) + ((nbf,) if nbf is not None else ()):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return None
        exp_ms = claim_ms(exp)
        if exp < 0 or iat < 0:
            return None   # ClaimValidationUtils: exp and iat non-negative
        if now_ms - self._skew_ms >= exp_ms:
            return None   # expired
        if nbf is not None and claim_ms(nbf) > now_ms + self._skew_ms:
            return None   # not yet valid
        # iat must be present and numeric, but one in the future is accepted: Kafka's
        # BrokerJwtValidator leaves jose4j's default (no bound on iat) in place
        principal = claims.get(self._sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            return None
        return principal.strip(), exp_ms


def _long(get: Callable[[str], Any], key: str, default: Any) -> Any:
    v = get(key)
    return int(v) if v is not None else default


# An http(s) JWKS is first fetched while the broker is built (before it serves anything, as
# Kafka's validator fetches it when configured); a server that does not answer within this
# stops the start-up instead of hanging it, and bounds each later fetch.
JWKS_FETCH_TIMEOUT = 10.0

# Kafka's RefreshingHttpsJwks limits on expedited refreshes: an unknown kid asks for one at
# most once a minute, the 16 most recent unknown kids are remembered, and a kid longer than
# 1000 characters is taken for a malformed token and never asks (a flood of made-up kids must
# not turn into a flood of fetches, nor fill the memory)
MISSING_KID_IN_FLIGHT_MS = 60000
MISSING_KID_CACHE_MAX = 16
MISSING_KID_MAX_LENGTH = 1000


class JwksCache:
    """The verification keys of a JWKS and the unknown kids met, sans-IO.  One owner writes it
    (the listener's JwksRefresher, ``replace``); validation reads ``key`` and reports
    ``missing`` kids, which wake the refresher through ``on_expedite``."""

    def __init__(self, jwks: dict) -> None:
        self._missing: dict[str, int] = {}   # kid -> time (ms) before which it asks no refresh
        self.on_expedite: Callable[[], None] | None = None   # set by the refresher: asks for a fetch now
        self.replace(jwks)

    def replace(self, jwks: dict) -> None:
        """A fetched JWKS becomes the key set (a JWKS without a usable key raises, keeping the
        old set)."""
        import jwt as pyjwt
        keyset = pyjwt.PyJWKSet.from_dict(jwks)
        self._keys = {k.key_id: k for k in keyset.keys}
        self._all = list(keyset.keys)
        for kid in self._keys:
            if kid is not None:
                self._missing.pop(kid, None)

    def key(self, kid: Optional[str]) -> Any:
        """The key of ``kid``; a token without kid needs a JWKS of one key."""
        if kid is None:
            return self._all[0] if len(self._all) == 1 else None
        return self._keys.get(kid)

    def missing(self, kid: str, now_ms: int) -> bool:
        """An unknown kid was met: True when that asks for a refresh now (Kafka's
        maybeExpediteRefresh)."""
        if len(kid) > MISSING_KID_MAX_LENGTH:
            log.warning("JWT key id of %d characters ignored (longer than %d)", len(kid), MISSING_KID_MAX_LENGTH)
            return False
        next_check = self._missing.pop(kid, None)
        if next_check is not None and next_check > now_ms:
            self._missing[kid] = next_check   # still in flight; most recently used last
            return False
        self._missing[kid] = now_ms + MISSING_KID_IN_FLIGHT_MS
        while len(self._missing) > MISSING_KID_CACHE_MAX:
            del self._missing[next(iter(self._missing))]
        if self.on_expedite is not None:
            self.on_expedite()
        return True


class JwksRefresher:
    """Kafka's RefreshingHttpsJwks: the JWKS of an http(s) URL fetched again every
    ``refresh_ms`` and as soon as a token names a kid the cache lacks (JwksCache.missing), a
    failed fetch retried with doubling waits from ``backoff_ms`` for at most
    ``backoff_max_ms`` in all, after which the keys held stay in use until the next refresh.
    ``run`` is the broker's task (one per listener with such a validator); the fetch itself
    runs in a worker thread so the connections are never held up by it."""

    def __init__(self, cache: JwksCache, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int,
                 fetch: Optional[Callable[[str], dict]] = None) -> None:
        self.cache = cache
        self.url = url
        self.refresh_ms = max(int(refresh_ms), 1)
        self.backoff_ms = max(int(backoff_ms), 0)
        self.backoff_max_ms = max(int(backoff_max_ms), 0)
        self._fetch = fetch or _fetch_jwks
        self.refreshes = 0   # completed fetches after start-up (tests, logs)

    async def run(self) -> None:
        import trio
        log.info("JWKS validation key refresh of %s every %d ms", self.url, self.refresh_ms)
        try:
            while True:
                wake = trio.Event()   # set by an unknown kid (JwksCache.missing)
                self.cache.on_expedite = wake.set
                with trio.move_on_after(self.refresh_ms / 1000.0):
                    await wake.wait()
                await self.refresh()
        finally:
            self.cache.on_expedite = None

    async def refresh(self) -> bool:
        import trio
        log.info("OAuth JWKS refresh of %s starting", self.url)
        end = trio.current_time() + self.backoff_max_ms / 1000.0
        attempt = 0
        while True:
            attempt += 1
            try:
                jwks = await trio.to_thread.run_sync(self._fetch, self.url, abandon_on_cancel=True)
                self.cache.replace(jwks)
            except Exception as e:   # unreachable, not JSON, no usable key: keep the keys held
                wait = min(self.backoff_ms * 2 ** (attempt - 1) / 1000.0, end - trio.current_time())
                if wait <= 0:
                    log.warning("OAuth JWKS refresh of %s failed (%s); keeping the keys held", self.url, e)
                    return False
                log.warning("OAuth JWKS refresh of %s, attempt %d failed (%s); retrying in %d ms",
                            self.url, attempt, e, wait * 1000)
                await trio.sleep(wait)
                continue
            self.refreshes += 1
            log.info("OAuth JWKS refresh of %s complete", self.url)
            return True


def _fetch_jwks(url: str) -> dict:
    import urllib.request
    with urllib.request.urlopen(url, timeout=JWKS_FETCH_TIMEOUT) as resp:   # https: the system's CAs
        return json.loads(resp.read())
