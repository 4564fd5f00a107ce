"""Delegation tokens (APIs 38-41, SCRAM tokenauth=true) with real clients: the Java Admin's
create/describe/renew/expire and Java producers and consumers logging in with a token; a token
expired on the broker's clock no longer authenticates; tokens survive a restart (the metadata
file, without the HMAC); Kafka's error answers (disabled, PLAINTEXT listener, unknown HMAC, not
owner nor renewer, non-User renewer); the authorizer's CREATE_TOKENS and Describe rules.  The
same answers are compared with Apache Kafka 4.4 in tests/differential/test_delegation_tokens.py.
(librdkafka, kafka-python and aiokafka cannot send the tokenauth extension: SKIPPED.md.)"""
import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.errors import ErrorCode
from pykbroker.protocol.wire import WireClient
from pykbroker.security.client import authenticate_sync
from pykbroker.security.errors import AuthenticationFailed

needs.module("cryptography")
LIBS = Path.home() / ".cache" / "pykbroker" / "kafka-4.4.0" / "libs"
JAVA = Path(__file__).parent / "java" / "DelegationTokens.java"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SECRET = {"delegation.token.secret.key": "token-secret"}
needs_java = pytest.mark.skipif(shutil.which("java") is None or not (LIBS / "kafka-clients-4.4.0.jar").exists(),
                                reason="no JDK or Kafka jars not cached (python3 compat/kafka/oracle.py fetch)")


def _broker(tmp_path, extra=None, listeners=None, **kw):
    cfg = dict(TEST_CONFIG, **SECRET, **(extra or {}))
    if listeners:
        cfg["listeners"] = listeners
    return pykbroker.Broker(security="SASL_PLAINTEXT", users=USERS, log_dir=str(tmp_path),
                            mechanisms=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], config=cfg, **kw)


def _sasl(b):
    return [("127.0.0.1", li.port) for li in b.broker.bound if li.name == "SASL_PLAINTEXT"][0]


def _login(b, user):
    c = WireClient(_sasl(b), timeout=15)
    authenticate_sync(c.request, "PLAIN", user, USERS[user])
    return c


def _create(c, renewers=(), max_lifetime_ms=-1, owner=None):
    return c.request(38, 3, {"owner_principal_type": owner and "User", "owner_principal_name": owner,
                             "renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers],
                             "max_lifetime_ms": max_lifetime_ms})


def _token_login(b, token, mechanism="SCRAM-SHA-512"):
    """True when the token logs in (SCRAM tokenauth=true), False when refused."""
    with WireClient(_sasl(b), timeout=15) as c:
        try:
            authenticate_sync(c.request, mechanism, token["token_id"], base64.b64encode(token["hmac"]).decode(),
                              {"tokenauth": "true"})
        except AuthenticationFailed:
            return False
        return True


def _described(c, owners=None):
    body = {"owners": None if owners is None else [{"principal_type": "User", "principal_name": o} for o in owners]}
    r = c.request(41, 3, body)
    assert r["error_code"] == 0, r
    return sorted(t["token_id"] for t in r["tokens"])


def _java(*args, timeout=240):
    r = subprocess.run(["java", "-cp", str(LIBS / "*"), str(JAVA)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@needs_java
def test_java_admin_and_token_clients(tmp_path):
    with _broker(tmp_path) as b:
        out = _java("lifecycle", b.bootstrap_servers)
    lines = out.splitlines()
    assert ("created owner=User:alice requester=User:alice renewers=[User:bob] expiry-issue=86400000 "
            "max-issue=604800000 hmac-bytes=64") in lines, out
    assert ("described owner=User:alice requester=User:alice renewers=[User:bob] expiry-issue=86400000 "
            "max-issue=604800000 same-hmac=true") in lines, out
    assert ("created for bob owner=User:bob requester=User:alice renewers=[] expiry-issue=86400000 "
            "max-issue=604800000") in lines, out
    assert "described owner bob 2" in lines, out   # bob's own token and the one he may renew
    renewed = [ln for ln in lines if ln.startswith("renewed by bob expiry-issue=")]
    assert renewed and 3600000 <= int(renewed[0].rsplit("=", 1)[1]) < 3660000, out
    assert "renew unknown: DelegationTokenNotFoundException" in lines, out
    assert "renew by carol: DelegationTokenOwnerMismatchException" in lines, out
    assert "expire by carol: DelegationTokenOwnerMismatchException" in lines, out
    # the token's producer and consumer: the bytes written come back
    assert "sent dt-topic-0@0" in lines and "got token-value" in lines and "committed 1" in lines, out
    # a token-authenticated principal may not ask for tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    assert "create with a token: UnsupportedByAuthenticationException" in lines, out
    assert "expired now true" in lines and "described after expiry 0" in lines, out
    assert lines[-1] == "produce failed: SaslAuthenticationException", out


@needs_java
def test_token_login_is_logged_with_its_token_id(tmp_path, caplog):
    """The broker's authentication line names the token a token-authenticated principal used
    (the owner's name alone would not tell it from the owner's own password)."""
    import logging

    caplog.set_level(logging.DEBUG, logger="pykbroker.security")
    with _broker(tmp_path) as b:
        with _login(b, "alice") as c:
            tok = _create(c)
        assert tok["error_code"] == 0
        assert _token_login(b, tok)
    lines = [r.getMessage() for r in caplog.records if "authenticated as User:alice" in r.getMessage()]
    assert lines[0].endswith("authenticated as User:alice with PLAIN"), lines
    assert lines[1].endswith("authenticated as User:alice with SCRAM-SHA-512 (delegation token %s)"
                             % tok["token_id"]), lines


def test_token_expired_on_the_broker_clock_no_longer_authenticates(tmp_path):
    with _broker(tmp_path, {"delegation.token.expiry.check.interval.ms": "1000"}) as b:
        with _login(b, "alice") as c:
            tok = _create(c)
            assert tok["error_code"] == 0
            hmac = base64.b64encode(tok["hmac"]).decode()
            assert "sent dt-clock-0@0" in _java("produce", b.bootstrap_servers, tok["token_id"], hmac,
                                                "SCRAM-SHA-512", "dt-clock", "before")
            assert _described(c) == [tok["token_id"]]
            b.clock.advance(86400 + 2)   # past the default expiry (1 day) and one expiry check
            deadline = time.monotonic() + 10
            while _described(c) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _described(c) == []
            assert not _token_login(b, tok)
        out = _java("produce", b.bootstrap_servers, tok["token_id"], hmac, "SCRAM-SHA-512", "dt-clock", "after")
        assert out.strip().splitlines()[-1] == "produce failed: SaslAuthenticationException", out


def test_token_renewed_on_the_clock_outlives_its_first_expiry(tmp_path):
    """Renewal moves the expiry (capped by the max lifetime); the check removes the token only
    once the renewed expiry passed."""
    with _broker(tmp_path, {"delegation.token.expiry.check.interval.ms": "1000",
                            "delegation.token.max.lifetime.ms": str(3 * 86400000)}) as b:
        with _login(b, "alice") as c:
            tok = _create(c)
            b.clock.advance(86400 - 60)
            r = c.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": -1})
            assert r["error_code"] == 0 and r["expiry_timestamp_ms"] - tok["issue_timestamp_ms"] > 2 * 86400000 - 70000
            b.clock.advance(120)          # past the first expiry: still there
            time.sleep(0.3)
            assert _described(c) == [tok["token_id"]] and _token_login(b, tok, "SCRAM-SHA-256")
            b.clock.advance(2 * 86400)    # past the max lifetime
            deadline = time.monotonic() + 10
            while _described(c) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _described(c) == [] and not _token_login(b, tok)
            r = c.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": -1})
            assert r == {"error_code": ErrorCode.DELEGATION_TOKEN_NOT_FOUND, "expiry_timestamp_ms": 0,
                         "throttle_time_ms": 0}


def test_tokens_survive_a_restart_without_their_hmac_on_disk(tmp_path):
    with _broker(tmp_path) as b:
        with _login(b, "alice") as c:
            tok = _create(c, renewers=[("User", "bob")])
        b.restart()
        assert _token_login(b, tok)
        with _login(b, "bob") as c:
            assert _described(c) == [tok["token_id"]]
            r = c.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": 1000})
            assert r["error_code"] == 0
    with open(os.path.join(str(tmp_path), "__pykbroker_metadata.json")) as fh:
        text = fh.read()
    stored = json.loads(text)["delegation_tokens"]
    assert [t["tokenId"] for t in stored] == [tok["token_id"]]
    assert stored[0]["owner"] == "User%3Aalice" and stored[0]["renewers"] == ["User%3Abob"]
    assert base64.b64encode(tok["hmac"]).decode() not in text and "token-secret" not in text


def test_error_answers(tmp_path):
    with _broker(tmp_path, listeners="SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0") as b:
        plain_port = [li.port for li in b.broker.bound if li.name == "PLAINTEXT"][0]
        with WireClient(("127.0.0.1", plain_port)) as c:
            r = _create(c)
            assert (r["error_code"], r["issue_timestamp_ms"], r["token_id"], r["hmac"], r["principal_name"]) == \
                (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1, "", b"", "ANONYMOUS")
            assert c.request(39, 2, {"hmac": b"x", "renew_period_ms": 1}) == {
                "error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "expiry_timestamp_ms": -1,
                "throttle_time_ms": 0}
            assert c.request(41, 3, {"owners": None})["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        with _login(b, "alice") as alice, _login(b, "carol") as carol:
            tok = _create(alice, renewers=[("User", "bob")])
            r = _create(alice, renewers=[("Group", "x")])
            assert (r["error_code"], r["expiry_timestamp_ms"]) == (ErrorCode.INVALID_PRINCIPAL_TYPE, -1)
            assert carol.request(39, 2, {"hmac": b"wrong" * 10, "renew_period_ms": 1})["error_code"] == \
                ErrorCode.DELEGATION_TOKEN_NOT_FOUND
            assert carol.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": 1})["error_code"] == \
                ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
            assert carol.request(40, 2, {"hmac": tok["hmac"], "expiry_time_period_ms": -1})["error_code"] == \
                ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
            # the owner sets the expiry to now: the token is expired (not removed until the check)
            r = alice.request(40, 2, {"hmac": tok["hmac"], "expiry_time_period_ms": 0})
            assert r["error_code"] == 0
            b.clock.advance(1)
            assert alice.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": 1})["error_code"] == \
                ErrorCode.DELEGATION_TOKEN_EXPIRED
            assert alice.request(40, 2, {"hmac": tok["hmac"], "expiry_time_period_ms": 1})["error_code"] == \
                ErrorCode.DELEGATION_TOKEN_EXPIRED
            assert _described(carol) == [tok["token_id"]]   # no authorizer: every token is described


def test_disabled_without_a_secret_key(tmp_path):
    with pykbroker.Broker(security="SASL_PLAINTEXT", users=USERS, log_dir=str(tmp_path),
                          mechanisms=["PLAIN", "SCRAM-SHA-512"], config=TEST_CONFIG) as b:
        assert b.broker.token_manager is None
        with _login(b, "alice") as c:
            r = _create(c)
            assert (r["error_code"], r["issue_timestamp_ms"], r["token_id"]) == \
                (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0, "")
            for api, body in ((39, {"hmac": b"x", "renew_period_ms": 1}), (40, {"hmac": b"x", "expiry_time_period_ms": 1})):
                assert c.request(api, 2, body) == {"error_code": ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
                                                   "expiry_timestamp_ms": 0, "throttle_time_ms": 0}
            assert c.request(41, 3, {"owners": None})["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert not _token_login(b, {"token_id": "abc", "hmac": b"x" * 64})


def test_deprecated_master_key_enables_tokens(tmp_path):
    """Kafka 3.x's delegation.token.master.key (removed by 4.0, unlisted here) is still read
    when delegation.token.secret.key is not set."""
    with pykbroker.Broker(security="SASL_PLAINTEXT", users=USERS, log_dir=str(tmp_path),
                          mechanisms=["PLAIN", "SCRAM-SHA-512"],
                          config=dict(TEST_CONFIG, **{"delegation.token.master.key": "old-name"})) as b:
        with _login(b, "alice") as c:
            tok = _create(c)
        assert tok["error_code"] == 0 and _token_login(b, tok)


AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}


def test_authorizer_create_tokens_and_describe(tmp_path):
    """KIP-373: a token for another owner needs CREATE_TOKENS on USER:<owner>; Describe shows a
    principal its own and renewable tokens, others only with DESCRIBE on the DELEGATION_TOKEN or
    DESCRIBE_TOKENS on the owner's USER resource."""
    with _broker(tmp_path, AUTHORIZER) as b:
        with _login(b, "alice") as alice, _login(b, "bob") as bob, _login(b, "carol") as carol:
            r = _create(alice, owner="bob")
            assert (r["error_code"], r["principal_name"], r["token_requester_principal_name"]) == \
                (ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "bob", "alice")
            b.acls.allow("User:alice", "CREATE_TOKENS", resource_type="USER", name="User:bob")
            for_bob = _create(alice, owner="bob")
            assert (for_bob["error_code"], for_bob["principal_name"]) == (0, "bob")
            own = _create(alice, renewers=[("User", "carol")])
            assert own["error_code"] == 0
            # the token for bob is bob's; alice, its requester, sees it too (Kafka's ownerOrRenewer)
            assert _described(bob) == [for_bob["token_id"]]
            assert _described(alice) == sorted([own["token_id"], for_bob["token_id"]])
            # ... but may not renew it (the controller's allowedToRenew: owner and renewers only)
            assert alice.request(39, 2, {"hmac": for_bob["hmac"], "renew_period_ms": 1})["error_code"] == \
                ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
            assert _described(carol) == [own["token_id"]]   # a renewer
            assert _described(carol, owners=["bob"]) == []
            b.acls.allow("User:carol", "DESCRIBE", resource_type="DELEGATION_TOKEN", name=for_bob["token_id"])
            assert _described(carol, owners=["bob"]) == [for_bob["token_id"]]
            bob2 = _create(bob)
            assert _described(carol, owners=["bob"]) == [for_bob["token_id"]]
            b.acls.allow("User:carol", "DESCRIBE_TOKENS", resource_type="USER", name="User:bob")
            assert _described(carol, owners=["bob"]) == sorted([for_bob["token_id"], bob2["token_id"]])
            with _login(b, "admin") as admin:   # a super user sees every token
                assert _described(admin) == sorted([for_bob["token_id"], own["token_id"], bob2["token_id"]])
        # the token authenticates as its owner, for the authorizer too
        b.acls.allow("User:bob", "DESCRIBE", topic="*")
        assert _token_login(b, for_bob)
