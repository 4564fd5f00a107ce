"""franz-go, IBM/sarama and segmentio/kafka-go over TLS, mTLS and SASL (the versions in
compat/go/go.mod): one secured broker for the module (``pykbroker.Broker(security="SASL_SSL")``
with two more listeners: SSL, and SSL with ``ssl.client.auth=required`` for mTLS; PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER with Kafka's unsecured-JWT validator on the SASL_SSL
one).  The Go programs' ``secure`` scenario produces records of the round trip's shapes (null,
empty and binary keys and values, 6 KiB values, duplicate headers, out-of-order timestamps) and
reads them back byte-exact over the secured listener, with each client's own TLS and SASL
code: franz-go's kgo.DialTLSConfig and pkg/sasl/{plain,scram,oauth}, sarama's Net.TLS and
Net.SASL (SCRAM through SCRAMClientGeneratorFunc with xdg-go/scram, OAUTHBEARER through a
TokenProvider), kafka-go's Transport and
Dialer with its sasl/plain and sasl/scram.

A client refused (a wrong password, an expired token, no client certificate on the mTLS
listener, a CA that did not sign the broker's certificate) must fail with its own
authentication (or TLS) error, and nothing of what it tried to produce may be in the log."""
from __future__ import annotations

import os
import time
import uuid

import pytest

from tests import needs

from . import gobuild

if gobuild.go_binary() is None:
    pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go): the Go client scenarios of compat/go "
                "need one", allow_module_level=True)
needs.module("cryptography")

import pykbroker  # noqa: E402
from pykbroker.embedded import TEST_CONFIG  # noqa: E402

# bob's password has a quote and a backslash: JAAS escaping (PLAIN) and SCRAM's saslname rules
USERS = {"alice": "alice-Pa55word!", "bob": 'b"o\\b-secret'}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
RECORDS = 30   # partition i % 3; among them null/empty keys and values, a 6 KiB value, headers


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """{"broker", "SASL_SSL"/"SSL"/"MTLS": bootstrap, "ca", "cert", "key", "other_ca"}."""
    d = tmp_path_factory.mktemp("gosec")
    cfg = {"listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
           "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL",
           "inter.broker.listener.name": "SASL_SSL",
           "listener.name.mtls.ssl.client.auth": "required",
           **TEST_CONFIG}
    b = pykbroker.Broker(security="SASL_SSL", users=USERS, mechanisms=MECHANISMS, config=cfg)
    s = b._secure
    # the mTLS listener trusts client certificates of the broker's own throw-away CA
    b.config.update({"listener.name.mtls.ssl.truststore.type": "PEM",
                     "listener.name.mtls.ssl.truststore.location": s.ca_file})
    client = s.ca.issue("go-client", [], server=False)
    files = {"cert": client.cert_pem, "key": client.key_pem}
    from pykbroker.security.certs import CertificateAuthority
    files["other_ca"] = CertificateAuthority().cert_pem
    out = {"ca": s.ca_file}
    for name, pem in files.items():
        (d / (name + ".pem")).write_text(pem)
        out[name] = str(d / (name + ".pem"))
    b.start()
    try:
        for li in b.broker.bound:
            out[li.name] = "127.0.0.1:%d" % li.port
        out["broker"] = b
        yield out
    finally:
        b.stop()


def _flags(sec, listener, mech=None, user=None, password=None, cert=False, ca=None):
    f = {"tls": "true", "ca": ca or sec["ca"]}
    if cert:
        f.update(cert=sec["cert"], key=sec["key"])
    if mech == "OAUTHBEARER":
        f.update(sasl=mech, oauth_token=gobuild.unsecured_jwt(user or "alice", -60 if password == "wrong" else 3600))
    elif mech:
        user = user or "alice"
        f.update(sasl=mech, user=user, password=USERS[user] if password is None else password)
    return sec[listener], f


def _roundtrip(gobin, client, bootstrap, flags):
    rep = gobuild.run(gobin / client, bootstrap, "secure", wait=90, prefix="%s-%s" % (client, uuid.uuid4().hex[:6]),
                      records=RECORDS, **flags)
    assert "error" not in rep, rep
    r = rep["roundtrip"]
    assert r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS, r
    # the shapes came back: 6 KiB values, 4 headers on two records of three
    assert r["big_values_read"] == 1 and r["headers_read"] == 4 * 20, r
    return r


def _refused(gobin, client, sec, bootstrap, flags):
    """Run the secure scenario on a topic that exists (made here, not through the client): the
    produce is the client's first request; the report is its failure.  Nothing was written."""
    prefix = "%s-no-%s" % (client, uuid.uuid4().hex[:6])
    sec["broker"].create_topic(prefix + "-sec", partitions=3)
    t0 = time.monotonic()
    rep = gobuild.run(gobin / client, bootstrap, "secure", wait=90, prefix=prefix, records=RECORDS, create="false",
                      **flags)
    rep["took_s"] = round(time.monotonic() - t0, 2)
    assert "roundtrip" not in rep, rep   # the client got in and wrote
    assert all(sec["broker"].records(prefix + "-sec", p) == [] for p in range(3))
    return rep


CLIENTS = ["franzgo", "sarama", "kafkago"]
# every mechanism each client offers that the broker serves (sarama's OAUTHBEARER: a
# TokenProvider handing it the JWT; kafka-go has no OAUTHBEARER)
SASL_CASES = [("franzgo", "PLAIN"), ("franzgo", "SCRAM-SHA-256"), ("franzgo", "SCRAM-SHA-512"),
              ("franzgo", "OAUTHBEARER"),
              ("sarama", "PLAIN"), ("sarama", "SCRAM-SHA-256"), ("sarama", "SCRAM-SHA-512"), ("sarama", "OAUTHBEARER"),
              ("kafkago", "PLAIN"), ("kafkago", "SCRAM-SHA-256"), ("kafkago", "SCRAM-SHA-512")]


@pytest.mark.parametrize("client", CLIENTS)
def test_tls(gobin, secured, client):
    _roundtrip(gobin, client, *_flags(secured, "SSL"))


@pytest.mark.parametrize("client,mech", SASL_CASES)
def test_sasl_ssl(gobin, secured, client, mech):
    # bob (quote and backslash in the password) for SCRAM-SHA-512, alice for the others
    _roundtrip(gobin, client, *_flags(secured, "SASL_SSL", mech, user="bob" if mech == "SCRAM-SHA-512" else "alice"))


@pytest.mark.parametrize("client", CLIENTS)
def test_mtls(gobin, secured, client):
    """The listener with ``ssl.client.auth=required``: in with a certificate of the CA it trusts."""
    _roundtrip(gobin, client, *_flags(secured, "MTLS", cert=True))


# a refused authentication's error: the client's own words (gobuild.GO_AUTH_ERROR; its error
# type is checked too: auth_failed is errors.Is with kerr.SaslAuthenticationFailed,
# sarama.ErrSASLAuthenticationFailed, kafka.SASLAuthenticationFailed), then the broker's
# message, Kafka's text (gobuild.broker_auth_error)


@pytest.mark.parametrize("client,mech", [("franzgo", "PLAIN"), ("franzgo", "SCRAM-SHA-512"), ("franzgo", "OAUTHBEARER"),
                                         ("sarama", "PLAIN"), ("sarama", "SCRAM-SHA-512"), ("sarama", "OAUTHBEARER"),
                                         ("kafkago", "PLAIN"), ("kafkago", "SCRAM-SHA-512")])
def test_wrong_password_is_refused(gobin, secured, client, mech):
    """A wrong password (OAUTHBEARER: a token expired a minute ago) fails the produce fast
    (gobuild.REFUSED_WITHIN_S) with the client's authentication error; no record written."""
    bootstrap, flags = _flags(secured, "SASL_SSL", mech, user="bob", password="wrong")
    rep = _refused(gobin, client, secured, bootstrap, flags)
    assert rep["auth_failed"] and not rep["tls_failed"], rep
    assert rep["took_s"] < gobuild.REFUSED_WITHIN_S, rep
    assert gobuild.GO_AUTH_ERROR[client] in rep["error"] and gobuild.broker_auth_error(client, mech) in rep["error"], rep


@pytest.mark.parametrize("client", CLIENTS)
def test_mtls_without_a_certificate_is_refused(gobin, secured, client):
    """No client certificate on the mTLS listener: the handshake fails and the broker's fatal
    alert reaches the client (Go's crypto/tls: "remote error: tls: certificate required", TLS
    1.3: OpenSSL's alert; Kafka on the JDK sends bad_certificate, tests/differential/
    test_secure_clients.py), as Kafka's SslTransportLayer flushes it, rather than a bare close."""
    rep = _refused(gobin, client, secured, *_flags(secured, "MTLS"))
    assert rep["tls_failed"] and not rep["auth_failed"], rep
    assert "remote error: tls: certificate required" in rep["error"], rep


def test_a_broker_certificate_of_another_ca_is_refused(gobin, secured):
    """franz-go trusting another CA refuses the broker's certificate (the client checks it)."""
    rep = _refused(gobin, "franzgo", secured, *_flags(secured, "SSL", ca=secured["other_ca"]))
    assert rep["tls_failed"] and "x509: certificate signed by unknown authority" in rep["error"], rep
