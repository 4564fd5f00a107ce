"""The broker's own OAuth login for its inter-broker connections: Kafka's
``OAuthBearerLoginCallbackHandler`` with the ``client_credentials`` grant, sans-IO apart from
:func:`http_post` (a blocking call the trio side runs in a worker thread).

Chosen as Kafka chooses it: ``[listener.name.<l>.oauthbearer.]sasl.login.callback.handler.class``
naming Kafka's handler on the inter-broker listener, with
``sasl.oauthbearer.token.endpoint.url``.  Then, as Kafka's ClientCredentialsJwtRetriever does:
- the client id, secret and scope come from ``sasl.oauthbearer.client.credentials.client.id`` /
  ``.client.secret`` / ``sasl.oauthbearer.scope`` (Kafka 4.1+), else the login module's JAAS
  options ``clientId`` / ``clientSecret`` / ``scope``; id and secret are required;
- the request: ``POST`` with ``grant_type=client_credentials[&scope=<url-encoded>]``,
  ``Authorization: Basic base64(id:secret)`` (RFC 7617, standard base64; id and secret
  URL-encoded first only with ``sasl.oauthbearer.header.urlencode=true``, Kafka's default
  false), ``Accept: application/json``, ``Cache-Control: no-cache``, form content type;
- the answer's ``access_token`` is the JWT; 200/201 succeed, Kafka's fatal statuses (400, 401,
  403, 404, ...) fail at once, anything else is retried with doubling waits from
  ``sasl.login.retry.backoff.ms`` for at most ``sasl.login.retry.backoff.max.ms``;
- the token is checked as Kafka's ClientJwtValidator checks it before use (no signature check:
  that is the receiving broker's job): ``exp`` and the subject claim
  (``sasl.oauthbearer.sub.claim.name``) present, the scope claim a string or a list of distinct
  non-blank strings;
- a ``file://`` endpoint URL is Kafka's FileJwtRetriever: the file holds the JWT, read again at
  each retrieval.
The token is kept and used for every connection until ``sasl.login.refresh.window.factor``
(0.8, Kafka's default) of its lifetime has passed, then fetched again at the next connection or
re-authentication (Kafka refreshes it in a background thread at the same point).  JAAS
``extension_<key>`` options become the SASL extensions.  The client secret never reaches a log,
an exception text or ``repr``.
"""
from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any, Callable, Optional
from urllib.parse import quote_plus

from ..config import ConfigError
from .oauthbearer import configured_endpoint, oauthbearer_settings

if TYPE_CHECKING:
    from .listeners import ListenerSecurity

# Kafka's login handler: its class name since 3.7 and the older package (3.1 to 3.6)
LOGIN_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                  "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")
# JwtHttpClient: the answers that end the retrieval at once (anything else not 200/201 is retried)
FATAL_STATUS = frozenset((400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505))
SUCCESS_STATUS = frozenset((200, 201))
# a token endpoint that does not answer within this much is an attempt failed (Kafka's
# sasl.login.connect/read.timeout.ms are unset by default: the JDK's, unbounded); a bound keeps
# one stuck endpoint from holding a replication connection forever
DEFAULT_TIMEOUT_S = 10.0


class TokenError(Exception):
    """No token could be had (the endpoint's answer, or the token's own fault)."""


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def check_token(jwt: str, sub_claim: str = "sub", scope_claim: str = "scope") -> tuple:
    """(subject, exp in ms, iat in ms or None) of a retrieved JWT, checked as Kafka's
    ClientJwtValidator does (claims only, no signature); TokenError names what is wrong."""
    parts = jwt.split(".")
    if len(parts) != 3:
        raise TokenError("the access token is not a JWT (%d parts)" % len(parts))
    try:
        claims = json.loads(_b64url(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise TokenError("the access token's payload is not JSON") from None
    if not isinstance(claims, dict):
        raise TokenError("the access token's payload is not a JSON object")
    scope = claims.get(scope_claim)
    scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
    if any(not isinstance(s, str) or not s.strip() for s in scopes) or len({s.strip() for s in scopes}) != len(scopes):
        raise TokenError("the access token's %s claim holds a blank or repeated scope" % scope_claim)
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)) or exp < 0:
        raise TokenError("the access token has no valid exp claim")
    sub = claims.get(sub_claim)
    if not isinstance(sub, str) or not sub.strip():
        raise TokenError("the access token has no %s claim" % sub_claim)
    iat = claims.get("iat")
    if iat is not None and (isinstance(iat, bool) or not isinstance(iat, (int, float)) or iat < 0):
        raise TokenError("the access token's iat claim is not a non-negative number")
    # Kafka reads exp and iat as whole seconds (Number.longValue() * 1000)
    return sub.strip(), int(exp) * 1000, (int(iat) * 1000 if iat is not None else None)


class ClientCredentialsLogin:
    """One broker's OAuth login (module docstring).  ``request()`` and ``accept()`` are the
    sans-IO halves; ``fetch(post, sleep, now)`` runs the retry loop with the I/O handed in, ``ensure()`` from trio."""

    def __init__(self, url: str, client_id: Optional[str] = None, client_secret: Optional[str] = None,
                 scope: Optional[str] = None, urlencode_header: bool = False, backoff_ms: int = 100,
                 backoff_max_ms: int = 10000, timeout_s: float = DEFAULT_TIMEOUT_S, sub_claim: str = "sub",
                 scope_claim: str = "scope", refresh_factor: float = 0.8, extensions: Optional[dict] = None) -> None:
        self.url = url
        self.file = url.lower().startswith("file:")
        if not self.file and (not client_id or not client_secret):
            raise ValueError("the client_credentials grant needs a client id and secret")
        self._id = quote_plus(client_id or "") if urlencode_header else (client_id or "")
        self._secret = quote_plus(client_secret or "") if urlencode_header else (client_secret or "")
        self.scope = scope if scope and scope.strip() else None
        self.backoff_ms, self.backoff_max_ms = max(int(backoff_ms), 0), max(int(backoff_max_ms), 0)
        self.timeout_s = timeout_s
        self.sub_claim, self.scope_claim = sub_claim or "sub", scope_claim or "scope"
        self.refresh_factor = refresh_factor
        self.extensions = dict(extensions or {})
        self.jwt: Optional[str] = None
        self.principal: Optional[str] = None
        self._refresh_at_ms = 0
        self.retrievals = 0   # tokens obtained (tests, logs)

    def __repr__(self) -> str:   # never the secret
        return "ClientCredentialsLogin(%s)" % self.url

    # -- sans-IO ------------------------------------------------------------------------------
    def request(self) -> tuple:
        """(headers, body) of the token request (ClientCredentialsRequestGenerator)."""
        body = "grant_type=client_credentials"
        if self.scope is not None:
            body += "&scope=" + quote_plus(self.scope)
        basic = base64.b64encode(("%s:%s" % (self._id, self._secret)).encode()).decode()
        headers = {"Accept": "application/json", "Authorization": "Basic " + basic,
                   "Cache-Control": "no-cache", "Content-Type": "application/x-www-form-urlencoded"}
        return headers, body.encode()

    def accept(self, jwt: str, now_ms: int) -> None:
        """Take a retrieved token (checked first); it serves until its refresh point."""
        sub, exp_ms, iat_ms = check_token(jwt.strip(), self.sub_claim, self.scope_claim)
        start = iat_ms if iat_ms is not None and iat_ms <= now_ms else now_ms
        self.jwt, self.principal = jwt.strip(), sub
        self._refresh_at_ms = start + int((exp_ms - start) * self.refresh_factor)
        self.retrievals += 1

    def needs_token(self, now_ms: int) -> bool:
        return self.jwt is None or now_ms >= self._refresh_at_ms

    def client_token(self) -> bytes:
        """The SASL client's first message with the held token (RFC 7628, as Kafka's
        OAuthBearerSaslClient: no authorization id, the extensions after auth)."""
        if self.jwt is None:
            raise TokenError("no token retrieved yet")
        ext = "".join("%s=%s\x01" % kv for kv in sorted(self.extensions.items()))
        return ("n,,\x01auth=Bearer %s\x01%s\x01" % (self.jwt, ext)).encode()

    @staticmethod
    def access_token(status: int, body: bytes) -> Optional[str]:
        """The JWT of a 200/201 answer; None for an answer worth retrying; TokenError for a
        fatal status or an answer without ``access_token`` (Kafka's JwtHttpResponseBodyHandler)."""
        if status in SUCCESS_STATUS:
            try:
                doc = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                raise TokenError("the token endpoint's answer is not JSON") from None
            token = doc.get("access_token") if isinstance(doc, dict) else None
            if not isinstance(token, str) or not token.strip():
                raise TokenError("the token endpoint's answer has no access_token")
            return token
        if status in FATAL_STATUS:
            raise TokenError("the token endpoint answered with the fatal status %d" % status)
        return None

    # -- the retry loop, I/O handed in --------------------------------------------------------
    def fetch(self, post: Optional[Callable] = None, sleep: Callable = time.sleep, now: Callable = time.monotonic) -> str:
        """A token from the endpoint (or the file), unchecked and not yet taken (``accept``
        does that on the caller's side); TokenError when none could be had.  Changes nothing
        here, so it may run in a worker thread."""
        if self.file:
            from urllib.parse import unquote, urlparse
            try:
                with open(unquote(urlparse(self.url).path)) as fh:
                    return fh.read().strip()
            except OSError as e:
                raise TokenError("the token file cannot be read: %s" % (e.strerror or e)) from None
        if post is None:
            post = http_post
        headers, body = self.request()
        end = now() + self.backoff_max_ms / 1000.0
        attempt = 0
        while True:
            attempt += 1
            try:
                status, answer = post(self.url, headers, body, self.timeout_s)
            except OSError as e:
                # connection refused, a timeout: retried within the same bound as a status
                # worth retrying (a token endpoint being restarted is transient)
                why = "%s" % (getattr(e, "reason", None) or e)
            else:
                why = "status %d" % status
                token = self.access_token(status, answer)
                if token is not None:
                    return token
            wait = min(self.backoff_ms * 2 ** (attempt - 1) / 1000.0, end - now())
            if wait <= 0:
                raise TokenError("%d attempts to retrieve a token from %s failed (last: %s)" % (attempt, self.url, why))
            sleep(wait)

    async def ensure(self) -> None:
        """A token good for a new authentication: the held one until its refresh point, else a
        new one fetched in a worker thread (trio side); TokenError when none could be had."""
        import trio
        if not self.needs_token(int(time.time() * 1000)):
            return
        jwt = await trio.to_thread.run_sync(self.fetch, abandon_on_cancel=True)
        self.accept(jwt, int(time.time() * 1000))


def http_post(url: str, headers: dict, body: bytes, timeout: float) -> tuple:
    """(status, body) of one POST (https: the system's CAs); OSError when unreachable."""
    import urllib.error
    import urllib.request
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read() or b""


def from_listener(sec: ListenerSecurity, jaas_options: dict) -> Optional[ClientCredentialsLogin]:
    """The login of the inter-broker listener ``sec`` when its OAUTHBEARER login callback
    handler is Kafka's OAuthBearerLoginCallbackHandler, else None (the unsecured login).  A bad
    setting is a ConfigError at start-up."""
    get = oauthbearer_settings(sec)
    configured = configured_endpoint(sec, "login", LOGIN_HANDLERS, "sasl.oauthbearer.token.endpoint.url",
                                     "where the broker obtains its own token")
    if configured is None:
        return None
    url = configured[1]

    def conf_or_jaas(conf_key: str, jaas_key: str) -> Any:
        v = get(conf_key)
        return v if v is not None else jaas_options.get(jaas_key)
    client_id = conf_or_jaas("sasl.oauthbearer.client.credentials.client.id", "clientId")
    secret = conf_or_jaas("sasl.oauthbearer.client.credentials.client.secret", "clientSecret")
    if not url.lower().startswith("file:"):
        for v, ck, jk in ((client_id, "sasl.oauthbearer.client.credentials.client.id", "clientId"),
                          (secret, "sasl.oauthbearer.client.credentials.client.secret", "clientSecret")):
            if not v:
                # Kafka's words (ClientCredentialsJwtRetriever.configOrJaas)
                raise ConfigError("Could not find OAuth configuration for %s or OAuth JAAS configuration for %s"
                                  % (ck, jk), ck)

    def number(k: str, default: Any, kind: Callable[[Any], Any] = int) -> Any:
        v = get(k)
        try:
            return kind(v) if v is not None else default
        except ValueError:
            raise ConfigError("Invalid value %s for configuration %s" % (v, k), k) from None
    timeouts = [number(k, None) for k in ("sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms")]
    timeout_s = max(t for t in timeouts if t is not None) / 1000.0 if any(t is not None for t in timeouts) \
        else DEFAULT_TIMEOUT_S
    urlencode = str(get("sasl.oauthbearer.header.urlencode") or "false").lower() == "true"
    return ClientCredentialsLogin(
        url, client_id, secret, conf_or_jaas("sasl.oauthbearer.scope", "scope"), urlencode,
        number("sasl.login.retry.backoff.ms", 100), number("sasl.login.retry.backoff.max.ms", 10000), timeout_s,
        get("sasl.oauthbearer.sub.claim.name") or "sub", get("sasl.oauthbearer.scope.claim.name") or "scope",
        number("sasl.login.refresh.window.factor", 0.8, float),
        {k[len("extension_"):]: v for k, v in jaas_options.items() if k.startswith("extension_")})
