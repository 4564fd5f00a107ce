"""The sans-IO pieces of a secured cluster: the broker's SASL client halves against pykbroker's
servers, and the ZooKeeper encodings compared with what Apache Kafka 3.9.1 (ZooKeeper mode)
wrote for the same requests (recorded from the oracle: docs/security.md)."""
import pytest

from pykbroker.acl import bindings as B
from pykbroker.cluster.zookeeper import security_store as S
from pykbroker.security.client import PlainClient, ScramClient
from pykbroker.security.errors import AuthenticationFailed
from pykbroker.security.plain import PlainServer
from pykbroker.security.scram import ScramServer, new_credential


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mech):
    cred = new_credential(mech, "pw,=1")
    server = ScramServer(mech, lambda u, m: cred if u == "br=ok,er" else None)
    client = ScramClient(mech, "br=ok,er", "pw,=1")
    client.step(server.evaluate(client.step(server.evaluate(client.first()))))
    assert client.complete and server.authorization_id == "br=ok,er"
    server = ScramServer(mech, lambda u, m: cred)
    client = ScramClient(mech, "br=ok,er", "wrong")
    with pytest.raises(AuthenticationFailed):
        server.evaluate(client.step(server.evaluate(client.first())))


def test_scram_client_refuses_a_server_without_the_key():
    """The server's final message proves it holds ServerKey: a forged one is refused."""
    mech = "SCRAM-SHA-256"
    cred = new_credential(mech, "pw")
    server = ScramServer(mech, lambda u, m: cred)
    client = ScramClient(mech, "broker", "pw")
    server.evaluate(client.step(server.evaluate(client.first())))
    with pytest.raises(AuthenticationFailed):
        client.step(b"v=" + b"A" * 44)


def test_plain_client_against_the_server():
    server = PlainServer({"broker": "secret"})
    server.evaluate(PlainClient("broker", "secret").first())
    assert server.authorization_id == "broker"
    with pytest.raises(AuthenticationFailed):
        PlainServer({"broker": "secret"}).evaluate(PlainClient("broker", "wrong").first())


def test_user_names_sanitized_as_kafka():
    assert S.sanitize("ca rol*") == "ca%20rol%2A"            # what Kafka 3.9.1 wrote
    assert S.sanitize("a.b-c_d") == "a.b-c_d"
    assert S.sanitize("é~/") == "%C3%A9%7E%2F"
    assert S.desanitize(S.sanitize("ca rol*é")) == "ca rol*é"


def test_acl_znodes_as_kafka_wrote_them():
    assert S.encode_acls([("User:alice", "*", B.ALL, B.DENY)]) == (
        b'{"acls":[{"principal":"User:alice","permissionType":"Deny","host":"*","operation":"All"}],"version":1}')
    assert S.encode_acls([("User:bob", "*", B.IDEMPOTENT_WRITE, B.ALLOW)]) == (
        b'{"acls":[{"principal":"User:bob","permissionType":"Allow","host":"*","operation":"IdempotentWrite"}],'
        b'"version":1}')
    assert S.resource_path(B.TRANSACTIONAL_ID, "tx", B.LITERAL) == "/kafka-acl/TransactionalId/tx"
    assert S.resource_path(B.TOPIC, "acl-", B.PREFIXED) == "/kafka-acl-extended/prefixed/Topic/acl-"
    assert S.encode_acl_change(B.TOPIC, "acl-topic", B.LITERAL) == ("/kafka-acl-changes", b"TOPIC:acl-topic")
    assert S.encode_acl_change(B.TOPIC, "acl-", B.PREFIXED) == (
        "/kafka-acl-extended-changes", b'{"version":1,"resourceType":"TOPIC","name":"acl-","patternType":"PREFIXED"}')
    # and read back (also Kafka's own spellings)
    got = S.decode_acls(B.CLUSTER, "kafka-cluster", B.LITERAL,
                        b'{"acls":[{"principal":"User:bob","permissionType":"Allow","host":"*",'
                        b'"operation":"IdempotentWrite"}],"version":1}')
    assert got == {B.AclBinding(B.CLUSTER, "kafka-cluster", B.LITERAL, "User:bob", "*", B.IDEMPOTENT_WRITE, B.ALLOW)}
    assert S.decode_acl_change("/kafka-acl-changes", b"GROUP:g1") == (B.GROUP, "g1", B.LITERAL)
    assert S.decode_acl_change("/kafka-acl-extended-changes",
                               b'{"version":1,"resourceType":"TOPIC","name":"a:b","patternType":"PREFIXED"}') == (
        B.TOPIC, "a:b", B.PREFIXED)


def test_scram_entity_and_notice_as_kafka_wrote_them():
    assert S.encode_config_change("users/ca%20rol%2A") == b'{"version":2,"entity_path":"users/ca%20rol%2A"}'
    cfg = {"SCRAM-SHA-512": "salt=MDEy,stored_key=qJ2e,server_key=BYT9,iterations=8192", "producer_byte_rate": "1024"}
    assert S.decode_entity_config(S.encode_entity_config(cfg)) == cfg
    assert S.encode_entity_config({"SCRAM-SHA-512": "x"}) == b'{"version":1,"config":{"SCRAM-SHA-512":"x"}}'
