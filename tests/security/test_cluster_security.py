"""A secured pykbroker cluster, with real clients: SASL_SSL + SCRAM-SHA-512 between the brokers
and for the clients, Kafka's ACL authorizer on, credentials and bindings in ZooKeeper.

One cluster for the module (ZooKeeper + 4 brokers): brokers 1-3 are healthy, broker 4 was given
a wrong password for its own inter-broker login.  Kept to one start: a secured cluster costs the
same as a plain one to start, and the tests share it in file order (the leader kill comes last).
"""
import json
import os
import time

import pytest

from tests import needs
from tests.cluster.helpers import requires_zookeeper, wait_for
from tests.security.clients import set_broker_configs

ck = needs.module("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AclOperation, AclPermissionType, AdminClient, NewTopic,  # noqa: E402
                                   ResourcePatternType, ResourceType, ScramMechanism)

pytestmark = requires_zookeeper

MECH = "SCRAM-SHA-512"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
BAD_BROKER = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from pykbroker.local.cluster import Cluster
    bad_jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                'username="broker" password="not-the-password";')
    c = Cluster(4, data_dir=str(tmp_path_factory.mktemp("seccluster")), security="SASL_SSL", users=USERS,
                mechanisms=[MECH],
                overrides={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                           "super.users": "User:admin",
                           # the bad broker leaves the ISR within seconds, not Kafka's 30 s
                           "replica.lag.time.max.ms": "3000",
                           # a killed leader is noticed in seconds (ZooKeeper session expiry)
                           "zookeeper.session.timeout.ms": "6000",
                           "offsets.topic.replication.factor": "3",
                           "transaction.state.log.replication.factor": "3"},
                broker_overrides={BAD_BROKER: {"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": bad_jaas}})
    with c:
        yield c


def conf(cluster, user="admin", brokers=None, password=None):
    cfg = cluster.client_config(user, MECH, password)
    if brokers is not None:
        cfg["bootstrap.servers"] = ",".join(cluster.broker(b).bootstrap for b in brokers)
    return cfg


def zk(cluster):
    from kazoo.client import KazooClient
    z = KazooClient(hosts=cluster.zookeeper_connect, timeout=10)
    z.start(timeout=10)
    return z


def wire_to(cluster, broker_id, user="admin"):
    """A raw client authenticated as ``user`` on that broker (pykbroker.protocol.wire)."""
    b = cluster.broker(broker_id)
    return cluster.security.wire_client(b.host, b.port, user=user, mechanism=MECH)


def create_topic(cluster, name, assignment):
    a = AdminClient(conf(cluster, brokers=[1]))
    a.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)])[name].result(20)


def test_registrations_carry_each_listener_and_its_protocol(cluster):
    z = zk(cluster)
    try:
        for b in cluster.brokers:
            reg = json.loads(z.get("/brokers/ids/%d" % b.broker_id)[0])
            assert reg["endpoints"] == ["SASL_SSL://%s" % b.bootstrap]
            assert reg["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL"}
            # Kafka's top-level host/port are the PLAINTEXT endpoint's: none here
            assert reg["host"] is None and reg["port"] == -1
    finally:
        z.stop()


def test_acks_all_replicated_over_sasl_ssl_and_read_back(cluster):
    """RF 3 on brokers 1-3: acks=all is answered only once both followers fetched the records,
    which they can only do authenticated (SCRAM as the broker user) over TLS."""
    create_topic(cluster, "secure-rf3", [[1, 2, 3]])
    p = Producer({**conf(cluster), "acks": "all", "enable.idempotence": True})
    errors = []
    for i in range(300):
        p.produce("secure-rf3", b"value-%d" % i, key=b"k%d" % i,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []
    md = AdminClient(conf(cluster)).list_topics("secure-rf3", timeout=10).topics["secure-rf3"].partitions[0]
    assert sorted(md.isrs) == [1, 2, 3]
    assert read_all(cluster, "secure-rf3") == [b"value-%d" % i for i in range(300)]


def test_large_fetch_answers_over_tls_reach_followers_byte_for_byte(cluster):
    """Batches of several hundred KiB: a follower's Fetch answers are read over TLS straight
    into their frame (cluster/interbroker.py, security/tls_transport.py), and every replica's
    log holds the leader's bytes exactly."""
    create_topic(cluster, "secure-large", [[1, 2, 3]])
    p = Producer({**conf(cluster), "acks": "all", "linger.ms": 50, "batch.size": 1 << 20})
    values = [os.urandom(100_000) for _ in range(24)]
    errors = []
    for v in values:
        p.produce("secure-large", v, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(60) == 0 and errors == []

    def log_bytes(b):
        with open(os.path.join(b.log_dir, "secure-large-0", "%020d.log" % 0), "rb") as f:
            return f.read()
    logs = [log_bytes(b) for b in cluster.brokers[:3]]
    assert len(logs[0]) > sum(map(len, values)) and logs[0] == logs[1] == logs[2]
    assert read_all(cluster, "secure-large", n_expected=len(values)) == values


def read_all(cluster, topic, brokers=None, n_expected=300):
    c = Consumer({**conf(cluster, brokers=brokers), "group.id": "reader-%s" % time.monotonic(),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < n_expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


def test_scram_user_created_through_one_broker_logs_in_on_another(cluster):
    def logs_in(broker):
        a = AdminClient({**conf(cluster, user="carol", password="carol-secret", brokers=[broker]),
                         "socket.timeout.ms": 3000})
        try:
            a.list_topics(timeout=3)
            return True
        except KafkaException:
            return False

    assert not logs_in(2)   # no such user yet: the login fails (the test can fail)
    # AlterUserScramCredentials sent to broker 1 itself (a client library picks any broker for
    # an admin request: the raw client pins it), salted as a client salts it
    import os
    from pykbroker.security.scram import salted_password
    salt = os.urandom(32)
    with wire_to(cluster, 1) as c:
        resp = c.request(51, 0, {"deletions": [], "upsertions": [
            {"name": "carol", "mechanism": 2, "iterations": 8192, "salt": salt,
             "salted_password": salted_password(MECH, "carol-secret", salt, 8192)}]})
    assert [r["error_code"] for r in resp["results"]] == [0]
    t0 = time.monotonic()
    wait_for(lambda: logs_in(2), 5, "carol logs in on broker 2")
    assert time.monotonic() - t0 < 5
    # every broker answers DescribeUserScramCredentials the same
    for b in (2, 3):
        admin_b = AdminClient(conf(cluster, brokers=[b]))   # kept: a collected client ends its futures
        d = admin_b.describe_user_scram_credentials(["carol"])["carol"].result(10)
        assert [(i.mechanism, i.iterations) for i in d.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    # stored as Kafka's ZK mode stores it (salted keys only) with its change notice
    z = zk(cluster)
    try:
        node = json.loads(z.get("/config/users/carol")[0])
        assert node["version"] == 1 and list(node["config"]) == [MECH]
        fields = dict(kv.split("=", 1) for kv in node["config"][MECH].split(","))
        assert sorted(fields) == ["iterations", "salt", "server_key", "stored_key"] and fields["iterations"] == "8192"
        assert "carol-secret" not in json.dumps(node)
        notices = [json.loads(z.get("/config/changes/" + c)[0]) for c in z.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/carol"} in notices
    finally:
        z.stop()


def test_acl_created_through_one_broker_holds_on_another(cluster):
    create_topic(cluster, "acl-topic", [[1, 2, 3]])

    def alice_sees(broker):
        """Metadata for the topic as alice, answered by that broker (raw client: pinned)."""
        from pykbroker.protocol.wire import metadata
        with wire_to(cluster, broker, user="alice") as c:
            return metadata(c, ["acl-topic"])["topics"][0]["error_code"] != 29   # TOPIC_AUTHORIZATION_FAILED

    def confluent_alice_sees():
        """The same through confluent-kafka (whichever broker it asks: all agree by then)."""
        a = AdminClient(conf(cluster, user="alice"))
        t = a.list_topics("acl-topic", timeout=10).topics["acl-topic"]
        return t.error is None or t.error.code() != ck.KafkaError.TOPIC_AUTHORIZATION_FAILED

    def create_acl_through_1(name, pattern, operation, permission):
        # CreateAcls sent to broker 1 itself (the raw client pins the broker; codes are Kafka's:
        # TOPIC 2, LITERAL 3 / PREFIXED 4, ALL 2 / DESCRIBE 8, DENY 2 / ALLOW 3)
        with wire_to(cluster, 1) as c:
            resp = c.request(30, 3, {"creations": [{
                "resource_type": 2, "resource_name": name, "resource_pattern_type": pattern,
                "principal": "User:alice", "host": "*", "operation": operation, "permission_type": permission}]})
        assert [r["error_code"] for r in resp["results"]] == [0]

    from pykbroker.protocol.wire import metadata
    # one connection to broker 3 held open throughout: its cached decisions (acl/check.py) are
    # dropped when a change arrives through ZooKeeper's notifications, as a new connection's are
    with wire_to(cluster, 3, user="alice") as held:
        def held_sees():
            return metadata(held, ["acl-topic"])["topics"][0]["error_code"] != 29

        assert not alice_sees(3) and not held_sees() and not confluent_alice_sees()
        create_acl_through_1("acl-", 4, 8, 3)
        wait_for(lambda: alice_sees(3), 1.0, "the prefixed ALLOW through broker 1 holds on broker 3")
        wait_for(held_sees, 1.0, "the ALLOW holds on broker 3's open connection")
        assert confluent_alice_sees()
        create_acl_through_1("acl-topic", 3, 2, 2)
        wait_for(lambda: not alice_sees(3), 1.0, "the literal DENY through broker 1 holds on broker 3")
        wait_for(lambda: not held_sees(), 1.0, "the DENY holds on broker 3's open connection")
    assert all(not alice_sees(b) for b in (2, 4)) and not confluent_alice_sees()
    z = zk(cluster)
    try:
        # the znodes byte for byte as Kafka 3.9.1's AclAuthorizer writes them (its key order)
        assert z.get("/kafka-acl-extended/prefixed/Topic/acl-")[0] == (
            b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Describe"}],'
            b'"version":1}')
        assert z.get("/kafka-acl/Topic/acl-topic")[0] == (
            b'{"acls":[{"principal":"User:alice","permissionType":"Deny","host":"*","operation":"All"}],"version":1}')
        assert sorted(z.get_children("/kafka-acl")) == sorted(z.get_children("/kafka-acl-extended/prefixed")) == [
            "Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"]
        assert json.loads(z.get("/kafka-acl-extended/prefixed/Topic/acl-")[0]) == {
            "version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Describe",
                                    "host": "*"}]}
        assert json.loads(z.get("/kafka-acl/Topic/acl-topic")[0]) == {
            "version": 1, "acls": [{"principal": "User:alice", "permissionType": "Deny", "operation": "All",
                                    "host": "*"}]}
        literal = [z.get("/kafka-acl-changes/" + c)[0] for c in z.get_children("/kafka-acl-changes")]
        assert b"TOPIC:acl-topic" in literal
        extended = [json.loads(z.get("/kafka-acl-extended-changes/" + c)[0])
                    for c in z.get_children("/kafka-acl-extended-changes")]
        assert {"version": 1, "resourceType": "TOPIC", "name": "acl-", "patternType": "PREFIXED"} in extended
    finally:
        z.stop()
    # every broker describes the same bindings
    from confluent_kafka.admin import AclBindingFilter
    f = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    for b in (2, 4):
        admin_b = AdminClient(conf(cluster, brokers=[b]))
        got = admin_b.describe_acls(f).result(10)
        assert {(x.name, x.permission_type) for x in got} == {("acl-", AclPermissionType.ALLOW),
                                                              ("acl-topic", AclPermissionType.DENY)}


def test_broker_with_wrong_inter_broker_credentials_cannot_replicate(cluster):
    create_topic(cluster, "bad-follower", [[1, BAD_BROKER]])

    def isr():
        md = AdminClient(conf(cluster)).list_topics("bad-follower", timeout=10).topics["bad-follower"]
        return sorted(md.partitions[0].isrs)

    wait_for(lambda: isr() == [1], 15, "broker %d leaves the ISR" % BAD_BROKER)
    p = Producer({**conf(cluster), "acks": "all"})
    p.produce("bad-follower", b"x")
    assert p.flush(15) == 0
    time.sleep(1.0)
    assert isr() == [1]
    log = open(cluster.broker(BAD_BROKER).log_path).read()
    assert "authentication as User:broker with SCRAM-SHA-512 on listener SASL_SSL" in log
    assert "Authentication failed during authentication due to invalid credentials" in log


def test_transaction_markers_between_brokers(cluster):
    """A transaction over partitions led by brokers 1, 2 and 3: the coordinator writes the markers
    of the partitions it does not lead with WriteTxnMarkers to their leaders, and transaction
    version 2 adds them with AddPartitionsToTxn to the coordinator: both authenticated.  A
    read_committed consumer sees the records only once every marker is written."""
    create_topic(cluster, "secure-txn", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    # a transactional id whose coordinator is a healthy broker (broker 4 cannot send markers)
    txn_id = None
    with wire_to(cluster, 1) as c:
        for i in range(40):
            resp = c.request(10, 4, {"key_type": 1, "coordinator_keys": ["secure-txn-%d" % i]})
            coord = resp["coordinators"][0]
            if coord["error_code"] == 0 and coord["node_id"] in (1, 2, 3):
                txn_id = "secure-txn-%d" % i
                break
    assert txn_id is not None
    p = Producer({**conf(cluster), "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(30):
        p.produce("secure-txn", b"t%d" % i, partition=i % 3)
    p.commit_transaction(30)
    c = Consumer({**conf(cluster), "group.id": "txn-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition("secure-txn", i, 0) for i in range(3)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    assert sorted(got) == sorted(b"t%d" % i for i in range(30))


def test_inter_broker_store_updates_must_pass_a_handshake(cluster, tmp_path):
    """Kafka's SslFactory on the inter-broker listener: a dynamic keystore or truststore update
    is accepted only if TLS handshakes between the current and the new stores succeed, so an
    update that would cut the brokers off from each other is refused (INVALID_REQUEST) and
    changes nothing; one that keeps them talking is applied, to this broker's own inter-broker
    connections too, and replication with acks=all goes on."""
    from confluent_kafka import KafkaError

    from pykbroker.security.certs import CertificateAuthority
    other = CertificateAuthority("a CA the brokers do not trust yet")
    pair = other.issue("localhost", ["localhost", "127.0.0.1", "::1"])   # the same DN and SANs
    keystore, other_ca, both = tmp_path / "ks.pem", tmp_path / "other-ca.pem", tmp_path / "both.pem"
    keystore.write_text(pair.key_pem + pair.cert_pem)
    other_ca.write_text(other.cert_pem)
    both.write_text(open(cluster.security.ca_file).read() + other.cert_pem)
    admin = AdminClient(conf(cluster, brokers=[1]))
    pre = "listener.name.sasl_ssl."

    def alter(entries):
        return set_broker_configs(admin, "1", entries)

    # a certificate from a CA the current truststore (the other brokers' too) does not hold
    err = alter({pre + "ssl.keystore.type": "PEM", pre + "ssl.keystore.location": str(keystore)})
    assert err is not None and err.code() == KafkaError.INVALID_REQUEST, err
    assert "the new keystore and the current truststore" in err.str()
    # a truststore without the CA of the certificates the brokers present
    err = alter({pre + "ssl.truststore.type": "PEM", pre + "ssl.truststore.location": str(other_ca)})
    assert err is not None and err.code() == KafkaError.INVALID_REQUEST, err
    assert "the current keystore and the new truststore" in err.str()
    # both CAs (the first step of a CA rotation): accepted
    assert alter({pre + "ssl.truststore.type": "PEM", pre + "ssl.truststore.location": str(both)}) is None
    wait_for(lambda: "inter-broker connections over SASL_SSL take the new keystore and truststore"
             in open(cluster.broker(1).log_path, errors="replace").read(), 10, "broker 1's client stores reloaded")
    create_topic(cluster, "secure-rotated", [[2, 1, 3]])
    p = Producer({**conf(cluster), "acks": "all"})
    for i in range(20):
        p.produce("secure-rotated", b"rotated-%d" % i)
    assert p.flush(30) == 0
    assert read_all(cluster, "secure-rotated", n_expected=20) == [b"rotated-%d" % i for i in range(20)]
    md = AdminClient(conf(cluster)).list_topics("secure-rotated", timeout=10).topics["secure-rotated"].partitions[0]
    assert sorted(md.isrs) == [1, 2, 3]


def test_leader_killed_every_acknowledged_record_still_there(cluster):
    md = AdminClient(conf(cluster)).list_topics("secure-rf3", timeout=10).topics["secure-rf3"].partitions[0]
    leader = md.leader
    cluster.kill(leader)
    survivors = [b for b in (1, 2, 3) if b != leader]

    def new_leader():
        try:
            p = AdminClient(conf(cluster, brokers=survivors)).list_topics("secure-rf3", timeout=5)
            lead = p.topics["secure-rf3"].partitions[0].leader
            return lead in survivors
        except KafkaException:
            return False

    wait_for(new_leader, 30, "a new leader among %s" % survivors)
    assert read_all(cluster, "secure-rf3", brokers=survivors) == [b"value-%d" % i for i in range(300)]


def test_handled_notices_older_than_the_expiry_are_purged(cluster, monkeypatch):
    """Kafka's notification listeners delete handled notices older than 15 minutes; here the
    expiry is 0 so that the ones just handled go (on this cluster's ZooKeeper, under a chroot
    of its own: the brokers' znodes are not touched)."""
    import trio

    from pykbroker.cluster import zk as Z
    from pykbroker.cluster.zookeeper import security_store as S

    class Owner:
        _scram: dict = {}
        _acls: set = set()
        _client_quotas: dict = {}

        def _publish_client_quotas(self):
            pass

    async def main():
        zs = Z.ZkSession(cluster.zookeeper_connect + "/purge-test", 10000, 10000)
        await zs.start()
        try:
            await zs.call("ensure_path", Z.CONFIG_CHANGES)
            owner = Owner()
            store = S.SecurityStore(owner, zs, events=None)
            await store.load()
            await zs.call("create", "/config/users/dave", S.encode_entity_config({"SCRAM-SHA-256": "salt=AA==,"
                          "stored_key=AA==,server_key=AA==,iterations=4096", "producer_byte_rate": "10"}))
            for _ in range(3):
                await zs.call("create", Z.CONFIG_CHANGE_PREFIX, S.encode_config_change("users/dave"), sequence=True)
            children = await zs.call("get_children", Z.CONFIG_CHANGES)
            monkeypatch.setattr(S, "NOTICE_EXPIRATION_MS", -60000)   # every handled notice is old enough
            await store.on_changes(Z.CONFIG_CHANGES, children)
            assert owner._scram == {"dave": {"SCRAM-SHA-256": "salt=AA==,stored_key=AA==,server_key=AA==,"
                                                               "iterations=4096"}}
            # the quota key of the same znode is read as dave's client quota
            assert owner._client_quotas == {(("user", "dave"),): {"producer_byte_rate": 10.0}}
            assert await zs.call("get_children", Z.CONFIG_CHANGES) == []
        finally:
            await zs.stop()

    trio.run(main)
