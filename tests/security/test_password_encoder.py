"""password.encoder.secret (pykbroker/password_encoder.py): PASSWORD-type dynamic broker configs
stored encrypted in Kafka's PasswordEncoder format.  The format is checked both ways against
Kafka 3.9's own EncryptingPasswordEncoder (a Java program over the cached Kafka jars); on a
ZooKeeper cluster a broker without a secret refuses a password config as Kafka's ZooKeeper mode
does, one with a secret stores it encoded in /config/brokers/<id>."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests import needs

needs.module("cryptography")
from pykbroker.password_encoder import PasswordEncoder, PasswordEncodingError, decode_layer, parse_encoded  # noqa: E402

LIBS = Path.home() / ".cache" / "pykbroker" / "kafka-3.9.1" / "libs"
JAVA = Path(__file__).parent / "java" / "PasswordEncoderInterop.java"


def test_round_trip_wrong_secret_and_old_secret():
    enc = PasswordEncoder("encoder-secret")
    stored = enc.encode("keystore-pässwörd")
    params = parse_encoded(stored)
    assert params["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512" and params["keyLength"] == "128"
    assert params["passwordLength"] == "17" and "pässwörd" not in stored
    assert enc.decode(stored) == "keystore-pässwörd"
    assert enc.encode("x") != enc.encode("x")   # a fresh salt and IV each time
    with pytest.raises(PasswordEncodingError):
        PasswordEncoder("another-secret").decode(stored)
    # password.encoder.old.secret still reads what the previous secret wrote
    assert PasswordEncoder("another-secret", old_secret="encoder-secret").decode(stored) == "keystore-pässwörd"
    # a layer: clear values kept, encoded ones decoded, undecodable ones left out
    layer = decode_layer(PasswordEncoder("another-secret"), "1",
                         {"a": "plain", "b": stored, "c": PasswordEncoder("another-secret").encode("ok")})
    assert layer == {"a": "plain", "c": "ok"}


def _java(*args):
    cp = ":".join(str(LIBS / j) for j in ("kafka-server-common-3.9.1.jar", "kafka-clients-3.9.1.jar",
                                          "slf4j-api-1.7.36.jar"))
    r = subprocess.run(["java", "-cp", cp, str(JAVA), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.skipif(shutil.which("javac") is None or not (LIBS / "kafka-server-common-3.9.1.jar").exists(),
                    reason="a JDK and the Kafka 3.9 jars (python3 compat/kafka/oracle.py fetch)")
def test_kafka_reads_ours_and_we_read_kafkas():
    ours = PasswordEncoder("shared-secret").encode("store-pässword")
    assert _java("decode", "shared-secret", ours) == "store-pässword"
    kafkas = _java("encode", "shared-secret", "store-pässword")
    assert PasswordEncoder("shared-secret").decode(kafkas) == "store-pässword"
    # the same fields in the same order (Kafka writes a HashMap's entries as they come)
    assert [kv.split(":")[0] for kv in ours.split(",")] == [kv.split(":")[0] for kv in kafkas.split(",")]


@pytest.mark.parametrize("key, value", [("password.encoder.cipher.algorithm", "AES/GCM/NoPadding"),
                                        ("password.encoder.keyfactory.algorithm", "MD5"),
                                        ("password.encoder.key.length", "100")])
def test_settings_pykbroker_cannot_honour_stop_the_start(key, value):
    from pykbroker.config import BrokerConfig, ConfigError
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        PasswordEncoder.from_config(BrokerConfig({"password.encoder.secret": "s", key: value}))


# ------------------------------------------------------------------ a ZooKeeper cluster

from tests.cluster.helpers import requires_zookeeper  # noqa: E402


@requires_zookeeper
def test_cluster_refuses_without_secret_and_stores_encoded_with_one(tmp_path):
    """Broker 1 has no password.encoder.secret: a password config is INVALID_REQUEST
    ("Password encoder secret not configured", Kafka 3.x's ZooKeeper-mode text); broker 2 has
    one: the value lands in /config/brokers/2 encoded, and decodes with the secret."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from kazoo.client import KazooClient

    from pykbroker.local.cluster import Cluster
    key = "listener.name.plaintext.ssl.keystore.password"   # a PASSWORD config (unused on PLAINTEXT)
    with Cluster(2, data_dir=str(tmp_path), broker_overrides={2: {"password.encoder.secret": "zk-secret"}}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})

        def alter(broker_id, value="store-secret", validate_only=False):
            res = ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
            try:
                for f in admin.incremental_alter_configs([res], validate_only=validate_only).values():
                    f.result(15)
            except KafkaException as e:
                return e.args[0]
            return None
        err = alter(1)
        assert err is not None and err.name() == "INVALID_REQUEST", err
        assert "Password encoder secret not configured" in err.str(), err.str()
        assert alter(1, validate_only=True) is None   # Kafka encodes only when storing
        assert alter(2) is None
        z = KazooClient(hosts=c.zookeeper_connect, timeout=10)
        z.start(timeout=10)
        try:
            data, _ = z.get("/config/brokers/2")
        finally:
            z.stop()
            z.close()
        stored = json.loads(data)["config"][key]
        assert "store-secret" not in data.decode() and parse_encoded(stored) is not None
        assert PasswordEncoder("zk-secret").decode(stored) == "store-secret"
        # the secret rotated: broker 2 restarted with a new secret and the old one as
        # password.encoder.old.secret writes the value back to /config/brokers/2 under the new one
        c.stop(2)
        c.broker(2).overrides.update({"password.encoder.secret": "zk-secret-2",
                                      "password.encoder.old.secret": "zk-secret"})
        c.start(2)
        z = KazooClient(hosts=c.zookeeper_connect, timeout=10)
        z.start(timeout=10)
        try:
            deadline = time.monotonic() + 15
            while json.loads(z.get("/config/brokers/2")[0])["config"][key] == stored:
                assert time.monotonic() < deadline, "not re-encoded"
                time.sleep(0.1)
            now = json.loads(z.get("/config/brokers/2")[0])["config"][key]
        finally:
            z.stop()
            z.close()
        assert PasswordEncoder("zk-secret-2").decode(now) == "store-secret"
        with pytest.raises(PasswordEncodingError):
            PasswordEncoder("zk-secret").decode(now)


def test_reencode_layer():
    """Kafka's maybeReEncodePasswords, sans-IO: what the old secret encoded is encoded again under
    the new one; values of the new secret, of neither, or in clear, and other configs stay."""
    from pykbroker.password_encoder import reencode_layer
    old, new, stranger = PasswordEncoder("old"), PasswordEncoder("new"), PasswordEncoder("stranger")
    raw = {"listener.name.ssl.ssl.keystore.password": old.encode("ks"),
           "listener.name.ssl.ssl.key.password": new.encode("key"),
           "listener.name.ssl.ssl.truststore.password": stranger.encode("ts"),
           "listener.name.sasl_ssl.plain.sasl.jaas.config": old.encode("jaas"),
           "log.retention.ms": "1000"}
    rotating = PasswordEncoder("new", old_secret="old")
    out = reencode_layer(rotating, raw)
    assert out is not None and set(out) == set(raw)
    for key, password in (("listener.name.ssl.ssl.keystore.password", "ks"),
                          ("listener.name.sasl_ssl.plain.sasl.jaas.config", "jaas")):
        assert new.decode(out[key]) == password
        with pytest.raises(PasswordEncodingError):
            old.decode(out[key])
    for key in ("listener.name.ssl.ssl.key.password", "listener.name.ssl.ssl.truststore.password", "log.retention.ms"):
        assert out[key] == raw[key]
    assert reencode_layer(new, raw) is None   # no old secret
    assert reencode_layer(rotating, {k: raw[k] for k in ("listener.name.ssl.ssl.key.password",
                                                         "log.retention.ms")}) is None
