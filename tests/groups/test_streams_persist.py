"""KIP-1071 streams groups are persisted in __consumer_offsets (Kafka's record layout, types 17-23)
and replayed at load: after a clean restart or a kill -9, StreamsGroupDescribe shows the same
topology, members, epochs and tasks, the members go on heartbeating at their epochs, offsets
committed by a member are still there; a deleted group stays deleted.  Raw requests (the
heartbeat sequence a Kafka Streams client sends); the Kafka Streams application itself runs in
tests/java/test_streams_groups.py."""
import time

import pytest

from pykbroker.protocol.wire import WireClient

from .helpers import create_topic, start_broker, unique

# no 3 s initial delay nor 1 s assignment interval: the sequence below is deterministic
OVERRIDES = {"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"}


def hb(group, member, epoch, topology=None, active=None):
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000, "topology": topology,
            "active_tasks": [] if epoch == 0 else active, "standby_tasks": [] if epoch == 0 else None,
            "warmup_tasks": [] if epoch == 0 else None, "process_id": "p-" + member,
            "user_endpoint": {"host": "h-" + member, "port": 8080}, "client_tags": [{"key": "zone", "value": "a"}],
            "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}


def topology(src, app):
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [src], "source_topic_regex": [],
         "state_changelog_topics": [{"name": app + "-store-changelog", "partitions": 0, "replication_factor": 0,
                                     "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
         "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}


def stable(r, group, members, timeout=30):
    """Heartbeat every member (reporting what it owns) until the group is Stable; returns
    member -> (epoch, owned tasks)."""
    state = {m: [e, []] for m, e in members.items()}
    deadline = time.monotonic() + timeout
    while True:
        for m, st in state.items():
            owned = [{"subtopology_id": s, "partitions": ps} for s, ps in st[1]]
            res = r.request(88, 1, hb(group, m, st[0], active=owned))
            assert res["error_code"] == 0, res
            st[0] = res["member_epoch"]
            if res["active_tasks"] is not None:
                st[1] = [(t["subtopology_id"], t["partitions"]) for t in res["active_tasks"]]
        d = describe(r, group)
        if d["group_state"] == "Stable":
            return {m: tuple((e, tuple((s, tuple(ps)) for s, ps in t))) for m, (e, t) in state.items()}
        assert time.monotonic() < deadline, d
        time.sleep(0.2)


def describe(r, group):
    d = r.request(89, 1, {"group_ids": [group], "include_authorized_operations": False,
                          "include_topology_description": False})["groups"][0]
    d["members"].sort(key=lambda m: m["member_id"])
    return d


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_streams_group_survives_restart(tmp_path, clean):
    b = start_broker(str(tmp_path / "data"), **OVERRIDES)
    src, app = unique("sgsrc"), unique("sgapp")
    try:
        create_topic(b.bootstrap, src, 4)
        with WireClient(b.bootstrap, timeout=30, client_id="streams-test") as r:
            r.request(10, 4, {"key_type": 0, "coordinator_keys": [app]})
            j1 = r.request(88, 1, hb(app, "m1", 0, topology(src, app)))
            assert j1["error_code"] == 0, j1
            j2 = r.request(88, 1, hb(app, "m2", 0, topology(src, app)))
            assert j2["error_code"] == 0, j2
            before = stable(r, app, {"m1": j1["member_epoch"], "m2": j2["member_epoch"]})
            assert sorted(len(t[0][1]) for _, t in before.values()) == [2, 2]
            d_before = describe(r, app)
            assert [m["member_id"] for m in d_before["members"]] == ["m1", "m2"]
            assert d_before["topology"]["subtopologies"][0]["state_changelog_topics"][0]["partitions"] == 4
            # a member commits offsets at its epoch (a streams group validates it as KIP-848 does)
            e1 = before["m1"][0]
            c = r.request(8, 9, {"group_id": app, "generation_id_or_member_epoch": e1, "member_id": "m1",
                                 "group_instance_id": None, "topics": [{"name": src, "partitions": [
                                     {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                                      "committed_metadata": "m"}]}]})
            assert c["topics"][0]["partitions"][0]["error_code"] == 0, c
            stale = r.request(8, 9, {"group_id": app, "generation_id_or_member_epoch": e1 + 7, "member_id": "m1",
                                     "group_instance_id": None, "topics": [{"name": src, "partitions": [
                                         {"partition_index": 0, "committed_offset": 43, "committed_leader_epoch": -1,
                                          "committed_metadata": ""}]}]})
            assert stale["topics"][0]["partitions"][0]["error_code"] == 113, stale   # STALE_MEMBER_EPOCH

        b.restart(clean=clean)
        with WireClient(b.bootstrap, timeout=30, client_id="streams-test") as r:
            d_after = describe(r, app)
            assert d_after == d_before
            # the members carry on at their epochs: no UNKNOWN_MEMBER_ID, no fencing, same tasks
            for m, (epoch, tasks) in before.items():
                owned = [{"subtopology_id": s, "partitions": list(ps)} for s, ps in tasks]
                res = r.request(88, 1, hb(app, m, epoch, active=owned))
                assert (res["error_code"], res["member_epoch"]) == (0, epoch), res
                assert res["active_tasks"] in (None, owned), res
            assert describe(r, app) == d_before
            f = r.request(9, 9, {"groups": [{"group_id": app, "member_id": "m1", "member_epoch": e1, "topics": None}],
                                 "require_stable": True})
            parts = f["groups"][0]["topics"][0]["partitions"]
            assert [(p["partition_index"], p["committed_offset"], p["metadata"]) for p in parts] == [(0, 42, "m")]
            # both leave; the group is deleted (with its records) and stays deleted
            for m in ("m1", "m2"):
                assert r.request(88, 1, hb(app, m, -1))["member_epoch"] == -1
            dg = r.request(42, 2, {"groups_names": [app]})
            assert dg["results"][0]["error_code"] == 0, dg
        b.restart(clean=clean)
        with WireClient(b.bootstrap, timeout=30, client_id="streams-test") as r:
            assert describe(r, app)["error_code"] == 69
            lg = r.request(16, 5, {"states_filter": [], "types_filter": []})
            assert app not in [g["group_id"] for g in lg["groups"]]
    finally:
        b.stop()
