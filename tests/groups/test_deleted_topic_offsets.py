"""Committed offsets of a deleted topic are removed for every group (Kafka's
onPartitionsDeleted; checked on a real Kafka 4.4.0 broker: OffsetFetch no longer lists them and a
topic re-created under the same name starts at -1), durably: tombstones in __consumer_offsets, so
they do not come back after a restart."""
from kafka.admin import KafkaAdminClient, NewTopic

from pykbroker.protocol.wire import WireClient

from .helpers import start_broker, unique


def P(i, off):
    return {"partition_index": i, "committed_offset": off, "committed_leader_epoch": -1, "committed_metadata": "x"}


def committed(b, group):
    with WireClient(b) as c:
        g = c.request(9, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}],
                             "require_stable": False})["groups"][0]
    assert g["error_code"] == 0
    return {(t["name"], p["partition_index"]): p["committed_offset"] for t in g["topics"] for p in t["partitions"]}


def test_offsets_of_deleted_topic_are_removed(tmp_path):
    b = start_broker(str(tmp_path / "data"))
    try:
        keep, gone = unique("keep"), unique("gone")
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        a.create_topics([NewTopic(keep, 2, 1), NewTopic(gone, 2, 1)])
        groups = [unique("g"), unique("g")]
        with WireClient(b) as c:
            for i, g in enumerate(groups):
                r = c.request(8, 9, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                     "group_instance_id": None,
                                     "topics": [{"name": keep, "partitions": [P(0, 10 + i)]},
                                                {"name": gone, "partitions": [P(0, 20 + i), P(1, 30 + i)]}]})
                assert all(p["error_code"] == 0 for t in r["topics"] for p in t["partitions"]), r
        for i, g in enumerate(groups):
            assert committed(b, g) == {(keep, 0): 10 + i, (gone, 0): 20 + i, (gone, 1): 30 + i}
        a.delete_topics([gone])
        for i, g in enumerate(groups):
            assert committed(b, g) == {(keep, 0): 10 + i}
        a.create_topics([NewTopic(gone, 2, 1)])
        a.close()
        with WireClient(b) as c:
            r = c.request(9, 9, {"groups": [{"group_id": groups[0], "member_id": None, "member_epoch": -1,
                                             "topics": [{"name": gone, "partition_indexes": [0, 1]}]}],
                                 "require_stable": False})
        assert [p["committed_offset"] for p in r["groups"][0]["topics"][0]["partitions"]] == [-1, -1]
        b.restart(clean=False)  # kill -9: the tombstones are in the log, the offsets stay gone
        for i, g in enumerate(groups):
            assert committed(b, g) == {(keep, 0): 10 + i}
    finally:
        b.stop()
