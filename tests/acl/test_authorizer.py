"""Kafka's StandardAuthorizer decision rule (pykbroker/acl/authorizer.py), case by case as
AK's StandardAuthorizerTest / AclAuthorizerTest state it."""
import pytest

from pykbroker.acl.authorizer import Authorizer, parse_super_users
from pykbroker.acl.bindings import (ALL, ALLOW, ALTER, ALTER_CONFIGS, ANY, CLUSTER, CREATE, DELETE, DENY, DESCRIBE,
                                    DESCRIBE_CONFIGS, GROUP, IDEMPOTENT_WRITE, LITERAL, MATCH, PREFIXED, READ,
                                    TOPIC, TRANSACTIONAL_ID, USER, WRITE, AclBinding, AclBindingFilter,
                                    validate_new_binding)

ALICE, BOB = "User:alice", "User:bob"
IP = "10.0.0.1"


def acl(name, principal=ALICE, op=READ, perm=ALLOW, rtype=TOPIC, pattern=LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def az(*bindings, **kw):
    a = Authorizer(**kw)
    a.load(bindings)
    return a


def test_literal_allow_and_other_names():
    a = az(acl("t"))
    assert a.authorize(ALICE, IP, READ, TOPIC, "t")
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t2")
    assert not a.authorize(ALICE, IP, WRITE, TOPIC, "t")
    assert not a.authorize(BOB, IP, READ, TOPIC, "t")
    assert not a.authorize(ALICE, IP, READ, GROUP, "t")   # another resource type


def test_wildcard_principal_and_resource():
    a = az(acl("*", principal="User:*"))
    assert a.authorize(BOB, IP, READ, TOPIC, "anything")
    assert not a.authorize(BOB, IP, READ, GROUP, "anything")


def test_prefixed():
    a = az(acl("fin-", pattern=PREFIXED))
    assert a.authorize(ALICE, IP, READ, TOPIC, "fin-")
    assert a.authorize(ALICE, IP, READ, TOPIC, "fin-ledger")
    assert not a.authorize(ALICE, IP, READ, TOPIC, "fin")
    assert not a.authorize(ALICE, IP, READ, TOPIC, "xfin-ledger")


def test_prefixed_star_is_a_plain_prefix():
    a = az(acl("*", pattern=PREFIXED))
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t")
    assert a.authorize(ALICE, IP, READ, TOPIC, "*t")


def test_deny_before_allow_across_patterns():
    a = az(acl("*"), acl("fin-", pattern=PREFIXED), acl("fin-secret", perm=DENY))
    assert a.authorize(ALICE, IP, READ, TOPIC, "fin-ledger")
    assert not a.authorize(ALICE, IP, READ, TOPIC, "fin-secret")
    a = az(acl("t"), acl("*", principal="User:*", perm=DENY))
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t")


def test_hosts():
    a = az(acl("t", host=IP))
    assert a.authorize(ALICE, IP, READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", READ, TOPIC, "t")
    a = az(acl("t"), acl("t", perm=DENY, host="10.0.0.2"))
    assert a.authorize(ALICE, IP, READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", READ, TOPIC, "t")


@pytest.mark.parametrize("op", [READ, WRITE, DELETE, ALTER, DESCRIBE])
def test_describe_implied(op):
    assert az(acl("t", op=op)).authorize(ALICE, IP, DESCRIBE, TOPIC, "t")


@pytest.mark.parametrize("op", [CREATE, DESCRIBE_CONFIGS, ALTER_CONFIGS])
def test_describe_not_implied(op):
    assert not az(acl("t", op=op)).authorize(ALICE, IP, DESCRIBE, TOPIC, "t")


def test_describe_configs_implied_by_alter_configs_only():
    assert az(acl("t", op=ALTER_CONFIGS)).authorize(ALICE, IP, DESCRIBE_CONFIGS, TOPIC, "t")
    assert not az(acl("t", op=ALTER)).authorize(ALICE, IP, DESCRIBE_CONFIGS, TOPIC, "t")
    # the reverse never holds
    assert not az(acl("t", op=DESCRIBE)).authorize(ALICE, IP, READ, TOPIC, "t")


def test_implication_is_for_allow_only():
    """A DENY of READ does not deny DESCRIBE (Kafka: implied operations come from ALLOWs)."""
    a = az(acl("t", op=DESCRIBE), acl("t", op=READ, perm=DENY))
    assert a.authorize(ALICE, IP, DESCRIBE, TOPIC, "t")
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t")


def test_all_operation():
    a = az(acl("t", op=ALL))
    assert all(a.authorize(ALICE, IP, op, TOPIC, "t") for op in (READ, WRITE, CREATE, DELETE, DESCRIBE_CONFIGS))
    a = az(acl("t", op=READ), acl("t", op=ALL, perm=DENY))
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t")


def test_super_users_bypass_deny():
    a = az(acl("*", principal="User:*", op=ALL, perm=DENY), super_users=parse_super_users("User:admin; User:ops"))
    assert a.authorize("User:admin", IP, WRITE, TOPIC, "t")
    assert a.authorize("User:ops", IP, ALTER, CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, IP, WRITE, TOPIC, "t")


def test_allow_everyone_only_without_any_acl_on_the_resource():
    a = az(acl("t", principal=BOB), allow_everyone_if_no_acl_found=True)
    assert a.authorize(ALICE, IP, READ, TOPIC, "other")       # no ACL at all applies
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t")       # bob's ACL applies to t
    assert not az(acl("t", principal=BOB)).authorize(ALICE, IP, READ, TOPIC, "other")
    # a prefixed binding applying to the name counts as an ACL of the resource
    a = az(acl("o", principal=BOB, pattern=PREFIXED), allow_everyone_if_no_acl_found=True)
    assert not a.authorize(ALICE, IP, READ, TOPIC, "other")


def test_changes_follow_and_generation_moves():
    a = az()
    g = a.generation
    a.apply(added=[acl("t")])
    assert a.authorize(ALICE, IP, READ, TOPIC, "t") and a.generation != g
    a.apply(removed=[acl("t")])
    assert not a.authorize(ALICE, IP, READ, TOPIC, "t")
    a.apply(added=[acl("p", pattern=PREFIXED)])
    a.apply(removed=[acl("p", pattern=PREFIXED)])
    assert a._prefix_lens[TOPIC] == [] and not a.authorize(ALICE, IP, READ, TOPIC, "pq")


def test_index_visits_only_matching_bindings():
    """10,000 bindings on other names: a decision looks at the few that apply."""
    a = az(*[acl("topic-%d" % i) for i in range(10000)], acl("x", pattern=PREFIXED))
    assert sorted(a.matching(TOPIC, "topic-42")) == [(ALICE, "*", READ, ALLOW)]
    assert len(list(a.matching(TOPIC, "xy"))) == 1


def test_authorized_operations_bits():
    a = az(acl("t", op=WRITE), acl("t", op=ALTER_CONFIGS))
    bits = a.authorized_operations(ALICE, IP, TOPIC, "t")
    assert bits == (1 << WRITE) | (1 << DESCRIBE) | (1 << ALTER_CONFIGS) | (1 << DESCRIBE_CONFIGS)


def test_authorize_by_resource_type():
    """KIP-679: WRITE on any topic lets an idempotent producer in (AK Authorizer default method)."""
    assert az(acl("t", op=WRITE)).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert az(acl("t", op=ALL)).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert not az(acl("t", op=READ)).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert not az(acl("t", op=WRITE), acl("t", op=WRITE, perm=DENY)).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert not az(acl("ab", op=WRITE), acl("a", op=WRITE, perm=DENY, pattern=PREFIXED)).authorize_by_resource_type(
        ALICE, IP, WRITE, TOPIC)
    assert not az(acl("t", op=WRITE), acl("*", op=WRITE, perm=DENY)).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert az(acl("*", op=WRITE)).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert az(allow_everyone_if_no_acl_found=True).authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)
    assert not az().authorize_by_resource_type(ALICE, IP, WRITE, TOPIC)


def test_filter_match_semantics():
    lit, star, pre, other = acl("foo-bar"), acl("*"), acl("foo-", pattern=PREFIXED), acl("baz")
    everything = [lit, star, pre, other]

    def sel(**kw):
        f = dict(resource_type=ANY, name=None, pattern_type=ANY, principal=None, host=None, operation=ANY,
                 permission=ANY)
        f.update(kw)
        return [b for b in everything if AclBindingFilter(**f).matches(b)]
    assert sel() == everything
    assert sel(name="foo-bar", pattern_type=MATCH) == [lit, star, pre]
    assert sel(name="foo-bar", pattern_type=ANY) == [lit]
    assert sel(name="foo-", pattern_type=PREFIXED) == [pre]
    assert sel(pattern_type=LITERAL) == [lit, star, other]
    assert sel(name="*", pattern_type=LITERAL) == [star]
    assert sel(resource_type=GROUP) == []
    assert sel(principal=BOB) == [] and sel(operation=WRITE) == [] and sel(permission=DENY) == []


@pytest.mark.parametrize("binding,message", [
    (acl("other", rtype=CLUSTER, op=ALTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(""), "Invalid empty resource name"),
    (acl("t", pattern=MATCH), "Invalid patternType MATCH"),
    (acl("t", op=ANY), "Invalid operation ANY"),
    (acl("t", perm=ANY), "Invalid permissionType ANY"),
    (acl("t", principal="alice"), "Could not parse principal from `alice` (no colon is present separating the "
                                  "principal type from the principal name)"),
    (acl("kafka-cluster", rtype=CLUSTER, op=IDEMPOTENT_WRITE), None),
    (acl("tx", rtype=TRANSACTIONAL_ID, op=WRITE, pattern=PREFIXED), None),
    (acl("bob", rtype=USER, op=13), None),
])
def test_validation(binding, message):
    assert validate_new_binding(binding) == message
