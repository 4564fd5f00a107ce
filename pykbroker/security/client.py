"""The client side of a secured listener: what a broker uses to reach another broker's
inter-broker listener (Kafka's ``ChannelBuilders.clientChannelBuilder`` for the broker's own
``inter.broker.listener.name``), sans-IO apart from the two small drivers at the end.

``InterBrokerSecurity.from_config(config)`` reads, once at start-up, what Kafka's broker reads
for its own connections to other brokers:
- the inter-broker listener and its security protocol (``inter.broker.listener.name``, else the
  listener named after ``security.inter.broker.protocol``);
- TLS: the trusted CAs (``ssl.truststore.location`` / ``ssl.truststore.certificates`` of the
  listener, Kafka's ``listener.name.<l>.`` overrides first), the broker's own keystore as its
  client certificate (mTLS listeners need it; Kafka sends it too), and host name verification
  as ``ssl.endpoint.identification.algorithm`` says (``https``, Kafka's default: on; empty: off);
- SASL: ``sasl.mechanism.inter.broker.protocol`` and the broker's own credentials from the
  listener's JAAS config for that mechanism (``listener.name.<l>.<mechanism>.sasl.jaas.config``,
  else ``sasl.jaas.config``): the ``username``/``password`` options of PlainLoginModule or
  ScramLoginModule, as Kafka's login module gives them to its SaslClient; for OAUTHBEARER the
  ``unsecuredLogin*`` options of OAuthBearerLoginModule, from which the broker makes its own
  unsigned token as Kafka's unsecured login callback handler does (a fresh one per connection).
A misconfiguration raises ``ConfigError`` at start-up rather than failing every replication
request later.

The mechanisms' client halves (``PlainClient``, ``ScramClient``: RFC 5802's client, checking
the server's signature, ``OAuthBearerClient``) are one token in, one token out, like the servers in plain.py and
scram.py.  The exchange is Kafka's: SaslHandshake v1, then the tokens in SaslAuthenticate.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from typing import TYPE_CHECKING, Any, Optional, Union

from ..config import ConfigError
from ..config import inter_broker_listener
from .errors import AuthenticationFailed
from .listeners import ListenerSecurity
from .scram import MECHANISMS as SCRAM_MECHANISMS

if TYPE_CHECKING:
    from types import ModuleType
    from typing import Callable

    from ..config.broker import BrokerConfig

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# The versions sent: SaslHandshake v1 (tokens in SaslAuthenticate, KIP-152) and SaslAuthenticate
# v2 (flexible); every pykbroker and Kafka 2.2+ broker serves both.
HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2


class PlainClient:
    """PLAIN (RFC 4616): one token ``\\0user\\0password`` (no authorization id, as Kafka's client)."""

    def __init__(self, user: str, password: str) -> None:
        self._token = b"\0" + user.encode() + b"\0" + password.encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def step(self, server_token: bytes) -> Optional[bytes]:
        self.complete = True
        return None


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """SCRAM-SHA-256/512 client (RFC 5802 §3): client-first, then client-final with the proof;
    the server's final message must carry the signature only the holder of ServerKey can make."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: Optional[str] = None,
                 extensions: Optional[dict] = None) -> None:
        self._hash = SCRAM_MECHANISMS[mechanism]
        self.mechanism = mechanism
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = "n=%s,r=%s" % (_saslname(user), self._nonce)
        # RFC 5802 extensions after the nonce, part of the AuthMessage: Kafka's only one is
        # tokenauth=true (user = delegation token id, password = its base64 HMAC)
        for k, v in (extensions or {}).items():
            self._bare += ",%s=%s" % (k, v)
        self._state = "first"
        self.complete = False

    def first(self) -> bytes:
        self._state = "server_first"
        return ("n,," + self._bare).encode()

    def step(self, server_token: bytes) -> Optional[bytes]:
        text = bytes(server_token).decode("utf-8", "replace")
        if self._state == "server_first":
            kv = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
            nonce, salt, iterations = kv.get("r", ""), kv.get("s"), kv.get("i", "0")
            if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
                raise AuthenticationFailed("Invalid SCRAM server first message")
            salted = hashlib.pbkdf2_hmac(self._hash, self._password, base64.b64decode(salt), int(iterations))
            without_proof = "c=biws,r=%s" % nonce   # biws = base64("n,,"): no channel binding
            auth = ("%s,%s,%s" % (self._bare, text, without_proof)).encode()
            client_key = hmac.digest(salted, b"Client Key", self._hash)
            stored_key = hashlib.new(self._hash, client_key).digest()
            signature = hmac.digest(stored_key, auth, self._hash)
            proof = bytes(a ^ b for a, b in zip(client_key, signature))
            server_key = hmac.digest(salted, b"Server Key", self._hash)
            self._expected = b"v=" + base64.b64encode(hmac.digest(server_key, auth, self._hash))
            self._state = "server_final"
            return ("%s,p=%s" % (without_proof, base64.b64encode(proof).decode())).encode()
        if self._state == "server_final":
            if not hmac.compare_digest(bytes(server_token), self._expected):
                raise AuthenticationFailed("Invalid SCRAM server signature")
            self._state = "done"
            self.complete = True
            return None
        raise AuthenticationFailed("SCRAM client in unexpected state %s" % self._state)


class OAuthBearerClient:
    """OAUTHBEARER (RFC 7628) with Kafka's unsecured login (OAuthBearerUnsecuredLoginCallbackHandler,
    the OAuthBearerLoginModule's default): a fresh unsigned JWT (``"alg":"none"``) from the JAAS
    options: ``unsecuredLoginStringClaim_<name>`` / ``NumberClaim_`` / ``ListClaim_`` (the list's
    first character is its separator) claims, the principal claim
    (``unsecuredLoginPrincipalClaimName``, ``sub`` by default) required, ``iat`` now and ``exp``
    ``unsecuredLoginLifetimeSeconds`` (3600) later, and ``unsecuredLoginExtension_<key>``
    extensions.  Only a broker whose listener runs the unsecured validator accepts it."""

    def __init__(self, options: dict, now_s: Optional[float] = None) -> None:
        import json
        import time
        now = time.time() if now_s is None else now_s
        claims: dict = {}
        for k, v in options.items():
            if k.startswith("unsecuredLoginStringClaim_"):
                claims[k[len("unsecuredLoginStringClaim_"):]] = v
            elif k.startswith("unsecuredLoginNumberClaim_"):
                claims[k[len("unsecuredLoginNumberClaim_"):]] = float(v) if "." in v else int(v)
            elif k.startswith("unsecuredLoginListClaim_") and v:
                claims[k[len("unsecuredLoginListClaim_"):]] = [x for x in v[1:].split(v[0]) if x]
        lifetime = int(options.get("unsecuredLoginLifetimeSeconds") or 3600)
        # whole milliseconds, truncated as Kafka's time.milliseconds() / 1000.0: rounding up could
        # put iat a fraction of a millisecond in the future, which a validator refuses
        now_ms = int(now * 1000)
        claims["iat"] = now_ms / 1000.0
        claims["exp"] = (now_ms + lifetime * 1000) / 1000.0
        principal_claim = options.get("unsecuredLoginPrincipalClaimName") or "sub"
        if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim].strip():
            raise ValueError("no %s claim (unsecuredLoginStringClaim_%s)" % (principal_claim, principal_claim))
        self.principal = claims[principal_claim]

        def b64(obj: Any) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()
        jwt = "%s.%s." % (b64({"alg": "none"}), b64(claims))
        ext = "".join("%s=%s\x01" % (k[len("unsecuredLoginExtension_"):], v) for k, v in sorted(options.items())
                      if k.startswith("unsecuredLoginExtension_"))
        self._token = ("n,,\x01auth=Bearer %s\x01%s\x01" % (jwt, ext)).encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def step(self, server_token: bytes) -> Optional[bytes]:
        if server_token:
            # the server's RFC 7628 error challenge: the token was refused
            raise AuthenticationFailed("OAUTHBEARER token refused: %s" % bytes(server_token).decode("utf-8", "replace"))
        self.complete = True
        return None


class BearerTokenClient:
    """OAUTHBEARER with a token obtained elsewhere (the broker's OAuth login,
    security/oauth_login.py): its first message as made there; a server challenge refuses it."""

    def __init__(self, first_message: bytes) -> None:
        self._token = first_message
        self.complete = False

    def first(self) -> bytes:
        return self._token

    step = OAuthBearerClient.step


def sasl_client(mechanism: str, user: str, password: str, extensions: Optional[dict] = None
                ) -> Union[PlainClient, ScramClient, OAuthBearerClient]:
    if mechanism == "PLAIN":
        return PlainClient(user, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, user, password, extensions=extensions)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerClient({"unsecuredLoginStringClaim_sub": user})   # an unsecured token for ``user``
    raise ValueError("no client for SASL mechanism %s" % mechanism)


class InterBrokerSecurity:
    """How this broker connects to the others (module docstring).  ``None`` from
    :meth:`from_config` when the inter-broker listener is PLAINTEXT (nothing to do)."""

    def __init__(self, listener: str, protocol: str, ssl_context: Optional[ssl.SSLContext] = None, check_hostname: bool = True,
                 mechanism: Optional[str] = None, username: Optional[str] = None, password: Any = None) -> None:
        self.listener = listener
        self.protocol = protocol
        self.ssl_context = ssl_context
        self.check_hostname = check_hostname
        self.mechanism = mechanism
        self.username = username
        self._password = password
        # OAUTHBEARER with Kafka's OAuthBearerLoginCallbackHandler: the broker's token comes
        # from an OAuth token endpoint (security/oauth_login.py), not from its JAAS options
        self.login = password if isinstance(password, _oauth_login().ClientCredentialsLogin) else None

    def __repr__(self) -> str:   # never the password
        return "InterBrokerSecurity(%s %s%s)" % (self.listener, self.protocol,
                                                 ", %s as %s" % (self.mechanism, self.username) if self.mechanism else "")

    @property
    def principal(self) -> Optional[str]:
        if self.login is not None:   # the token's subject, once one was obtained
            return "User:%s" % (self.login.principal or "<token from %s>" % self.login.url)
        return "User:%s" % self.username if self.username is not None else None

    async def prepare(self) -> None:
        """Before an authentication: a token from the endpoint when the held one is due for
        refresh (nothing to do for the other mechanisms)."""
        if self.login is not None:
            try:
                await self.login.ensure()
            except _oauth_login().TokenError as e:
                raise AuthenticationFailed("no OAuth token for this broker: %s" % e) from None
            self.username = self.login.principal

    def sasl_client(self) -> Any:   # one of the SASL clients above (first/step/complete)
        if self.login is not None:
            return BearerTokenClient(self.login.client_token())
        if self.mechanism == "OAUTHBEARER":
            return OAuthBearerClient(self._password)   # a fresh token at each connection
        # a SASL inter-broker listener always has its mechanism and username (from_config)
        return sasl_client(self.mechanism, self.username, self._password)  # type: ignore[arg-type]

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Optional["InterBrokerSecurity"]:
        li = inter_broker_listener(config)
        if li.protocol == "PLAINTEXT":
            return None
        sec = ListenerSecurity(config, li.name, li.protocol)   # the listener's settings, read as its server reads them
        ctx, check = None, True
        if sec.tls:
            ctx, check = client_context(sec)
        mech = user = password = None
        if sec.sasl:
            mech = (config["sasl.mechanism.inter.broker.protocol"] or "").upper()
            enabled = [m.strip().upper() for m in sec.get("sasl.enabled.mechanisms")]
            key = "sasl.mechanism.inter.broker.protocol"
            if mech not in ("PLAIN", "OAUTHBEARER") + tuple(SCRAM_MECHANISMS):
                raise ConfigError("Invalid value %s for configuration %s: a pykbroker broker authenticates to "
                                  "other brokers with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
                                  % (mech, key), key)
            if mech not in enabled:
                # Kafka's KafkaConfig check: the inter-broker mechanism must be enabled on the listener
                raise ConfigError("%s must be included in sasl.enabled.mechanisms when SASL is used for "
                                  "inter-broker communication" % key, key)
            user, password = _own_credentials(sec, mech)
        return cls(li.name, li.protocol, ctx, check, mech, user, password)


def client_context(sec: ListenerSecurity) -> tuple:
    from .tls import load_keystore, load_truststore
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    known = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
    versions = [known[v] for v in sec.get("ssl.enabled.protocols") if v in known]
    if versions:
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    if sec.get("ssl.truststore.location") is None and sec.get("ssl.truststore.certificates") is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        load_truststore(sec, ctx)
    # the broker's own certificate as its client certificate (an mTLS listener asks for one)
    # PEM, PKCS12 or JKS, read as the listener's server side reads it (tls.py)
    if sec.get("ssl.keystore.location") is not None or sec.get("ssl.keystore.certificate.chain") is not None:
        load_keystore(sec, ctx)
    # Kafka's ssl.endpoint.identification.algorithm: "https" (default) checks the host name
    # against the certificate's SANs; empty turns the check off
    algo = sec.get("ssl.endpoint.identification.algorithm")
    check = bool(algo) if algo is not None else True
    ctx.check_hostname = check
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx, check


def _own_credentials(sec: ListenerSecurity, mech: str) -> tuple:
    from .jaas import JaasError, parse_jaas
    key = "listener.name.%s.%s.sasl.jaas.config" % (sec.name.lower(), mech.lower())
    jaas = sec.mechanism_get(mech, "sasl.jaas.config")
    if jaas is None:
        raise ConfigError("listener %s is the inter-broker listener with SASL mechanism %s but %s is not set "
                          "(the broker's own username=\"...\" password=\"...\")" % (sec.name, mech, key), key)
    module = {"PLAIN": "PlainLoginModule", "OAUTHBEARER": "OAuthBearerLoginModule"}.get(mech, "ScramLoginModule")
    try:
        mods = parse_jaas(jaas)
    except JaasError as e:
        raise ConfigError("Invalid value for configuration %s: %s" % (key, e), key) from None
    if mech == "OAUTHBEARER":
        # Kafka's unsecured login: the token's claims from the module's options (OAuthBearerClient);
        # the "password" slot carries the options, the principal is the username.  With Kafka's
        # OAuthBearerLoginCallbackHandler, the "password" is the login that obtains the token
        # (its subject is known once the first token is in)
        for cls, _flag, opts in mods:
            if cls.endswith(module):
                login = _oauth_login().from_listener(sec, dict(opts))
                if login is not None:
                    return None, login
                try:
                    return OAuthBearerClient(opts).principal, dict(opts)
                except ValueError as e:
                    raise ConfigError("Invalid value for configuration %s: the broker's own token: %s"
                                      % (key, e), key) from None
        raise ConfigError("Invalid value for configuration %s: no OAuthBearerLoginModule (the broker's own "
                          "unsecuredLoginStringClaim_sub=\"...\" for inter-broker connections)" % key, key)
    for cls, _flag, opts in mods:
        if cls.endswith(module) and "username" in opts and "password" in opts:
            return opts["username"], opts["password"]
    raise ConfigError("Invalid value for configuration %s: no %s with username and password options (the "
                      "broker's own credentials for inter-broker connections)" % (key, module), key)


def _oauth_login() -> ModuleType:
    from . import oauth_login
    return oauth_login


# ------------------------------------------------------------------ drivers
async def authenticate(chan: Any, security: InterBrokerSecurity) -> int:
    """SaslHandshake v1 + SaslAuthenticate on a connection (``chan.call``, trio).  Raises
    ``AuthenticationFailed`` with the broker's error message when refused.  Returns the session
    lifetime the broker granted (KIP-368 ``session_lifetime_ms``; 0: the session never expires)."""
    lifetime = 0
    await security.prepare()   # the broker's OAuth token, obtained or refreshed first
    resp = await chan.call(SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": security.mechanism})
    if resp["error_code"]:
        raise AuthenticationFailed("SaslHandshake for %s refused (error %d; the broker enables %s)"
                                   % (security.mechanism, resp["error_code"], resp.get("mechanisms")))
    client = security.sasl_client()
    token = client.first()
    while token is not None:
        resp = await chan.call(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
        if resp["error_code"]:
            raise AuthenticationFailed(resp.get("error_message") or "SaslAuthenticate error %d" % resp["error_code"])
        lifetime = resp.get("session_lifetime_ms") or 0
        token = client.step(resp["auth_bytes"] or b"")
        if client.complete:
            break
    return lifetime


def authenticate_sync(request: Callable[[int, int, dict[str, Any]], dict[str, Any]], mechanism: str,
                      user: str, password: str, extensions: Optional[dict] = None,
                      client: Any = None) -> None:
    """The same over a blocking client (``request(api_key, version, body)`` -> decoded answer),
    for tools and tests (pykbroker/testing's WireClient.request); ``client``: a SASL client
    made by the caller (e.g. a BearerTokenClient with a signed token) instead of one for
    ``user``/``password``."""
    resp = request(SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": mechanism})
    if resp["error_code"]:
        raise AuthenticationFailed("SaslHandshake for %s refused (error %d)" % (mechanism, resp["error_code"]))
    if client is None:
        client = sasl_client(mechanism, user, password, extensions)
    token = client.first()
    while token is not None:
        resp = request(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
        if resp["error_code"]:
            raise AuthenticationFailed(resp.get("error_message") or "SaslAuthenticate error %d" % resp["error_code"])
        token = client.step(resp["auth_bytes"] or b"")
        if client.complete:
            break
