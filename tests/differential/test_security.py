"""SASL as Apache Kafka 4.4 answers it, compared frame by frame: both brokers get a PLAINTEXT and a
SASL_PLAINTEXT listener with the same PLAIN users and SCRAM-SHA-256/512 enabled, and the same
client sessions (raw Kafka frames) run against each.  What is compared: SaslHandshake answers,
SaslAuthenticate error codes and messages, which requests close the connection and when, the v0
raw-token framing, the SASL APIs on a PLAINTEXT listener, and the SCRAM credential APIs'
validation answers."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pykbroker.security.scram import salted_password
from pykbroker.protocol.wire import WireClient

from .helpers import sasl_sides

ROOT = Path(__file__).resolve().parents[2]
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret";')
# Kafka needs a JAAS entry per enabled mechanism (the SCRAM ones carry no options); pykbroker
# reads only PLAIN's users and accepts the others as they are.
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
              'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="requiredScope";')
SASL = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "connections.max.reauth.ms": "600000",   # sessions with a lifetime: KIP-368 re-authentication
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}


_kafka, _pyk, _both = sasl_sides(SASL, "pyk_sasl", "kafka_sasl", both="both")


def _closed(c, timeout=3.0):
    return c.wait_closed(timeout)


def _session(ops):
    """A scenario as a list of steps on one SASL connection; each step's observation is recorded
    (an answer without volatile bytes, or "closed")."""
    def run(side):
        out = []
        with WireClient(side["sasl"], timeout=10) as c:
            for op in ops:
                try:
                    out.append(op(c))
                except (ConnectionError, struct.error, OSError):
                    # closed (an orderly close or a reset: unread bytes from the client make
                    # the kernel answer with RST, which says nothing about the broker)
                    out.append("closed")
                    break
        return out
    return run


def hs(mech, v=1):
    return lambda c: c.request(17, v, {"mechanism": mech})


def auth(token, v=2, keep=("error_code", "error_message")):
    def op(c):
        r = c.request(36, v, {"auth_bytes": token})
        return {k: r[k] for k in keep if k in r}
    return op


def closed(c):
    return "closed" if _closed(c) else "open"


API_VERSIONS_V3 = {"client_software_name": "t", "client_software_version": "1"}


@pytest.mark.parametrize("ops", [
    pytest.param([hs("GSSAPI"), closed], id="unsupported-mechanism"),
    pytest.param([hs("PLAIN"), auth(b"\x00alice\x00alice-secret", keep=("error_code", "error_message", "auth_bytes"))],
                 id="plain-ok"),
    pytest.param([hs("PLAIN"), auth(b"\x00alice\x00wrong"), closed], id="plain-wrong-password"),
    pytest.param([hs("PLAIN"), auth(b"\x00nobody\x00wrong"), closed], id="plain-unknown-user"),
    pytest.param([hs("PLAIN"), auth(b"garbage"), closed], id="plain-garbage"),
    pytest.param([hs("PLAIN"), auth(b"bob\x00alice\x00alice-secret"), closed], id="plain-other-authzid"),
    pytest.param([hs("SCRAM-SHA-256"), auth(b"n,,n=nobody,r=abc"), closed], id="scram-unknown-user"),
    pytest.param([hs("SCRAM-SHA-512"), auth(b"\xff\xfe"), closed], id="scram-garbage"),
    pytest.param([hs("PLAIN"), lambda c: {"error_code": c.request(18, 3, API_VERSIONS_V3)["error_code"]}, closed],
                 id="other-request-while-authenticating"),
    pytest.param([lambda c: "closed" if c.closed_after(3, 1, {"topics": None}) else "answered"],
                 id="metadata-before-handshake"),
    pytest.param([lambda c: "closed" if c.closed_after(36, 2, {"auth_bytes": b"x"}) else "answered"],
                 id="authenticate-before-handshake"),
    pytest.param([hs("PLAIN"), auth(b"\x00alice\x00alice-secret", keep=("error_code", "session_lifetime_ms")),
                  hs("PLAIN"), auth(b"\x00alice\x00alice-secret", keep=("error_code", "session_lifetime_ms")),
                  hs("PLAIN"), auth(b"x"), lambda c: {"error_code": c.request(18, 3, API_VERSIONS_V3)["error_code"]}],
                 id="reauthentication-then-too-soon"),
    pytest.param([hs("PLAIN"), auth(b"\x00alice\x00alice-secret"), hs("PLAIN"), auth(b"\x00admin\x00admin-secret"),
                  closed], id="reauthentication-as-another-principal"),
    pytest.param([hs("PLAIN"), auth(b"\x00alice\x00alice-secret"), hs("SCRAM-SHA-256"), closed],
                 id="reauthentication-with-another-mechanism"),
    pytest.param([hs("PLAIN", v=0), lambda c: _raw_v0(b"alice-secret")(c), hs("PLAIN")],
                 id="no-reauthentication-after-v0"),
])
def test_sasl_session(both, ops):
    p, k = both(_session(ops))
    assert p == k


def _raw_v0(password):
    def op(c):
        token = b"\x00alice\x00" + password
        c.send_bytes(struct.pack(">i", len(token)) + token)
        try:
            return c.recv_exact(4)
        except (ConnectionError, OSError):
            return "closed"
    return op


@pytest.mark.parametrize("password", [b"alice-secret", b"wrong"])
def test_handshake_v0_raw_tokens(both, password):
    p, k = both(_session([hs("PLAIN", v=0), _raw_v0(password)]))
    assert p == k


def test_sasl_apis_on_a_plaintext_listener(both):
    def run(side):
        with WireClient(side["plain"]) as c:
            return [c.request(17, 1, {"mechanism": "PLAIN"}),
                    {k: v for k, v in c.request(36, 2, {"auth_bytes": b""}).items() if k != "error_message"}]
    p, k = both(run)
    assert p == k


def _authenticated(side):
    c = WireClient(side["sasl"], timeout=10)
    assert c.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert c.request(36, 2, {"auth_bytes": b"\x00admin\x00admin-secret"})["error_code"] == 0
    return c


def _until_stored(c, name, timeout=15.0):
    """Until DescribeUserScramCredentials shows ``name``: Kafka applies an alteration from its
    metadata log a moment after answering it (pykbroker at once)."""
    import time
    deadline = time.monotonic() + timeout
    while c.request(50, 0, {"users": [{"name": name}]})["results"][0]["error_code"] != 0:
        assert time.monotonic() < deadline, "%s never stored" % name
        time.sleep(0.1)


def _upsert(name, mech=1, iterations=4096):
    return {"name": name, "mechanism": mech, "iterations": iterations, "salt": b"saltsalt",
            "salted_password": salted_password("SCRAM-SHA-256", "pw", b"saltsalt", 4096)}


def test_scram_credential_apis(both):
    def run(side):
        with _authenticated(side) as c:
            alter = c.request(51, 0, {
                "deletions": [{"name": "ghost", "mechanism": 1}, {"name": "dup", "mechanism": 2}],
                "upsertions": [_upsert(""), _upsert("weird", mech=3), _upsert("dup", mech=2),
                               _upsert("few", iterations=4095), _upsert("many", iterations=16385),
                               _upsert("fine"),
                               # one user, two mechanisms: one change per user and request
                               _upsert("both", mech=1), _upsert("both", mech=2),
                               # a failed first change keeps its error
                               _upsert("fewtwice", iterations=4095), _upsert("fewtwice", mech=2)]})
            _until_stored(c, "fine")
            described = c.request(50, 0, {"users": [{"name": "fine"}, {"name": "few"}, {"name": "x"}, {"name": "x"},
                                                    {"name": "both"}]})
            cleanup = c.request(51, 0, {"deletions": [{"name": "fine", "mechanism": 1}], "upsertions": []})
        key = lambda r: r["user"]   # noqa: E731  (result order may follow each broker's maps)
        return (sorted(alter["results"], key=key), sorted(described["results"], key=key), cleanup["results"],
                described["error_code"])
    p, k = both(run)
    assert p == k, "\n%r\n%r" % (p, k)


def test_scram_login_with_a_credential_made_by_the_api(both):
    """A user upserted through API 51 logs in with SCRAM-SHA-256 (the RFC 5802 client here),
    and the same wrong proof is refused with the same message."""
    import base64
    import hashlib
    import hmac

    def login(side, password):
        with _authenticated(side) as c:
            c.request(51, 0, {"deletions": [], "upsertions": [_upsert("carol")]})
            _until_stored(c, "carol")
        out = []
        with WireClient(side["sasl"], timeout=10) as c:
            out.append(c.request(17, 1, {"mechanism": "SCRAM-SHA-256"}))
            first_bare = "n=carol,r=fixedclientnonce"
            r = c.request(36, 2, {"auth_bytes": ("n,," + first_bare).encode()})
            server_first = bytes(r["auth_bytes"]).decode()
            attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
            out.append((r["error_code"], attrs["r"].startswith("fixedclientnonce"), attrs["s"], attrs["i"]))
            salted = hashlib.pbkdf2_hmac("sha256", password, base64.b64decode(attrs["s"]), int(attrs["i"]))
            ck = hmac.digest(salted, b"Client Key", "sha256")
            without = "c=biws,r=" + attrs["r"]
            msg = ",".join((first_bare, server_first, without)).encode()
            sig = hmac.digest(hashlib.sha256(ck).digest(), msg, "sha256")
            proof = base64.b64encode(bytes(x ^ y for x, y in zip(ck, sig))).decode()
            r = c.request(36, 2, {"auth_bytes": (without + ",p=" + proof).encode()})
            out.append((r["error_code"], r["error_message"], bool(r["auth_bytes"])))
        return out

    p, k = both(lambda s: login(s, b"pw"))
    assert p == k and p[2][0] == 0
    p, k = both(lambda s: login(s, b"not-pw"))
    assert p == k and p[2][0] == 58


def _jwt(claims, alg="none"):
    import base64
    import json
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()   # noqa: E731
    return "%s.%s." % (enc({"alg": alg}), enc(claims))


def _bearer(claims, alg="none"):
    return ("n,,\x01auth=Bearer %s\x01\x01" % _jwt(claims, alg)).encode()


FAR = 4102444800   # 2100-01-01: valid by both brokers' clocks


@pytest.mark.parametrize("first", [
    pytest.param(_bearer({"sub": "alice", "exp": FAR, "scope": ["requiredScope"]}), id="valid"),
    pytest.param(_bearer({"sub": "alice", "exp": FAR, "scope": "requiredScope other"}), id="valid-string-scope"),
    pytest.param(_bearer({"sub": "alice", "exp": 1000, "scope": ["requiredScope"]}), id="expired"),
    pytest.param(_bearer({"sub": "alice", "exp": FAR, "scope": ["other"]}), id="insufficient-scope"),
    pytest.param(_bearer({"exp": FAR, "scope": ["requiredScope"]}), id="no-sub"),
    pytest.param(b"n,,auth=Bearer x", id="malformed"),
])
def test_oauthbearer_unsecured(both, first):
    p, k = both(_session([hs("OAUTHBEARER"), auth(first, keep=("error_code", "error_message", "auth_bytes")),
                          auth(b"\x01"), closed]))
    assert p == k
