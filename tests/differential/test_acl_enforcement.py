"""Denied requests as Apache Kafka 4.4 with StandardAuthorizer answers them: a SASL PLAIN user
without ACLs sends each request of tests/acl/test_required_acls.py's table (Produce, Fetch,
ListOffsets, Metadata, CreatePartitions, DeleteRecords, configs, coordinators, classic, consumer,
share and streams groups, share fetch and acknowledgements, the share coordinator's state APIs,
share-group offsets, log dirs, ListConfigResources, InitProducerId, EndTxn...) to both brokers; the answers are compared with the volatile fields
(broker addresses, cluster and topic ids) left out.  Then the same user is granted the
bindings the table names and the codes must no longer be the authorization error on either."""
from __future__ import annotations

import importlib.util
import itertools
import re
import time
from pathlib import Path

import pytest

from pykbroker.protocol.wire import WireClient

from .conftest import authorizer_config
from .helpers import explain, sasl_sides

ROOT = Path(__file__).resolve().parents[2]
# StandardAuthorizer, ANONYMOUS (PLAINTEXT) a super user, the PLAIN user alice on a SASL_PLAINTEXT
# listener: the Kafka side is the directory's shared authorizer node (conftest.py), the
# pykbroker side gets its settings
CONFIG = authorizer_config()


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TABLE = _load(ROOT / "tests" / "acl" / "test_required_acls.py", "pykbroker_required_acls")
# Kafka's ids and addresses differ by nature; everything else is compared
VOLATILE = {"brokers", "cluster_id", "controller_id", "topic_id", "node_id", "host", "port", "throttle_time_ms",
            "log_start_offset", "high_watermark", "last_stable_offset", "member_id", "node_endpoints"}
_n = itertools.count()


_kafka_side, _pyk_side = sasl_sides(CONFIG, "pyk_side", "kafka_side", authorizer=True)


def _alice(side):
    c = WireClient(side["sasl"], timeout=15)
    assert c.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert c.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})["error_code"] == 0
    return c


_REQUEST_TEXT = re.compile(r"^Request .* needs (\w+) permission\.$", re.S)


def _strip(x):
    if isinstance(x, str) and x.startswith("Request "):
        # Kafka's controller puts its request object's toString in these messages; pykbroker
        # names the API: only "needs X permission." is compared
        m = _REQUEST_TEXT.match(x)
        return m.group(1) if m else x
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


_OPS = {"READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
        "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
_TYPES = {"topic": 2, "topic_new": 2, "group": 3, "cluster": 4, "transactional_id": 5}


def _grant(side, needs, t, g, x):
    """alice's bindings ``(operation, resource kind)`` of the table's ``needs`` on the case's
    topic ``t``, group ``g`` and transactional id ``x``, waited for."""
    names = {"topic": t, "topic_new": t + "-new", "group": g, "transactional_id": x, "cluster": "kafka-cluster"}
    _grant_named(side, [(op, kind, names[kind]) for op, kind in needs])


def _grant_named(side, bindings):
    """alice's bindings ``(operation, resource type, name)`` (literal names), waited for (Kafka's
    broker applies ACL records asynchronously); none: nothing is sent."""
    if not bindings:
        return
    creations = [{"resource_type": _TYPES[kind], "resource_name": name, "resource_pattern_type": 3,
                  "principal": "User:alice", "host": "*", "operation": _OPS[op], "permission_type": 3}
                 for op, kind, name in bindings]
    with WireClient(side["plain"]) as c:
        r = c.request(30, 3, {"creations": creations})
    assert all(x["error_code"] == 0 for x in r["results"]), r
    want = {(_TYPES[kind], name, _OPS[op]) for op, kind, name in bindings}
    _wait_bindings(side, lambda got: want <= got, "bindings %s" % sorted(want))


def _delete_alice_bindings(side):
    """alice's bindings deleted (every one), waited for: the next case starts without them."""
    with WireClient(side["plain"]) as c:
        c.request(31, 3, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                                        "pattern_type_filter": 1, "principal_filter": "User:alice",
                                        "host_filter": None, "operation": 1, "permission_type": 1}]})
    _wait_bindings(side, lambda got: not got, "bindings deleted")


def _alice_bindings(side) -> set:
    """alice's bindings as the side's broker serves them (DescribeAcls): (resource type, name,
    operation).  Kafka's broker answers DescribeAcls from its authorizer's own copy, filled from
    the controller's ACL records asynchronously: once a binding is listed it is enforced."""
    with WireClient(side["plain"]) as c:
        r = c.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": "User:alice", "host_filter": None, "operation": 1,
                              "permission_type": 1})
    assert r["error_code"] == 0, r
    return {(res["resource_type"], res["resource_name"], a["operation"]) for res in r["resources"] for a in res["acls"]}


def _wait_bindings(side, ok, what, timeout=15.0):
    """Until ``ok(alice's bindings)``: the wait for Kafka's broker to apply ACL records, ended by
    the event rather than a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        got = _alice_bindings(side)
        if ok(got):
            return
        assert time.monotonic() < deadline, "%s: alice's bindings %s" % (what, sorted(got))
        time.sleep(0.05)


def _topics(side, g, *topics):
    """Group ``g``'s coordinator ready, then each topic (one partition) created with its leader."""
    with WireClient(side["plain"]) as c:
        for _ in range(100):   # the group's coordinator ready (Kafka creates __consumer_offsets on demand)
            if c.request(10, 4, {"key_type": 0, "coordinator_keys": [g]})["coordinators"][0]["error_code"] == 0:
                break
            time.sleep(0.1)
        for t in topics:
            r = c.request(19, 7, {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1}],
                                  "timeout_ms": 10000})
            assert r["topics"][0]["error_code"] in (0, 36), r
            for _ in range(50):
                md = c.request(3, 12, {"topics": [{"name": t}], "allow_auto_topic_creation": False})
                if md["topics"][0]["error_code"] == 0 and md["topics"][0]["partitions"] and \
                        md["topics"][0]["partitions"][0]["leader_id"] >= 0:
                    break
                time.sleep(0.1)


def _topic_id(side, topic):
    """The topic's id on that side (the table's requests by topic id: share fetch and state)."""
    with WireClient(side["plain"]) as c:
        return c.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})["topics"][0]["topic_id"]


@pytest.mark.parametrize("case", sorted(TABLE.CASES))
def test_denied_then_allowed(pyk_side, kafka_side, case):
    api, version, body, needs, codes, denied = TABLE.CASES[case]
    n = next(_n)
    t, g, x = "dt%d" % n, "dg%d" % n, "dx%d" % n
    answers, reqs = {}, {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, g, t)
        _grant(side, TABLE.EXTRA.get(case, []), t, g, x)
        reqs[name] = TABLE.resolve(body(t, g, x), lambda topic: _topic_id(side, topic))
        with _alice(side) as c:
            answers[name] = c.request(api, version, reqs[name])
    p, k = _strip(answers["pyk"]), _strip(answers["kafka"])
    assert p == k, explain(p, k)
    assert set(codes(answers["kafka"])) == {denied}, answers
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _grant(side, needs, t, g, x)
        with _alice(side) as c:
            answer = c.request(api, version, reqs[name])
        got = codes(answer)
        if not got and answer.get("error_code") not in (None, denied):
            # no per-partition answers and no top-level denial: Kafka's ShareFetch lists a
            # partition only with records or an error (a denied topic is listed with 29, as the
            # first half shows), and its share partition here has neither yet
            got = [answer["error_code"]]
        assert got and denied not in got, (name, got, answer)
        _delete_alice_bindings(side)


def test_authorized_operations_and_visibility(pyk_side, kafka_side):
    """Metadata's topic_authorized_operations, all-topics visibility, DescribeCluster's cluster
    operations and DescribeGroups' group operations for a user with a few bindings."""
    n = next(_n)
    t, hidden, g = "ops%d" % n, "hidden%d" % n, "opsg%d" % n
    answers = {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, g, t, hidden)
        _grant(side, [("WRITE", "topic"), ("ALTER_CONFIGS", "topic"), ("READ", "group"),
                      ("DESCRIBE_CONFIGS", "cluster")], t, g, "unused")
        with _alice(side) as c:
            named = c.request(3, 12, {"topics": [{"name": t}, {"name": hidden}, {"name": "missing%d" % n}],
                                      "allow_auto_topic_creation": False, "include_topic_authorized_operations": True})
            every = c.request(3, 12, {"topics": None, "include_topic_authorized_operations": True})
            cluster = c.request(60, 1, {"include_cluster_authorized_operations": True})
            groups = c.request(15, 5, {"groups": [g, "other%d" % n], "include_authorized_operations": True})
        answers[name] = (
            [(x["name"], x["error_code"], x["topic_authorized_operations"]) for x in named["topics"]],
            sorted((x["name"], x["topic_authorized_operations"]) for x in every["topics"]
                   if x["name"] in (t, hidden)),
            cluster["cluster_authorized_operations"],
            [(x["group_id"], x["error_code"], x["authorized_operations"]) for x in groups["groups"]])
    assert answers["pyk"] == answers["kafka"], answers


def test_share_offsets_and_acknowledgements_with_a_topic_denied(pyk_side, kafka_side):
    """Alter/DeleteShareGroupOffsets naming a readable and an unreadable topic (the order of the
    answer's topics), and a share session whose topic stops being readable (ShareAcknowledge)."""
    n = next(_n)
    t, other, g = "st%d" % n, "su%d" % n, "sg%d" % n
    answers = {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, g, t, other)
        _grant(side, [("READ", "group"), ("DELETE", "group"), ("READ", "topic")], other, g, "unused")
        out = []
        with _alice(side) as c:
            alter = {"group_id": g, "topics": [{"topic_name": x, "partitions": [{"partition_index": 0,
                                                                                 "start_offset": 0}]}
                                               for x in (t, other)]}
            out.append(c.request(91, 0, alter))
            out.append(c.request(92, 0, {"group_id": g, "topics": [{"topic_name": t}, {"topic_name": other}]}))
            body = TABLE._share_fetch(other, g + "-s")
        _grant(side, [("READ", "group")], other, g + "-s", "unused")
        tid = _topic_id(side, other)
        with _alice(side) as c:
            r = c.request(78, 1, TABLE.resolve(body, lambda topic: tid))
            out.append({"fetch_error": r["error_code"]})
            with WireClient(side["plain"]) as admin:   # READ on the topic goes
                admin.request(31, 3, {"filters": [{"resource_type_filter": 2, "resource_name_filter": other,
                                                    "pattern_type_filter": 3, "principal_filter": "User:alice",
                                                    "host_filter": None, "operation": 3, "permission_type": 3}]})
            _wait_bindings(side, lambda got: (2, other, 3) not in got, "%s: topic READ removed" % name)
            out.append(c.request(79, 1, {"group_id": g + "-s", "member_id": TABLE.MEMBER, "share_session_epoch": 1,
                                         "topics": [{"topic_id": tid, "partitions": [
                                             {"partition_index": 0, "acknowledgement_batches": [
                                                 {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]}))
        answers[name] = _strip(out)
        _delete_alice_bindings(side)
    assert answers["pyk"] == answers["kafka"], explain(answers["pyk"], answers["kafka"])


def _exists(side, topic) -> bool:
    with WireClient(side["plain"]) as c:
        r = c.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return r["topics"][0]["error_code"] == 0


def _streams_status(r):
    return (r["error_code"], r["error_message"],
            [(s["status_code"], s["status_detail"]) for s in r["status"] or []])


def test_streams_internal_topics_need_create(pyk_side, kafka_side):
    """StreamsGroupHeartbeat of a member allowed to describe its topology's topics but not to
    create its changelog topic: Kafka 4.4 creates nothing and adds "Unauthorized to CREATE on
    topics ..." to the MISSING_INTERNAL_TOPICS status; once CREATE on the topic is granted, the
    next heartbeat has it created.  Before any of that, whatever the ACLs: a topology naming an
    internal topic or an invalid name is STREAMS_INVALID_TOPOLOGY."""
    n = next(_n)
    src, g = "ss%d" % n, "sg%d" % n
    changelog = g + "-store-changelog"
    answers = {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, g, src)
        _grant_named(side, [("READ", "group", g), ("DESCRIBE", "topic", src), ("DESCRIBE", "topic", changelog)])
        out = []
        with _alice(side) as c:
            for bad in ("__consumer_offsets", "bad name!"):
                body = TABLE._streams_hb(bad, g)
                out.append(_streams_status(c.request(88, 1, body)))
            body = TABLE._streams_hb(src, g)
            body["topology"]["subtopologies"][0]["state_changelog_topics"] = [
                {"name": changelog, "partitions": 0, "replication_factor": 0, "topic_configs": []}]
            r = c.request(88, 1, body)
            out.append(_streams_status(r))
            epoch = r["member_epoch"]
            beat = dict(TABLE._streams_hb(src, g, topology=False), member_epoch=epoch,
                        active_tasks=None, standby_tasks=None, warmup_tasks=None)
            r = c.request(88, 1, beat)
            out.append(_streams_status(r))
            time.sleep(0.5)   # nothing is created in the background either
            out.append(("changelog exists", _exists(side, changelog)))
            _grant_named(side, [("CREATE", "topic", changelog)])
            deadline = time.monotonic() + 20
            while not _exists(side, changelog):
                assert time.monotonic() < deadline, (name, "changelog never created", r)
                r = c.request(88, 1, dict(beat, member_epoch=r["member_epoch"]))
                time.sleep(0.2)
            out.append(("changelog exists", True))
        answers[name] = out
        _delete_alice_bindings(side)
    assert answers["pyk"] == answers["kafka"], explain(answers["pyk"], answers["kafka"])
    assert any("Unauthorized to CREATE on topics %s." % changelog in d for _, d in answers["kafka"][2][2]), answers


def test_streams_topic_lists_in_kafkas_order(pyk_side, kafka_side):
    """The topic lists of StreamsGroupHeartbeat's statuses with several topics, as Kafka 4.4 words
    them: missing source topics sorted, at most three named ("... and 1 additional topics");
    missing internal topics in its HashMap's order, at most three named; the CREATE refusal naming
    every one of them in that order, ", " between names; none created until CREATE is granted on
    all of them."""
    n = next(_n)
    src, g = "sm%d" % n, "sn%d" % n
    absent = [g + "-%s-in" % k for k in ("q", "c", "x", "a")]
    changelogs = [g + "-%s-changelog" % k for k in ("zeta", "alpha", "mid", "beta", "pi")]
    answers = {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, g, src)
        _grant_named(side, [("READ", "group", g)] + [("DESCRIBE", "topic", t) for t in [src] + absent + changelogs])
        out = []
        with _alice(side) as c:
            body = TABLE._streams_hb(src, g)
            body["topology"]["subtopologies"][0]["source_topics"] = absent
            r = c.request(88, 1, body)
            out.append(_streams_status(r))
            body = dict(TABLE._streams_hb(src, g), group_id=g + "-b")   # a fresh group: a new topology
            _grant_named(side, [("READ", "group", g + "-b")])
            body["topology"]["subtopologies"][0]["state_changelog_topics"] = [
                {"name": t, "partitions": 0, "replication_factor": 0, "topic_configs": []} for t in changelogs]
            r = c.request(88, 1, body)
            out.append(_streams_status(r))
            _grant_named(side, [("CREATE", "topic", t) for t in changelogs])
            beat = dict(TABLE._streams_hb(src, g + "-b", topology=False), active_tasks=None, standby_tasks=None,
                        warmup_tasks=None)
            deadline = time.monotonic() + 20
            while not all(_exists(side, t) for t in changelogs):
                assert time.monotonic() < deadline, (name, "changelogs never created", r)
                r = c.request(88, 1, dict(beat, member_epoch=r["member_epoch"]))
                time.sleep(0.2)
        answers[name] = out
        _delete_alice_bindings(side)
    assert answers["pyk"] == answers["kafka"], explain(answers["pyk"], answers["kafka"])
    assert "and 1 additional topics are missing." in answers["kafka"][0][2][-1][1], answers
    assert "Unauthorized to CREATE on topics %s." % ", ".join(
        sorted(changelogs, key=answers["kafka"][1][2][-1][1].index)) in answers["kafka"][1][2][-1][1], answers


def test_regex_subscription_matches_only_describable_topics(pyk_side, kafka_side):
    """A KIP-848 member subscribing by regex (ConsumerGroupHeartbeat v1) is assigned only the
    matching topics its principal may DESCRIBE (Kafka 4.4's TopicRegexResolver); the other
    matching topic stays out of the assignment and of the group's description."""
    n = next(_n)
    g, seen, unseen = "rg%d" % n, "rx%d-seen" % n, "rx%d-unseen" % n
    answers = {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, g, seen, unseen)
        _grant_named(side, [("READ", "group", g), ("DESCRIBE", "topic", seen), ("DESCRIBE", "group", g)])
        names = {_topic_id(side, seen): seen, _topic_id(side, unseen): unseen}
        body = {"group_id": g, "member_id": TABLE.MEMBER, "member_epoch": 0, "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": 10000, "subscribed_topic_names": None,
                "subscribed_topic_regex": "rx%d-.*" % n, "server_assignor": None, "topic_partitions": []}
        assigned: list = []
        with _alice(side) as c:
            deadline = time.monotonic() + 20
            while True:
                r = c.request(68, 1, body)
                assert r["error_code"] == 0, (name, r)
                if r["assignment"] is not None:
                    assigned = sorted((names.get(tp["topic_id"], "?"), tp["partitions"])
                                      for tp in r["assignment"]["topic_partitions"])
                if assigned:
                    break
                # Kafka resolves the regex in the background: heartbeat until it is assigned
                assert time.monotonic() < deadline, (name, "never assigned", r)
                body = dict(body, member_epoch=r["member_epoch"], subscribed_topic_regex=None,
                            topic_partitions=[])
                time.sleep(0.2)
            d = c.request(69, 0, {"group_ids": [g], "include_authorized_operations": False})["groups"][0]
        target = sorted(tp["topic_name"] for m in d["members"] for tp in m["target_assignment"]["topic_partitions"])
        answers[name] = (assigned, d["error_code"], target)
        _delete_alice_bindings(side)
    assert answers["pyk"] == answers["kafka"], answers
    assert answers["kafka"][0] == [(seen, [0])], answers


def test_regex_resolved_with_the_principal_of_the_resolving_heartbeat(pyk_side, kafka_side):
    """Kafka 4.4 resolves all of a group's regexes at once with the context of the heartbeat that
    triggers the resolution (GroupMetadataManager.maybeUpdateRegularExpressions): alice's member,
    subscribed to ``rxN-.*`` and allowed to DESCRIBE only ``rxN-seen``, is assigned only that;
    once a super user's member subscribes to a regex new to the group (and Kafka's 10 s between
    resolutions has passed), alice's regex is resolved again with the super user's rights and
    alice's member is assigned ``rxN-unseen`` too."""
    from .conftest import at_once
    n = next(_n)
    g, seen, unseen = "rr%d" % n, "rx%d-seen" % n, "rx%d-unseen" % n

    def hb(c, body):
        r = c.request(68, 1, body)
        assert r["error_code"] == 0, r
        return r

    def observe(side):
        _topics(side, g, seen, unseen)
        _grant_named(side, [("READ", "group", g), ("DESCRIBE", "topic", seen)])
        names = {_topic_id(side, seen): seen, _topic_id(side, unseen): unseen}

        def assigned(r):
            if r["assignment"] is None:
                return None
            return sorted(names.get(tp["topic_id"], "?") for tp in r["assignment"]["topic_partitions"])
        a = {"group_id": g, "member_id": TABLE.MEMBER, "member_epoch": 0, "instance_id": None, "rack_id": None,
             "rebalance_timeout_ms": 30000, "subscribed_topic_names": None,
             "subscribed_topic_regex": "rx%d-.*" % n, "server_assignor": None, "topic_partitions": []}
        out = []
        with _alice(side) as alice, WireClient(side["plain"], timeout=15) as anon:
            deadline = time.monotonic() + 20
            got = None
            while not got:   # Kafka resolves a new regex in the background
                assert time.monotonic() < deadline, "alice never assigned"
                r = hb(alice, a)
                got = assigned(r) or got
                a = dict(a, member_epoch=r["member_epoch"], subscribed_topic_regex=None)
                time.sleep(0.2)
            resolved_at = time.monotonic()
            out.append(got)
            b = {"group_id": g, "member_id": TABLE.MEMBER[:-1] + "B", "member_epoch": 0, "instance_id": None,
                 "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": None,
                 "subscribed_topic_regex": "rx%d-none.*" % n, "server_assignor": None, "topic_partitions": []}
            # only the super user's member heartbeats until Kafka's 10 s between resolutions have
            # passed, so that its heartbeat is the one resolving the group's regexes
            while time.monotonic() < resolved_at + 11:
                r = hb(anon, b)
                b = dict(b, member_epoch=r["member_epoch"], subscribed_topic_regex=None)
                time.sleep(0.5)
            deadline = time.monotonic() + 10
            while True:
                r = hb(alice, a)
                got = assigned(r) or got
                a = dict(a, member_epoch=r["member_epoch"])
                if len(got) == 2 or time.monotonic() > deadline:
                    break
                b = dict(b, member_epoch=hb(anon, b)["member_epoch"])
                time.sleep(0.2)
            out.append(got)
        _delete_alice_bindings(side)
        return out

    answers = dict(zip(("pyk", "kafka"), at_once(observe, pyk_side, kafka_side)))
    assert answers["pyk"] == answers["kafka"], answers
    assert answers["kafka"] == [[seen], [seen, unseen]], answers


def test_offset_for_leader_epoch_cluster_action_or_describe(pyk_side, kafka_side):
    """OffsetForLeaderEpoch, from a consumer (replica id -1) or as a follower (1): without
    bindings each partition is TOPIC_AUTHORIZATION_FAILED (Kafka 4.4 requires no CLUSTER_ACTION
    of a follower's request); CLUSTER_ACTION on the cluster alone lets every topic through."""
    n = next(_n)
    t = "oe%d" % n
    answers = {}
    for name, side in (("pyk", pyk_side), ("kafka", kafka_side)):
        _topics(side, "unused%d" % n, t)
        out = []

        def ask():
            with _alice(side) as c:
                for replica in (-1, 1):
                    r = c.request(23, 4, {"replica_id": replica, "topics": [{"topic": t, "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
                    out.append(_strip(r))
        ask()
        _grant_named(side, [("CLUSTER_ACTION", "cluster", "kafka-cluster")])
        ask()
        answers[name] = out
        _delete_alice_bindings(side)
    assert answers["pyk"] == answers["kafka"], explain(answers["pyk"], answers["kafka"])
    codes = [p["error_code"] for r in answers["kafka"] for x in r["topics"] for p in x["partitions"]]
    assert codes == [29, 29, 0, 0], answers
