"""``pykbroker serve`` (a child process) with Kafka's security settings: PEM files, a PLAINTEXT
and a SASL_SSL listener, a JAAS config; a real client moves several MiB through TLS (Fetch
answers larger than one write buffer, read from the segment files instead of sendfile) and a
wrong password is logged once, without the password."""
import re
import time
import uuid

import pytest

from tests import needs

from pykbroker.local.broker_process import BrokerProcess

needs.module("cryptography")
from pykbroker.security.certs import CertificateAuthority  # noqa: E402

PASSWORD = "serve-Secret-77"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    ca = CertificateAuthority()
    pair = ca.issue("localhost", ["localhost", "127.0.0.1"])
    (d / "server.pem").write_text(pair.key_pem + pair.cert_pem)
    (d / "ca.pem").write_text(ca.cert_pem)
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "server.pem"),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="%s";' % PASSWORD,
        "group.initial.rebalance.delay.ms": "0",
    }
    b = BrokerProcess(str(d / "data"), overrides)
    b.start()
    m = re.search(r"SASL_SSL://127\.0\.0\.1:(\d+)", b.log_text())
    yield b, int(m.group(1)), str(d / "ca.pem")
    b.stop()


def _cfg(port, ca, password=PASSWORD):
    return {"bootstrap.servers": "127.0.0.1:%d" % port, "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password}


def test_megabytes_through_tls(served):
    from confluent_kafka import Consumer, Producer, TopicPartition

    b, port, ca = served
    topic = "tls-bulk-" + uuid.uuid4().hex[:6]
    values = [(b"%06d" % i) + bytes([i % 251]) * 2042 for i in range(2000)]   # ~4 MiB
    p = Producer({**_cfg(port, ca), "linger.ms": 20})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({**_cfg(port, ca), "group.id": "bulk", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 8 << 20, "fetch.max.bytes": 16 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                got.append(m.value())
    c.close()
    assert got == values


def test_wrong_password_is_logged_once_without_it(served):
    from confluent_kafka import KafkaError, Producer

    b, port, ca = served
    errors = []
    p = Producer({**_cfg(port, ca, "not-" + PASSWORD), "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    time.sleep(0.5)
    log = b.log_text()
    assert "Failed authentication with 127.0.0.1:" in log and "(mechanism PLAIN)" in log
    assert PASSWORD not in log
