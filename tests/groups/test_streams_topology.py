"""Sans-IO checks of the streams group model (coordinator/group/streams.py): how a topology is
configured against the metadata (partition counts of repartition and changelog topics, the
internal topics to create, the statuses) and the sticky task assignor; and the record codec of
coordinator/group/streams_records.py (Kafka's byte layout, round trip)."""
from types import SimpleNamespace

from pykbroker.coordinator.group import streams as S
from pykbroker.coordinator.group import streams_records as R


class MD:
    def __init__(self, **counts):
        self.topics = {n: SimpleNamespace(num_partitions=c, topic_id=bytes(16)) for n, c in counts.items()}

    def get(self, name):
        return self.topics.get(name)


def info(name, partitions=0, configs=()):
    return {"name": name, "partitions": partitions, "replication_factor": 0,
            "topic_configs": [{"key": k, "value": v} for k, v in configs]}


def sub(sid, sources=(), regex=(), changelogs=(), sinks=(), rep_sources=(), copart=()):
    return {"subtopology_id": sid, "source_topics": list(sources), "source_topic_regex": list(regex),
            "state_changelog_topics": list(changelogs), "repartition_sink_topics": list(sinks),
            "repartition_source_topics": list(rep_sources), "copartition_groups": list(copart)}


def test_missing_source_topics():
    c = S.configure({"epoch": 0, "subtopologies": [sub("0", ["a", "b"]), sub("1", regex=["x-.*"])]}, MD(a=2))
    assert not c["ready"]
    assert c["statuses"] == [(S.MISSING_SOURCE_TOPICS, "Source topics b, x-.* are missing.")]


def test_repartition_and_changelog_counts_and_creation():
    topo = {"epoch": 0, "subtopologies": [
        sub("0", ["in"], sinks=["app-rep-repartition"]),
        sub("1", changelogs=[info("app-store-changelog", configs=[("cleanup.policy", "compact")])],
            rep_sources=[info("app-rep-repartition")]),
        sub("2", ["other"], changelogs=[info("app-fixed-changelog", 7)])]}
    c = S.configure(topo, MD(**{"in": 5, "other": 2}))
    assert not c["ready"]
    assert c["create"] == {"app-rep-repartition": (5, 0, []),
                           "app-store-changelog": (5, 0, [{"key": "cleanup.policy", "value": "compact"}]),
                           "app-fixed-changelog": (7, 0, [])}
    assert c["statuses"][0][0] == S.MISSING_INTERNAL_TOPICS
    md = MD(**{"in": 5, "other": 2, "app-rep-repartition": 5, "app-store-changelog": 5, "app-fixed-changelog": 7})
    c = S.configure(topo, md)
    assert c["ready"] and c["statuses"] == [] and c["tasks"] == {"0": 5, "1": 5, "2": 2}
    # an internal topic with another partition count is reported, not recreated
    md.topics["app-store-changelog"].num_partitions = 3
    c = S.configure(topo, md)
    assert not c["ready"] and c["statuses"][0][0] == S.INCORRECTLY_PARTITIONED_TOPICS and c["create"] == {}


def test_copartitioned_sources_must_agree():
    topo = {"epoch": 0, "subtopologies": [
        sub("0", ["l", "r"], copart=[{"source_topics": [0, 1], "source_topic_regex": [],
                                      "repartition_source_topics": []}])]}
    assert S.configure(topo, MD(l=3, r=3))["ready"]
    c = S.configure(topo, MD(l=3, r=4))
    assert c["statuses"][0][0] == S.INCORRECTLY_PARTITIONED_TOPICS


def test_sticky_assignment():
    tasks = {"0": 3, "1": 3}
    first = S.sticky_assign({"a": 1}, tasks, {})
    assert first == {"a": {("0", 0), ("0", 1), ("0", 2), ("1", 0), ("1", 1), ("1", 2)}}
    # a second member: "a" keeps half, some of every subtopology (partition-major order)
    two = S.sticky_assign({"a": 1, "b": 1}, tasks, first)
    assert two["a"] == {("0", 0), ("1", 0), ("0", 1)} and two["b"] == {("1", 1), ("0", 2), ("1", 2)}
    # "a" leaves: "b" keeps its tasks and gets "a"'s
    assert S.sticky_assign({"b": 1}, tasks, {"b": two["b"]}) == {"b": first["a"]}


def test_records_round_trip_and_layout():
    k = R.key(R.SG_CURRENT_ASSIGNMENT, "g", "m")
    assert k == b"\x00\x16\x00\x01g\x00\x01m"
    v = R.value(R.SG_METADATA, {"epoch": 3, "metadata_hash": 5, "validated_topology_epoch": 0})
    # version 0, epoch, hash, one tagged field (tag 0, 4 bytes: the validated topology epoch)
    assert v == bytes.fromhex("0000" "00000003" "0000000000000005" "01" "00" "04" "00000000")
    assert R.parse_value(R.SG_METADATA, v) == {"epoch": 3, "metadata_hash": 5, "validated_topology_epoch": 0}
    cur = {"member_epoch": 4, "previous_member_epoch": 3, "state": 1,
           "active_tasks": R.task_ids({"0": {2, 1}}, {("0", 1): 4, ("0", 2): 3}), "standby_tasks": [],
           "warmup_tasks": [], "active_tasks_pending_revocation": R.task_ids({"1": {0}}, {("1", 0): 2}),
           "standby_tasks_pending_revocation": [], "warmup_tasks_pending_revocation": []}
    back = R.parse_value(R.SG_CURRENT_ASSIGNMENT, R.value(R.SG_CURRENT_ASSIGNMENT, cur))
    assert back == cur
    assert R.from_task_ids(back["active_tasks"]) == {"0": {1, 2}}
    assert R.parse_key(22, k) == (22, "g", "m")
