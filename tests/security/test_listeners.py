"""Named listeners (listeners, advertised.listeners, listener.security.protocol.map,
inter.broker.listener.name): one broker serves two networks, and each client is told the
addresses of the listener it connected through (Kafka's rule), checked with real clients."""
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.config import BrokerConfig, ConfigError


@pytest.fixture(scope="module")
def two_listeners():
    cfg = {
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        # The EXTERNAL network reaches the broker as "localhost": a client there must be told
        # that name, one on INTERNAL the address.
        "advertised.listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://localhost:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        **TEST_CONFIG,
    }
    with pykbroker.Broker(config=cfg) as b:
        ports = {li.name: li.port for li in b.broker.bound}
        yield b, ports


def _brokers_seen(bootstrap):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return sorted((bm.host, bm.port) for bm in md.brokers.values())


def test_each_listener_advertises_its_own_address(two_listeners):
    b, ports = two_listeners
    assert _brokers_seen("127.0.0.1:%d" % ports["INTERNAL"]) == [("127.0.0.1", ports["INTERNAL"])]
    assert _brokers_seen("127.0.0.1:%d" % ports["EXTERNAL"]) == [("localhost", ports["EXTERNAL"])]


def test_describe_cluster_and_coordinator_follow_the_listener(two_listeners):
    from kafka import KafkaAdminClient

    from pykbroker.protocol.wire import call

    b, ports = two_listeners
    admin = KafkaAdminClient(bootstrap_servers="127.0.0.1:%d" % ports["EXTERNAL"])
    try:
        cluster = admin.describe_cluster()
        assert [(n["host"], n["port"]) for n in cluster["brokers"]] == [("localhost", ports["EXTERNAL"])]
    finally:
        admin.close()
    for name, host in (("EXTERNAL", "localhost"), ("INTERNAL", "127.0.0.1")):
        r = call(("127.0.0.1", ports[name]), 10, 3, {"key": "g-listeners", "key_type": 0})
        assert (r["error_code"], r["host"], r["port"]) == (0, host, ports[name])


def test_produce_and_consume_through_both_listeners(two_listeners):
    b, ports = two_listeners
    topic = "listeners-" + uuid.uuid4().hex[:8]
    b.create_topic(topic, partitions=1)
    for name in ("INTERNAL", "EXTERNAL"):
        p = Producer({"bootstrap.servers": "127.0.0.1:%d" % ports[name]})
        p.produce(topic, b"via-" + name.encode())
        assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": "127.0.0.1:%d" % ports["EXTERNAL"], "group.id": "g-" + topic,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        for _ in range(100):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == 2:
                break
    finally:
        c.close()
    assert got == [b"via-INTERNAL", b"via-EXTERNAL"]


@pytest.mark.parametrize("values,message", [
    ({"listeners": "INTERNAL://127.0.0.1:0"}, "No security protocol defined for listener INTERNAL"),
    ({"listeners": "A://127.0.0.1:0,A://127.0.0.1:0", "listener.security.protocol.map": "A:PLAINTEXT"},
     "Each listener must have a different name, A appears twice"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "EXTERNAL://h:1"},
     "No security protocol defined for listener EXTERNAL"),
])
def test_listener_names_need_a_protocol(values, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({"log.dirs": "/tmp/x", **values})
