"""OAUTHBEARER as sasl.mechanism.inter.broker.protocol: each broker of a ZooKeeper cluster makes
its own unsigned token from its listener's OAuthBearerLoginModule options
(unsecuredLoginStringClaim_sub, Kafka's unsecured login) and authenticates to the others with it;
the followers replicate (a record acknowledged with acks=all on a topic of replication factor 2
is read back, both replicas in the ISR), and a broker whose JAAS names no subject stops at
start-up."""
import time
import uuid

import pytest

from tests import needs
from tests.polling import poll_values
from tests.cluster.helpers import requires_zookeeper

needs.module("confluent_kafka")
pytestmark = requires_zookeeper


def test_cluster_replicates_over_oauthbearer(tmp_path):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from pykbroker.local.cluster import Cluster
    with Cluster(2, data_dir=str(tmp_path), security="SASL_PLAINTEXT", mechanisms=["OAUTHBEARER"],
                 users={"alice": ""}, overrides={"offsets.topic.replication.factor": "2"}) as c:
        cfg = c.client_config("alice", "OAUTHBEARER")
        topic = "ob-ib-" + uuid.uuid4().hex[:6]
        admin = AdminClient(cfg)
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
        p = Producer({**cfg, "acks": "all", "message.timeout.ms": 20000})
        p.produce(topic, b"replicated over OAUTHBEARER")
        assert p.flush(25) == 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            md = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
            if sorted(md.isrs) == [1, 2]:
                break
            time.sleep(0.3)
        assert sorted(md.isrs) == [1, 2] and sorted(md.replicas) == [1, 2]
        con = Consumer({**cfg, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
        con.subscribe([topic])
        try:
            got = poll_values(con, 1, 30)
        finally:
            con.close()
        assert got == [b"replicated over OAUTHBEARER"]


def test_broker_token_needs_a_subject():
    from pykbroker.config import BrokerConfig, ConfigError
    from pykbroker.security.client import InterBrokerSecurity
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "zookeeper.connect": "127.0.0.1:1",
            "security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}
    key = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
    with pytest.raises(ConfigError, match="sub"):
        InterBrokerSecurity.from_config(BrokerConfig({**base, key: module + ";"}))
    sec = InterBrokerSecurity.from_config(BrokerConfig(
        {**base, key: module + ' unsecuredLoginStringClaim_sub="kafka-broker" unsecuredLoginExtension_traceId="t1";'}))
    assert sec.principal == "User:kafka-broker"
    token = sec.sasl_client().first()
    assert token.startswith(b"n,,\x01auth=Bearer ") and b"\x01traceId=t1\x01\x01" in token
    # the server side (Kafka's unsecured validator) accepts it with that principal
    from pykbroker.security.oauthbearer import OAuthBearerServer
    srv = OAuthBearerServer({}, lambda: int(time.time() * 1000))
    assert srv.evaluate(token) == b"" and srv.authorization_id == "kafka-broker"


def test_token_iat_is_never_in_the_future():
    """iat is truncated to the millisecond (Kafka's time.milliseconds() / 1000.0): a token made
    at x.0006 s must pass a validator reading the clock in the same millisecond."""
    import base64
    import json

    from pykbroker.security.client import OAuthBearerClient
    from pykbroker.security.oauthbearer import OAuthBearerServer
    now = 1_900_000_000.0006
    tok = OAuthBearerClient({"unsecuredLoginStringClaim_sub": "b"}, now_s=now).first()
    jwt = tok.split(b"Bearer ")[1].split(b"\x01")[0].decode()
    claims = json.loads(base64.urlsafe_b64decode(jwt.split(".")[1] + "=="))
    assert claims["iat"] * 1000 <= now * 1000 and claims["exp"] - claims["iat"] == 3600
    srv = OAuthBearerServer({}, lambda: int(now * 1000))
    assert srv.evaluate(tok) == b"" and srv.authorization_id == "b"
