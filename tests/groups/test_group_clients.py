"""Real client processes sharing a 6-partition topic in one group (classic protocol).

For each client library: three consumers split the partitions with no partition owned twice
(checked on the client side and on the broker via DescribeGroups), and with commit-after-
processing every record is consumed exactly once in a clean run.
"""
import pytest

from .helpers import (Worker, create_topic, produce, unique, wait_consumed, wait_stable)

N = 600


@pytest.mark.parametrize("lib", ["kafka-python", "confluent", "aiokafka"])
def test_three_consumers_share_topic_exactly_once(gbroker, tmp_path, lib):
    topic, group = unique("share"), unique("g")
    create_topic(gbroker.bootstrap, topic)
    workers = [Worker(tmp_path, lib, gbroker.bootstrap, topic, group, "w%d" % i) for i in range(3)]
    try:
        asgs = wait_stable(workers, timeout=40)
        assert all(len(a) == 2 for a in asgs), asgs  # range/roundrobin give 2 each
        produce(gbroker.bootstrap, topic, N)
        seen = wait_consumed(workers, N)
        assert sorted(seen) == list(range(N))
        dups = {v: c for v, c in seen.items() if c > 1}
        assert not dups, "clean run consumed records twice: %s" % sorted(dups)[:20]
        # the broker's view: three members, assignments disjoint and complete
        from kafka import KafkaAdminClient
        a = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
        d = a.describe_groups([group])[group]
        a.close()
        assert d["group_state"] == "Stable" and len(d["members"]) == 3
        owned = [p for m in d["members"] for t in m["member_assignment"]["assigned_partitions"]
                 for p in t["partitions"]]
        assert sorted(owned) == list(range(6))
        # a record's partition matches the worker that owned it
        for w, asg in zip(workers, asgs):
            assert {p for p, _, _ in w.records()} <= set(asg)
    finally:
        for w in workers:
            w.stop()
    assert all(not w.alive() for w in workers)
