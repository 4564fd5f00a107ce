"""Regression tests for what the long SASL fuzz runs found (compat/fuzz/results/README.md).

An unsecured OAUTHBEARER token whose ``exp`` lies beyond a Java long in milliseconds (``1e300``,
``1.7e306``, infinite once in ms, ``10**30``, or ``1e999``, which JSON reads as infinity) made SaslAuthenticate v1+ raise while
encoding ``session_lifetime_ms`` (int64) or converting the float: a traceback in the log, an
UNKNOWN_SERVER_ERROR instead of Kafka's answer.  Kafka reads the claim as a double and rounds it
to a long (Math.round saturates: Long.MAX_VALUE), so the token is valid and the session's
lifetime is Long.MAX_VALUE minus now."""
import base64
import json

import pytest

from pykbroker.protocol.codec import APIS
from pykbroker.security.authenticator import SaslAuthenticator
from pykbroker.security.oauthbearer import claim_ms

LONG_MAX = 2 ** 63 - 1
NOW_MS = 1_700_000_000_000


def _token(exp_json: str) -> bytes:
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()   # noqa: E731
    claims = ('{"sub":"alice","exp":%s}' % exp_json).encode()
    jwt = "%s.%s." % (enc(json.dumps({"alg": "none"}).encode()), enc(claims))
    return ("n,,\x01auth=Bearer %s\x01\x01" % jwt).encode()


class _Sec:
    mechanisms = ["OAUTHBEARER"]
    name = "SASL_PLAINTEXT"
    plain_users: dict = {}


@pytest.mark.parametrize("exp", ["1e300", "1.7e306", "1000000000000000000000000000000", "1e999"])
@pytest.mark.parametrize("version", [1, 2])
def test_a_far_off_exp_saturates_like_a_java_long(exp, version):
    a = SaslAuthenticator(_Sec(), lambda u, m: None, now_ms=lambda: NOW_MS)
    a.handshake(1, "OAUTHBEARER")
    answer = a.authenticate(version, _token(exp))
    assert answer["error_code"] == 0 and a.principal == "User:alice"
    assert answer["session_lifetime_ms"] == LONG_MAX - NOW_MS
    back = APIS[36].decode("response", version, APIS[36].encode_bytes("response", version, answer))
    assert back["session_lifetime_ms"] == LONG_MAX - NOW_MS


def test_claim_ms_is_math_round_to_a_long():
    assert claim_ms(1.5) == 1500 and claim_ms(10 ** 30) == LONG_MAX and claim_ms(-(10 ** 30)) == -(2 ** 63)
    assert claim_ms(1.7e306) == LONG_MAX and claim_ms(-1.7e306) == -(2 ** 63)
    assert claim_ms(float("inf")) == LONG_MAX and claim_ms(float("-inf")) == -(2 ** 63) and claim_ms(float("nan")) == 0


@pytest.mark.timeout(60)
def test_the_broker_answers_a_far_off_exp_and_serves_the_session(tmp_path):
    """The same token over a real SASL_PLAINTEXT listener: the answer decodes, the session is
    authenticated (Metadata served on it), and nothing went to the log as an error."""
    from compat.fuzz.sasl import broker_overrides
    from pykbroker.local.broker_process import BrokerProcess
    from pykbroker.protocol.wire import WireClient
    with BrokerProcess(str(tmp_path / "data"), broker_overrides()) as b:
        host, port = b.bootstrap.rsplit(":", 1)
        with WireClient((host, int(port))) as c:
            assert c.request(17, 1, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
            r = c.request(36, 1, {"auth_bytes": _token("1e300")})
            assert r["error_code"] == 0, r
            assert LONG_MAX - 10 ** 13 < r["session_lifetime_ms"] < LONG_MAX
            m = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False})
            assert m["brokers"], m
        errors = [line for line in b.lines if " ERROR " in line or line.startswith("Traceback")]
        assert not errors, errors[:5]
