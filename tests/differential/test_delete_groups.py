"""DeleteGroups v0-3 against Apache Kafka 4.4: an empty group with committed offsets only, a
classic group with a member, KIP-848 consumer groups with and without a member, an unknown
group, the empty id and a repeated id, in one request per version; then the deleted group
again.  Kafka answers one result per distinct id (its response is a map keyed by group id) in
an order of its own (per __consumer_offsets shard), so results are compared sorted; v3's
per-group error_message is null for every error a group can get without a streams topology
plugin (generic texts are dropped by Kafka's ApiError.fromThrowable)."""
import uuid

import pytest

from .helpers import call, connect, create_topic, explain, wait_for_topic
from .test_groups import wait_coordinator


def _hb(c, group, topic, member_id, epoch):
    leaving = epoch == -1
    return c.request(68, 1, {"group_id": group, "member_id": member_id, "member_epoch": epoch,
                             "instance_id": None, "rack_id": None,
                             "rebalance_timeout_ms": -1 if leaving else 30000,
                             "subscribed_topic_names": None if leaving else [topic],
                             "subscribed_topic_regex": None, "server_assignor": None,
                             "topic_partitions": None if leaving else []})


def scenario(t, version):
    topic = "dg-topic"
    with connect(t) as r:
        create_topic(t, topic, 1)
        wait_for_topic(r, topic, 1)
    off, cls, new, new_empty = ("dg-%s-v%d" % (k, version) for k in ("offsets", "classic", "consumer", "consumer-empty"))
    for g in (off, cls, new, new_empty):
        wait_coordinator(t, g)
    r = call(t, 8, 8, {"group_id": off, "generation_id_or_member_epoch": -1, "member_id": "",
                       "group_instance_id": None, "retention_time_ms": -1,
                       "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                  "committed_leader_epoch": -1,
                                                                  "committed_metadata": ""}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
    with connect(t, timeout=40) as c:
        join = {"group_id": cls, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"m"}], "reason": None}
        j = c.request(11, 7, join)        # MEMBER_ID_REQUIRED with the member id
        j = c.request(11, 7, dict(join, member_id=j["member_id"]))
        assert j["error_code"] == 0, j
        hb = _hb(c, new, topic, str(uuid.uuid4()), 0)
        assert hb["error_code"] == 0, hb
        hb = _hb(c, new_empty, topic, str(uuid.uuid4()), 0)
        assert hb["error_code"] == 0, hb
        assert _hb(c, new_empty, topic, hb["member_id"], -1)["error_code"] == 0
        names = ["", "dg-unknown", off, cls, new, new_empty, off, "dg-unknown"]
        r = call(t, 42, version, {"groups_names": names})
        first = sorted((x["group_id"], x["error_code"], x.get("error_message", "absent")) for x in r["results"])
        again = call(t, 42, version, {"groups_names": [off]})["results"]
    return first, [(x["group_id"], x["error_code"], x.get("error_message", "absent")) for x in again]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_delete_groups(both, version):
    p, k = both(scenario, version)
    assert p == k, explain(p, k)
    first, again = p
    # what both answered (so that a shared wrong answer cannot pass either)
    assert {g: e for g, e, _ in first} == {
        "": 69, "dg-unknown": 69, "dg-offsets-v%d" % version: 0, "dg-classic-v%d" % version: 68,
        "dg-consumer-v%d" % version: 68, "dg-consumer-empty-v%d" % version: 0}
    assert again == [("dg-offsets-v%d" % version, 69, None)]
