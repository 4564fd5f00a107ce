"""The Go (franz-go, sarama, kafka-go) and Node (kafkajs, @confluentinc/kafka-javascript) clients'
``secure`` scenarios against Apache Kafka 4.4 and pykbroker secured alike (secure_sides.py:
SASL_SSL with PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER's unsecured JWTs, SSL, and an mTLS
listener; the same certificate files, users and server.properties keys on both): every
connection case of tests/go/test_go_security.py and tests/node (test_secure_*) on both brokers,
the same observations.

- A case that gets in: the client's own verdict (the 30 records of the round trip's shapes read
  back byte-exact at the offsets its produce answers named) and what the broker stored, read
  here with raw Fetches (offsets, keys, values, headers, the timestamps' pattern), equal.
- A case refused (a wrong password for each mechanism, an expired token, no client certificate
  on the mTLS listener, a broker certificate of a CA the client does not trust): the client's
  error kind (its authentication or TLS error; kafkajs's error class, type and retriable flag;
  librdkafka's connect error and the authentication failure in its log) and its text, which
  carries the broker's SaslAuthenticate message or TLS alert, equal; nothing written.

One difference is expected and pinned: the TLS alert refusing a client without a certificate
on the mTLS listener is ``certificate_required`` (116) from pykbroker (OpenSSL, TLS 1.3) and
``bad_certificate`` (42) from Kafka (the JDK's JSSE); the TLS stacks pick the alert, neither is
configurable (SKIPPED.md).  The clients see a fatal TLS alert either way, the same error kind.

One Kafka and one pykbroker for the module; one test per client, its cases run at once (a Go
program per case, side by side: their flags are per process; one Node process for all of a
client's cases).  About 40 s, the Kafka start included.  A missing oracle fails; a missing Go
toolchain or Node package skips that client's test (a failure under CI=true for Node)."""
from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import needs
from tests.go import gobuild
from tests.node.secure import REFUSED_WITHIN_MS, connection_case

needs.module("cryptography")

from . import secure_sides as ss  # noqa: E402
from .conftest import at_once  # noqa: E402
from .helpers import explain  # noqa: E402

RECORDS = 30
GUARDED = "secure-guarded"   # the topic the refused Node cases aim at: it must stay empty


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    from .conftest import _load_oracle
    m = ss.Material(str(tmp_path_factory.mktemp("secure-material")))
    try:
        k, kafka = ss.start_kafka(_load_oracle(), tmp_path_factory.mktemp("kafka-secure"), m)
    except Exception as e:   # never a skip: a missing oracle is a CI failure
        pytest.fail("Apache Kafka (the oracle) could not be started: %s" % e, pytrace=False)
    try:
        b, pyk = ss.start_pykbroker(m)
        try:
            for side in (pyk, kafka):
                ss.add_scram_users(side)
                ss.create_topic(side, GUARDED, 1)
            yield {"material": m, "both": (pyk, kafka)}
        finally:
            b.stop()
    finally:
        k.stop()


def _both(sides, observe):
    return at_once(observe, *sides["both"])


def _normal(text: str) -> str:
    """The ports differ between the two brokers, nothing else may."""
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)


# --- Go --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gobin(tmp_path_factory):
    return gobuild.build_for_module(tmp_path_factory)


def _go_flags(m, mech=None, user="alice", wrong=False, cert=False, ca=None):
    f = {"tls": "true", "ca": ca or m.ca}
    if cert:
        f.update(cert=m.cert, key=m.key)
    if mech == "OAUTHBEARER":
        f.update(sasl=mech, oauth_token=gobuild.unsecured_jwt(user, -60 if wrong else 3600))
    elif mech:
        f.update(sasl=mech, user=user, password="wrong" if wrong else ss.USERS[user])
    return f


def go_cases(client, m):
    """(name, listener, flags, refused) of every connection case the client has (kafka-go has
    no OAUTHBEARER)."""
    mechs = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] + (["OAUTHBEARER"] if client != "kafkago" else [])
    cases = [("ssl", "SSL", _go_flags(m), False), ("mtls", "MTLS", _go_flags(m, cert=True), False)]
    # bob (a quote and a backslash in the password) for SCRAM-SHA-512, alice for the others
    cases += [("sasl-" + mech, "SASL_SSL", _go_flags(m, mech, "bob" if mech == "SCRAM-SHA-512" else "alice"), False)
              for mech in mechs]
    cases += [("wrong-" + mech, "SASL_SSL", _go_flags(m, mech, "bob", wrong=True), True) for mech in mechs]
    cases += [("mtls-without-certificate", "MTLS", _go_flags(m), True)]
    if client == "franzgo":
        cases += [("broker-certificate-of-another-ca", "SSL", _go_flags(m, ca=m.other_ca), True)]
    return cases


def _go_case(gobin, client, side, case):
    name, listener, flags, refused = case
    prefix = "%s-%s" % (client, name.lower())
    if refused:
        # a topic that exists (made here): the produce is the client's first request
        ss.create_topic(side, prefix + "-sec", 3)
        flags = dict(flags, create="false")
    t0 = time.monotonic()
    rep = gobuild.run(gobin / client, side.address(listener), "secure", wait=90, prefix=prefix, records=RECORDS,
                      **flags)
    took = time.monotonic() - t0
    if "roundtrip" in rep:
        return {"roundtrip": rep["roundtrip"], "stored": ss.stored(side, prefix + "-sec")}
    # how long the refusal took is timing: compared as "at the first refusal" or not
    return {"auth_failed": rep.get("auth_failed"), "tls_failed": rep.get("tls_failed"),
            "error": _normal(rep.get("error", repr(rep))), "end_offsets": ss.end_offsets(side, prefix + "-sec"),
            "refused_fast": took < gobuild.REFUSED_WITHIN_S}


@pytest.mark.parametrize("client", ["franzgo", "sarama", "kafkago"])
def test_go_client_secure_cases_same_observations(sides, gobin, client):
    cases = go_cases(client, sides["material"])

    def observe(side):
        with ThreadPoolExecutor(4) as pool:
            return dict(zip([c[0] for c in cases], pool.map(lambda c: _go_case(gobin, client, side, c), cases)))

    p, k = _both(sides, observe)
    for side, alert in ((p, "certificate required"), (k, "bad certificate")):
        r = side["mtls-without-certificate"]
        assert "remote error: tls: " + alert in r["error"], r
        r["error"] = r["error"].replace(alert, "<alert>")
    assert p == k, explain(p, k)
    for name, listener, _, refused in cases:
        r = p[name]
        if not refused:
            rt = r["roundtrip"]
            assert rt["mismatches"] == [] and rt["produced"] == rt["read"] == RECORDS, (name, r)
            assert sum(len(v) for v in r["stored"].values()) == RECORDS, (name, r)
            continue
        assert r["end_offsets"] == [0, 0, 0], (name, r)
        if name.startswith("wrong-"):
            assert r["auth_failed"] and not r["tls_failed"] and r["refused_fast"], (name, r)
            assert gobuild.GO_AUTH_ERROR[client] in r["error"], (name, r)
            assert gobuild.broker_auth_error(client, name[6:]) in r["error"], (name, r)
        elif name == "mtls-without-certificate":
            # the broker's fatal alert reaches the client (TLS 1.3), rather than a bare close
            assert r["tls_failed"] and "remote error: tls: <alert>" in r["error"], (name, r)
        else:
            assert r["tls_failed"] and "x509: certificate signed by unknown authority" in r["error"], (name, r)


# --- Node ------------------------------------------------------------------------------------
def _node_case(m, side, name, listener, sasl=None, cert=False, expect="ok"):
    return connection_case(name, side.address(listener), m.ca, (m.cert, m.key) if cert else None, sasl, expect,
                           guarded=GUARDED)


def _password(m, side, name, mech, user="alice", wrong=False):
    return _node_case(m, side, name, "SASL_SSL", {"mechanism": mech, "username": user,
                                                  "password": "not-" + ss.USERS[user] if wrong else ss.USERS[user]},
                      expect="auth-error" if wrong else "ok")


def kafkajs_cases(m, side):
    cases = [_node_case(m, side, "ssl", "SSL"), _node_case(m, side, "mtls", "MTLS", cert=True),
             _password(m, side, "sasl-plain", "plain"), _password(m, side, "sasl-scram-sha-256", "scram-sha-256"),
             _password(m, side, "sasl-scram-sha-512", "scram-sha-512", user="bob"),
             _node_case(m, side, "sasl-oauthbearer", "SASL_SSL", {"mechanism": "oauthbearer", "sub": "alice"})]
    cases += [_password(m, side, "wrong-" + mech, mech, user="bob" if mech.endswith("512") else "alice", wrong=True)
              for mech in ("plain", "scram-sha-256", "scram-sha-512")]
    cases += [_node_case(m, side, "expired-token", "SASL_SSL", {"mechanism": "oauthbearer", "sub": "alice",
                                                                 "lifetime_s": -60}, expect="auth-error"),
              _node_case(m, side, "mtls-without-certificate", "MTLS", expect="auth-error")]
    return cases


def confluent_cases(m, side):
    cases = [_node_case(m, side, "ssl", "SSL"), _node_case(m, side, "mtls", "MTLS", cert=True),
             _password(m, side, "sasl-plain", "plain"), _password(m, side, "sasl-scram-sha-256", "scram-sha-256"),
             _password(m, side, "sasl-scram-sha-512", "scram-sha-512", user="bob")]
    cases += [_password(m, side, "wrong-" + mech, mech, user="bob" if mech.endswith("512") else "alice", wrong=True)
              for mech in ("plain", "scram-sha-256", "scram-sha-512")]
    return cases


def _node_observe(script, make_cases, m, tmp_dir):
    from tests.node import noderun

    def observe(side):
        cases = make_cases(m, side)
        path = os.path.join(tmp_dir, "%s-%s.json" % (script, side.name))
        with open(path, "w") as fh:
            json.dump({"cases": cases}, fh)
        prefix = "diff-" + script.split(".")[0]
        rep = noderun.scenario(noderun.start(script, side.address("SASL_SSL"), ["secure"], wait=90, prefix=prefix,
                                             security=path).report(), "secure")
        out = {}
        for c in cases:
            r = dict(noderun.scenario(rep, c["name"]))
            if c["expect"] == "ok":
                out[c["name"]] = {"roundtrip": r, "stored": ss.stored(side, r["topic"])}
            else:
                # how long the refusal took is timing: compared as "at the first refusal" or not
                ms = r.pop("refused_after_ms", None)
                r["refused_fast"] = ms is not None and ms < REFUSED_WITHIN_MS
                out[c["name"]] = {k: _normal(v) if isinstance(v, str) else v for k, v in r.items()}
        out["guarded_end_offsets"] = ss.end_offsets(side, GUARDED, 1)
        return out
    return observe


def _librdkafka_failure(r):
    """librdkafka's first log line of a refused authentication, from its "SASL authentication
    error" on (before: the connection's name), without the time it took (after: "(after N ms in
    state AUTH_REQ...)"); how often it retried before the connect failed is timing too."""
    f = r["failures_logged"][0] if r["failures_logged"] else ""
    f = f[f.index("SASL authentication error"):] if "SASL authentication error" in f else f
    return [re.sub(r" \(after \d+ms in state [A-Z_]+(, \d+ identical error\(s\) suppressed)?\)$", "", f)]


def test_kafkajs_secure_cases_same_observations(sides, tmp_path):
    from tests.node import noderun
    noderun.require()
    p, k = _both(sides, _node_observe("kafkajs.js", kafkajs_cases, sides["material"], str(tmp_path)))
    # the TLS alert (module docstring), in OpenSSL's words after its per-process error prefix
    for side, alert in ((p, "tlsv13 alert certificate required"), (k, "sslv3 alert bad certificate")):
        r = side["mtls-without-certificate"]
        assert r["message"].startswith("Connection error: ") and alert in r["message"], r
        r["message"] = "<alert>"
    assert p == k, explain(p, k)
    assert p["guarded_end_offsets"] == [0], p
    for name in ("ssl", "mtls", "sasl-plain", "sasl-scram-sha-256", "sasl-scram-sha-512", "sasl-oauthbearer"):
        r = p[name]["roundtrip"]
        assert r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS, (name, r)
    for mech, shown in (("plain", "PLAIN"), ("scram-sha-256", "SCRAM SHA256"), ("scram-sha-512", "SCRAM SHA512")):
        r = p["wrong-" + mech]
        assert r["error_name"] == "KafkaJSSASLAuthenticationError" and r["retriable"] is False and r["refused_fast"], r
        assert "SASL %s authentication failed: Authentication failed" % shown in r["message"], r
    # kafkajs does not read OAUTHBEARER's error challenge and sends its next request: the broker
    # answers it ILLEGAL_SASL_STATE and closes
    assert p["expired-token"]["message"] == "Request is not valid given the current SASL state", p
    assert p["mtls-without-certificate"]["error_name"] is not None, p


def test_confluent_kafka_javascript_secure_cases_same_observations(sides, tmp_path):
    from tests.node import noderun
    noderun.require(native=True)
    p, k = _both(sides, _node_observe("confluent.js", confluent_cases, sides["material"], str(tmp_path)))
    # the log line up to the broker's message names the connection and its timing: compared
    # from "SASL authentication error" on
    for side in (p, k):
        for mech in ("plain", "scram-sha-256", "scram-sha-512"):
            side["wrong-" + mech]["failures_logged"] = _librdkafka_failure(side["wrong-" + mech])
    assert p == k, explain(p, k)
    assert p["guarded_end_offsets"] == [0], p
    for name in ("ssl", "mtls", "sasl-plain", "sasl-scram-sha-256", "sasl-scram-sha-512"):
        r = p[name]["roundtrip"]
        assert r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS and r["offsets_dense"], (name, r)
    for mech in ("plain", "scram-sha-256", "scram-sha-512"):
        r = p["wrong-" + mech]
        assert r["connected"] is False and r["sent"] is None and r["connect_error"]["code"] == -195, r
        assert r["refused_fast"], r
        assert gobuild.BROKER_AUTH_ERROR[mech.upper()] in r["failures_logged"][0], r
