"""DescribeGroups v0-6 on the wire, with the answers Apache Kafka 4.4 gives (probed on a real
4.4.0 broker): unknown/deleted groups and the empty id are "Dead" without error up to v5 and
GROUP_ID_NOT_FOUND with a message on v6 (KIP-1043); a KIP-848 group is "Dead" up to v5 and
"not a classic group" on v6; requested authorized operations are 3400 except on v6 errors."""
import time
import uuid

from pykbroker.local.broker_process import wait_until

from pykbroker.protocol.wire import WireClient
from .helpers import create_topic, unique

NO_OPS = -2147483648
ALL_OPS = 3400  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS


def describe(b, version, groups, ops=False):
    with WireClient(b) as c:
        r = c.request(15, version, {"groups": groups, "include_authorized_operations": ops})
    return {g["group_id"]: g for g in r["groups"]}


def test_describe_groups_versions(gbroker):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    b = gbroker
    topic = unique("dg")
    create_topic(b.bootstrap, topic, 3)
    offonly, classic, k848, nope = unique("off"), unique("cls"), unique("k848"), unique("nope")
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=offonly, enable_auto_commit=False)
    c.assign([TopicPartition(topic, 0)])
    c.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    c.close()
    # a KIP-848 group with one member, joined by a raw ConsumerGroupHeartbeat
    with WireClient(b) as rc:
        hb = rc.request(68, 1, {"group_id": k848, "member_id": str(uuid.uuid4()), "member_epoch": 0,
                                "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                                "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                                "server_assignor": None, "topic_partitions": []})
        assert hb["error_code"] == 0, hb
    # the topic's metadata first, then the join: kafka-python can join before its first
    # Metadata answer, get an empty assignment ("No partition metadata") and, under load, not
    # rejoin within the wait (its race, not the broker's; this test is about DescribeGroups)
    live = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=classic, enable_auto_commit=False)
    try:
        assert live.partitions_for_topic(topic) == {0, 1, 2}
        live.subscribe([topic])
        deadline = time.monotonic() + 60
        while not live.assignment() and time.monotonic() < deadline:
            live.poll(200)
        assert live.assignment()
        for v in range(0, 7):
            d = describe(b, v, [nope, offonly, classic, k848, ""], ops=True)
            if v < 6:
                for gid in (nope, k848, ""):
                    assert (d[gid]["error_code"], d[gid]["group_state"], d[gid]["members"]) == (0, "Dead", []), (v, d[gid])
            else:
                assert d[nope]["error_code"] == 69 and d[nope]["error_message"] == "Group %s not found." % nope
                assert d[""]["error_code"] == 69 and d[""]["error_message"] == "Group  not found."
                assert d[k848]["error_code"] == 69
                assert d[k848]["error_message"] == "Group %s is not a classic group." % k848
                for gid in (nope, k848, ""):
                    assert d[gid]["group_state"] == "Dead" and d[gid]["authorized_operations"] == NO_OPS
            assert (d[offonly]["error_code"], d[offonly]["group_state"], d[offonly]["protocol_type"]) == (0, "Empty", "")
            s = d[classic]
            assert (s["error_code"], s["group_state"], s["protocol_type"], s["protocol_data"]) == (0, "Stable", "consumer", "range")
            assert len(s["members"]) == 1 and s["members"][0]["client_host"] == "/127.0.0.1"
            assert s["members"][0]["member_assignment"]  # Stable: the assignment bytes are shown
            if v >= 3:
                assert s["authorized_operations"] == d[offonly]["authorized_operations"] == ALL_OPS
                if v < 6:
                    assert d[nope]["authorized_operations"] == ALL_OPS
                assert describe(b, v, [classic])[classic]["authorized_operations"] == NO_OPS
            if v < 6:
                assert all(g["error_message"] is None for g in d.values())
    finally:
        live.close()
    # after the last member left, then once deleted
    wait_until(lambda: describe(b, 6, [classic])[classic]["group_state"] == "Empty", 10)
    with WireClient(b) as rc:
        r = rc.request(42, 2, {"groups_names": [classic]})
        assert r["results"][0]["error_code"] == 0, r
    assert describe(b, 6, [classic])[classic]["error_code"] == 69
    assert describe(b, 5, [classic])[classic]["group_state"] == "Dead"
