"""Fault injection on the SASL APIs (``broker.faults`` on SaslHandshake / SaslAuthenticate):
the client sees what Apache Kafka sends when the exchange fails so, an error answer and then
the connection's end (SASL_AUTHENTICATION_FAILED with Kafka's bad-credentials text, closed after
``connection.failed.authentication.delay.ms``; other errors closed at once), and a real client's
retry gets in once the rule is spent."""
import time

import pytest

from tests import needs
from tests.security.clients import produce_one

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.errors import ErrorCode
from pykbroker.protocol.wire import WireClient

needs.module("cryptography")

PASSWORD = "Fault-Pw-1"
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


@pytest.fixture(scope="module")
def broker():
    with pykbroker.Broker(security="SASL_PLAINTEXT", users={"alice": PASSWORD},
                          mechanisms=["PLAIN", "SCRAM-SHA-512"], config=TEST_CONFIG) as b:
        yield b


pytestmark = pytest.mark.usefixtures("no_fault_rules")


def _produce_through(cfg, timeout=20):
    return produce_one(cfg, "sasl-fault-", timeout)


@pytest.mark.parametrize("mechanism, text", [
    ("PLAIN", "Invalid username or password"),
    ("SCRAM-SHA-512", "invalid credentials with SASL mechanism SCRAM-SHA-512")])
def test_authentication_failed_reaches_confluent_kafka_as_bad_credentials(broker, mechanism, text):
    from confluent_kafka import KafkaError
    broker.faults.fail("SaslAuthenticate", "SASL_AUTHENTICATION_FAILED", count=1)
    err, errors = _produce_through(broker.client_config("alice", mechanism))
    assert err is None, err   # the client's retry got in (the rule was spent)
    auth = [e for e in errors if e[0] == KafkaError._AUTHENTICATION]
    assert auth and text in auth[0][1], errors


def test_handshake_unsupported_mechanism_reaches_confluent_kafka(broker):
    broker.faults.fail("SaslHandshake", "UNSUPPORTED_SASL_MECHANISM", count=1)
    err, errors = _produce_through(broker.client_config("alice", "PLAIN"))
    assert err is None, err
    # librdkafka names the broker's enabled mechanisms, read from the answer
    assert any("PLAIN" in e[1] and "SCRAM-SHA-512" in e[1] for e in errors), errors


def test_kafka_python_sees_error_58_and_retries(broker, caplog):
    """kafka-python (SaslAuthenticate framing) reads the injected 58 as Kafka's bad-credentials
    error, drops the connection and its bootstrap retry gets in."""
    import logging

    from kafka import KafkaProducer
    broker.faults.fail("SaslAuthenticate", "SASL_AUTHENTICATION_FAILED", count=1)
    caplog.set_level(logging.WARNING, logger="kafka")
    p = KafkaProducer(**broker.kafka_python_config("alice", "SCRAM-SHA-512"), request_timeout_ms=5000,
                      max_block_ms=10000)
    try:
        md = p.send("sasl-fault-kp", b"v").get(timeout=10)
        assert md.offset >= 0
    finally:
        p.close()
    assert any("SaslAuthenticationFailedError" in r.getMessage() and
               "invalid credentials with SASL mechanism SCRAM-SHA-512" in r.getMessage() for r in caplog.records)


def _authenticated_wire(broker, mechanism="PLAIN"):
    c = WireClient(broker)
    assert c.request(SASL_HANDSHAKE, 1, {"mechanism": mechanism})["error_code"] == 0
    return c


def test_wire_answers_and_closes(broker):
    """The bytes of each injected answer, and the close after it: 58 with Kafka's text after
    the failed-authentication delay, 34 (no message) and 33 (the enabled list) at once."""
    broker.faults.fail("SaslAuthenticate", "SASL_AUTHENTICATION_FAILED", count=1)
    with _authenticated_wire(broker) as c:
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()})
        assert (r["error_code"], r["error_message"]) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password")
        assert c.wait_closed(5)
    broker.faults.fail("SaslAuthenticate", "ILLEGAL_SASL_STATE", count=1)
    with _authenticated_wire(broker) as c:
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()})
        assert (r["error_code"], r["error_message"]) == (ErrorCode.ILLEGAL_SASL_STATE, None)
        assert c.wait_closed(5)
    broker.faults.fail("SaslHandshake", "UNSUPPORTED_SASL_MECHANISM", count=1)
    with WireClient(broker) as c:
        r = c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert r["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert sorted(r["mechanisms"]) == ["PLAIN", "SCRAM-SHA-512"]
        assert c.wait_closed(5)
    # spent: the same exchange succeeds
    with _authenticated_wire(broker) as c:
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()})
        assert r["error_code"] == 0


def test_drop_and_delay_on_sasl_apis(broker):
    """drop_connection closes without an answer; delay holds the answer; confluent-kafka
    reconnects past a dropped SaslAuthenticate."""
    broker.faults.drop_connection("SaslAuthenticate", count=1)
    with _authenticated_wire(broker) as c:
        assert c.closed_after(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()})
    broker.faults.delay("SaslHandshake", 0.5, count=1)
    with WireClient(broker) as c:
        t = time.monotonic()
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert time.monotonic() - t >= 0.45
    broker.faults.drop_connection("SaslAuthenticate", count=1)
    err, _ = _produce_through(broker.client_config("alice", "PLAIN"))
    assert err is None, err
