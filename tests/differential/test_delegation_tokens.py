"""Delegation tokens (APIs 38-41) as Apache Kafka 4.4 answers them: both brokers get a PLAINTEXT
and a SASL_PLAINTEXT listener with the same PLAIN users (admin, alice, bob), SCRAM enabled and
the same ``delegation.token.secret.key``; the same requests run against each and the answers are
compared field by field (timestamps as their differences from the issue time or from now, ids
and HMACs by their shape: both are random).  A second pair of brokers without a secret key
compares the disabled answers.  What is compared: every version's create answer, the refusals
(PLAINTEXT listener, a token-authenticated principal, a non-User renewer), renew and expire by
HMAC with their error order (unknown HMAC, not owner nor renewer, immediate expiry), Describe's
owner filter, and logging in with SCRAM ``tokenauth=true`` (both mechanisms, a wrong HMAC)."""
from __future__ import annotations

import base64
import time

import pytest

from pykbroker.protocol.wire import WireClient
from pykbroker.security.client import authenticate_sync
from pykbroker.security.errors import AuthenticationFailed

from .conftest import authorizer_config
from .helpers import explain, sasl_sides
from .test_security import SASL

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
BASE = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}
ENABLED = dict(BASE, **{"delegation.token.secret.key": "differential-secret"})
DAY, WEEK = 86400000, 604800000
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


_kafka, _pyk, _both = sasl_sides(ENABLED, "pyk_tokens", "kafka_tokens", both="both")


def _login(side, user):
    c = WireClient(side["sasl"], timeout=15)
    authenticate_sync(c.request, "PLAIN", user, PASSWORDS[user])
    return c


def _create_body(version, renewers=(), max_lifetime_ms=-1, owner=None):
    body = {"renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers],
            "max_lifetime_ms": max_lifetime_ms}
    if version >= 3:
        body["owner_principal_type"] = owner[0] if owner else None
        body["owner_principal_name"] = owner[1] if owner else None
    return body


def _shape(r):
    """A create answer without its random or time-dependent values."""
    out = dict(r)
    issue = out.pop("issue_timestamp_ms")
    out["expiry-issue"] = out.pop("expiry_timestamp_ms") - issue if issue > 0 else out["expiry_timestamp_ms"]
    out["max-issue"] = out.pop("max_timestamp_ms") - issue if issue > 0 else out["max_timestamp_ms"]
    out["issue"] = "now" if abs(issue - time.time() * 1000) < 60000 else issue
    tid = out.pop("token_id")
    out["token_id"] = "22 chars" if len(tid) == 22 else tid
    out["hmac"] = len(out.pop("hmac"))
    return out


def _wait_described(side, token_id, present=True, timeout=15.0):
    """Kafka's brokers learn a token (or its removal) from the metadata log a moment after the
    controller answered: wait until Describe shows it (pykbroker's answer is at once)."""
    deadline = time.monotonic() + timeout
    with _login(side, "admin") as c:
        while True:
            ids = [t["token_id"] for t in c.request(41, 3, {"owners": None})["tokens"]]
            if (token_id in ids) == present or time.monotonic() > deadline:
                return
            time.sleep(0.1)


def _create(side, user="admin", version=3, **kw):
    with _login(side, user) as c:
        r = c.request(38, version, _create_body(version, **kw))
    if r["error_code"] == 0:
        _wait_described(side, r["token_id"])
    return r


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("kw", [
    pytest.param({}, id="defaults"),
    pytest.param({"max_lifetime_ms": 3600000}, id="max-lifetime-1h"),
    pytest.param({"max_lifetime_ms": 10 * WEEK}, id="max-lifetime-capped"),
    pytest.param({"renewers": [("User", "bob")]}, id="renewer"),
    pytest.param({"renewers": [("Group", "bob")]}, id="renewer-not-a-user"),
])
def test_create(both, version, kw):
    p, k = both(lambda s: _shape(_create(s, version=version, **kw)))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("owner", [("User", "alice"), ("User", "admin"), ("Group", "g")])
def test_create_for_another_owner(both, owner):
    """KIP-373 (v3): without an authorizer any owner may be named."""
    p, k = both(lambda s: _shape(_create(s, owner=owner)))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("api,version,body", [
    (38, 3, _create_body(3)), (38, 1, _create_body(1)),
    (39, 2, {"hmac": b"x" * 64, "renew_period_ms": 1000}),
    (40, 2, {"hmac": b"x" * 64, "expiry_time_period_ms": -1}),
    (41, 3, {"owners": None}), (41, 1, {"owners": []}),
])
def test_refused_on_plaintext(both, api, version, body):
    def run(side):
        with WireClient(side["plain"]) as c:
            r = c.request(api, version, body)
        return _shape(r) if api == 38 else r
    p, k = both(run)
    assert p == k, explain(p, k)


def _token(side, renewers=(("User", "bob"),)):
    r = _create(side, renewers=renewers)
    assert r["error_code"] == 0, r
    return r


def test_renew_and_expire(both):
    """Renew and expire by HMAC in Kafka's error order, as the owner, a renewer and a stranger."""
    def run(side):
        tok = _token(side)
        hm, issue, max_ts = tok["hmac"], tok["issue_timestamp_ms"], tok["max_timestamp_ms"]
        out = []
        with _login(side, "admin") as admin, _login(side, "alice") as alice, _login(side, "bob") as bob:
            out.append(("unknown hmac", alice.request(39, 2, {"hmac": b"y" * 64, "renew_period_ms": 1000})))
            out.append(("stranger renews", alice.request(39, 2, {"hmac": hm, "renew_period_ms": 1000})))
            r = bob.request(39, 2, {"hmac": hm, "renew_period_ms": 600000})
            out.append(("renewer renews 10 min", r["error_code"], 600000 <= r["expiry_timestamp_ms"] - issue < 660000))
            r = admin.request(39, 1, {"hmac": hm, "renew_period_ms": 2 * DAY})
            # a period above delegation.token.expiry.time.ms is capped by it
            out.append(("owner renews 2 days", r["error_code"], DAY <= r["expiry_timestamp_ms"] - issue < DAY + 60000))
            r = admin.request(39, 2, {"hmac": hm, "renew_period_ms": -1})
            out.append(("owner renews default", r["error_code"], DAY <= r["expiry_timestamp_ms"] - issue < DAY + 60000))
            out.append(("stranger expires", alice.request(40, 2, {"hmac": hm, "expiry_time_period_ms": -1})))
            r = admin.request(40, 2, {"hmac": hm, "expiry_time_period_ms": 3600000})
            out.append(("owner expires in 1h", r["error_code"], 3600000 <= r["expiry_timestamp_ms"] - issue < 3660000))
            r = admin.request(40, 2, {"hmac": hm, "expiry_time_period_ms": 2 * WEEK})
            out.append(("expire capped by max", r["error_code"], r["expiry_timestamp_ms"] == max_ts))
            r = bob.request(40, 1, {"hmac": hm, "expiry_time_period_ms": -1})
            out.append(("renewer expires now", r["error_code"], abs(r["expiry_timestamp_ms"] - time.time() * 1000) < 60000))
            _wait_described(side, tok["token_id"], present=False)
            out.append(("renew after expiry", admin.request(39, 2, {"hmac": hm, "renew_period_ms": 1000})))
            out.append(("expire after expiry", admin.request(40, 2, {"hmac": hm, "expiry_time_period_ms": -1})))
            gone = [t for t in admin.request(41, 3, {"owners": None})["tokens"] if t["token_id"] == tok["token_id"]]
            out.append(("described after expiry", gone))
        return out
    p, k = both(run)
    assert p == k, explain(p, k)


def _describe_shape(r, mine):
    """Describe's answer restricted to the tokens of this test (``mine``: their ids), each
    without its random or time-dependent values."""
    toks = []
    for t in r["tokens"]:
        if t["token_id"] not in mine:
            continue
        t = dict(t)
        issue = t.pop("issue_timestamp")
        t["expiry-issue"] = t.pop("expiry_timestamp") - issue
        t["max-issue"] = t.pop("max_timestamp") - issue
        t["token"] = mine.index(t.pop("token_id"))
        t["hmac"] = len(t.pop("hmac"))
        toks.append(t)
    return {"error_code": r["error_code"], "throttle_time_ms": r["throttle_time_ms"],
            "tokens": sorted(toks, key=lambda t: t["token"])}


def test_describe_owner_filter(both):
    def run(side):
        a = _create(side, user="alice", renewers=[("User", "bob")])
        b = _create(side, user="bob")
        mine = [a["token_id"], b["token_id"]]
        out = {}
        with _login(side, "admin") as admin, _login(side, "bob") as bob:
            for name, conn, owners in (("all", admin, None), ("none", admin, []),
                                       ("alice's", admin, [("User", "alice")]),
                                       ("bob's (and renewable)", admin, [("User", "bob")]),
                                       ("nobody's", admin, [("User", "carol")]),
                                       ("as bob, all", bob, None)):
                body = {"owners": None if owners is None else
                        [{"principal_type": t, "principal_name": n} for t, n in owners]}
                for v in (1, 3):
                    out["%s v%d" % (name, v)] = _describe_shape(conn.request(41, v, body), mine)
        return out
    p, k = both(run)
    assert p == k, explain(p, k)


def _token_login(side, token_id, password, mechanism):
    c = WireClient(side["sasl"], timeout=15)
    try:
        authenticate_sync(c.request, mechanism, token_id, password, {"tokenauth": "true"})
    except AuthenticationFailed as e:
        c.close()
        return None, str(e)
    return c, None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_token_authentication(both, mechanism):
    """A token logs in with SCRAM tokenauth=true as its owner; the connection may not ask for
    tokens; a wrong HMAC, or the token id without tokenauth, fails."""
    def run(side):
        tok = _create(side, user="alice")
        password = base64.b64encode(tok["hmac"]).decode()
        out = []
        c, err = _token_login(side, tok["token_id"], password, mechanism)
        out.append(("login", err))
        with c:
            out.append(("create", _shape(c.request(38, 3, _create_body(3)))))
            out.append(("renew", c.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": 1000})))
            out.append(("describe", c.request(41, 3, {"owners": None})))
            md = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
            out.append(("metadata", md["error_code"] if "error_code" in md else 0))
        out.append(("wrong hmac", _token_login(side, tok["token_id"], base64.b64encode(b"z" * 64).decode(),
                                               mechanism)[1]))
        c2 = WireClient(side["sasl"], timeout=15)
        try:
            authenticate_sync(c2.request, mechanism, tok["token_id"], password)
            out.append(("without tokenauth", "accepted"))
        except AuthenticationFailed as e:
            out.append(("without tokenauth", str(e)))
        finally:
            c2.close()
        return out
    p, k = both(run)
    assert p == k, explain(p, k)


def test_token_session_lifetime(both):
    """The session of a token login ends with the token (Kafka's negotiated credential lifetime
    when connections.max.reauth.ms is unset)."""
    def run(side):
        tok = _create(side, user="alice", max_lifetime_ms=3600000)
        password = base64.b64encode(tok["hmac"]).decode()
        with WireClient(side["sasl"], timeout=15) as c:
            c.request(17, 1, {"mechanism": "SCRAM-SHA-512"})
            from pykbroker.security.client import ScramClient
            sc = ScramClient("SCRAM-SHA-512", tok["token_id"], password, extensions={"tokenauth": "true"})
            r = c.request(36, 2, {"auth_bytes": sc.first()})
            r = c.request(36, 2, {"auth_bytes": sc.step(r["auth_bytes"])})
            life = r["session_lifetime_ms"]
        return r["error_code"], 3500000 < life <= 3600000
    p, k = both(run)
    assert p == k, explain(p, k)


# ---------------------------------------------------------------------------------- disabled
# No secret key: the brokers of test_security.py (the same PLAIN user alice; SCRAM and
# OAUTHBEARER besides, which these requests do not involve), whose Kafka is started once for both
# modules (conftest.sasl_oracles)
assert "delegation.token.secret.key" not in SASL and "alice-secret" in SASL["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
_off_kafka, _off_pyk = sasl_sides(SASL, "pyk_off", "kafka_off")


@pytest.mark.parametrize("api,version,body", [
    (38, 3, _create_body(3)), (38, 1, _create_body(1, renewers=[("User", "bob")])),
    (38, 3, _create_body(3, renewers=[("Group", "g")])),
    (39, 2, {"hmac": b"x" * 64, "renew_period_ms": 1000}),
    (40, 2, {"hmac": b"x" * 64, "expiry_time_period_ms": -1}),
    (41, 3, {"owners": None}), (41, 2, {"owners": []}),
])
def test_disabled_without_secret_key(pyk_off, kafka_off, api, version, body):
    def run(side):
        with _login(side, "alice") as c:
            r = c.request(api, version, body)
        return _shape(r) if api == 38 else r
    p, k = run(pyk_off), run(kafka_off)
    assert p == k, explain(p, k)


# ---------------------------------------------------------------------------------- authorizer
AUTHZ = dict(ENABLED, **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                         # ANONYMOUS: the brokers' own PLAINTEXT listener (Kafka's inter-broker
                         # and readiness traffic); the clients here all log in with SASL
                         "super.users": "User:admin;User:ANONYMOUS"})
USER_RT, TOKEN_RT, LITERAL, ALLOW = 7, 6, 3, 3
CREATE_TOKENS, DESCRIBE_TOKENS, DESCRIBE = 13, 14, 8


# the Kafka side is the directory's shared authorizer node (conftest.py): exactly these settings
assert AUTHZ == authorizer_config(), (AUTHZ, authorizer_config())


_kafka_authz, _pyk_authz = sasl_sides(AUTHZ, "pyk_authz", "kafka_authz", authorizer=True)


def _allow(side, principal, op, rtype, name, timeout=15.0):
    binding = {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
               "principal": principal, "host": "*", "operation": op, "permission_type": ALLOW}
    with _login(side, "admin") as c:
        r = c.request(30, 3, {"creations": [binding]})
        assert [x["error_code"] for x in r["results"]] == [0], r
        # Kafka's broker learns the binding from the metadata log a moment later: until its
        # authorizer lists it (DescribeAcls answers from the authorizer's own copy, so a listed
        # binding is enforced)
        deadline = time.monotonic() + timeout
        while True:
            d = c.request(29, 3, {"resource_type_filter": rtype, "resource_name_filter": name,
                                  "pattern_type_filter": LITERAL, "principal_filter": principal,
                                  "host_filter": "*", "operation": op, "permission_type": ALLOW})
            assert d["error_code"] == 0, d
            if d["resources"]:
                return
            assert time.monotonic() < deadline, "the binding %r is not listed" % binding
            time.sleep(0.05)


def test_authorizer_create_tokens_and_describe(pyk_authz, kafka_authz):
    """KIP-373's CREATE_TOKENS on the owner's USER resource, and which tokens Describe shows
    without and with DESCRIBE on the token / DESCRIBE_TOKENS on the owner."""
    def run(side):
        out = []
        out.append(("alice for bob, no ACL", _shape(_create(side, user="alice", owner=("User", "bob")))))
        _allow(side, "User:alice", CREATE_TOKENS, USER_RT, "User:bob")
        for_bob = _create(side, user="alice", owner=("User", "bob"))
        out.append(("alice for bob, with CREATE_TOKENS", _shape(for_bob)))
        own = _create(side, user="alice", renewers=[("User", "carol")])
        bob2 = _create(side, user="bob")
        mine = [for_bob["token_id"], own["token_id"], bob2["token_id"]]
        with _login(side, "alice") as alice:
            out.append(("alice sees", _describe_shape(alice.request(41, 3, {"owners": None}), mine)))
            out.append(("alice owners=[alice]", _describe_shape(
                alice.request(41, 3, {"owners": [{"principal_type": "User", "principal_name": "alice"}]}), mine)))
            out.append(("requester renews", alice.request(39, 2, {"hmac": for_bob["hmac"], "renew_period_ms": 1000})))
            _allow(side, "User:alice", DESCRIBE, TOKEN_RT, bob2["token_id"])
            out.append(("alice with DESCRIBE on bob's token", _describe_shape(alice.request(41, 3, {"owners": None}), mine)))
            _allow(side, "User:alice", DESCRIBE_TOKENS, USER_RT, "User:bob")
            out.append(("alice with DESCRIBE_TOKENS on bob", _describe_shape(alice.request(41, 3, {"owners": None}), mine)))
        with _login(side, "bob") as bob:
            out.append(("bob sees", _describe_shape(bob.request(41, 3, {"owners": None}), mine)))
        with _login(side, "admin") as admin:
            out.append(("admin sees", _describe_shape(admin.request(41, 3, {"owners": None}), mine)))
        return out
    p, k = run(pyk_authz), run(kafka_authz)
    assert p == k, explain(p, k)
