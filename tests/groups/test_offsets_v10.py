"""OffsetCommit v2-10 / OffsetFetch v1-10 details on the wire, as Apache Kafka 4.4 answers them
(probed on a real 4.4.0 broker): v10 names topics by id (KIP-848) and answers UNKNOWN_TOPIC_ID
for an unknown or zero id; unknown partitions of a known topic are UNKNOWN_TOPIC_OR_PARTITION
and lead the response (topic checks run before the coordinator); v8+ group errors carry no
topics; offsets committed by id read back by name and vice versa."""
import time
import uuid

from pykbroker.protocol.wire import WireClient

from .helpers import create_topic, unique


def P(i, off=5, meta="m"):
    return {"partition_index": i, "committed_offset": off, "committed_leader_epoch": -1, "committed_metadata": meta}


def commit(c, v, group, topics):
    return c.request(8, v, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                            "group_instance_id": None, "topics": topics})


def fetch(c, v, groups):
    return c.request(9, v, {"groups": groups, "require_stable": False})["groups"]


def topic_id(c, name):
    """The topic's id once this broker's Metadata knows the topic (on Apache Kafka a broker's
    metadata follows CreateTopics a moment later: a zero id until then)."""
    deadline = time.monotonic() + 15
    while True:
        md = c.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": name}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        tid = md["topics"][0]["topic_id"]
        if tid != bytes(16) or time.monotonic() > deadline:
            return tid
        time.sleep(0.05)


def test_offset_commit_and_fetch_v10_by_topic_id(gbroker):
    t, t2 = unique("o10"), unique("o10b")
    create_topic(gbroker.bootstrap, t, 3)
    create_topic(gbroker.bootstrap, t2, 2)
    g, g9 = unique("g"), unique("g9")
    bogus = uuid.uuid4().bytes
    with WireClient(gbroker) as c:
        tid, tid2 = topic_id(c, t), topic_id(c, t2)
        r = commit(c, 10, g, [{"name": "", "topic_id": tid, "partitions": [P(1), P(99)]},
                              {"name": "", "topic_id": bogus, "partitions": [P(0)]},
                              {"name": "", "topic_id": tid2, "partitions": [P(0)]}])["topics"]
        # errors first (request order), then what the coordinator stored
        assert [(x["topic_id"], x["name"], [(p["partition_index"], p["error_code"]) for p in x["partitions"]])
                for x in r] == [(tid, "", [(99, 3), (1, 0)]), (bogus, "", [(0, 100)]), (tid2, "", [(0, 0)])]
        # v10 with a name but a zero id: the name is not used
        r = commit(c, 10, g, [{"name": t, "topic_id": bytes(16), "partitions": [P(2)]}])["topics"]
        assert r[0]["partitions"][0]["error_code"] == 100
        # the same request by name (v9): same order, names echoed
        r = commit(c, 9, g9, [{"name": t, "partitions": [P(1), P(99)]}, {"name": "nope-" + t, "partitions": [P(0)]},
                              {"name": t2, "partitions": [P(0)]}])["topics"]
        assert [(x["name"], [(p["partition_index"], p["error_code"]) for p in x["partitions"]]) for x in r] == [
            (t, [(99, 3), (1, 0)]), ("nope-" + t, [(0, 3)]), (t2, [(0, 0)])]
        # unknown topics and a generation for a group that does not exist: topic errors first, the
        # group error for the rest: GROUP_ID_NOT_FOUND from v9 on, ILLEGAL_GENERATION before
        # (Kafka 4.4, run against it with PYKBROKER_AGAINST=kafka)
        for v, group_error in ((9, 69), (8, 22)):
            r = c.request(8, v, {"group_id": unique("gen"), "generation_id_or_member_epoch": 3, "member_id": "m",
                                 "group_instance_id": None,
                                 "topics": [{"name": "nope-" + t, "partitions": [P(0)]},
                                            {"name": t, "partitions": [P(0)]}]})
            assert [(x["name"], x["partitions"][0]["error_code"]) for x in r["topics"]] == \
                [("nope-" + t, 3), (t, group_error)], v
        # fetch by id (v10): committed by id and by name alike; unknown id; unknown partition
        gs = fetch(c, 10, [{"group_id": g, "member_id": None, "member_epoch": -1,
                            "topics": [{"name": "", "topic_id": tid, "partition_indexes": [1, 99]},
                                       {"name": "", "topic_id": bogus, "partition_indexes": [0]}]},
                           {"group_id": g9, "member_id": None, "member_epoch": -1,
                            "topics": [{"name": "", "topic_id": tid2, "partition_indexes": [0]}]}])
        assert gs[0]["error_code"] == 0
        got = {(x["topic_id"], p["partition_index"]): (x["name"], p["committed_offset"], p["metadata"], p["error_code"])
               for x in gs[0]["topics"] for p in x["partitions"]}
        assert got == {(tid, 1): ("", 5, "m", 0), (tid, 99): ("", -1, "", 0), (bogus, 0): ("", -1, "", 100)}
        assert [(x["topic_id"], x["partitions"][0]["committed_offset"]) for x in gs[1]["topics"]] == [(tid2, 5)]
        # all offsets of a group, by id
        gs = fetch(c, 10, [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": None}])
        assert sorted((x["topic_id"], x["name"], p["partition_index"]) for x in gs[0]["topics"] for p in x["partitions"]) \
            == sorted([(tid, "", 1), (tid2, "", 0)])
        # and by name (v9) what was committed by id
        gs = fetch(c, 9, [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": None}])
        assert sorted((x["name"], p["partition_index"]) for x in gs[0]["topics"] for p in x["partitions"]) \
            == sorted([(t, 1), (t2, 0)])
        # the empty group id is a group like any other for offsets (Kafka: backwards compatibility)
        r = commit(c, 10, "", [{"name": "", "topic_id": tid, "partitions": [P(0, 42)]}])["topics"]
        assert r[0]["partitions"][0]["error_code"] == 0
        gs = fetch(c, 10, [{"group_id": "", "member_id": None, "member_epoch": -1,
                            "topics": [{"name": "", "topic_id": tid, "partition_indexes": [0]}]}])
        assert gs[0]["error_code"] == 0 and gs[0]["topics"][0]["partitions"][0]["committed_offset"] == 42
