"""TLS listeners: mutual TLS (ssl.client.auth required / requested), the principal of a client
certificate, Kafka's inline PEM configs, per-listener overrides, and refused configurations."""
import logging
import os
import ssl
import time

import pytest

from tests import needs

import pykbroker
from pykbroker.config import ConfigError
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import WireClient

needs.module("cryptography")
from pykbroker.security.certs import CertificateAuthority  # noqa: E402


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pki"))
    ca, other_ca = CertificateAuthority(), CertificateAuthority("someone else's CA")
    server = ca.issue("localhost", ["localhost", "127.0.0.1"])
    client = ca.issue("client1", server=False, subject=[("O", "pykbroker"), ("OU", "tests")])
    stranger = other_ca.issue("client1", server=False)
    files = {"dir": d, "ca": os.path.join(d, "ca.pem"), "keystore": os.path.join(d, "server.pem")}
    with open(files["ca"], "w") as fh:
        fh.write(ca.cert_pem)
    with open(files["keystore"], "w") as fh:
        fh.write(server.key_pem + server.cert_pem)
    files["client_cert"], files["client_key"] = client.write(d, "client")
    files["stranger_cert"], files["stranger_key"] = stranger.write(d, "stranger")
    files["server"], files["ca_pem"] = server, ca.cert_pem
    return files


@pytest.fixture(scope="module")
def mtls(pki):
    """EXTERNAL requires a client certificate, INTERNAL only asks for one (a per-listener override)."""
    cfg = {"listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
           "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL",
           "inter.broker.listener.name": "INTERNAL",
           "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["keystore"],
           "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
           "ssl.client.auth": "requested", "listener.name.external.ssl.client.auth": "required",
           "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=.*$/$1/U,DEFAULT",
           **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        yield b, {li.name: li.port for li in b.broker.bound}


def _confluent(port, pki, cert=True, stranger=False):
    from confluent_kafka import Consumer, Producer, TopicPartition

    cfg = {"bootstrap.servers": "127.0.0.1:%d" % port, "security.protocol": "SSL", "ssl.ca.location": pki["ca"]}
    if cert:
        who = "stranger" if stranger else "client"
        cfg.update({"ssl.certificate.location": pki[who + "_cert"], "ssl.key.location": pki[who + "_key"]})
    errors = []
    p = Producer({**cfg, "error_cb": errors.append})
    topic = "mtls-%d" % port
    value = b"mtls-%f" % time.time()
    p.produce(topic, value)
    # refused: not delivered within 5 s; a handshake the broker refuses shows as transport errors
    # at once (each retry is refused within milliseconds), so 2 s undelivered with errors is
    # enough to tell (an accepted client delivers in well under one)
    t0 = time.monotonic()
    while p.flush(0.25):
        waited = time.monotonic() - t0
        if waited >= 5 or (errors and waited >= 2):
            return None, errors
    c = Consumer({**cfg, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 15
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
            if got[-1] == value:
                break
    c.close()
    return got[-1:], errors


def test_required_client_certificate_is_accepted_and_mapped(mtls, pki, caplog):
    caplog.set_level(logging.DEBUG, logger="pykbroker.connection")
    b, ports = mtls
    got, errors = _confluent(ports["EXTERNAL"], pki)
    assert got and got[0].startswith(b"mtls-"), errors
    # the DN CN=client1,OU=tests,O=pykbroker mapped by the RULE (CN, upper case)
    assert "on EXTERNAL, principal User:CLIENT1" in caplog.text


@pytest.mark.parametrize("stranger", [False, True], ids=["no-certificate", "unknown-ca"])
def test_required_refuses_missing_or_untrusted_certificates(mtls, pki, stranger):
    b, ports = mtls
    got, errors = _confluent(ports["EXTERNAL"], pki, cert=stranger, stranger=stranger)
    assert got is None and errors
    ctx = ssl.create_default_context(cafile=pki["ca"])
    if stranger:
        ctx.load_cert_chain(pki["stranger_cert"], pki["stranger_key"])
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with WireClient(("127.0.0.1", ports["EXTERNAL"]), ssl_context=ctx) as c:
            # TLS 1.3: the refusal arrives with the first read
            c.request(18, 0, {})


def test_requested_serves_clients_without_a_certificate_as_anonymous(mtls, pki, caplog):
    caplog.set_level(logging.DEBUG, logger="pykbroker.connection")
    b, ports = mtls
    got, errors = _confluent(ports["INTERNAL"], pki, cert=False)
    assert got, errors
    assert "on INTERNAL, principal User:ANONYMOUS" in caplog.text


def test_inline_pem_configs(pki):
    server = pki["server"]
    cfg = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
           "ssl.keystore.certificate.chain": server.cert_pem, "ssl.keystore.key": server.key_pem,
           "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki["ca_pem"],
           "ssl.client.auth": "required", **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        got, errors = _confluent(b.broker.bound[0].port, pki)
        assert got, errors
        assert _confluent(b.broker.bound[0].port, pki, cert=False)[0] is None


@pytest.mark.parametrize("extra,message", [
    ({}, "an SSL listener needs a key and certificate"),
    ({"ssl.keystore.location": "/nonexistent.jks"}, "ssl.keystore.location: cannot read the keystore file"),
    ({"ssl.keystore.location": "KEYSTORE"}, "is a PEM file but ssl.keystore.type is JKS"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"}, "cannot load the key"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYSTORE", "ssl.enabled.protocols": "TLSv1.1"},
     "none of .* is supported"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYSTORE", "ssl.principal.mapping.rules": "RULE:x"},
     "not Kafka's rule syntax"),
])
def test_bad_ssl_configs_stop_the_start(pki, extra, message):
    from pykbroker.broker import BrokerServer
    from pykbroker.config import BrokerConfig

    extra = {k: (pki["keystore"] if v == "KEYSTORE" else v) for k, v in extra.items()}
    cfg = BrokerConfig({"listeners": "SSL://127.0.0.1:0", "log.dirs": pki["dir"] + "/data", **extra})
    with pytest.raises(ConfigError, match=message):
        BrokerServer(cfg)


@pytest.mark.parametrize("extra,message", [
    ({}, "Could not find a .KafkaServer."),   # Kafka's default mechanism, GSSAPI, needs its JAAS login
    ({"sasl.enabled.mechanisms": "PLAIN"}, "sets no listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required a"},
     "plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-1"}, "pykbroker serves only"),
])
def test_bad_sasl_configs_stop_the_start(pki, extra, message):
    from pykbroker.broker import BrokerServer
    from pykbroker.config import BrokerConfig

    cfg = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": pki["dir"] + "/data", **extra})
    with pytest.raises(ConfigError, match=message):
        BrokerServer(cfg)


def test_a_cluster_checks_its_secured_inter_broker_listener(pki):
    """A cluster member on a secured inter-broker listener needs its own side of it: the trust
    for SSL, the mechanism and the broker's credentials for SASL (checked at start-up)."""
    from pykbroker.security.setup import check_config
    from pykbroker.config import BrokerConfig

    base = {"log.dirs": pki["dir"] + "/data", "zookeeper.connect": "127.0.0.1:2181",
            "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SSL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["keystore"],
            "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    check_config(BrokerConfig({**base, "inter.broker.listener.name": "EXTERNAL",
                               "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"]}))
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        check_config(BrokerConfig({**base, "inter.broker.listener.name": "INTERNAL"}))   # GSSAPI default
    with pytest.raises(ConfigError, match="listener.name.internal.scram-sha-512.sasl.jaas.config"):
        check_config(BrokerConfig({**base, "inter.broker.listener.name": "INTERNAL",
                                   "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}))
    check_config(BrokerConfig({**base, "inter.broker.listener.name": "INTERNAL",
                               "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                               "listener.name.internal.scram-sha-512.sasl.jaas.config":
                                   'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                   'username="broker" password="broker-secret";'}))


def test_session_tickets_are_sent_right_after_the_handshake(mtls, pki):
    """A TLS 1.3 server's session tickets leave at once after the handshake, before the client
    sends anything (as Kafka's do): otherwise nothing acknowledges the client's Finished and a
    client with Nagle's algorithm on (librdkafka's default) waits for the delayed ACK, 40 ms, before
    its first request goes out (compat/bench connect cell)."""
    import select
    import socket

    b, ports = mtls
    ctx = ssl.create_default_context(cafile=pki["ca"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    sock = socket.create_connection(("127.0.0.1", ports["INTERNAL"]), timeout=10)
    try:
        while True:   # the handshake by hand: the test decides when the client writes
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                data = sock.recv(65536)
                assert data, "the server closed during the handshake"
                incoming.write(data)
        sock.sendall(outgoing.read())   # the client's Finished; no application data follows
        assert obj.version() == "TLSv1.3"
        # poll(), not select(): a whole-suite run may hold more than 1,024 descriptors by now
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        readable = poller.poll(3000)
        assert readable, "nothing from the server after the handshake (session tickets held back)"
        incoming.write(sock.recv(65536))
        with pytest.raises(ssl.SSLWantReadError):   # tickets are handshake records: no app data
            obj.read(1)
    finally:
        sock.close()


def test_a_refused_client_certificate_gets_kafkas_alert_over_tls12():
    """Kafka answers a client certificate its truststore refuses with bad_certificate (42);
    OpenSSL's TLS 1.2 alert (in the clear) is rewritten to it, nothing else is touched."""
    from pykbroker.security.tls_transport import kafka_alert
    unknown_ca = bytes([21, 3, 3, 0, 2, 2, 48])
    assert kafka_alert(unknown_ca, True) == bytes([21, 3, 3, 0, 2, 2, 42])
    assert kafka_alert(unknown_ca, False) == unknown_ca             # another failure: OpenSSL's own
    encrypted = bytes([23, 3, 3, 0, 19]) + bytes(19)                # TLS 1.3: an encrypted record
    assert kafka_alert(encrypted, True) == encrypted
    assert kafka_alert(b"", True) == b""
