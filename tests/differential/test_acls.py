"""CreateAcls / DescribeAcls / DeleteAcls as Apache Kafka 4.4 with StandardAuthorizer answers
them (``super.users=User:ANONYMOUS`` on both, so the PLAINTEXT client may manage ACLs): each
creation's code and message (valid, invalid per binding, whole-request failures, connection
closes on UNKNOWN codes), DescribeAcls filters (ANY, MATCH, PREFIXED, LITERAL '*', principal,
out-of-range codes), DeleteAcls matches.  Kafka lists bindings in hash order: answers are compared
sorted."""
from __future__ import annotations

import json
import time

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import WireClient
from tests.client_acls import AUTH



@pytest.fixture(scope="module")
def kafka_acl(kafka_authorizer):
    """The authorizer Kafka shared with test_client_acls.py (conftest.py), no binding on it."""
    return ("127.0.0.1", kafka_authorizer.port)


@pytest.fixture(scope="module")
def pyk_acl():
    with pykbroker.Broker(config={**TEST_CONFIG, **AUTH}) as b:
        yield ("127.0.0.1", b.port)


def _call(target, api, version, body):
    with WireClient(target) as c:
        try:
            return c.request(api, version, body)
        except ConnectionError:
            return "closed"


def _cr(rt=2, name="t", pt=3, principal="User:a", host="*", op=3, perm=3):
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pt, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


def _f(rt=1, name=None, pt=1, principal=None, host=None, op=1, perm=1):
    return {"resource_type_filter": rt, "resource_name_filter": name, "pattern_type_filter": pt,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


VALID = [_cr(), _cr(principal="Group:x"), _cr(rt=4, name="kafka-cluster", host="10.0.0.1", op=12, perm=2),
         _cr(name="pre-", pt=4, principal="User:b", op=4), _cr(rt=3, name="*", principal="User:*", op=2),
         _cr(rt=7, name="bob", op=13), _cr(rt=5, name="tx", pt=4, op=4), _cr(name="pre-x", op=8, perm=2)]

CREATIONS = {
    "empty name": [_cr(name="")], "match pattern": [_cr(pt=2)], "any pattern": [_cr(pt=1)],
    "no colon": [_cr(principal="alice")], "any operation": [_cr(op=1)], "any permission": [_cr(perm=1)],
    "cluster name": [_cr(rt=4, name="other", op=7)], "any type": [_cr(rt=1)], "empty host": [_cr(host="")],
    "type 99": [_cr(rt=99)], "pattern 99": [_cr(pt=99)], "operation 99": [_cr(op=99)],
    "permission 99": [_cr(perm=99)], "type 0": [_cr(rt=0)], "pattern 0": [_cr(pt=0)], "operation 0": [_cr(op=0)],
    "valid with invalid": [_cr(name="mixed"), _cr(name="")],
    "valid with unbuildable": [_cr(name="mixed2"), _cr(op=1)],
}

FILTERS = {
    "any": _f(), "match t": _f(2, "t", 2), "match pre-xy": _f(2, "pre-xy", 2), "prefixed": _f(pt=4),
    "literal *": _f(3, "*", 3), "principal": _f(principal="User:b"), "host": _f(host="10.0.0.1"),
    "deny": _f(perm=2), "topic literal t": _f(2, "t", 3), "any name t": _f(2, "t", 1),
    "type 99": _f(rt=99), "operation 99": _f(op=99), "permission 0": _f(perm=0), "pattern 0": _f(pt=0),
}


def _norm(r):
    if isinstance(r, dict) and "resources" in r:
        r = dict(r, resources=sorted((dict(x, acls=sorted(x["acls"], key=json.dumps)) for x in r["resources"]),
                                     key=json.dumps))
    if isinstance(r, dict) and "filter_results" in r:
        r = dict(r, filter_results=[dict(f, matching_acls=sorted(f["matching_acls"], key=json.dumps))
                                    for f in r["filter_results"]])
    return r


@pytest.fixture(scope="module")
def seeded(pyk_acl, kafka_acl):
    for t in (pyk_acl, kafka_acl):
        r = _call(t, 30, 3, {"creations": VALID})
        assert [x["error_code"] for x in r["results"]] == [0] * len(VALID), r
    # Kafka's broker applies the controller's ACL records asynchronously: until it lists them all
    _wait_listed(kafka_acl, lambda n: n == len(VALID), "the %d seeded bindings" % len(VALID))
    return pyk_acl, kafka_acl


def _wait_listed(target, ok, what, timeout=15.0):
    """Until ``ok(number of bindings the broker lists)`` (DescribeAcls matching every binding)."""
    deadline = time.monotonic() + timeout
    while True:
        r = _call(target, 29, 3, _f())
        n = sum(len(x["acls"]) for x in r["resources"])
        if ok(n):
            return
        assert time.monotonic() < deadline, "%s: the broker lists %d bindings" % (what, n)
        time.sleep(0.05)


# Set by each CreateAcls of the module: the next DescribeAcls first leaves Kafka's broker a
# moment to apply the records (describes in a row with no change between need none).
_created_since_describe = [True]


@pytest.mark.parametrize("case", sorted(CREATIONS))
def test_create(seeded, case):
    p, k = seeded
    _created_since_describe[0] = True
    assert _call(p, 30, 3, {"creations": CREATIONS[case]}) == _call(k, 30, 3, {"creations": CREATIONS[case]})


@pytest.mark.parametrize("case", sorted(FILTERS))
@pytest.mark.parametrize("version", [1, 3])
def test_describe(seeded, case, version):
    p, k = seeded
    if _created_since_describe[0]:
        time.sleep(0.2)
        _created_since_describe[0] = False
    assert _norm(_call(p, 29, version, FILTERS[case])) == _norm(_call(k, 29, version, FILTERS[case]))


def test_delete_then_describe(seeded):
    """Last (it removes bindings): two filters matching the same binding, an unknown pattern."""
    p, k = seeded
    body = {"filters": [_f(2, "pre-xy", 2), _f(principal="User:b"), _f(pt=99), _f(op=99), _f(rt=7, name="nobody", pt=3)]}
    before = sum(len(x["acls"]) for x in _call(k, 29, 3, _f())["resources"])
    deleted = _call(k, 31, 3, body)
    assert _norm(_call(p, 31, 3, body)) == _norm(deleted)
    # until Kafka's broker no longer lists what its answer deleted (it applies the records
    # asynchronously)
    # (two filters may match the same binding: counted once)
    gone = len({json.dumps(a, sort_keys=True) for f in deleted["filter_results"] for a in f["matching_acls"]})
    _wait_listed(k, lambda n: n <= before - gone, "the %d deleted bindings gone" % gone)
    assert _norm(_call(p, 29, 3, _f())) == _norm(_call(k, 29, 3, _f()))
