"""Bad input on secured listeners gets Kafka's answer or a close, never a crash, and the broker's
other clients carry on; no password reaches the logs.  Raw Kafka frames (pykbroker.protocol.wire)
so each step is explicit."""
import logging
import ssl
import struct
import time

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.errors import ErrorCode
from pykbroker.protocol.wire import WireClient

needs.module("cryptography")

PASSWORD = "Very-Secret-Pw-1"
WRONG = "Wrong-Guess-Pw-2"
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18


@pytest.fixture(scope="module")
def sasl_ssl():
    # the listener of the protocol and a PLAINTEXT one beside it
    with pykbroker.Broker(security="SASL_SSL", users={"alice": PASSWORD},
                          mechanisms=["PLAIN", "SCRAM-SHA-256"], config=TEST_CONFIG) as b:
        yield b


@pytest.fixture(scope="module")
def sasl_plain():
    with pykbroker.Broker(security="SASL_PLAINTEXT", users={"alice": PASSWORD},
                          mechanisms=["PLAIN", "SCRAM-SHA-512"], config=TEST_CONFIG) as b:
        yield b


def _tls(b):
    return ssl.create_default_context(cafile=b._secure.ca_file)


def _still_serves(b):
    """A well-behaved client still gets through after the bad one."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient(b.client_config()).list_topics(timeout=10)
    assert list(md.brokers) == [1]


def test_plaintext_bytes_on_a_tls_port_are_closed(sasl_ssl):
    with WireClient(sasl_ssl) as c:
        assert c.closed_after(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    _still_serves(sasl_ssl)


def test_tls_on_a_plaintext_port_is_closed(sasl_plain):
    import socket
    s = socket.create_connection(("127.0.0.1", sasl_plain.port), timeout=5)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        ssl.create_default_context().wrap_socket(s, server_hostname="localhost")
    _still_serves(sasl_plain)


def test_stalled_and_truncated_tls_handshakes_do_not_block_others(sasl_ssl):
    import socket
    stalled = socket.create_connection(("127.0.0.1", sasl_ssl.port))
    truncated = socket.create_connection(("127.0.0.1", sasl_ssl.port))
    truncated.sendall(b"\x16\x03\x01\x02\x00\x01")   # the start of a ClientHello, then nothing
    truncated.close()
    _still_serves(sasl_ssl)
    stalled.close()


@pytest.mark.parametrize("api_key,version,body", [
    (METADATA, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
    (SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00" + PASSWORD.encode()}),
])
def test_requests_before_authentication_are_closed_unanswered(sasl_plain, api_key, version, body):
    with WireClient(sasl_plain) as c:
        assert c.closed_after(api_key, version, body)


def test_api_versions_is_answered_before_authentication(sasl_plain):
    with WireClient(sasl_plain) as c:
        r = c.request(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
        assert keys[SASL_HANDSHAKE] == (0, 1) and keys[SASL_AUTHENTICATE] == (0, 2)


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(sasl_plain):
    with WireClient(sasl_plain) as c:
        r = c.request(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert r == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
        assert c.wait_closed(5)


def test_another_request_during_authentication_gets_illegal_sasl_state_then_close(sasl_plain):
    with WireClient(sasl_plain) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        r = c.request(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
        assert r["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert c.wait_closed(5)


@pytest.mark.parametrize("mech,token", [
    ("PLAIN", b"garbage"),
    ("PLAIN", b"\x00alice\x00" + WRONG.encode()),
    ("SCRAM-SHA-512", b"\xff\xfe\x00garbage"),
    ("SCRAM-SHA-512", b"n,,n=nobody,r=abc"),
])
def test_bad_tokens_fail_with_sasl_authentication_failed_then_a_delayed_close(sasl_plain, mech, token):
    with WireClient(sasl_plain) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": mech})["error_code"] == 0
        t0 = time.monotonic()
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and r["error_message"]
        assert PASSWORD not in r["error_message"] and "nobody" not in r["error_message"]
        assert c.wait_closed(5)
        # connection.failed.authentication.delay.ms (100): the close waits for it
        assert time.monotonic() - t0 >= 0.09
    _still_serves(sasl_plain)


def test_wrong_scram_proof_is_refused(sasl_plain):
    with WireClient(sasl_plain) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=clientnonce"})
        assert r["error_code"] == 0
        nonce = dict(kv.split("=", 1) for kv in r["auth_bytes"].decode().split(","))["r"]
        final = ("c=biws,r=%s,p=%s" % (nonce, "A" * 86 + "==")).encode()
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": final})
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r["error_message"] == ("Authentication failed during authentication due to invalid credentials "
                                      "with SASL mechanism SCRAM-SHA-512")
        assert c.wait_closed(5)


def test_oversized_token_before_authentication_is_closed(sasl_plain):
    with WireClient(sasl_plain) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        # sasl.server.max.receive.size (524288): the frame size alone closes the connection
        c.send_bytes(struct.pack(">i", 524289 + 100) + b"\x00" * 1000)
        assert c.wait_closed(5)
    _still_serves(sasl_plain)


def _plain_v0(c, password):
    assert c.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    token = b"\x00alice\x00" + password.encode()
    c.send_bytes(struct.pack(">i", len(token)) + token)


def test_handshake_v0_raw_tokens(sasl_ssl):
    with WireClient(sasl_ssl, ssl_context=_tls(sasl_ssl)) as c:
        _plain_v0(c, PASSWORD)
        assert c.recv_exact(4) == b"\x00\x00\x00\x00"   # PLAIN's empty answer, as a raw frame
        md = c.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        assert [b["port"] for b in md["brokers"]] == [sasl_ssl.port]
        # authenticated: a new handshake / authenticate is ILLEGAL_SASL_STATE, the connection stays
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"x"})
        assert r["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert c.request(API_VERSIONS, 0, {})["error_code"] == 0


def test_handshake_v0_bad_raw_token_is_closed(sasl_ssl):
    with WireClient(sasl_ssl, ssl_context=_tls(sasl_ssl)) as c:
        _plain_v0(c, WRONG)
        assert c.wait_closed(5)


def test_sasl_apis_on_a_plaintext_listener_are_illegal_sasl_state():
    with pykbroker.Broker(config=TEST_CONFIG) as b, WireClient(b) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}) == {
            "error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        assert c.request(SASL_AUTHENTICATE, 1, {"auth_bytes": b""})["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert c.request(API_VERSIONS, 0, {})["error_code"] == 0


def test_no_password_reaches_the_logs(caplog):
    """A run with good and bad credentials through every mechanism, logging at DEBUG: neither
    password appears in any log line (the tokens carry them)."""
    from confluent_kafka import Producer

    caplog.set_level(logging.DEBUG)
    with pykbroker.Broker(security="SASL_SSL", users={"alice": PASSWORD}, config=TEST_CONFIG) as b:
        for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            for pw in (PASSWORD, WRONG):
                errors = []
                p = Producer({**b.client_config("alice", mech, password=pw), "error_cb": errors.append})
                p.produce("logs", b"v")
                if pw == WRONG:
                    # until the client reports the failed authentication (its error_cb), not a
                    # fixed 3 s flush of a record that can never be delivered
                    deadline = time.monotonic() + 10
                    while not errors and time.monotonic() < deadline:
                        p.poll(0.1)
                    assert errors, "no authentication error reported with a wrong password (%s)" % mech
                else:
                    p.flush(10)
        with WireClient(b, ssl_context=_tls(b)) as c:
            _plain_v0(c, WRONG)
            c.wait_closed(5)
    text = caplog.text
    assert "Failed authentication with" in text   # the failures were logged...
    assert PASSWORD not in text and WRONG not in text   # ...without a secret


def test_trace_redacts_sasl_tokens(tmp_path):
    """``--trace`` writes every request and answer: SaslAuthenticate's tokens (a PLAIN token holds
    the password) and AlterUserScramCredentials' salted passwords are redacted."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from pykbroker.observability.observer import Observers
    from pykbroker.observability.trace import TraceWriter

    path = tmp_path / "trace.jsonl"
    with pykbroker.Broker(security="SASL_PLAINTEXT", users={"alice": PASSWORD}, config=TEST_CONFIG) as b:
        b.broker.observer = Observers([TraceWriter(str(path))])   # read by each new connection
        a = AdminClient(b.client_config("alice", "PLAIN"))
        a.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), WRONG.encode())])["carol"].result()
        for mech in ("PLAIN", "SCRAM-SHA-256"):
            p = Producer(b.client_config("alice", mech))
            p.produce("traced", b"v")
            assert p.flush(10) == 0
        b.broker.observer = None
    text = path.read_text()
    assert '"api": "SaslAuthenticate"' in text and '"api": "AlterUserScramCredentials"' in text
    assert "<redacted" in text
    assert PASSWORD not in text and WRONG not in text
    import base64
    assert base64.b64encode(b"\x00alice\x00" + PASSWORD.encode()).decode() not in text


def test_the_first_request_after_authentication_may_be_large(sasl_plain):
    """sasl.server.max.receive.size (512 KiB) bounds frames before authentication only: the very
    next request may be as large as socket.request.max.bytes (a producer's first batch)."""
    from pykbroker.protocol.wire import request_frame

    with WireClient(sasl_plain) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00" + PASSWORD.encode()})["error_code"] == 0
        c.corr += 1
        # Metadata v1 for all topics, followed by 600 KB that the reader ignores (as Kafka does)
        frame = request_frame(METADATA, 1, c.corr, b"\xff\xff\xff\xff" + b"\x00" * 600_000)
        c.send_bytes(frame)
        assert c.recv(METADATA, 1, c.corr)["brokers"][0]["port"] == sasl_plain.port
