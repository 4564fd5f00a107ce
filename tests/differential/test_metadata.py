"""Metadata across versions: brokers, controller, cluster id presence, topic and partition fields,
error codes for unknown, invalid and auto-created topics, internal topics."""
import time

import pytest

from .helpers import explain, ZERO_UUID, call, create_topic, wait_for_topic

VERSIONS = list(range(0, 14))   # Kafka 4.4: 0-13


def norm_broker(t, b):
    return {"node_id": "<node>" if b["node_id"] == t.node_id else b["node_id"],
            "host": b["host"], "port": "<port>" if b["port"] == t.port else b["port"], "rack": b["rack"]}


def norm_topic(t, tp):
    out = dict(tp)
    out["topic_id"] = "<zero>" if tp["topic_id"] == ZERO_UUID else "<uuid>"
    parts = []
    for p in sorted(tp["partitions"], key=lambda p: p["partition_index"]):
        q = dict(p)
        for k in ("leader_id",):
            q[k] = "<node>" if p[k] == t.node_id else p[k]
        for k in ("replica_nodes", "isr_nodes", "offline_replicas"):
            q[k] = ["<node>" if n == t.node_id else n for n in p[k]]
        parts.append(q)
    out["partitions"] = parts
    return out


def norm(t, m):
    return {
        "throttle_time_ms": m["throttle_time_ms"],
        "brokers": [norm_broker(t, b) for b in m["brokers"]],
        "cluster_id": None if m["cluster_id"] is None else "<cluster>",
        "controller_id": "<node>" if m["controller_id"] == t.node_id else m["controller_id"],
        "topics": sorted((norm_topic(t, tp) for tp in m["topics"]), key=lambda x: x["name"] or ""),
        "cluster_authorized_operations": m["cluster_authorized_operations"],
    }


def request(t, version, topics, auto_create=False, authz=False):
    if topics is None:
        tl = None
    else:
        tl = [{"name": n, "topic_id": ZERO_UUID} for n in topics]
    return call(t, 3, version, {"topics": tl, "allow_auto_topic_creation": auto_create,
                                "include_cluster_authorized_operations": authz,
                                "include_topic_authorized_operations": authz})


@pytest.mark.parametrize("version", VERSIONS)
def test_existing_topic(both, version):
    def scenario(t):
        create_topic(t, "md-existing", 3)
        return norm(t, request(t, version, ["md-existing"]))
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
def test_authorized_operations_requested(both, version):
    """Without an authorizer Kafka answers the 'not requested' sentinel or all operations."""
    def scenario(t):
        create_topic(t, "md-existing", 3)
        return norm(t, request(t, version, ["md-existing"], authz=True))
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 1])
def test_no_topics(both, version):
    """An empty topic list (v1+) is 'no topics': brokers, controller and cluster id only."""
    p, k = both(lambda t: norm(t, request(t, version, [])))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 4])
def test_unknown_topic_no_auto_create(both, version):
    p, k = both(lambda t: norm(t, request(t, version, ["md-unknown-%d" % version], auto_create=False)))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", VERSIONS)
def test_auto_create(both, version):
    """v0-3 always auto-create, v4+ when allowed: the first answer, then the created topic."""
    name = "md-auto-%d" % version

    def scenario(t):
        first = norm(t, request(t, version, [name], auto_create=True))
        wait_for_topic(t, name, 1)
        later = norm(t, request(t, version, [name]))
        return first, later
    p, k = both(scenario)
    assert p == k, explain(p, k)


BAD_NAMES = {"space": "bad name", "slash": "a/b", "dot": ".", "dotdot": "..", "long": "x" * 250,
             "empty": ""}


@pytest.mark.parametrize("auto_create", [True, False], ids=["auto", "noauto"])
@pytest.mark.parametrize("name", list(BAD_NAMES), ids=list(BAD_NAMES))
@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_invalid_topic_name(both, version, name, auto_create):
    if version < 4 and not auto_create:
        pytest.skip("allow_auto_topic_creation exists from v4")
    p, k = both(lambda t: norm(t, request(t, version, [BAD_NAMES[name]], auto_create=auto_create)))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [1, 9, 12])
def test_internal_offsets_topic(both, version):
    """After a group coordinator lookup, __consumer_offsets is internal with 50 partitions."""
    def scenario(t):
        deadline = time.monotonic() + 30
        while True:
            r = call(t, 10, 3, {"key": "md-group", "key_type": 0})
            if r["error_code"] == 0:
                break
            assert time.monotonic() < deadline, r
            time.sleep(0.1)
        m = norm(t, request(t, version, ["__consumer_offsets"]))
        tp = m["topics"][0]
        return {"error": tp["error_code"], "internal": tp["is_internal"], "partitions": len(tp["partitions"]),
                "leaders": sorted({p["leader_id"] for p in tp["partitions"]}, key=str),
                "errors": sorted({p["error_code"] for p in tp["partitions"]})}
    p, k = both(scenario)
    assert p == k, explain(p, k)
