"""OAUTHBEARER with Kafka's secured validator (OAuthBearerValidatorCallbackHandler): tokens signed
with an RSA key of a JWKS file, handed to confluent-kafka by ``oauth_cb``.  A valid token
authenticates and its ``sub`` is the principal (an ACL decides by it); a token signed by another
key, expired, for another audience or issuer, or unsigned, is refused with the client's
authentication error."""
import json
import time
import uuid

import pytest

from tests import needs
from tests.security.clients import produce_one

import pykbroker
from pykbroker.embedded import TEST_CONFIG

needs.module("cryptography")
needs.module("jwt")

ISSUER = "https://issuer.example"
AUDIENCE = "kafka-broker"


def _rsa():
    from cryptography.hazmat.primitives.asymmetric import rsa
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def keys():
    return {"good": _rsa(), "other": _rsa()}


@pytest.fixture(scope="module")
def broker(keys, tmp_path_factory):
    import jwt
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["good"].public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    pre = "listener.name.sasl_plaintext.oauthbearer."
    cfg = {**TEST_CONFIG,
           pre + "sasl.server.callback.handler.class":
               "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
           pre + "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
           "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
           "sasl.oauthbearer.expected.audience": AUDIENCE,
           "sasl.oauthbearer.expected.issuer": ISSUER,
           # the principal is the sub: alice is allowed everything, anyone else nothing
           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:alice"}
    with pykbroker.Broker(security="SASL_PLAINTEXT", mechanisms=["OAUTHBEARER"], users={"alice": ""},
                          config=cfg) as b:
        yield b


def _token(key, kid="k1", alg="RS256", **claims):
    import jwt
    now = int(time.time())
    body = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid} if kid else None)


def _client_cfg(b, token):
    return {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "default",
            # librdkafka's own lifetime of the token (the broker checks the JWT's exp itself)
            "oauth_cb": lambda _conf: (token, time.time() + 600, "client")}


def _produce(cfg):
    """None when delivered, else (code, text) of the first error (authentication or delivery)."""
    from confluent_kafka import Producer
    errors, delivered = [], []
    p = Producer({**cfg, "error_cb": lambda e: errors.append((e.code(), e.str())), "message.timeout.ms": 10000})
    p.produce("jwt-" + uuid.uuid4().hex[:6], b"v",
              on_delivery=lambda err, msg: delivered.append(err and (err.code(), err.str())))
    deadline = time.monotonic() + 12
    while not delivered and not errors and time.monotonic() < deadline:
        p.poll(0.1)
    p.purge()
    p.flush(0)
    return errors[0] if errors else delivered[0] if delivered else ("no answer", "")


def test_a_signed_token_authenticates_and_its_sub_is_the_principal(broker, keys):
    from confluent_kafka import KafkaError
    assert _produce(_client_cfg(broker, _token(keys["good"]))) is None
    # same key, another sub: authenticated (no authentication error) but not alice, so the
    # authorizer refuses the write
    err = _produce(_client_cfg(broker, _token(keys["good"], sub="mallory")))
    assert err is not None and err[0] == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


@pytest.mark.parametrize("case", ["other-key", "expired", "audience", "issuer", "unsigned", "not-yet-valid"])
def test_bad_tokens_are_refused(broker, keys, case):
    from confluent_kafka import KafkaError
    now = int(time.time())
    token = {
        "other-key": lambda: _token(keys["other"]),
        # past the 30 s of allowed clock skew
        "expired": lambda: _token(keys["good"], iat=now - 600, exp=now - 120),
        "audience": lambda: _token(keys["good"], aud="someone-else"),
        "issuer": lambda: _token(keys["good"], iss="https://evil.example"),
        "unsigned": lambda: _token(None, alg="none"),
        "not-yet-valid": lambda: _token(keys["good"], nbf=now + 300),
    }[case]()
    err = _produce(_client_cfg(broker, token))
    assert err is not None and err[0] == KafkaError._AUTHENTICATION, err
    assert "invalid_token" in err[1]


def test_jwks_over_http(keys):
    """The JWKS from an http:// endpoint (fetched at start-up): the same signed token authenticates;
    an unreachable endpoint stops the broker's start-up with the config named."""
    import http.server
    import threading

    import jwt

    from pykbroker.config import ConfigError
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["good"].public_key()))
    jwk.update({"kid": "k1"})
    body = json.dumps({"keys": [jwk]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pre = "listener.name.sasl_plaintext.oauthbearer."
    cfg = {**TEST_CONFIG,
           pre + "sasl.server.callback.handler.class":
               "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
           pre + "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
           pre + "sasl.oauthbearer.jwks.endpoint.url": "http://127.0.0.1:%d/jwks" % server.server_port,
           "sasl.oauthbearer.expected.audience": AUDIENCE}
    try:
        with pykbroker.Broker(security="SASL_PLAINTEXT", mechanisms=["OAUTHBEARER"], users={"alice": ""},
                              config=cfg) as b:
            assert _produce(_client_cfg(b, _token(keys["good"]))) is None
            assert _produce(_client_cfg(b, _token(keys["other"]))) is not None   # a key not in the JWKS
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ConfigError, match="jwks.endpoint.url"):
        with pykbroker.Broker(security="SASL_PLAINTEXT", mechanisms=["OAUTHBEARER"], users={"alice": ""},
                              config={**cfg, pre + "sasl.oauthbearer.jwks.endpoint.url":
                                      "http://127.0.0.1:%d/jwks" % server.server_port}):
            pass


# ------------------------------------------------------------------ sans-IO: the validator alone

def _server(validator, now_s):
    from pykbroker.security.oauthbearer import OAuthBearerServer
    return OAuthBearerServer({}, lambda: int(now_s * 1000), validator)


def _first_message(token):
    return ("n,,\x01auth=Bearer %s\x01\x01" % token).encode()


def test_validator_options_es256_and_the_broker_clock():
    """sub.claim.name, an EC key without kid (the JWKS's only key), exp/iat required, the
    session lifetime from exp, and exp judged by the broker's clock with the skew."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    from pykbroker.security.oauthbearer import JwtValidator
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    v = JwtValidator({"keys": [jwk]}, sub_claim="client_id", skew_seconds=5)
    now = 1_900_000_000
    tok = jwt.encode({"client_id": "svc-a", "sub": "ignored", "iat": now, "exp": now + 100}, key, algorithm="ES256")
    s = _server(v, now)
    assert s.evaluate(_first_message(tok)) == b"" and s.complete
    assert (s.authorization_id, s.lifetime_ms) == ("svc-a", 100_000)
    # 4 s past exp is within the 5 s skew; 6 s past is not
    assert _server(v, now + 104).evaluate(_first_message(tok)) == b""
    assert _server(v, now + 106).evaluate(_first_message(tok)) == b'{"status":"invalid_token"}'
    for claims in ({"client_id": "svc-a", "iat": now}, {"client_id": "svc-a", "exp": now + 100},
                   {"iat": now, "exp": now + 100}, {"client_id": "  ", "iat": now, "exp": now + 100}):
        bad = jwt.encode(claims, key, algorithm="ES256")
        assert _server(v, now).evaluate(_first_message(bad)) == b'{"status":"invalid_token"}', claims


@pytest.mark.parametrize("settings, words", [
    ({"sasl.server.callback.handler.class": "com.example.Mine"}, "pykbroker knows only"),
    ({"sasl.server.callback.handler.class":
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"}, "needs sasl.oauthbearer.jwks"),
    ({"sasl.server.callback.handler.class":
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
      "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"}, "jwks.endpoint.url"),
    ({"sasl.server.callback.handler.class":
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
      "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}, "a file://, http:// or https:// URL"),
])
def test_validator_settings_are_checked_at_start_up(settings, words):
    from pykbroker.config import BrokerConfig, ConfigError
    from pykbroker.security.setup import check_config
    cfg = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
           **{"listener.name.sasl_plaintext.oauthbearer." + k: v for k, v in settings.items()}}
    with pytest.raises(ConfigError, match=words):
        check_config(BrokerConfig(cfg))


# ------------------------------------------------------------------ JWKS refresh (RefreshingHttpsJwks)

class _JwksServer:
    """A JWKS over http on a free loopback port whose keys a test replaces; counts the GETs."""

    def __init__(self, jwks):
        import http.server
        import threading
        self.body = json.dumps(jwks).encode()
        self.gets = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.gets += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *a):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/jwks" % self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, jwks):
        self.body = json.dumps(jwks).encode()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _jwk(key, kid):
    import jwt
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "use": "sig", "alg": "RS256"})
    return jwk


def _produce_eventually(cfg, timeout=20):
    """(delivery error or None, authentication errors seen on the way)."""
    from confluent_kafka import KafkaError
    result, errors = produce_one(cfg, "jwt-", timeout)
    return result, [e for e in errors if e[0] == KafkaError._AUTHENTICATION]


def _refresh_cfg(url, refresh_ms):
    pre = "listener.name.sasl_plaintext.oauthbearer."
    return {**TEST_CONFIG,
            pre + "sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            pre + "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            pre + "sasl.oauthbearer.jwks.endpoint.url": url,
            pre + "sasl.oauthbearer.jwks.endpoint.refresh.ms": str(refresh_ms),
            "sasl.oauthbearer.expected.audience": AUDIENCE}


def test_rotated_key_unknown_kid_triggers_a_refetch(keys):
    """The identity provider rotates its key (k1 -> k2, refresh.ms an hour): the first token
    signed by k2 names a kid the broker lacks, is refused and makes the broker fetch the JWKS
    at once; librdkafka's next attempt gets in, without a broker restart.  A flood of tokens
    with the same unknown kid fetches once a minute at most."""
    new = _rsa()
    srv = _JwksServer({"keys": [_jwk(keys["good"], "k1")]})
    try:
        with pykbroker.Broker(security="SASL_PLAINTEXT", mechanisms=["OAUTHBEARER"], users={"alice": ""},
                              config=_refresh_cfg(srv.url, 3600000)) as b:
            assert _produce(_client_cfg(b, _token(keys["good"]))) is None
            assert srv.gets == 1   # start-up only
            srv.set({"keys": [_jwk(new, "k2")]})
            err, auth = _produce_eventually(_client_cfg(b, _token(new, kid="k2")))
            assert err is None, err
            assert auth and "invalid_token" in auth[0][1], auth   # the first attempt met the old keys
            assert srv.gets == 2
            # the old key is gone from the JWKS: refused (k1 is a kid it knows no more, so it
            # asks for one fetch, which still does not have it)
            err = _produce(_client_cfg(b, _token(keys["good"])))
            assert err is not None and "invalid_token" in err[1], err
            time.sleep(0.5)
            gets = srv.gets
            for _ in range(3):
                err = _produce(_client_cfg(b, _token(keys["other"], kid="k9")))
                assert err is not None and "invalid_token" in err[1], err
            time.sleep(0.5)
            assert srv.gets == gets + 1, (gets, srv.gets)   # one fetch for k9, not three
    finally:
        srv.close()


def test_periodic_refresh(keys):
    """sasl.oauthbearer.jwks.endpoint.refresh.ms: the JWKS is fetched again on its own, so a
    token signed by a key published since is accepted at its first attempt (no refusal on the
    way, which an unknown-kid refetch would need)."""
    new = _rsa()
    srv = _JwksServer({"keys": [_jwk(keys["good"], "k1")]})
    try:
        with pykbroker.Broker(security="SASL_PLAINTEXT", mechanisms=["OAUTHBEARER"], users={"alice": ""},
                              config=_refresh_cfg(srv.url, 300)) as b:
            srv.set({"keys": [_jwk(keys["good"], "k1"), _jwk(new, "k3")]})
            deadline = time.monotonic() + 10
            gets = srv.gets
            while srv.gets < gets + 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert srv.gets >= gets + 2, srv.gets
            err, auth = _produce_eventually(_client_cfg(b, _token(new, kid="k3")), timeout=10)
            assert err is None and auth == [], (err, auth)
    finally:
        srv.close()


def test_missing_kid_rate_limit_sans_io(keys):
    """Kafka's maybeExpediteRefresh: once per kid per minute, 16 kids remembered, a kid over
    1000 characters never asks; a fetched JWKS clears the kids it holds."""
    from pykbroker.security.oauthbearer import JwksCache
    asked = []
    c = JwksCache({"keys": [_jwk(keys["good"], "k1")]})
    c.on_expedite = lambda: asked.append(1)
    assert c.missing("k2", 0) is True
    assert c.missing("k2", 59_999) is False
    assert c.missing("k2", 60_000) is True
    assert c.missing("x" * 1001, 0) is False
    assert len(asked) == 2
    for i in range(16):
        c.missing("kid%d" % i, 70_000)
    assert c.missing("k2", 70_001) is True   # pushed out of the 16 remembered
    c.replace({"keys": [_jwk(keys["good"], "kid15")]})
    assert c.missing("kid15", 70_002) is True   # was in flight, cleared by the fetch holding it
    assert c.key("kid15") is not None and c.key("k1") is None


def test_audience_and_scope_claims_sans_io(keys):
    """No expected audience: a token naming one is refused (jose4j's default check in Kafka's
    BrokerJwtValidator); the scope claim must be a string or a list of distinct non-blank
    strings (ClaimValidationUtils.validateScopes)."""
    import jwt

    from pykbroker.security.oauthbearer import JwtValidator
    now = 1_900_000_000
    v = JwtValidator({"keys": [_jwk(keys["good"], "k1")]})

    def tok(**claims):
        return jwt.encode({"sub": "alice", "iat": now, "exp": now + 100, **claims}, keys["good"],
                          algorithm="RS256", headers={"kid": "k1"})
    assert v.validate(tok(), now * 1000) is not None
    assert v.validate(tok(aud="kafka"), now * 1000) is None
    assert v.validate(tok(scope="a b"), now * 1000) is not None
    assert v.validate(tok(scope=["a", "b"]), now * 1000) is not None
    for bad in (["a", " a"], ["a", ""], ["a", 3], " "):
        assert v.validate(tok(scope=bad), now * 1000) is None, bad
    assert JwtValidator({"keys": [_jwk(keys["good"], "k1")]}, audience=["kafka"]).validate(
        tok(aud=["x", "kafka"]), now * 1000) == ("alice", (now + 100) * 1000)
