"""CreateAcls / DescribeAcls / DeleteAcls through confluent-kafka's AdminClient (librdkafka) and
raw requests: Kafka's filter semantics, per-binding validation, SECURITY_DISABLED without an
authorizer, CLUSTER ALTER/DESCRIBE required, bindings kept across a restart."""
import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import WireClient

ck = needs.module("confluent_kafka.admin")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   ResourcePatternType, ResourceType)

AUTH = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}


def _admin(b):
    return ck.AdminClient({"bootstrap.servers": b.bootstrap_servers})


def _b(name, principal="User:alice", op=AclOperation.READ, perm=AclPermissionType.ALLOW,
       rtype=ResourceType.TOPIC, pattern=ResourcePatternType.LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def _f(name=None, rtype=ResourceType.ANY, pattern=ResourcePatternType.ANY, principal=None, host=None,
       op=AclOperation.ANY, perm=AclPermissionType.ANY):
    return AclBindingFilter(rtype, name, pattern, principal, host, op, perm)


def _create(admin, bindings):
    out = {}
    for b, fut in admin.create_acls(bindings, request_timeout=10).items():
        try:
            fut.result()
            out[b] = None
        except KafkaException as e:
            out[b] = e.args[0]
    return out


def _key(b):
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


@pytest.fixture
def broker(tmp_path):
    b = pykbroker.Broker(log_dir=tmp_path / "data", config={**TEST_CONFIG, **AUTH}).start()
    try:
        yield b
    finally:
        b.stop()


def test_create_describe_delete(broker):
    admin = _admin(broker)
    lit, star, pre, grp = (_b("foo-bar"), _b("*"), _b("foo-", pattern=ResourcePatternType.PREFIXED),
                           _b("g", rtype=ResourceType.GROUP, principal="User:bob", perm=AclPermissionType.DENY))
    assert _create(admin, [lit, star, pre, grp]) == {lit: None, star: None, pre: None, grp: None}
    assert _create(admin, [lit]) == {lit: None}   # again: a success that changes nothing

    def describe(flt):
        return sorted(map(_key, admin.describe_acls(flt, request_timeout=10).result()))
    assert describe(_f()) == sorted(map(_key, [lit, star, pre, grp]))
    assert describe(_f("foo-bar", pattern=ResourcePatternType.MATCH)) == sorted(map(_key, [lit, star, pre]))
    assert describe(_f("foo-bar")) == [_key(lit)]
    assert describe(_f(pattern=ResourcePatternType.PREFIXED)) == [_key(pre)]
    assert describe(_f(rtype=ResourceType.GROUP)) == [_key(grp)]
    assert describe(_f(principal="User:bob", perm=AclPermissionType.DENY)) == [_key(grp)]
    assert describe(_f(op=AclOperation.WRITE)) == []

    deleted = admin.delete_acls([_f("foo-bar", pattern=ResourcePatternType.MATCH, rtype=ResourceType.TOPIC)],
                                request_timeout=10)
    (res,) = deleted.values()
    assert sorted(map(_key, res.result())) == sorted(map(_key, [lit, star, pre]))
    assert describe(_f()) == [_key(grp)]


def test_invalid_bindings_answered_each(broker):
    admin = _admin(broker)
    good = _b("t")
    bad_cluster = _b("other", rtype=ResourceType.BROKER, op=AclOperation.ALTER)   # librdkafka's CLUSTER
    out = _create(admin, [good, bad_cluster])
    assert out[good] is None
    assert out[bad_cluster].code() == 42   # INVALID_REQUEST
    assert "kafka-cluster" in out[bad_cluster].str()
    assert sorted(map(_key, admin.describe_acls(_f(), request_timeout=10).result())) == [_key(good)]


def test_raw_validation_and_persistence(tmp_path):
    """Per-binding INVALID_REQUEST with Kafka's messages (nothing of a refused binding stored);
    the valid ones survive a restart."""
    cfg = {**TEST_CONFIG, **AUTH}
    creations = [
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
         "operation": 3, "permission_type": 3},
        {"resource_type": 2, "resource_name": "", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
         "operation": 3, "permission_type": 3},
        {"resource_type": 9, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
         "operation": 3, "permission_type": 3},
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "alice", "host": "*",
         "operation": 3, "permission_type": 3},
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a", "host": "",
         "operation": 3, "permission_type": 3},
        {"resource_type": 4, "resource_name": "kafka-cluster", "resource_pattern_type": 3, "principal": "User:a",
         "host": "10.0.0.1", "operation": 12, "permission_type": 2},
    ]
    b = pykbroker.Broker(log_dir=tmp_path / "d", config=cfg).start()
    try:
        with WireClient(b) as c:
            r = c.request(30, 3, {"creations": creations})
            assert [(x["error_code"], x["error_message"]) for x in r["results"]] == [
                (0, ""), (42, "Invalid empty resource name"), (42, "Invalid resourceType UNKNOWN"),
                (42, "Could not parse principal from `alice` (no colon is present separating the principal type "
                     "from the principal name)"),
                (42, "Host pattern cannot be null or empty"), (0, "")]
            # a creation Kafka cannot build (a MATCH pattern, an ANY operation) fails the whole
            # request, and stores nothing of it
            bad = dict(creations[0], resource_name="u", resource_pattern_type=2)
            r = c.request(30, 3, {"creations": [dict(creations[0], resource_name="u"), bad]})
            assert [(x["error_code"], x["error_message"]) for x in r["results"]] == [(-1, None), (-1, None)]
            # a 0 (UNKNOWN) code fails Kafka's request validation: the connection closes
            assert c.closed_after(30, 3, {"creations": [dict(creations[0], operation=0)]})
    finally:
        b.stop()
    b = pykbroker.Broker(log_dir=tmp_path / "d", config=cfg).start()
    try:
        with WireClient(b) as c:
            r = c.request(29, 1, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
            assert r["error_code"] == 0
            got = sorted((x["resource_type"], x["resource_name"], x["pattern_type"], a["principal"], a["host"],
                          a["operation"], a["permission_type"]) for x in r["resources"] for a in x["acls"])
            assert got == [(2, "t", 3, "User:a", "*", 3, 3), (4, "kafka-cluster", 3, "User:a", "10.0.0.1", 12, 2)]
            # a filter with an unknown element deletes nothing
            r = c.request(31, 2, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                                             "pattern_type_filter": 9, "principal_filter": None, "host_filter": None,
                                             "operation": 1, "permission_type": 1}]})
            assert r["filter_results"][0]["error_code"] == 42
            r = c.request(29, 2, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
            assert len(r["resources"]) == 2
    finally:
        b.stop()


def test_security_disabled_without_authorizer(tmp_path):
    b = pykbroker.Broker(log_dir=tmp_path / "d", config=TEST_CONFIG).start()
    try:
        admin = _admin(b)
        with WireClient(b) as c:   # (librdkafka's describe_acls reports a top-level error as no binding)
            r = c.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                                  "principal_filter": None, "host_filter": None, "operation": 1,
                                  "permission_type": 1})
        assert (r["error_code"], r["error_message"]) == (54, "No Authorizer is configured.")
        (fut,) = admin.create_acls([_b("t")], request_timeout=10).values()
        with pytest.raises(KafkaException) as e:
            fut.result()
        assert e.value.args[0].code() == 54 and "No Authorizer is configured." in e.value.args[0].str()
    finally:
        b.stop()


def test_cluster_alter_and_describe_required(tmp_path):
    """A principal without CLUSTER ALTER/DESCRIBE is refused (ANONYMOUS is no super user here)."""
    cfg = {**TEST_CONFIG, "authorizer.class.name": AUTH["authorizer.class.name"]}
    b = pykbroker.Broker(log_dir=tmp_path / "d", config=cfg).start()
    try:
        with WireClient(b) as c:
            r = c.request(30, 2, {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                                              "principal": "User:a", "host": "*", "operation": 3,
                                              "permission_type": 3}]})
            assert r["results"][0]["error_code"] == 31
            r = c.request(29, 2, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
            assert r["error_code"] == 31
    finally:
        b.stop()
