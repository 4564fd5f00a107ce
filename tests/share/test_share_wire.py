"""KIP-932 share groups on the wire (ShareGroupHeartbeat 76, ShareGroupDescribe 77, ShareFetch 78,
ShareAcknowledge 79) against a real broker process: membership and the simple assignor,
acquisition with delivery counts, acknowledgement (accept / release / reject), session epochs,
acquisition lock expiry and ApiVersions' share.version."""
import threading
import time
import uuid

import pytest

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol.wire import WireClient, create_topic, decode_batches, make_batch, produce, wait_for_topic

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("share")
    # a short acquisition lock so that expiry is observable quickly
    with BrokerProcess(str(d / "data"), {"group.share.record.lock.duration.ms": "1500",
                                         "group.share.delivery.count.limit": "3"}) as b:
        yield b


def _hb(c, group, member, epoch, topics=None):
    return c.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                             "subscribed_topic_names": topics})


def _fetch(c, group, member, epoch, tid, parts, acks=None, max_wait_ms=0, max_records=500, version=2, forgotten=()):
    acks = acks or {}
    return c.request(78, version, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": 500,
        "share_acquire_mode": 0, "is_renew_ack": False,
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": p, "acknowledgement_batches": acks.get(p, [])}
                                                    for p in parts]}] if parts else [],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": list(forgotten)}] if forgotten else []})


def _ack(c, group, member, epoch, tid, p, batches):
    return c.request(79, 2, {"group_id": group, "member_id": member, "share_session_epoch": epoch,
                             "is_renew_ack": False,
                             "topics": [{"topic_id": tid, "partitions": [{"partition_index": p,
                                                                          "acknowledgement_batches": batches}]}]})


def _records(resp):
    out = {}
    for t in resp["responses"]:
        for p in t["partitions"]:
            assert p["error_code"] == 0, p
            vals = [(o, v) for _, _, recs in decode_batches(p["records"]) for o, _, v in recs]
            acq = [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]
            if acq:
                out[p["partition_index"]] = (acq, vals)
    return out


def test_api_versions_advertise_share_apis(broker):
    with WireClient(broker.bootstrap) as c:
        r = c.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    keys = {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}
    assert keys[76] == (1, 1) and keys[77] == (1, 1) and keys[78] == (1, 2) and keys[79] == (1, 2)
    assert {f["name"]: f["max_version_level"] for f in r["finalized_features"]}["share.version"] == 1


def test_membership_and_simple_assignor(broker):
    topic, group = "share-members", "sg-members"
    with WireClient(broker.bootstrap) as c:
        create_topic(c, topic, partitions=3)
        tid = wait_for_topic(c, topic, 3)["topics"][0]["topic_id"]
        assert _hb(c, group, "", 0, [topic])["error_code"] == 42            # INVALID_REQUEST: empty member id
        assert _hb(c, group, "m1", 0, None)["error_code"] == 42             # no subscription on join
        a = _hb(c, group, "m1", 0, [topic])
        assert a["error_code"] == 0 and a["member_epoch"] == 1 and a["heartbeat_interval_ms"] == 5000
        assert a["assignment"]["topic_partitions"] == [{"topic_id": tid, "partitions": [0, 1, 2]}]
        b = _hb(c, group, "m2", 0, [topic])
        assert b["member_epoch"] == 2
        a2 = _hb(c, group, "m1", 1, [topic])
        assert a2["member_epoch"] == 2
        mine = a2["assignment"]["topic_partitions"][0]["partitions"]
        theirs = b["assignment"]["topic_partitions"][0]["partitions"]
        assert sorted(mine + theirs) == [0, 1, 2] and not set(mine) & set(theirs)
        assert _hb(c, group, "m1", 1, [topic])["error_code"] == 110          # FENCED_MEMBER_EPOCH
        assert _hb(c, group, "nobody", 2, [topic])["error_code"] == 25       # UNKNOWN_MEMBER_ID
        # more members than partitions: partitions are shared, every member gets one
        epochs = {}
        for i in range(3, 7):
            epochs["m%d" % i] = _hb(c, group, "m%d" % i, 0, [topic])["member_epoch"]
        for m in ("m1", "m2", "m3", "m4", "m5", "m6"):   # each takes the target of epoch 6
            r = _hb(c, group, m, epochs.get(m, 2), [topic])
            assert r["error_code"] == 0 and r["member_epoch"] == 6, (m, r)
        d = c.request(77, 1, {"group_ids": [group, "nope"], "include_authorized_operations": False})["groups"]
        assert d[0]["error_code"] == 0 and d[0]["group_state"] == "Stable" and d[0]["assignor_name"] == "simple"
        assert d[0]["group_epoch"] == 6 and len(d[0]["members"]) == 6
        counts = {}
        for m in d[0]["members"]:
            parts = [p for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]]
            assert m["assignment"]["topic_partitions"][0]["topic_name"] == topic
            assert len(parts) == 1, m      # 6 members x 3 partitions, shared by 2 each
            for p in parts:
                counts[p] = counts.get(p, 0) + 1
        assert counts == {0: 2, 1: 2, 2: 2}
        assert d[1]["error_code"] == 69                                      # GROUP_ID_NOT_FOUND
        lst = c.request(16, 5, {"states_filter": [], "types_filter": ["share"]})
        assert [(g["group_id"], g["group_type"], g["protocol_type"]) for g in lst["groups"]] == [(group, "share", "share")]
        for i in range(1, 7):
            m = "m%d" % i
            epoch = -1
            assert _hb(c, group, m, epoch, [topic])["error_code"] == 0
        d = c.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
        assert d["group_state"] == "Empty" and d["members"] == []


def test_acquire_acknowledge_redeliver(broker):
    topic, group, member = "share-data", "sg-data", str(uuid.uuid4())
    with WireClient(broker.bootstrap) as c:
        create_topic(c, topic, partitions=1)
        tid = wait_for_topic(c, topic, 1)["topics"][0]["topic_id"]
        produce(c, topic, 0, make_batch([b"before"]))
        # the session opens; share.auto.offset.reset=latest: what was there before is not delivered
        r = _fetch(c, group, member, 0, tid, [0])
        assert r["error_code"] == 0 and r["acquisition_lock_timeout_ms"] == 1500 and _records(r) == {}
        produce(c, topic, 0, make_batch([b"a0", b"a1", b"a2"]))
        produce(c, topic, 0, make_batch([b"b3", b"b4"]))
        r = _fetch(c, group, member, 1, tid, [], max_wait_ms=2000)
        acq, vals = _records(r)[0]
        assert acq == [(1, 5, 1)] and vals == [(1, b"a0"), (2, b"a1"), (3, b"a2"), (4, b"b3"), (5, b"b4")]
        # ShareAcknowledge: accept 1-2, release 3, reject 4, accept 5 (per-offset types)
        a = _ack(c, group, member, 2, tid, 0, [{"first_offset": 1, "last_offset": 5, "acknowledge_types": [1, 1, 2, 3, 1]}])
        assert a["error_code"] == 0 and a["responses"][0]["partitions"][0]["error_code"] == 0
        # acknowledging again: not acquired any more
        a = _ack(c, group, member, 3, tid, 0, [{"first_offset": 1, "last_offset": 1, "acknowledge_types": [1]}])
        assert a["responses"][0]["partitions"][0]["error_code"] == 121        # INVALID_RECORD_STATE
        # the released record comes back with delivery count 2, its whole batch sent
        r = _fetch(c, group, member, 4, tid, [], max_wait_ms=2000)
        acq, vals = _records(r)[0]
        assert acq == [(3, 3, 2)] and (3, b"a2") in vals
        # let the lock expire: delivered a third time by another member, then archived at the limit
        other = str(uuid.uuid4())
        r = _fetch(c, group, other, 0, tid, [0], max_wait_ms=5000)
        acq, vals = _records(r)[0]
        assert acq == [(3, 3, 3)]
        r = _fetch(c, group, other, 1, tid, [0], acks={0: [{"first_offset": 3, "last_offset": 3, "acknowledge_types": [2]}]},
                   max_wait_ms=200)
        part = r["responses"][0]["partitions"][0]
        assert part["acknowledge_error_code"] == 0 and part["acquired_records"] == []   # archived (limit 3)
        # session epochs
        assert _fetch(c, group, other, 7, tid, [0])["error_code"] == 123            # INVALID_SHARE_SESSION_EPOCH
        assert _fetch(c, group, "ghost", 3, tid, [0])["error_code"] == 122          # SHARE_SESSION_NOT_FOUND
        assert _ack(c, group, other, 0, tid, 0, [])["error_code"] == 123
        produce(c, topic, 0, make_batch([b"c6"]))
        r = _fetch(c, group, other, 2, tid, [0], max_wait_ms=2000)
        assert _records(r)[0] == ([(6, 6, 1)], [(6, b"c6")])
        # closing the session (-1) releases what the member holds: the first member gets it again
        r = _fetch(c, group, other, -1, tid, [], max_wait_ms=0)
        assert r["error_code"] == 0
        r = _fetch(c, group, member, 5, tid, [0], max_wait_ms=2000)
        assert _records(r)[0] == ([(6, 6, 2)], [(6, b"c6")])


def _list_offsets(c, group, topic=None, parts=(0,), version=1):
    topics = None if topic is None else [{"topic_name": topic, "partitions": list(parts)}]
    r = c.request(90, version, {"groups": [{"group_id": group, "topics": topics}]})
    return r["groups"][0]


@pytest.mark.parametrize("kill", [False, True], ids=["clean", "kill9"])
def test_delivery_state_survives_restart(tmp_path, kill):
    """Acknowledged records stay done, released ones come back with their delivery count, and
    the start offset holds across a restart (clean or kill -9): the state is in __share_group_state."""
    topic, group, member = "share-restart", "sg-restart", str(uuid.uuid4())
    with BrokerProcess(str(tmp_path / "data")) as b:
        with WireClient(b.bootstrap) as c:
            create_topic(c, topic, partitions=1)
            tid = wait_for_topic(c, topic, 1)["topics"][0]["topic_id"]
            joined = _hb(c, group, member, 0, [topic])
            assert joined["error_code"] == 0 and joined["member_epoch"] == 1
            assert _fetch(c, group, member, 0, tid, [0])["error_code"] == 0
            produce(c, topic, 0, make_batch([b"x0", b"x1", b"x2", b"x3"]))
            acq, vals = _records(_fetch(c, group, member, 1, tid, [], max_wait_ms=2000))[0]
            assert acq == [(0, 3, 1)]
            a = _ack(c, group, member, 2, tid, 0, [{"first_offset": 0, "last_offset": 3, "acknowledge_types": [1, 2, 1, 2]}])
            assert a["responses"][0]["partitions"][0]["error_code"] == 0
            g = _list_offsets(c, group, topic)
            assert g["error_code"] == 0 and g["topics"][0]["partitions"][0]["start_offset"] == 1
            assert g["topics"][0]["partitions"][0]["lag"] == 2      # 4 records, x0 and x2 done
        if kill:
            b.kill()
            b.start()
        else:
            b.restart()
        with WireClient(b.bootstrap) as c:
            # the membership is in __consumer_offsets: the member goes on with its epoch
            d = c.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
            assert (d["error_code"], d["group_state"], d["group_epoch"]) == (0, "Stable", 1)
            assert [(m["member_id"], m["member_epoch"], m["assignment"]["topic_partitions"][0]["partitions"])
                    for m in d["members"]] == [(member, 1, [0])]
            hb = _hb(c, group, member, 1, [topic])
            assert (hb["error_code"], hb["member_epoch"]) == (0, 1)
            g = _list_offsets(c, group, topic)
            assert g["topics"][0]["partitions"][0]["start_offset"] == 1
            r = _fetch(c, group, member, 0, tid, [0], max_wait_ms=3000)
            acq, vals = _records(r)[0]
            assert acq == [(1, 1, 2), (3, 3, 2)], acq                   # x1 and x3 again, second delivery
            assert {v for o, v in vals if o in (1, 3)} == {b"x1", b"x3"}
        # the coordinators' three topics are internal in Metadata, as Kafka 4.4's Topic.isInternal
        # says (kafka-python reads the flag from Metadata v1+)
        from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            described = {t["name"]: t["is_internal"] for t in admin.describe_topics(
                ["__share_group_state", "__consumer_offsets", topic])}
        finally:
            admin.close()
        assert described == {"__share_group_state": True, "__consumer_offsets": True, topic: False}, described
        with WireClient(b.bootstrap) as c:   # DescribeTopicPartitions (75) says the same
            r = c.request(75, 0, {"topics": [{"name": "__share_group_state"}], "response_partition_limit": 1,
                                  "cursor": None})
            assert [(t["name"], t["error_code"], t["is_internal"]) for t in r["topics"]] == \
                [("__share_group_state", 0, True)], r


def test_share_coordinator_apis_and_offsets_admin(broker):
    topic, group = "share-admin", "sg-admin"
    with WireClient(broker.bootstrap) as c:
        create_topic(c, topic, partitions=2)
        tid = wait_for_topic(c, topic, 2)["topics"][0]["topic_id"]
        # FindCoordinator key type 2 (share): "group:topicId:partition"
        import base64
        key = "%s:%s:0" % (group, base64.urlsafe_b64encode(tid).rstrip(b"=").decode())
        fc = c.request(10, 6, {"key_type": 2, "coordinator_keys": [key, "bad-key"]})["coordinators"]
        assert fc[0]["error_code"] == 0 and fc[0]["node_id"] == 1
        assert fc[1]["error_code"] == 42
        # 84 on nothing: INVALID_REQUEST (Kafka 4.4: "Read operation on uninitialized share partition not allowed.")
        body = {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
        p = c.request(84, 0, body)["results"][0]["partitions"][0]
        assert (p["error_code"], p["start_offset"], p["state_epoch"], p["state_batches"]) == (42, 0, 0, [])
        # 83 initialize, 85 write, 84 read, 87 summary, 86 delete
        init = {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 1, "start_offset": 10}]}]}
        assert c.request(83, 0, init)["results"][0]["partitions"][0]["error_code"] == 0
        w = {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{
            "partition": 0, "state_epoch": 1, "leader_epoch": 0, "start_offset": 12, "delivery_complete_count": 1,
            "state_batches": [{"first_offset": 12, "last_offset": 14, "delivery_state": 0, "delivery_count": 2},
                              {"first_offset": 15, "last_offset": 15, "delivery_state": 2, "delivery_count": 1}]}]}]}
        assert c.request(85, 1, w)["results"][0]["partitions"][0]["error_code"] == 0
        p = c.request(84, 0, body)["results"][0]["partitions"][0]
        assert (p["start_offset"], p["state_epoch"]) == (12, 1)
        assert [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"]) for b in p["state_batches"]] \
            == [(12, 14, 0, 2), (15, 15, 2, 1)]
        s = c.request(87, 1, body)["results"][0]["partitions"][0]
        assert (s["start_offset"], s["state_epoch"], s["leader_epoch"], s["delivery_complete_count"]) == (12, 1, 0, 1)
        stale = dict(init, topics=[{"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 0, "start_offset": 5}]}])
        assert c.request(83, 0, stale)["results"][0]["partitions"][0]["error_code"] == 124   # FENCED_STATE_EPOCH
        # the Admin APIs: describe (90), alter (91) needs an empty group, delete (92)
        assert _list_offsets(c, group, topic, parts=(0, 1))["topics"][0]["partitions"][1]["start_offset"] == -1
        alter = {"group_id": group, "topics": [{"topic_name": topic, "partitions": [{"partition_index": 1, "start_offset": 3},
                                                                                    {"partition_index": 9, "start_offset": 0}]}]}
        r = c.request(91, 0, alter)
        assert r["error_code"] == 0
        assert [(p["partition_index"], p["error_code"]) for p in r["responses"][0]["partitions"]] == [(1, 0), (9, 3)]
        assert _list_offsets(c, group, topic, parts=(1,))["topics"][0]["partitions"][0]["start_offset"] == 3
        listed = _list_offsets(c, group)
        assert [(t["topic_name"], [p["partition_index"] for p in t["partitions"]]) for t in listed["topics"]] == [(topic, [0, 1])]
        _hb(c, group, "busy", 0, [topic])
        assert c.request(91, 0, alter)["error_code"] == 68                                      # NON_EMPTY_GROUP
        assert c.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})["error_code"] == 68
        _hb(c, group, "busy", -1, [topic])
        r = c.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}, {"topic_name": "nope"}]})
        assert [(t["topic_name"], t["error_code"]) for t in r["responses"]] == [(topic, 0), ("nope", 3)]
        assert _list_offsets(c, group, topic, parts=(0, 1))["topics"][0]["partitions"][0]["start_offset"] == -1
        d = {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0}]}]}
        assert c.request(86, 0, d)["results"][0]["partitions"][0]["error_code"] == 0


def test_closed_connection_releases_its_records(tmp_path):
    """A share session ends with the connection that opened it: its acquired records go back at
    once (the 30 s acquisition lock would otherwise hold them)."""
    topic, group = "share-conn", "sg-conn"
    with BrokerProcess(str(tmp_path / "data")) as b:
        with WireClient(b.bootstrap) as c:
            create_topic(c, topic, partitions=1)
            tid = wait_for_topic(c, topic, 1)["topics"][0]["topic_id"]
        first = WireClient(b.bootstrap)
        assert _fetch(first, group, "m-a", 0, tid, [0])["error_code"] == 0
        with WireClient(b.bootstrap) as c:
            produce(c, topic, 0, make_batch([b"held"]))
        assert _records(_fetch(first, group, "m-a", 1, tid, [], max_wait_ms=3000))[0] == ([(0, 0, 1)], [(0, b"held")])
        with WireClient(b.bootstrap) as c:
            assert _records(_fetch(c, group, "m-b", 0, tid, [0], max_wait_ms=200)) == {}   # still locked by m-a
            first.close()
            r = _fetch(c, group, "m-b", 1, tid, [], max_wait_ms=10000)
            assert _records(r)[0] == ([(0, 0, 2)], [(0, b"held")])


def test_parked_fetch_of_a_replaced_session_acquires_nothing(broker):
    """A member reconnects (its old connection still has a ShareFetch waiting) and opens a new
    session: a record produced then goes to the new session, not to the old waiting fetch, whose
    answer nobody reads (the record would be held until its acquisition lock ran out)."""
    topic, group = "share-replaced-" + uuid.uuid4().hex[:6], "sg-replaced"
    with WireClient(broker.bootstrap) as c:
        create_topic(c, topic, partitions=1)
        tid = wait_for_topic(c, topic, 1)["topics"][0]["topic_id"]
    old, new = WireClient(broker.bootstrap), WireClient(broker.bootstrap)
    try:
        assert _fetch(old, group, "m-a", 0, tid, [0])["error_code"] == 0
        parked = {}
        t = threading.Thread(target=lambda: parked.update(r=_fetch(old, group, "m-a", 1, tid, [], max_wait_ms=4000)))
        t.start()
        time.sleep(0.5)   # the old session's fetch is waiting for data
        assert _fetch(new, group, "m-a", 0, tid, [0])["error_code"] == 0   # replaces the session
        with WireClient(broker.bootstrap) as c:
            produce(c, topic, 0, make_batch([b"for-the-new-session"]))
        t.join(10)
        assert not t.is_alive() and _records(parked["r"]) == {}
        got = _records(_fetch(new, group, "m-a", 1, tid, [], max_wait_ms=3000))
        assert got[0] == ([(0, 0, 1)], [(0, b"for-the-new-session")])
    finally:
        old.close()
        new.close()
