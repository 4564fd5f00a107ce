"""Real clients over SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512:
each produces records and reads the same bytes back through the secured listener of a broker
made by ``pykbroker.Broker(security=..., users=...)``.  A wrong password fails fast with the
client's authentication error."""
import asyncio
import shutil
import subprocess
import time
import uuid

import pytest

from tests import needs
from tests.polling import poll_values

import pykbroker
from pykbroker.embedded import TEST_CONFIG

needs.module("cryptography")

USERS = {"alice": "alice-Pa55word!", "bob": 'b"o\\b-secret'}   # quotes/backslash: JAAS escaping
PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def brokers():
    out = {}
    try:
        for proto in PROTOCOLS:
            out[proto] = pykbroker.Broker(security=proto, users=USERS, config=TEST_CONFIG).start()
        yield out
    finally:
        for b in out.values():
            b.stop()


def _cases():
    for proto in PROTOCOLS:
        for mech in (MECHANISMS if proto != "SSL" else (None,)):
            yield proto, mech


def _values(n=3):
    tag = uuid.uuid4().hex[:6].encode()
    return [b"%s-%d-" % (tag, i) + bytes(range(256)) for i in range(n)]


# ------------------------------------------------------------------ confluent-kafka

def _confluent_roundtrip(cfg, topic, values):
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer(cfg)
    for v in values:
        p.produce(topic, v)
    assert p.flush(20) == 0
    c = Consumer({**cfg, "group.id": "g-" + topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        return poll_values(c, len(values), 20)
    finally:
        c.close()


@pytest.mark.parametrize("proto,mech", list(_cases()))
def test_confluent_kafka(brokers, proto, mech):
    b = brokers[proto]
    topic = "ck-%s-%s" % (proto, mech or "tls")
    values = _values()
    user = "bob" if mech == "SCRAM-SHA-512" else "alice"
    assert _confluent_roundtrip(b.client_config(user, mech), topic, values) == values


# ------------------------------------------------------------------ kafka-python

@pytest.mark.parametrize("proto,mech", list(_cases()))
def test_kafka_python(brokers, proto, mech):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    b = brokers[proto]
    cfg = b.kafka_python_config("alice", mech)
    topic = "kp-%s-%s" % (proto, mech or "tls")
    values = _values()
    p = KafkaProducer(**cfg)
    try:
        for v in values:
            p.send(topic, v).get(20)
    finally:
        p.close()
    c = KafkaConsumer(**cfg, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        got = [m.value for _, m in zip(range(len(values)), c)]
    finally:
        c.close()
    assert got == values


# ------------------------------------------------------------------ aiokafka

@pytest.mark.parametrize("proto,mech", list(_cases()))
def test_aiokafka(brokers, proto, mech):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    b = brokers[proto]
    topic = "ak-%s-%s" % (proto, mech or "tls")
    values = _values()

    async def run():
        p = AIOKafkaProducer(**b.aiokafka_config("alice", mech))
        await p.start()
        try:
            for v in values:
                await p.send_and_wait(topic, v)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**b.aiokafka_config("alice", mech), enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = []
            while len(got) < len(values):
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                got += [m.value for ms in batch.values() for m in ms]
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == values


# ------------------------------------------------------------------ kcat

@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
# PLAIN only: the kcat 1.7.1 of Debian bundles librdkafka 2.0.2, whose SCRAM client-final message
# repeats the client nonce before the server's combined nonce; Kafka 4.4 (like RFC 5802) requires
# the nonce echoed exactly and refuses it, and so does pykbroker.  confluent-kafka's newer
# librdkafka covers SCRAM above.
@pytest.mark.parametrize("proto,mech", [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "PLAIN")])
def test_kcat(brokers, proto, mech):
    b = brokers[proto]
    cfg = b.client_config("alice", mech)
    args = ["kcat", "-b", cfg.pop("bootstrap.servers")]
    for k, v in cfg.items():
        args += ["-X", "%s=%s" % (k, v)]
    topic = "kc-%s-%s" % (proto, mech or "tls")
    lines = [b"kcat-%d-%s" % (i, uuid.uuid4().hex.encode()) for i in range(3)]
    subprocess.run(args + ["-P", "-t", topic], input=b"\n".join(lines) + b"\n", check=True, timeout=30)
    out = subprocess.run(args + ["-C", "-t", topic, "-o", "beginning", "-c", "3", "-e"], capture_output=True,
                         check=True, timeout=30).stdout
    assert out.splitlines() == lines


# ------------------------------------------------------------------ wrong credentials

@pytest.mark.parametrize("proto,mech", [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
                                        ("SASL_PLAINTEXT", "SCRAM-SHA-512")])
def test_wrong_password_fails_fast_confluent(brokers, proto, mech):
    from confluent_kafka import KafkaError, Producer

    errors = []
    cfg = brokers[proto].client_config("alice", mech, password="not-the-password")
    p = Producer({**cfg, "error_cb": errors.append})
    t0 = time.monotonic()
    while not errors and time.monotonic() - t0 < 10:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("user", ["alice", "nobody"])   # an unknown user fails the same way
def test_wrong_password_fails_fast_aiokafka(brokers, user):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    b = brokers["SASL_SSL"]

    async def run():
        p = AIOKafkaProducer(**b.aiokafka_config(user, "PLAIN", password="wrong"))
        try:
            await p.start()
        finally:
            await p.stop()

    t0 = time.monotonic()
    with pytest.raises(KafkaConnectionError):
        asyncio.run(run())
    assert time.monotonic() - t0 < 5


def test_the_secure_broker_fixture(kafka_secure_broker):
    """The pytest plugin's ``kafka_secure_broker``: SCRAM-SHA-512 by default, every user."""
    b = kafka_secure_broker
    assert b.client_config("alice")["sasl.mechanism"] == "SCRAM-SHA-512"
    values = _values(2)
    assert _confluent_roundtrip(b.client_config("alice"), "fixture-topic", values) == values
    assert _confluent_roundtrip(b.client_config("admin", "PLAIN"), "fixture-topic-2", values) == values
