"""Signed JWTs between brokers: each broker obtains its own token from an OAuth token endpoint
(Kafka's OAuthBearerLoginCallbackHandler, client_credentials) and the others validate it against
the endpoint's JWKS (Kafka's OAuthBearerValidatorCallbackHandler), over SASL_SSL.

One cluster (ZooKeeper + 5 brokers) and one local token endpoint for the module.  Brokers 1-3
hold the right client secret; broker 4 a wrong one, so the endpoint refuses it (401) and it can
replicate from nobody; broker 5 reads its token from a file (``file://`` as the token endpoint
URL, Kafka's FileJwtRetriever), one the endpoint's key signed.  The tokens live 8 s, so the brokers' sessions are re-authenticated with
fresh tokens while the test runs.  Clients are confluent-kafka with librdkafka's own OIDC login
against the same endpoint.
"""
import base64
import http.server
import json
import threading
import time
import uuid

import pytest

from tests import needs
from tests.cluster.helpers import requires_zookeeper, wait_for

needs.module("confluent_kafka")
needs.module("cryptography")
needs.module("jwt")
pytestmark = requires_zookeeper

ISSUER = "https://tokens.pykbroker.test"
AUDIENCE = "kafka-cluster"
TOKEN_LIFETIME_S = 8
BAD_BROKER = 4
FILE_BROKER = 5
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


class TokenEndpoint:
    """An OAuth provider in miniature: ``POST /token`` (client_credentials, HTTP Basic client
    authentication) answers an RS256 JWT whose ``sub`` is the client id; ``GET /jwks`` the public
    key.  Records what it was asked."""

    def __init__(self, clients: dict):
        import secrets

        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa
        self.clients = clients
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.kid = secrets.token_hex(4)
        jwk.update({"kid": self.kid, "use": "sig", "alg": "RS256"})
        self.jwks = {"keys": [jwk]}
        self.issued: list = []      # (client id, scope) of each token handed out
        self.refused: list = []     # client ids refused
        self.tokens: list = []      # the tokens handed out (credentials: never to be logged)
        self.requests: list = []    # (headers, body) of each POST
        self.file_tokens: list = []  # tokens signed for a token file (credentials too)
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self._answer(200, outer.jwks) if self.path == "/jwks" else self._answer(404, {})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                outer.requests.append((dict(self.headers), body))
                form = dict(kv.split("=", 1) for kv in body.split("&") if "=" in kv)
                auth = self.headers.get("Authorization") or ""
                try:
                    cid, _, secret = base64.b64decode(auth[len("Basic "):]).decode().partition(":")
                except ValueError:
                    cid, secret = "", None
                if self.path != "/token" or form.get("grant_type") != "client_credentials" \
                        or outer.clients.get(cid) != secret:
                    outer.refused.append(cid)
                    self._answer(401, {"error": "invalid_client"})
                    return
                now = int(time.time())
                token = jwt.encode({"sub": cid, "iss": ISSUER, "aud": AUDIENCE, "iat": now,
                                    "exp": now + TOKEN_LIFETIME_S, "scope": form.get("scope", "kafka")},
                                   outer.key, algorithm="RS256", headers={"kid": outer.kid})
                outer.issued.append((cid, form.get("scope")))
                outer.tokens.append(token)
                self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME_S})

            def _answer(self, status, doc):
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def signed(self, sub: str, lifetime_s: int) -> str:
        """A token as the endpoint signs them, for a token file."""
        import jwt
        now = int(time.time())
        token = jwt.encode({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime_s,
                            "scope": "kafka.broker"}, self.key, algorithm="RS256", headers={"kid": self.kid})
        self.file_tokens.append(token)
        return token

    def token_for(self, client_id: str) -> str:
        """A token as the endpoint hands out (client_credentials, Basic authentication)."""
        import urllib.request
        basic = base64.b64encode(("%s:%s" % (client_id, self.clients[client_id])).encode()).decode()
        req = urllib.request.Request(self.url + "/token", data=b"grant_type=client_credentials", method="POST",
                                     headers={"Authorization": "Basic " + basic,
                                              "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())["access_token"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def endpoint():
    import secrets
    e = TokenEndpoint({"broker": secrets.token_urlsafe(16), "alice": secrets.token_urlsafe(16)})
    yield e
    e.close()


def _jaas(client_id, secret):
    return ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            'clientId="%s" clientSecret="%s" scope="kafka.broker";' % (client_id, secret))


@pytest.fixture(scope="module")
def cluster(endpoint, tmp_path_factory):
    from pykbroker.local.cluster import Cluster
    from pykbroker.local.secure_setup import SecureSetup
    pre = "listener.name.sasl_ssl.oauthbearer."
    overrides = {pre + "sasl.server.callback.handler.class": VALIDATOR,
                 pre + "sasl.login.callback.handler.class": LOGIN,
                 pre + "sasl.jaas.config": _jaas("broker", endpoint.clients["broker"]),
                 "sasl.oauthbearer.jwks.endpoint.url": endpoint.url + "/jwks",
                 "sasl.oauthbearer.token.endpoint.url": endpoint.url + "/token",
                 "sasl.oauthbearer.expected.audience": AUDIENCE,
                 "sasl.oauthbearer.expected.issuer": ISSUER,
                 # a refused login is final after a few quick retries (the endpoint answers 401:
                 # Kafka's fatal status, not retried at all)
                 "sasl.login.retry.backoff.max.ms": "1000",
                 "replica.lag.time.max.ms": "3000", "offsets.topic.replication.factor": "3",
                 "group.initial.rebalance.delay.ms": "0"}
    bad = {pre + "sasl.jaas.config": _jaas("broker", "not-the-secret")}
    # broker 5: its token from a file (an hour's token: the file is read again at each refresh)
    token_file = tmp_path_factory.mktemp("jwt-file") / "broker.jwt"
    token_file.write_text(endpoint.signed("file-broker", 3600) + "\n")
    from_file = {"sasl.oauthbearer.token.endpoint.url": token_file.as_uri()}
    setup = SecureSetup("SASL_SSL", {"alice": ""}, ["OAUTHBEARER"])
    # the harness's own connections (the cluster view at start-up) log in at the endpoint too
    setup.oauth_token = lambda user: endpoint.token_for("broker")
    c = Cluster(5, data_dir=str(tmp_path_factory.mktemp("jwt-ib")), security=setup,
                overrides=overrides, broker_overrides={BAD_BROKER: bad, FILE_BROKER: from_file})
    with c:
        c.wait_registered()
        yield c


def _client(cluster, endpoint, secret=None):
    return {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": cluster.security.ca_file, "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "alice",
            "sasl.oauthbearer.client.secret": secret or endpoint.clients["alice"],
            "sasl.oauthbearer.token.endpoint.url": endpoint.url + "/token"}


def _isr(admin, topic):
    return sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs)


def _produce_and_read(cfg, topic, new, before=()):
    """``new`` produced with acks=all; everything the partition holds (``before`` + ``new``) read back."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    p = Producer({**cfg, "acks": "all", "message.timeout.ms": 30000})
    for v in new:
        p.produce(topic, v)
    assert p.flush(35) == 0
    values = list(before) + list(new)
    c = Consumer({**cfg, "group.id": "g-" + uuid.uuid4().hex[:6], "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def test_brokers_replicate_with_signed_tokens_from_the_endpoint(cluster, endpoint):
    from confluent_kafka.admin import AdminClient, NewTopic
    cfg = _client(cluster, endpoint)
    admin = AdminClient(cfg)
    topic = "jwt-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
    first = [b"signed-%d-" % i + bytes(range(256)) for i in range(20)]
    assert _produce_and_read(cfg, topic, first) == first
    wait_for(lambda: _isr(admin, topic) == [1, 2, 3], timeout=20, what="ISR [1, 2, 3]")
    # every good broker logged in at the endpoint as itself, with its JAAS scope
    assert ("broker", "kafka.broker") in endpoint.issued
    # the tokens expire in 8 s: a little later the followers' sessions have been re-authenticated
    # with new tokens from the endpoint, and acks=all still reaches all three replicas
    import jwt as pyjwt
    before = sum(1 for cid, _ in endpoint.issued if cid == "broker")
    # until every token handed out so far has expired (the newest one within the next 8 s: not a
    # fixed 10 s from now) and the brokers have fetched newer ones
    expiry = max(pyjwt.decode(t, options={"verify_signature": False})["exp"] for t in list(endpoint.tokens))
    wait_for(lambda: time.time() > expiry + 2 and sum(1 for cid, _ in endpoint.issued if cid == "broker") > before,
             timeout=TOKEN_LIFETIME_S + 20, what="the tokens issued so far expired and new ones fetched")
    later = [b"after-refresh-%d" % i for i in range(5)]
    assert _produce_and_read(cfg, topic, later, before=first) == first + later
    assert _isr(admin, topic) == [1, 2, 3]
    assert sum(1 for cid, _ in endpoint.issued if cid == "broker") > before
    # the request is Kafka's: client_credentials with the scope, Basic client authentication
    headers, body = next(r for r in endpoint.requests if "scope=kafka.broker" in r[1])
    assert body == "grant_type=client_credentials&scope=kafka.broker"
    assert headers["Accept"] == "application/json" and headers["Cache-Control"] == "no-cache"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"


def test_a_broker_the_endpoint_refuses_cannot_replicate(cluster, endpoint):
    from confluent_kafka.admin import AdminClient, NewTopic
    cfg = _client(cluster, endpoint)
    admin = AdminClient(cfg)
    topic = "jwt-bad-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, BAD_BROKER]])])[topic].result(30)
    # the bad broker never fetches: it leaves the ISR after replica.lag.time.max.ms
    wait_for(lambda: _isr(admin, topic) == [1], timeout=20, what="ISR [1]")
    assert "broker" in endpoint.refused
    log = open(cluster.broker(BAD_BROKER).log_path, errors="replace").read()
    assert "no OAuth token for this broker" in log and "fatal status 401" in log


def test_a_broker_with_a_token_file_replicates(cluster, endpoint):
    """Broker 5 logs in with the signed token of its file (sub "file-broker"): as a follower it
    fetches from broker 1, and as a leader it is fetched from, so acks=all reaches both ways."""
    from confluent_kafka.admin import AdminClient, NewTopic
    cfg = _client(cluster, endpoint)
    admin = AdminClient(cfg)
    for assignment in ([1, FILE_BROKER], [FILE_BROKER, 2]):
        topic = "jwt-file-" + uuid.uuid4().hex[:6]
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[assignment])])[topic].result(30)
        values = [b"from-file-%d-" % i + bytes(range(64)) for i in range(10)]
        assert _produce_and_read(cfg, topic, values) == values
        wait_for(lambda: _isr(admin, topic) == sorted(assignment), timeout=20, what="ISR %s" % sorted(assignment))


def test_no_secret_in_any_log(cluster, endpoint):
    """Neither the client secrets nor any token the brokers obtained (a bearer token is a
    credential) reaches a broker's log."""
    secrets = list(endpoint.clients.values()) + ["not-the-secret"] + \
        [t.split(".")[2] for t in endpoint.tokens + endpoint.file_tokens]
    assert len(secrets) > 5
    for b in cluster.brokers:
        text = open(b.log_path, errors="replace").read()
        assert not any(s in text for s in secrets), b.log_path


def test_the_login_sans_io():
    """The request Kafka's ClientCredentialsRequestGenerator makes, the statuses JwtHttpClient
    treats as fatal or retried, and ClientJwtValidator's checks of the token."""
    import jwt as pyjwt

    from pykbroker.security.oauth_login import ClientCredentialsLogin, TokenError, check_token
    login = ClientCredentialsLogin("http://x/token", "id:1", "s&cret", scope="a b")
    headers, body = login.request()
    assert body == b"grant_type=client_credentials&scope=a+b"
    assert base64.b64decode(headers["Authorization"][6:]) == b"id:1:s&cret"
    # sasl.oauthbearer.header.urlencode=true: RFC 6749's form-encoding first
    enc = ClientCredentialsLogin("http://x/token", "id:1", "s&cret", urlencode_header=True)
    assert base64.b64decode(enc.request()[0]["Authorization"][6:]) == b"id%3A1:s%26cret"
    assert "s&cret" not in repr(login)
    calls = []

    def post(status):
        def fn(url, headers, body, timeout):
            calls.append(status)
            return status, b"{}"
        return fn
    with pytest.raises(TokenError, match="fatal status 401"):
        login.fetch(post(401), sleep=lambda s: None)
    assert calls == [401]   # fatal: not retried
    clock = [0.0]
    calls.clear()
    with pytest.raises(TokenError, match="attempts"):
        login.fetch(post(503), sleep=lambda s: clock.__setitem__(0, clock[0] + s), now=lambda: clock[0])
    assert len(calls) > 3 and clock[0] <= 10.0   # retried, doubling, within backoff.max.ms
    now = int(time.time())
    good = pyjwt.encode({"sub": "b", "exp": now + 100, "iat": now, "scope": ["x", "y"]}, "k" * 32)
    assert check_token(good)[0] == "b"
    for claims, why in (({"exp": now + 100}, "sub"), ({"sub": "b"}, "exp"),
                        ({"sub": "b", "exp": now + 100, "scope": ["x", "x"]}, "scope")):
        with pytest.raises(TokenError, match=why):
            check_token(pyjwt.encode(claims, "k" * 32))
    login.accept(good, now * 1000)
    assert not login.needs_token(now * 1000 + 79_000) and login.needs_token(now * 1000 + 81_000)
    assert login.client_token() == ("n,,\x01auth=Bearer %s\x01\x01" % good).encode()
