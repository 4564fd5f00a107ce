"""Dynamic keystore and truststore updates on the inter-broker listener, as Apache Kafka 4.4
answers them: both brokers get a PLAINTEXT listener (the admin client's) and an SSL listener
named as the inter-broker one, with the same PEM keystore and truststore; the same three
IncrementalAlterConfigs go to each through confluent-kafka.  Kafka's SslFactory accepts a new
inter-broker keystore or truststore only when TLS handshakes between the current and the new
stores succeed: a certificate from a CA the truststore lacks and a truststore without the CA of
the current certificate are refused (INVALID_REQUEST), a truststore holding both CAs is taken."""
from __future__ import annotations

import pytest

from tests import needs
from tests.ports import free_port

from .conftest import _load_oracle

needs.module("confluent_kafka")
needs.module("cryptography")

PRE = "listener.name.ssl."


def make_material(d):
    """Two CAs and a keystore of each (same DN and SANs), PEM files under ``d``, and the SSL
    listener's settings."""
    from pykbroker.security.certs import CertificateAuthority
    ca, other = CertificateAuthority("inter-broker CA"), CertificateAuthority("a CA the brokers do not trust yet")
    f = {}
    for name, text in (("ca", ca.cert_pem), ("other_ca", other.cert_pem), ("both", ca.cert_pem + other.cert_pem)):
        f[name] = d / (name + ".pem")
        f[name].write_text(text)
    for name, issuer in (("keystore", ca), ("other_keystore", other)):
        pair = issuer.issue("localhost", ["localhost", "127.0.0.1"])   # the same DN and SANs
        f[name] = d / (name + ".pem")
        f[name].write_text(pair.key_pem + pair.cert_pem)
    f["config"] = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(f["keystore"]),
                   "ssl.truststore.type": "PEM", "ssl.truststore.location": str(f["ca"]),
                   "inter.broker.listener.name": "SSL"}
    return f


@pytest.fixture(scope="module")
def material(interbroker_kafka_answers_run):
    """The stores Kafka's answers were got with (made in the background run, conftest.py)."""
    return interbroker_kafka_answers_run.result()[0]


def _updates(material):
    return [("a keystore of another CA", {PRE + "ssl.keystore.type": "PEM",
                                          PRE + "ssl.keystore.location": str(material["other_keystore"])}),
            ("a truststore of another CA", {PRE + "ssl.truststore.type": "PEM",
                                            PRE + "ssl.truststore.location": str(material["other_ca"])}),
            ("a truststore of both CAs", {PRE + "ssl.truststore.type": "PEM",
                                          PRE + "ssl.truststore.location": str(material["both"])})]


def _run_updates(bootstrap, updates):
    """Each update through IncrementalAlterConfigs on broker 1: its error code name, or None."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = []
    for what, entries in updates:
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()])
        try:
            for f in admin.incremental_alter_configs([res]).values():
                f.result(30)
            out.append((what, None, ""))
        except KafkaException as e:
            out.append((what, e.args[0].name(), e.args[0].str()))
    return out


def kafka_run(tmp_path_factory):
    """(the stores, Apache Kafka's answers to the updates): an oracle with an SSL inter-broker
    listener, started, asked and stopped.  Run ahead, in the directory's background thread
    (tests/differential/conftest.py): nothing in it is timed."""
    material = make_material(tmp_path_factory.mktemp("ib-stores"))
    oracle = _load_oracle()
    ssl_port = free_port()

    class SslOracle(oracle.KafkaOracle):
        def properties(self):
            p = super().properties()
            p["listeners"] += ",SSL://127.0.0.1:%d" % ssl_port
            p["advertised.listeners"] += ",SSL://127.0.0.1:%d" % ssl_port
            p["listener.security.protocol.map"] += ",SSL:SSL"
            p.update(material["config"])
            return p
    k = SslOracle(tmp_path_factory.mktemp("kafka-ib-ssl"), {"group.initial.rebalance.delay.ms": "0"})
    try:
        k.start()
    except Exception as e:
        pytest.fail("Apache Kafka (the oracle) could not be started: %s" % e, pytrace=False)
    try:
        return material, _run_updates(k.bootstrap, _updates(material))
    finally:
        k.stop()


@pytest.fixture(scope="module")
def kafka_answers(interbroker_kafka_answers_run):
    return interbroker_kafka_answers_run.result()[1]


def test_inter_broker_store_updates_answered_as_kafka(material, kafka_answers):
    import pykbroker
    from pykbroker.embedded import TEST_CONFIG
    cfg = {**TEST_CONFIG, "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
           **material["config"]}
    with pykbroker.Broker(config=cfg) as b:
        ours = _run_updates(b.bootstrap_servers, _updates(material))
    codes = lambda answers: [(what, code) for what, code, _ in answers]   # noqa: E731
    assert codes(ours) == codes(kafka_answers), (ours, kafka_answers)
    assert codes(kafka_answers) == [("a keystore of another CA", "INVALID_REQUEST"),
                                    ("a truststore of another CA", "INVALID_REQUEST"),
                                    ("a truststore of both CAs", None)]
