"""OAUTHBEARER with Kafka's unsecured validator, through librdkafka's unsecured JWTs
(confluent-kafka and kcat): the required scope, the principal claim, a refused token failing
fast with the client's authentication error, and token expiry following ``broker.clock``."""
import time
import uuid

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG

needs.module("cryptography")

JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="requiredScope";')


@pytest.fixture(scope="module")
def broker():
    cfg = {"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": JAAS, **TEST_CONFIG}
    with pykbroker.Broker(security="SASL_SSL", mechanisms=["OAUTHBEARER"], users={"alice": ""}, config=cfg) as b:
        yield b


def _cfg(b, scope="requiredScope", life=3600):
    cfg = b.client_config("alice")
    cfg["sasl.oauthbearer.config"] = "principal=alice scope=%s lifeSeconds=%d" % (scope, life)
    return cfg


def _roundtrip(cfg):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = "oauth-" + uuid.uuid4().hex[:6]
    p = Producer(cfg)
    p.produce(topic, b"bearer-value")
    assert p.flush(15) == 0
    c = Consumer({**cfg, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                return m.value()
    finally:
        c.close()


def _fails_fast(cfg):
    from confluent_kafka import KafkaError, Producer
    errors = []
    p = Producer({**cfg, "error_cb": errors.append})
    t0 = time.monotonic()
    while not errors and time.monotonic() - t0 < 10:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    return errors[0].str()


def test_unsecured_token_with_the_required_scope(broker):
    assert _roundtrip(_cfg(broker)) == b"bearer-value"


def test_missing_scope_is_refused(broker):
    msg = _fails_fast(_cfg(broker, scope="otherScope"))
    assert "insufficient_scope" in msg


def test_token_expiry_follows_the_broker_clock(broker):
    # a token valid for 10 minutes by the wall clock; the broker's clock is an hour ahead
    broker.clock.advance(3600)
    msg = _fails_fast(_cfg(broker, life=600))
    assert "invalid_token" in msg
    assert _roundtrip(_cfg(broker, life=7200)) == b"bearer-value"   # still valid an hour on
