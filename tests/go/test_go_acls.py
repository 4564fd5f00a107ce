"""ACL admin calls of the Go clients against pykbroker with StandardAuthorizer on: franz-go's kadm
(CreateACLs / DescribeACLs / DeleteACLs with an ACLBuilder; compat/go/cmd/franzgo/acls.go).

The scenario creates LITERAL and PREFIXED topic and group bindings, ALLOW and DENY, describes
them with three filters (exactly the created bindings must come back), then, in a second run,
deletes them with MATCH filters (the matching bindings must be reported deleted) and describes
again (empty).  Between and after the runs confluent-kafka's AdminClient.describe_acls looks at
the bindings independently.  One authorizer broker for the module (principal ANONYMOUS is a
super user, so the client may call the ACL APIs over PLAINTEXT).
"""
from __future__ import annotations

import uuid

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG

from . import gobuild

gobuild.require_toolchain("the franz-go ACL scenario of compat/go")
ck = needs.module("confluent_kafka.admin")
from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType  # noqa: E402,E501

AUTH = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory):
    b = pykbroker.Broker(log_dir=tmp_path_factory.mktemp("go-acls") / "data", config={**TEST_CONFIG, **AUTH}).start()
    try:
        yield b
    finally:
        b.stop()


def _key(b):
    return "|".join([b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                     b.permission_type.name])


def confluent_bindings(bootstrap, prefix):
    """Every binding whose principal is one of the run's (confluent-kafka's describe_acls)."""
    admin = ck.AdminClient({"bootstrap.servers": bootstrap})
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return sorted(_key(b) for b in admin.describe_acls(flt, request_timeout=10).result()
                  if b.principal.startswith("User:%s-" % prefix))


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


def check_acl_reports(create, delete, p, between, after):
    """Judge the two reports of an ACL scenario (create phase, delete phase) and confluent-kafka's
    views ``between`` the runs and ``after`` them."""
    e = expected_bindings(p)
    every = sorted(e.values())
    assert create["create_errors"] == [] and create["created"] == every, create
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


def test_franz_go_kadm_acls(gobin, auth_broker):
    p = "fgacl%s" % uuid.uuid4().hex[:6]
    bs = auth_broker.bootstrap_servers
    create = gobuild.run(gobin / "franzgo", bs, "acls", wait=60, prefix=p, acl_phase="create")
    between = confluent_bindings(bs, p)
    delete = gobuild.run(gobin / "franzgo", bs, "acls", wait=60, prefix=p, acl_phase="delete")
    check_acl_reports(create, delete, p, between, confluent_bindings(bs, p))
