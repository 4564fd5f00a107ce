"""TxnOffsetCommit (key 28) with generation -1 for a KIP-848 consumer group, pykbroker against
Apache Kafka 4.4 (measured on the oracle):
- no member id (v0-2 carry neither field; v3-6 with "" / -1): accepted even while the group has
  members, as for a classic group (the transactional commit of an old client or an assign()
  producer); a plain OffsetCommit v9 of the same identity is refused UNKNOWN_MEMBER_ID;
- a member id while the group has no member: accepted (an admin / assign() commit), by both APIs;
- a member id while the group has members: UNKNOWN_MEMBER_ID if no member has it, else the epoch
  must match (ILLEGAL_GENERATION at v3-5, STALE_MEMBER_EPOCH at v6).  The transaction is aborted at
the end; producer ids and member ids differ between the brokers and are only used."""
from __future__ import annotations

import time
import uuid

from .helpers import call, connect, create_topic, explain
from .test_transactions import RETRIABLE, _absorb, _coordinator, _end, _init, _retry, _toc
from .test_txn_error_paths import _add_offsets


def _join_848(t, group, topic):
    """One KIP-848 member joins (ConsumerGroupHeartbeat v1); it stays a member until its session
    times out (45 s), longer than the scenario."""
    _retry(t, 10, 3, {"key": group, "key_type": 0})
    body = {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    deadline = time.monotonic() + 30
    while True:
        with connect(t, timeout=40) as c:
            r = c.request(68, 1, body)
        # the group's coordinator still loading / not yet known: retried, as clients do
        if r["error_code"] not in RETRIABLE or time.monotonic() > deadline:
            return r
        _absorb(t, 68, r["error_code"])
        time.sleep(0.2)


def _leave_848(t, group, member_id):
    with connect(t, timeout=40) as c:
        return c.request(68, 1, {"group_id": group, "member_id": member_id, "member_epoch": -1,
                                 "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                                 "subscribed_topic_names": [], "subscribed_topic_regex": None,
                                 "server_assignor": None, "topic_partitions": []})["error_code"]


def scenario(t):
    run = uuid.uuid4().hex[:6]
    topic, tid = "tocm-" + run, "tocm-id-" + run
    g848, gempty, gclassic = "tocm-848-" + run, "tocm-848-empty-" + run, "tocm-classic-" + run
    create_topic(t, topic, 1)
    md = call(t, 3, 12, {"topics": [{"name": topic, "topic_id": b"\0" * 16}], "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False})
    topic_id = md["topics"][0]["topic_id"]
    out = {}
    hb = _join_848(t, g848, topic)
    out["heartbeat"] = hb["error_code"]
    left = _join_848(t, gempty, topic)
    out["leave"] = _leave_848(t, gempty, left["member_id"])   # a KIP-848 group with no member left
    _retry(t, 10, 3, {"key": gclassic, "key_type": 0})
    with connect(t, timeout=40) as c:   # a classic group with one member (JoinGroup v4: id, then join)
        jg = {"group_id": gclassic, "session_timeout_ms": 45000, "rebalance_timeout_ms": 30000,
              "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": b""}]}
        first = c.request(11, 4, jg)
        jg["member_id"] = first["member_id"]
        out["classic_join"] = c.request(11, 4, jg)["error_code"]
    _coordinator(t, tid)
    init = _init(t, tid, version=5)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    out["init"] = init["error_code"]
    for name, g in (("848", g848), ("848_empty", gempty), ("classic", gclassic)):
        out["add_offsets_" + name] = _add_offsets(t, tid, pid, epoch, g, 3)
    for v in (0, 2, 3, 4, 5, 6):
        key = topic_id if v >= 6 else topic
        def toc(group, generation=-1, member_id=""):
            return [codes for _, codes in _toc(t, v, tid, group, pid, epoch, [(key, [(0, 1)])],
                                                generation=generation, member_id=member_id)][:1]
        out["v%d_members_no_member_id" % v] = toc(g848)
        out["v%d_empty_848" % v] = toc(gempty)
        out["v%d_classic_with_member" % v] = toc(gclassic)
        if v >= 3:
            out["v%d_members_unknown_member" % v] = toc(g848, member_id="nobody")
            out["v%d_member_epoch_-1" % v] = toc(g848, member_id=hb["member_id"])
            out["v%d_empty_848_some_member_id" % v] = toc(gempty, member_id="gone")
            out["v%d_member_current_epoch" % v] = toc(g848, hb["member_epoch"], hb["member_id"])
    # the same identities in a plain OffsetCommit (v9), which shares the group's check
    for name, g, member in (("members_no_member_id", g848, ""), ("empty_848_some_member_id", gempty, "gone")):
        r = call(t, 8, 9, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": member,
                           "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                               {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                "committed_metadata": ""}]}]})
        out["offset_commit_v9_" + name] = r["topics"][0]["partitions"][0]["error_code"]
    out["abort"] = _end(t, tid, pid, epoch, False, version=5)
    return out


def test_txn_offset_commit_without_member_id(both):
    p, k = both(scenario)
    assert p == k, explain(p, k)
    # the comparison covered Kafka's refusals (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION at v3-5,
    # STALE_MEMBER_EPOCH at v6) and its acceptances
    assert k["v3_members_unknown_member"] == [[(0, 25)]] and k["v6_member_epoch_-1"] == [[(0, 113)]], k
    assert k["v3_empty_848_some_member_id"] == [[(0, 0)]] and k["offset_commit_v9_members_no_member_id"] == 25, k
