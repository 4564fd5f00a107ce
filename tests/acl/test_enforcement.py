"""ACLs enforced on the main APIs, seen by real clients over SASL_PLAINTEXT (PLAIN users): a user
without ACLs is refused produce and consume with the client's authorization error, then allowed
once the super user adds the ACL through confluent-kafka's AdminClient; the super user needs none;
kafka-python sees the same; Metadata hides what the user may not describe; authorized operations
are the real ones."""
import uuid

import pytest

from tests import needs

needs.module("cryptography")
ck = needs.module("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,  # noqa: E402
                                   ResourcePatternType, ResourceType)

from tests.acl.clients import authorizing_broker, consume, produce as _produce  # noqa: E402

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def broker():
    with authorizing_broker(USERS) as b:
        yield b


def _allow(b, *bindings):
    admin = AdminClient(b.client_config("admin"))
    for fut in admin.create_acls(list(bindings), request_timeout=10).values():
        fut.result()


def _acl(rtype, name, user, op, pattern=ResourcePatternType.LITERAL, perm=AclPermissionType.ALLOW):
    return AclBinding(rtype, name, pattern, "User:" + user, "*", op, perm)


def _consume(cfg, topic, group, n, timeout=15):
    """Stops at an authorization error; commits what it read."""
    return consume(cfg, topic, group, n, timeout, stop_when_denied=True, commit=True)


def test_produce_and_consume_denied_then_allowed(broker):
    topic = "orders-" + uuid.uuid4().hex[:6]
    broker.create_topic(topic)
    values = [b"v%d-" % i + bytes(range(256)) for i in range(3)]
    alice = broker.client_config("alice")
    errs = _produce(alice, topic, values)
    assert errs and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs), errs

    _allow(broker, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    assert _produce(alice, topic, values) == [None] * 3

    group = "g-" + topic
    got, errors = _consume(alice, topic, group, 3, timeout=8)
    assert not got and errors and errors[-1] in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                                 KafkaError.TOPIC_AUTHORIZATION_FAILED), errors
    _allow(broker, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.READ),
           _acl(ResourceType.GROUP, group, "alice", AclOperation.READ))
    got, errors = _consume(alice, topic, group, 3)
    assert got == values, errors


def test_super_user_needs_no_acl(broker):
    topic = "admin-" + uuid.uuid4().hex[:6]
    broker.create_topic(topic)
    cfg = broker.client_config("admin")
    assert _produce(cfg, topic, [b"x", b"y"]) == [None, None]
    got, errors = _consume(cfg, topic, "g-" + topic, 2)
    assert got == [b"x", b"y"], errors


def test_deny_wins_and_prefixed_acls(broker):
    tag = uuid.uuid4().hex[:6]
    ok, secret = "fin-%s-ledger" % tag, "fin-%s-secret" % tag
    broker.create_topic(ok)
    broker.create_topic(secret)
    _allow(broker, _acl(ResourceType.TOPIC, "fin-%s-" % tag, "bob", AclOperation.WRITE, ResourcePatternType.PREFIXED),
           _acl(ResourceType.TOPIC, secret, "bob", AclOperation.WRITE, perm=AclPermissionType.DENY))
    bob = broker.client_config("bob")
    assert _produce(bob, ok, [b"a"]) == [None]
    (err,) = _produce(bob, secret, [b"a"])
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_undescribable_topics(broker):
    tag = uuid.uuid4().hex[:6]
    mine, other = "mine-" + tag, "other-" + tag
    broker.create_topic(mine)
    broker.create_topic(other)
    admin_view = AdminClient(broker.client_config("admin")).list_topics(timeout=10).topics
    assert mine in admin_view and other in admin_view
    _allow(broker, _acl(ResourceType.TOPIC, mine, "alice", AclOperation.READ))   # READ implies DESCRIBE
    view = AdminClient(broker.client_config("alice")).list_topics(timeout=10).topics
    assert mine in view and other not in view
    # a named topic the user may not describe: TOPIC_AUTHORIZATION_FAILED, existing or not
    md = AdminClient(broker.client_config("alice")).list_topics(topic=other, timeout=10).topics
    assert md[other].error is not None and md[other].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    md = AdminClient(broker.client_config("alice")).list_topics(topic="nope-" + tag, timeout=10).topics
    assert md["nope-" + tag].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_are_real(broker):
    """describe_topics / describe_cluster with include_authorized_operations."""
    from confluent_kafka import TopicCollection
    tag = uuid.uuid4().hex[:6]
    topic = "ops-" + tag
    broker.create_topic(topic)
    _allow(broker, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    admin = AdminClient(broker.client_config("alice"))
    (fut,) = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                   request_timeout=10).values()
    ops = set(fut.result().authorized_operations)
    assert ops == {AclOperation.WRITE, AclOperation.DESCRIBE}
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result()
    assert not cluster.authorized_operations
    super_admin = AdminClient(broker.client_config("admin"))
    cluster = super_admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result()
    assert AclOperation.ALTER in set(cluster.authorized_operations)


def test_kafka_python_denied_then_allowed(broker):
    kafka = needs.module("kafka")
    from kafka.errors import TopicAuthorizationFailedError
    topic = "kp-" + uuid.uuid4().hex[:6]
    broker.create_topic(topic)
    cfg = broker.kafka_python_config("bob")
    p = kafka.KafkaProducer(**cfg, retries=0, max_block_ms=5000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send(topic, b"x").get(timeout=10)
    finally:
        p.close()
    _allow(broker, _acl(ResourceType.TOPIC, topic, "bob", AclOperation.WRITE))
    p = kafka.KafkaProducer(**cfg, retries=0, max_block_ms=5000)
    try:
        md = p.send(topic, b"kp-value").get(timeout=10)
        assert md.offset == 0
    finally:
        p.close()
    c = kafka.KafkaConsumer(**broker.kafka_python_config("admin"), auto_offset_reset="earliest",
                            consumer_timeout_ms=5000)
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    # the whole log is that one record (end offset 1): read it, then stop, rather than waiting
    # 5 s for more (a missing record still ends the loop at the timeout, empty)
    assert c.end_offsets([tp]) == {tp: 1}
    got = []
    for m in c:
        got.append(m.value)
        if m.offset >= 0:
            break
    assert got == [b"kp-value"]
    c.close()


def test_deny_after_allow_holds_on_the_next_request_of_an_open_connection(broker):
    """Decisions are cached per connection (acl/check.py) until the bindings change: a DENY
    created through CreateAcls refuses the very next Produce of a producer whose connection is
    already open and allowed, on that same connection (librdkafka's statistics count one
    connect).  Deleting it lets the producer write again.  What the log holds is read back as admin."""
    import json
    import time
    topic = "cache-" + uuid.uuid4().hex[:6]
    broker.create_topic(topic)
    _allow(broker, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    stats = []
    p = ck.Producer({**broker.client_config("alice"), "retries": 0, "message.timeout.ms": 5000,
                     "linger.ms": 0, "topic.metadata.refresh.interval.ms": 100,
                     "statistics.interval.ms": 100, "stats_cb": stats.append})
    errors = []

    def send(value):
        p.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
        return errors[-1]

    assert send(b"allowed") is None
    admin = AdminClient(broker.client_config("admin"))
    deny = _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE, perm=AclPermissionType.DENY)
    _allow(broker, deny)
    err = send(b"denied")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.WRITE, AclPermissionType.DENY)
    for fut in admin.delete_acls([flt], request_timeout=10).values():
        assert len(fut.result()) == 1
    # librdkafka refuses produce() itself for a topic its last Produce was denied on, until its
    # next metadata refresh (100 ms here) finds the topic fine: then the Produce goes out
    deadline = time.monotonic() + 10
    while True:
        try:
            assert send(b"allowed again") is None
            break
        except ck.KafkaException as e:
            assert e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and time.monotonic() < deadline, e
            p.poll(0.1)
    stats.clear()
    while not stats:
        p.poll(0.1)
    brokers = [b for b in json.loads(stats[-1])["brokers"].values() if b["nodeid"] >= 0]
    assert [b["connects"] for b in brokers] == [1], brokers
    got, errs = _consume(broker.client_config("admin"), topic, "g-" + topic, 2, timeout=10)
    assert got == [b"allowed", b"allowed again"], errs
