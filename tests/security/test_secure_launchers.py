"""A secured broker or cluster in one line, as users start them: ``Broker.subprocess(security=...)``
and ``pykbroker cluster up --security ...``, checked with confluent-kafka."""
import json
import os
import signal
import subprocess
import sys

import pytest

from tests import needs
from tests.cluster.helpers import requires_zookeeper

needs.module("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import pykbroker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def produce_and_read(cfg, topic, n=20):
    a = AdminClient(cfg)
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    p = Producer({**cfg, "acks": "all"})
    for i in range(n):
        p.produce(topic, b"r%d" % i)
    assert p.flush(20) == 0
    c = Consumer({**cfg, "group.id": "g-" + topic, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == n:
                break
        return got
    finally:
        c.close()


def test_subprocess_broker_with_security():
    with pykbroker.Broker.subprocess(security="SASL_SSL", users={"alice": "alice-secret"},
                                     mechanisms=["SCRAM-SHA-512"]) as b:
        assert b.client_config("alice")["security.protocol"] == "SASL_SSL"
        assert produce_and_read(b.client_config("alice"), "sub-secure") == [b"r%d" % i for i in range(20)]
        # the SCRAM user was stored salted in the child's metadata file before it started
        stored = json.load(open(os.path.join(b.log_dir, "__pykbroker_metadata.json")))
        assert list(stored["user_scram_credentials"]["alice"]) == ["SCRAM-SHA-512"]
        assert "alice-secret" not in json.dumps(stored)
        # introspection through the protocol authenticates too
        assert [r.value for r in b.records("sub-secure", 0)][:2] == [b"r0", b"r1"]
        bad = AdminClient({**b.client_config("alice", password="wrong"), "socket.timeout.ms": 3000})
        with pytest.raises(KafkaException):
            bad.list_topics(timeout=3)


def properties(path):
    out = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").partition("=")
        out[k] = v
    return out


@requires_zookeeper
@pytest.mark.parametrize("launcher", ["cluster-up"])   # names a cluster: the cluster cost class (tests/conftest.py)
def test_cluster_up_with_security(launcher):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-m", "pykbroker", "cluster", "up", "--brokers", "2", "--json",
                             "--security", "SASL_PLAINTEXT", "--user", "alice=alice-secret",
                             "--mechanisms", "SCRAM-SHA-256", "--override", "default.replication.factor=2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("{"), (line, proc.stderr.read() if proc.poll() is not None else "")
        info = json.loads(line)
        sec = info["security"]
        assert sec["protocol"] == "SASL_PLAINTEXT" and sec["users"] == ["alice"]
        props = properties(sec["client_properties"]["alice"])
        assert props["security.protocol"] == "SASL_PLAINTEXT" and props["sasl.mechanism"] == "SCRAM-SHA-256"
        assert props["bootstrap.servers"] == info["bootstrap_servers"]
        cfg = {"bootstrap.servers": info["bootstrap_servers"], "security.protocol": "SASL_PLAINTEXT",
               "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret"}
        a = AdminClient(cfg)
        a.create_topics([NewTopic("up-secure", 1, 2)])["up-secure"].result(20)
        p = Producer({**cfg, "acks": "all"})   # answered once the follower fetched (authenticated)
        p.produce("up-secure", b"v")
        assert p.flush(20) == 0
        md = a.list_topics("up-secure", timeout=10).topics["up-secure"].partitions[0]
        assert sorted(md.isrs) == [1, 2]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


@requires_zookeeper
@pytest.mark.parametrize("launcher", ["plugin-cluster"])   # names a cluster: the cluster cost class
def test_kafka_secure_cluster_fixture(launcher, kafka_secure_cluster):
    """The plugin's secured cluster: a topic replicated 3 times read back as alice."""
    cfg = kafka_secure_cluster.client_config("alice", "SCRAM-SHA-512")
    assert cfg["security.protocol"] == "SASL_SSL"
    a = AdminClient(cfg)
    a.create_topics([NewTopic("fixture-rf3", 1, 3)])["fixture-rf3"].result(20)
    p = Producer({**cfg, "acks": "all"})
    p.produce("fixture-rf3", b"v")
    assert p.flush(20) == 0
    assert sorted(a.list_topics("fixture-rf3", timeout=10).topics["fixture-rf3"].partitions[0].isrs) == [1, 2, 3]


@requires_zookeeper
@pytest.mark.parametrize("launcher", ["mtls-cluster"])   # names a cluster: the cluster cost class
def test_mtls_cluster(launcher, tmp_path):
    """SSL with ssl.client.auth=required between the brokers too: each presents its keystore
    certificate to the others; replication and a client with its own certificate work."""
    from pykbroker.local.cluster import Cluster
    with Cluster(2, data_dir=str(tmp_path / "c"), security="SSL", overrides={"ssl.client.auth": "required"}) as c:
        cert, key = c.security.ca.issue("client1", server=False).write(str(tmp_path), "client")
        cfg = {**c.client_config(), "ssl.certificate.location": cert, "ssl.key.location": key}
        a = AdminClient(cfg)
        a.create_topics([NewTopic("mtls", 1, 2)])["mtls"].result(20)
        p = Producer({**cfg, "acks": "all"})
        p.produce("mtls", b"v")
        assert p.flush(20) == 0
        assert sorted(a.list_topics("mtls", timeout=10).topics["mtls"].partitions[0].isrs) == [1, 2]
        # no client certificate: refused at the handshake
        bare = AdminClient({**c.client_config(), "socket.timeout.ms": 3000})
        with pytest.raises(KafkaException):
            bare.list_topics(timeout=3)
