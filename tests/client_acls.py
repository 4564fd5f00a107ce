"""What the ACL admin scenarios of the Go and Node clients (compat/go/cmd/*/acls.go,
compat/node/acls.js) create and report, the authorizer broker they run against, and the
independent look at the bindings with confluent-kafka's AdminClient.describe_acls."""
from __future__ import annotations

import contextlib

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG

AUTH = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}


@contextlib.contextmanager
def authorizer_broker(tmp_path_factory, name):
    """One broker with StandardAuthorizer on; ANONYMOUS (PLAINTEXT) is a super user, so the clients
    may call the ACL APIs."""
    b = pykbroker.Broker(log_dir=tmp_path_factory.mktemp(name) / "data", config={**TEST_CONFIG, **AUTH}).start()
    try:
        yield b
    finally:
        b.stop()


PARSE = "Could not parse principal from `%s-nocolon` (no colon is present separating the principal type from the principal name)"
# how each Go client reports the refused creation (%s: the run's prefix): the error code's name or
# number, Kafka's message where the client keeps it (sarama keeps only its own summary and the
# code's description)
GO_INVALID = {"franzgo": ["INVALID_REQUEST", PARSE], "kafkago": ["[42] Invalid Request", PARSE],
              "sarama": ["failed to create one or more ACL rules", "request being malformed"]}


def _key(b):
    return "|".join([b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                     b.permission_type.name])


def confluent_bindings(bootstrap, prefix):
    """Every binding on a resource of the run (its name starts with ``prefix``), as confluent-kafka's
    describe_acls sees them: the refused creation must not be among them."""
    ck = needs.module("confluent_kafka.admin")
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    admin = ck.AdminClient({"bootstrap.servers": bootstrap})
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return sorted(_key(b) for b in admin.describe_acls(flt, request_timeout=10).result()
                  if b.name.startswith(prefix))


def broker_bindings(address, prefix):
    """What one broker (``(host, port)``) answers a raw DescribeAcls (v3, every binding) with,
    those on a resource of the run, in :func:`expected_bindings`' form: on a cluster each broker
    learns a change from ZooKeeper by itself, so each is asked."""
    from pykbroker.acl.bindings import OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES
    from pykbroker.protocol.wire import WireClient
    any_ = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    with WireClient(address, timeout=15) as c:
        r = c.request(29, 3, any_)
    assert r["error_code"] == 0, r
    return sorted("|".join([RESOURCE_TYPES[x["resource_type"]], x["resource_name"], PATTERN_TYPES[x["pattern_type"]],
                            a["principal"], a["host"], OPERATIONS[a["operation"]], PERMISSIONS[a["permission_type"]]])
                  for x in r["resources"] if x["resource_name"].startswith(prefix) for a in x["acls"])


def expected_bindings(p):
    """The bindings the scenarios create, as "TYPE|name|PATTERN|principal|host|OPERATION|PERMISSION"."""
    alice, bob = "User:%s-alice" % p, "User:%s-bob" % p
    return {
        "topic_lit_read": "TOPIC|%s-t|LITERAL|%s|*|READ|ALLOW" % (p, alice),
        "topic_lit_write": "TOPIC|%s-t|LITERAL|%s|*|WRITE|ALLOW" % (p, alice),
        "topic_pre_deny": "TOPIC|%s-|PREFIXED|%s|127.0.0.1|WRITE|DENY" % (p, bob),
        "group_lit_read": "GROUP|%s-g|LITERAL|%s|*|READ|ALLOW" % (p, alice),
        "group_pre_deny": "GROUP|%s-|PREFIXED|%s|*|DESCRIBE|DENY" % (p, bob),
    }


def check_acl_reports(create, delete, p, between, after, invalid_error):
    """Judge the two reports of an ACL scenario (create phase, delete phase) and confluent-kafka's
    views ``between`` the runs and ``after`` them.  ``invalid_error``: the substrings the client's
    error for the refused creation (a principal without its type) must hold, as each client words
    Kafka's INVALID_REQUEST (and its message where the client passes it on)."""
    e = expected_bindings(p)
    every = sorted(e.values())
    assert create["create_errors"] == [] and create["created"] == every, create
    for part in invalid_error:
        assert part in create["invalid_create_error"], create["invalid_create_error"]
    d = create["described"]
    assert d["alice_allow"] == sorted([e["topic_lit_read"], e["topic_lit_write"], e["group_lit_read"]]), d
    assert d["topic_match"] == sorted([e["topic_lit_read"], e["topic_lit_write"], e["topic_pre_deny"]]), d
    assert d["group_prefixed_deny_bob"] == [e["group_pre_deny"]], d
    assert d["alice_bob"] == every, d
    assert between == every
    assert delete["delete_errors"] == [], delete
    assert delete["deleted"]["topic_match"] == sorted([e["topic_lit_read"], e["topic_lit_write"],
                                                       e["topic_pre_deny"]]), delete
    assert delete["deleted"]["group_match"] == sorted([e["group_lit_read"], e["group_pre_deny"]]), delete
    assert all(v == [] for v in delete["described"].values()), delete
    assert after == []
