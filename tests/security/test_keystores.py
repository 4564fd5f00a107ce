"""PKCS12 and JKS keystores and truststores, made the way Kafka users make them (the JDK's
keytool, openssl pkcs12), on SSL listeners and on the broker's inter-broker client side; wrong
passwords and types stop the start-up with one line naming the setting."""
import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import needs
from tests.security.clients import produce_until_answer, set_broker_configs

import pykbroker
from pykbroker.config import BrokerConfig, ConfigError
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import WireClient

needs.module("cryptography")
needs.module("jks")
from pykbroker.security.certs import CertificateAuthority  # noqa: E402

KEYTOOL = shutil.which("keytool")
if KEYTOOL is None or shutil.which("openssl") is None:
    pytest.skip("keytool and openssl make the stores", allow_module_level=True)

STORE_PW, KEY_PW, TRUST_PW = "store-secret", "key-secret", "trust-secret"


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


def _p12(d, name, pair, password):
    """A PKCS12 keystore from a PEM key and chain, as `openssl pkcs12 -export` makes it."""
    cert, key = pair.write(d, name)
    out = os.path.join(d, name + ".p12")
    _run("openssl", "pkcs12", "-export", "-in", cert, "-inkey", key, "-name", name,
         "-out", out, "-passout", "pass:" + password)
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("stores"))
    ca, client_ca = CertificateAuthority("server CA"), CertificateAuthority("client CA")
    server = ca.issue("broker-one", ["localhost", "127.0.0.1"])
    # the renewed certificate: same subject and SANs (Kafka refuses a dynamic keystore whose DN
    # or SANs differ), another key and serial
    server2 = ca.issue("broker-one", ["localhost", "127.0.0.1"])
    client = client_ca.issue("alice", server=False)
    f = {"dir": d, "ca": os.path.join(d, "ca.pem"), "client_ca": os.path.join(d, "client_ca.pem")}
    for key, pem in (("ca", ca.cert_pem), ("client_ca", client_ca.cert_pem)):
        with open(f[key], "w") as fh:
            fh.write(pem)
    f["client_cert"], f["client_key"] = client.write(d, "client")
    f["pem"] = os.path.join(d, "server.pem")
    with open(f["pem"], "w") as fh:
        fh.write(server.key_pem + server.cert_pem)
    f["p12"] = _p12(d, "server", server, STORE_PW)
    f["p12_two"] = _p12(d, "server2", server2, STORE_PW)
    f["p12_other_dn"] = _p12(d, "server3", ca.issue("someone-else", ["localhost", "127.0.0.1"]), STORE_PW)
    # JKS with its own key password: keytool -importkeystore from the PKCS12 file
    f["jks"] = os.path.join(d, "server.jks")
    _run(KEYTOOL, "-importkeystore", "-noprompt", "-srckeystore", f["p12"], "-srcstoretype", "PKCS12",
         "-srcstorepass", STORE_PW, "-destkeystore", f["jks"], "-deststoretype", "JKS",
         "-deststorepass", STORE_PW, "-destkeypass", KEY_PW, "-srcalias", "server", "-destalias", "server")
    # truststores of the client CA (mTLS) and of the server CA (the inter-broker client side)
    for name, cafile, stype in (("client_trust.p12", f["client_ca"], "PKCS12"),
                                ("server_trust.jks", f["ca"], "JKS")):
        f[name] = os.path.join(d, name)
        _run(KEYTOOL, "-importcert", "-noprompt", "-alias", "ca", "-file", cafile, "-keystore", f[name],
             "-storetype", stype, "-storepass", TRUST_PW)
    # the client's own PKCS12 keystore (mTLS), as openssl makes it
    f["client_p12"] = _p12(d, "alice", client, STORE_PW)
    return f


def _keystore(stores, kind):
    if kind == "PKCS12":
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": stores["p12"],
                "ssl.keystore.password": STORE_PW}
    return {"ssl.keystore.type": "JKS", "ssl.keystore.location": stores["jks"],
            "ssl.keystore.password": STORE_PW, "ssl.key.password": KEY_PW}


def _produce_consume(port, stores, topic, cert=False):
    from confluent_kafka import Consumer, Producer

    cfg = {"bootstrap.servers": "127.0.0.1:%d" % port, "security.protocol": "SSL",
           "ssl.ca.location": stores["ca"]}
    if cert:
        cfg.update({"ssl.certificate.location": stores["client_cert"], "ssl.key.location": stores["client_key"]})
    p = Producer(cfg)
    p.produce(topic, b"over-" + topic.encode())
    assert p.flush(15) == 0
    c = Consumer({**cfg, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and not m.error():
                return m.value()
    finally:
        c.close()
    return None


def _peer_cn(port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
        subject = dict(x[0] for x in w.sock.getpeercert()["subject"])
    return subject["commonName"]


@pytest.mark.parametrize("kind", ["PKCS12", "JKS"])
def test_binary_keystore_serves_confluent_kafka(stores, kind):
    cfg = {"listeners": "SSL://127.0.0.1:0", **_keystore(stores, kind), **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        port = b.broker.bound[0].port
        assert _peer_cn(port, stores["ca"]) == "broker-one"
        assert _produce_consume(port, stores, "ks-" + kind.lower()) == b"over-ks-" + kind.lower().encode()


def test_mtls_with_a_pkcs12_truststore_of_client_cas(stores):
    cfg = {"listeners": "SSL://127.0.0.1:0", **_keystore(stores, "JKS"), "ssl.client.auth": "required",
           "ssl.truststore.type": "PKCS12", "ssl.truststore.location": stores["client_trust.p12"],
           "ssl.truststore.password": TRUST_PW, **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        port = b.broker.bound[0].port
        assert _produce_consume(port, stores, "mtls", cert=True) == b"over-mtls"
        # without a certificate from a trusted client CA the broker ends the handshake
        ctx = ssl.create_default_context(cafile=stores["ca"])
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with WireClient(("127.0.0.1", port), ssl_context=ctx, timeout=5) as w:
                w.request(18, 0, {})


LIBS = Path.home() / ".cache" / "pykbroker" / "kafka-4.4.0" / "libs"


@pytest.mark.skipif(not (LIBS / "kafka-clients-4.4.0.jar").exists(),
                    reason="Kafka jars not cached (python3 compat/kafka/oracle.py fetch)")
def test_java_client_with_jks_truststore_and_pkcs12_keystore(stores):
    cfg = {"listeners": "SSL://127.0.0.1:0", **_keystore(stores, "JKS"), "ssl.client.auth": "required",
           "ssl.truststore.type": "PKCS12", "ssl.truststore.location": stores["client_trust.p12"],
           "ssl.truststore.password": TRUST_PW, **TEST_CONFIG}
    src = Path(__file__).parent / "java" / "Keystores.java"
    with pykbroker.Broker(config=cfg) as b:
        # localhost: the Java client checks the host name (ssl.endpoint.identification.algorithm=https)
        r = subprocess.run(["java", "-cp", str(LIBS / "*"), str(src), "localhost:%d" % b.broker.bound[0].port,
                            stores["server_trust.jks"], TRUST_PW, stores["client_p12"], STORE_PW],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "sent java-keystores-0@0" in r.stdout and "got java-jks-value" in r.stdout, r.stdout


def test_inter_broker_client_side_reads_jks_and_pkcs12(stores):
    """The broker's own connections to the inter-broker listener: a JKS truststore of the server
    CA and a PKCS12 keystore as its client certificate, against an mTLS listener."""
    from pykbroker.security.client import InterBrokerSecurity

    trust = {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": stores["client_trust.p12"],
             "ssl.truststore.password": TRUST_PW}
    cfg = {"listeners": "SSL://127.0.0.1:0", **_keystore(stores, "PKCS12"), "ssl.client.auth": "required",
           **trust, **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        port = b.broker.bound[0].port
        # the client side: trusts the server CA through JKS, presents alice's certificate (PKCS12)
        client_p12 = stores["client_p12"]
        own = BrokerConfig({"listeners": "SSL://127.0.0.1:%d" % port, "log.dirs": stores["dir"] + "/d",
                            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": client_p12,
                            "ssl.keystore.password": STORE_PW, "ssl.truststore.location": stores["server_trust.jks"],
                            "ssl.truststore.password": TRUST_PW})   # ssl.truststore.type: Kafka's default, JKS
        sec = InterBrokerSecurity.from_config(own)
        with WireClient(("localhost", port), ssl_context=sec.ssl_context) as w:
            assert w.request(18, 0, {})["error_code"] == 0


@pytest.mark.parametrize("extra,key", [
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "@P12", "ssl.keystore.password": "wrong"},
     "ssl.keystore.password"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "@P12"}, "ssl.keystore.password"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "@JKS", "ssl.keystore.password": "wrong",
      "ssl.key.password": KEY_PW}, "ssl.keystore.password"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "@JKS", "ssl.keystore.password": STORE_PW,
      "ssl.key.password": "wrong"}, "ssl.key.password"),
    ({"ssl.keystore.location": "@PEM", "ssl.keystore.password": STORE_PW}, "ssl.keystore.type"),  # JKS default
    ({"ssl.keystore.type": "BCFKS", "ssl.keystore.location": "@P12"}, "ssl.keystore.type"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "@P12", "ssl.keystore.password": STORE_PW,
      "ssl.client.auth": "required", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": "@TRUST",
      "ssl.truststore.password": "wrong"}, "ssl.truststore.password"),
])
def test_wrong_password_or_type_stops_the_start(stores, extra, key):
    from pykbroker.broker import BrokerServer

    paths = {"@P12": stores["p12"], "@JKS": stores["jks"], "@PEM": stores["pem"], "@TRUST": stores["client_trust.p12"]}
    extra = {k: paths.get(v, v) for k, v in extra.items()}
    cfg = BrokerConfig({"listeners": "SSL://127.0.0.1:0", "log.dirs": stores["dir"] + "/data", **extra})
    with pytest.raises(ConfigError) as e:
        BrokerServer(cfg)
    assert e.value.name == key and ": %s: " % key in str(e.value), str(e.value)
    assert "wrong" not in str(e.value).replace("wrong password", "")   # never the value


def test_serve_says_one_line_and_exits_2(stores):
    r = subprocess.run([sys.executable, "-m", "pykbroker", "serve", "--log-dirs", stores["dir"] + "/serve",
                        "--override", "listeners=SSL://127.0.0.1:0", "--override", "ssl.keystore.type=JKS",
                        "--override", "ssl.keystore.location=" + stores["jks"],
                        "--override", "ssl.keystore.password=" + STORE_PW, "--override", "ssl.key.password=nope"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "ssl.key.password" in lines[0] and "nope" not in lines[0], r.stderr


def _peer_serial(w):
    from cryptography import x509
    return x509.load_der_x509_certificate(w.sock.getpeercert(binary_form=True)).serial_number


def _alter(port, stores, entries, cert=None):
    """IncrementalAlterConfigs SET on broker 1 through confluent-kafka's AdminClient (from a
    client presenting ``cert``, mTLS, when given); the error code, or None."""
    from confluent_kafka.admin import AdminClient

    conf = {"bootstrap.servers": "127.0.0.1:%d" % port, "security.protocol": "SSL", "ssl.ca.location": stores["ca"]}
    if cert is not None:
        conf.update({"ssl.certificate.location": cert[0], "ssl.key.location": cert[1]})
    err = set_broker_configs(AdminClient(conf), "1", entries)
    return None if err is None else err.code()


def test_dynamic_keystore_update_reloads_for_new_connections(stores):
    from confluent_kafka import KafkaError

    cfg = {"listeners": "SSL://127.0.0.1:0", "node.id": "1", **_keystore(stores, "JKS"), **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        port = b.broker.bound[0].port
        ctx = ssl.create_default_context(cafile=stores["ca"])
        old = WireClient(("127.0.0.1", port), ssl_context=ctx)
        first = _peer_serial(old)
        # a keystore that does not open: INVALID_REQUEST, the listener keeps its certificate
        bad = {"listener.name.ssl.ssl.keystore.type": "PKCS12",
               "listener.name.ssl.ssl.keystore.location": stores["p12_two"],
               "listener.name.ssl.ssl.keystore.password": "wrong"}
        assert _alter(port, stores, bad) == KafkaError.INVALID_REQUEST
        # another subject DN: refused as Kafka's SslFactory refuses it
        other = {**bad, "listener.name.ssl.ssl.keystore.location": stores["p12_other_dn"],
                 "listener.name.ssl.ssl.keystore.password": STORE_PW}
        assert _alter(port, stores, other) == KafkaError.INVALID_REQUEST
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            assert _peer_serial(w) == first
        good = {**bad, "listener.name.ssl.ssl.keystore.password": STORE_PW}
        assert _alter(port, stores, good) is None
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            second = _peer_serial(w)
            assert w.request(18, 0, {})["error_code"] == 0
        assert second != first
        # the connection opened before keeps its session and works on
        assert _peer_serial(old) == first and old.request(18, 0, {})["error_code"] == 0
        old.close()
        assert _produce_consume(port, stores, "after-reload") == b"over-after-reload"


def test_dynamic_config_log_lines_hide_secrets():
    """The controller's "dynamic broker configs ... now" line (written after every AlterConfigs)
    shows PASSWORD-type values, plain or listener-prefixed, as [hidden]; other values as they are."""
    from pykbroker.config import redacted
    got = redacted({"listener.name.ssl.ssl.keystore.password": STORE_PW,
                    "listener.name.ssl.ssl.keystore.location": "/x/server.p12",
                    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": 'x password="%s";' % KEY_PW,
                    "ssl.truststore.password": TRUST_PW, "log.retention.ms": "1000"})
    assert got == {"listener.name.ssl.ssl.keystore.password": "[hidden]",
                   "listener.name.ssl.ssl.keystore.location": "/x/server.p12",
                   "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "[hidden]",
                   "ssl.truststore.password": "[hidden]", "log.retention.ms": "1000"}


def _alter_mtls(port, stores, entries, cert):
    return _alter(port, stores, entries, cert)


def _mtls_produce(port, stores, cert, topic):
    """confluent-kafka over mTLS with ``cert``: None when the record is acknowledged, else the
    first error seen (a refused handshake is an error_cb, not a hang)."""
    done, errors = produce_until_answer({"bootstrap.servers": "127.0.0.1:%d" % port, "security.protocol": "SSL",
                                         "ssl.ca.location": stores["ca"], "ssl.certificate.location": cert[0],
                                         "ssl.key.location": cert[1]}, topic)
    if done and done[0] is None:
        return None
    return errors[0].str() if errors else str(done[0] if done else "no answer")


def test_dynamic_truststore_update_trusts_a_new_client_ca(stores, tmp_path):
    """listener.name.ssl.ssl.truststore.* through IncrementalAlterConfigs: a client signed by a
    new CA is refused, then accepted once the truststore holding that CA is set; a truststore
    that does not load is INVALID_REQUEST and changes nothing; a connection opened before keeps
    working."""
    from confluent_kafka import KafkaError
    new_ca = CertificateAuthority("client CA two")
    bob = new_ca.issue("bob", server=False).write(str(tmp_path), "bob")
    alice = (stores["client_cert"], stores["client_key"])
    both = tmp_path / "both.pem"
    both.write_text(Path(stores["client_ca"]).read_text() + new_ca.cert_pem)
    cfg = {"listeners": "SSL://127.0.0.1:0", "node.id": "1", **_keystore(stores, "PKCS12"),
           "ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
           "ssl.truststore.location": stores["client_trust.p12"], "ssl.truststore.password": TRUST_PW, **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        port = b.broker.bound[0].port
        assert _mtls_produce(port, stores, alice, "trust-a") is None
        assert _mtls_produce(port, stores, bob, "trust-b") is not None   # bob's CA is not trusted
        pre = "listener.name.ssl."
        bad = {pre + "ssl.truststore.type": "PKCS12", pre + "ssl.truststore.location": stores["client_trust.p12"],
               pre + "ssl.truststore.password": "wrong"}
        assert _alter_mtls(port, stores, bad, alice) == KafkaError.INVALID_REQUEST
        missing = {pre + "ssl.truststore.type": "PEM", pre + "ssl.truststore.location": str(tmp_path / "nope.pem")}
        assert _alter_mtls(port, stores, missing, alice) == KafkaError.INVALID_REQUEST
        assert _mtls_produce(port, stores, bob, "trust-b") is not None   # still refused
        ctx = ssl.create_default_context(cafile=stores["ca"])
        ctx.load_cert_chain(*alice)
        before = WireClient(("127.0.0.1", port), ssl_context=ctx)
        assert before.request(18, 0, {})["error_code"] == 0
        # only the new CA: bob gets in, alice's new connections no longer do
        only_new = tmp_path / "new.pem"
        only_new.write_text(new_ca.cert_pem)
        good = {pre + "ssl.truststore.type": "PEM", pre + "ssl.truststore.location": str(only_new),
                pre + "ssl.truststore.password": ""}
        assert _alter_mtls(port, stores, good, alice) is None
        assert _mtls_produce(port, stores, bob, "trust-b") is None
        assert _mtls_produce(port, stores, alice, "trust-a2") is not None
        assert before.request(18, 0, {})["error_code"] == 0   # opened before: kept
        before.close()
        # both CAs: both get in
        assert _alter_mtls(port, stores, {**good, pre + "ssl.truststore.location": str(both)}, bob) is None
        assert _mtls_produce(port, stores, alice, "trust-a3") is None
        assert _mtls_produce(port, stores, bob, "trust-b3") is None


def test_adding_a_truststore_to_a_listener_without_one_is_refused(stores):
    """Kafka's SslFactory: "Cannot add SSL truststore to an existing listener for which no
    truststore was configured." (INVALID_REQUEST)."""
    from confluent_kafka import KafkaError
    cfg = {"listeners": "SSL://127.0.0.1:0", "node.id": "1", **_keystore(stores, "PKCS12"), **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        port = b.broker.bound[0].port
        add = {"listener.name.ssl.ssl.truststore.type": "PEM",
               "listener.name.ssl.ssl.truststore.location": stores["client_ca"]}
        assert _alter(port, stores, add) == KafkaError.INVALID_REQUEST
        assert _produce_consume(port, stores, "no-trust-added") == b"over-no-trust-added"


def test_keystore_password_stored_encoded_with_password_encoder_secret(stores, tmp_path, caplog):
    """password.encoder.secret on a single node: the dynamic keystore password is stored in
    Kafka's encoded form (never in clear), read back at the next start (the new certificate is
    served after a restart), and a broker given another secret cannot decode it: it says so
    (never the value), leaves the password out and still serves."""
    import json
    import logging

    from pykbroker.password_encoder import PasswordEncoder, parse_encoded
    log_dir = tmp_path / "data"
    cfg = {"listeners": "SSL://127.0.0.1:0", "node.id": "1", **_keystore(stores, "JKS"),
           "password.encoder.secret": "encoder-secret-1", **TEST_CONFIG}
    ctx = ssl.create_default_context(cafile=stores["ca"])
    with pykbroker.Broker(config=cfg, log_dir=log_dir) as b:
        port = b.broker.bound[0].port
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            first = _peer_serial(w)
        good = {"listener.name.ssl.ssl.keystore.type": "PKCS12",
                "listener.name.ssl.ssl.keystore.location": stores["p12_two"],
                "listener.name.ssl.ssl.keystore.password": STORE_PW}
        assert _alter(port, stores, good) is None
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            second = _peer_serial(w)
        assert second != first
        text = (log_dir / "__pykbroker_metadata.json").read_text()
        assert STORE_PW not in text
        stored = json.loads(text)["broker_configs"]["1"]["listener.name.ssl.ssl.keystore.password"]
        assert parse_encoded(stored) is not None
        assert PasswordEncoder("encoder-secret-1").decode(stored) == STORE_PW
        b.restart()
        port = b.broker.bound[0].port
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            assert _peer_serial(w) == second   # decoded at start-up: the dynamic keystore loads
    caplog.set_level(logging.ERROR, logger="pykbroker")
    with pykbroker.Broker(config={**cfg, "password.encoder.secret": "another-secret"}, log_dir=log_dir) as b:
        port = b.broker.bound[0].port
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            # (the static ssl.keystore.password is the same as the new store's here, so the
            # dynamic keystore still opens without the dynamic password)
            assert _peer_serial(w) in (first, second) and w.request(18, 0, {})["error_code"] == 0
    assert any("could not be decoded" in r.getMessage() for r in caplog.records)
    assert not any(STORE_PW in r.getMessage() for r in caplog.records)


def test_passwords_of_the_old_secret_re_encoded_at_start_up(stores, tmp_path, caplog):
    """password.encoder.old.secret (Kafka's secret rotation): a broker started with a new
    password.encoder.secret and the old one as password.encoder.old.secret serves the keystore
    whose password the old secret encoded, and stores that password again under the new secret
    (Kafka's DynamicBrokerConfig.maybeReEncodePasswords), so the next start, with the new secret
    only, still opens the keystore: its password is one the static settings do not know."""
    import json
    import logging

    from pykbroker.password_encoder import PasswordEncoder, PasswordEncodingError
    rotated = os.path.join(str(tmp_path), "rotated.p12")   # the renewed certificate under its own password
    pem = subprocess.run(["openssl", "pkcs12", "-in", stores["p12_two"], "-passin", "pass:" + STORE_PW, "-nodes"],
                         check=True, capture_output=True, timeout=60).stdout
    (tmp_path / "renewed.pem").write_bytes(pem)
    _run("openssl", "pkcs12", "-export", "-in", str(tmp_path / "renewed.pem"), "-out", rotated,
         "-passout", "pass:rotated-pw")
    log_dir = tmp_path / "data"
    meta = log_dir / "__pykbroker_metadata.json"
    key = "listener.name.ssl.ssl.keystore.password"
    cfg = {"listeners": "SSL://127.0.0.1:0", "node.id": "1", **_keystore(stores, "JKS"), **TEST_CONFIG}
    ctx = ssl.create_default_context(cafile=stores["ca"])

    def stored():
        return json.loads(meta.read_text())["broker_configs"]["1"][key]

    with pykbroker.Broker(config={**cfg, "password.encoder.secret": "secret-one"}, log_dir=log_dir) as b:
        port = b.broker.bound[0].port
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            first = _peer_serial(w)
        assert _alter(port, stores, {"listener.name.ssl.ssl.keystore.type": "PKCS12",
                                     "listener.name.ssl.ssl.keystore.location": rotated, key: "rotated-pw"}) is None
        with WireClient(("127.0.0.1", port), ssl_context=ctx) as w:
            renewed = _peer_serial(w)
        assert renewed != first
    under_one = stored()
    rotation = {**cfg, "password.encoder.secret": "secret-two", "password.encoder.old.secret": "secret-one"}
    with pykbroker.Broker(config=rotation, log_dir=log_dir) as b:
        with WireClient(("127.0.0.1", b.broker.bound[0].port), ssl_context=ctx) as w:
            assert _peer_serial(w) == renewed   # decoded with the old secret
        deadline = time.monotonic() + 10
        while stored() == under_one and time.monotonic() < deadline:
            time.sleep(0.05)
    now = stored()
    assert now != under_one and "rotated-pw" not in meta.read_text()
    assert PasswordEncoder("secret-two").decode(now) == "rotated-pw"
    with pytest.raises(PasswordEncodingError):
        PasswordEncoder("secret-one").decode(now)
    caplog.set_level(logging.ERROR, logger="pykbroker")
    with pykbroker.Broker(config={**cfg, "password.encoder.secret": "secret-two"}, log_dir=log_dir) as b:
        with WireClient(("127.0.0.1", b.broker.bound[0].port), ssl_context=ctx) as w:
            assert _peer_serial(w) == renewed and w.request(18, 0, {})["error_code"] == 0
    assert not any("could not be decoded" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_the_validation_handshake_checks_both_certificates(tmp_path, version):
    """security/reload.py's in-memory handshake (Kafka's SslEngineValidator): it fails when the
    server's certificate is not trusted, and under ssl.client.auth=required when the client's
    certificate is not trusted or missing (TLS 1.3 too, where the client finishes first)."""
    from pykbroker.security.reload import _handshake
    ca, other = CertificateAuthority("trusted CA"), CertificateAuthority("another CA")
    mine, theirs = ca.issue("localhost", ["localhost"]).write(str(tmp_path), "mine"), \
        other.issue("localhost", ["localhost"]).write(str(tmp_path), "theirs")
    cafile = tmp_path / "ca.pem"
    cafile.write_text(ca.cert_pem)

    def server(chain, required):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.maximum_version = getattr(ssl.TLSVersion, version)
        ctx.load_cert_chain(*chain)
        if required:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(str(cafile))
        return ctx

    def client(chain):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(str(cafile))
        if chain:
            ctx.load_cert_chain(*chain)
        return ctx
    _handshake(server(mine, False), client(None))
    _handshake(server(mine, True), client(mine))
    for srv, cli in ((server(theirs, False), client(None)), (server(mine, True), client(theirs)),
                     (server(mine, True), client(None))):
        with pytest.raises(ssl.SSLError):
            _handshake(srv, cli)
