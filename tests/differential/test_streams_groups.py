"""KIP-1071 streams groups over raw requests, the same sequence on pykbroker and on Apache Kafka
4.4: request validation (INVALID_REQUEST texts), the delayed first assignment, the statuses
MISSING_SOURCE_TOPICS / MISSING_INTERNAL_TOPICS, internal topics created by the coordinator with
the topology's partition counts, a second member joining (epochs, task split), fencing and
unknown members, the streams group as the other group APIs see it (ListGroups, DescribeGroups,
ConsumerGroupDescribe, ConsumerGroupHeartbeat, JoinGroup, DeleteGroups, OffsetFetch),
StreamsGroupDescribe, StreamsGroupTopologyDescriptionUpdate, and leaving."""
import time

from .helpers import call, connect, create_topic, explain, wait_for_topic

HB_V = 1


def hb_body(group, member, epoch, **kw):
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000, "topology": None,
            "active_tasks": [] if epoch == 0 else None, "standby_tasks": [] if epoch == 0 else None,
            "warmup_tasks": [] if epoch == 0 else None, "process_id": "process-" + member, "user_endpoint": None,
            "client_tags": None, "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}
    body.update(kw)
    return body


def topology(group, source):
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [group + "-rep-repartition"], "repartition_source_topics": [],
         "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [{"name": group + "-store-changelog", "partitions": 0, "replication_factor": 0,
                                     "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
         "repartition_sink_topics": [], "copartition_groups": [],
         "repartition_source_topics": [{"name": group + "-rep-repartition", "partitions": 0,
                                        "replication_factor": 0, "topic_configs": []}]}]}


def short(r):
    """What a heartbeat answer says, without the per-cluster member ids."""
    return (r["error_code"], r["error_message"], r["member_epoch"], r["heartbeat_interval_ms"],
            r["task_offset_interval_ms"], r["acceptable_recovery_lag"],
            [(s["status_code"], s["status_detail"]) for s in r["status"] or []],
            None if r["active_tasks"] is None else [(t["subtopology_id"], t["partitions"]) for t in r["active_tasks"]],
            r["standby_tasks"], r["warmup_tasks"], r["topology_description_required"])


def wait_coordinator(t, group):
    deadline = time.monotonic() + 30
    while True:
        r = call(t, 10, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        if r["error_code"] == 0:
            # Kafka answers FindCoordinator before the new __consumer_offsets partition is loaded
            d = call(t, 89, 1, {"group_ids": [group], "include_authorized_operations": False,
                                "include_topology_description": False})["groups"][0]
            if d["error_code"] in (0, 69):
                return
        assert time.monotonic() < deadline, r
        time.sleep(0.1)


def test_heartbeat_validation(both):
    def scenario(t):
        g = "sg-validation"
        wait_coordinator(t, g)
        topo = topology(g, "sg-validation-src")
        cases = {
            "empty group": hb_body("", "m1", 0, topology=topo),
            "empty member": hb_body(g, "", 0, topology=topo),
            "no topology": hb_body(g, "m1", 0),
            "active tasks null": hb_body(g, "m1", 0, topology=topo, active_tasks=None),
            "standby tasks set": hb_body(g, "m1", 0, topology=topo,
                                         standby_tasks=[{"subtopology_id": "0", "partitions": [0]}]),
            "no rebalance timeout": hb_body(g, "m1", 0, topology=topo, rebalance_timeout_ms=-1),
            "epoch -3": hb_body(g, "m1", -3),
            "empty instance id": hb_body(g, "m1", 0, topology=topo, instance_id=""),
            "unknown group": hb_body(g, "m1", 3),
            "unknown group leave": hb_body(g, "m1", -1),
        }
        out = {}
        with connect(t) as r:
            for name, body in cases.items():
                res = r.request(88, HB_V, body)
                out[name] = (res["error_code"], res["error_message"], res["member_id"], res["member_epoch"])
            # the topology description push without a plugin (a default broker has none)
            out["93"] = r.request(93, 0, {"group_id": g, "member_id": "m1", "topology_epoch": 0,
                                          "topology_description": {"subtopologies": [], "global_stores": []}})
        return out
    p, k = both.at_once(scenario)
    assert p == k, explain(p, k)


def test_group_lifecycle(both):
    def scenario(t):
        g = "sg-life"
        src = "sg-life-src"
        wait_coordinator(t, g)
        steps = []
        with connect(t) as r:
            topo = topology(g, src)
            # the source topic does not exist yet
            steps.append(("join", short(r.request(88, HB_V, hb_body(g, "m1", 0, topology=topo)))))
            create_topic(t, src, 3)
            # the internal topics are created once the source topic is there; wait past Kafka's
            # 3 s initial rebalance delay and for the assignment
            deadline = time.monotonic() + 30
            seen = []
            while True:
                res = r.request(88, HB_V, hb_body(g, "m1", 1 if not seen else seen[-1]["member_epoch"]))
                seen.append(res)
                if res["active_tasks"]:
                    break
                assert time.monotonic() < deadline, res
                time.sleep(0.5)
            first = seen[-1]
            steps.append(("assigned", (first["error_code"], first["status"],
                                       [(x["subtopology_id"], x["partitions"]) for x in first["active_tasks"]])))
            # every status seen while waiting is one of these
            # MISSING_INTERNAL_TOPICS was reported while the coordinator created them (whether the
            # source topic was still reported missing first depends on timing)
            steps.append(("internal topics reported missing", any(s["status_code"] == 3 for x in seen
                                                                  for s in x["status"] or [])))
            md = r.request(3, 12, {"topics": [{"topic_id": None, "name": g + "-store-changelog"},
                                              {"topic_id": None, "name": g + "-rep-repartition"}],
                                   "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            steps.append(("internal topics", sorted((x["name"], x["error_code"], len(x["partitions"]))
                                                    for x in md["topics"])))
            e1 = first["member_epoch"]
            # a second member joins: it gets the current assignment epoch and no tasks; at most one
            # assignment per second (KIP-1263: "assignment interval"); m1 gives up half of its
            # tasks, then m2 gets them.  Heartbeat both until the group is Stable.
            j2 = r.request(88, HB_V, hb_body(g, "m2", 0, topology=topo))
            steps.append(("m2 join", short(j2)[:2], j2["member_epoch"] == e1, short(j2)[6:8]))
            owned = {"m1": [(x["subtopology_id"], x["partitions"]) for x in first["active_tasks"]], "m2": []}
            epochs = {"m1": e1, "m2": j2["member_epoch"]}
            changes = []
            deadline = time.monotonic() + 30
            while True:
                for mid in ("m1", "m2"):
                    tasks = [{"subtopology_id": sid, "partitions": ps} for sid, ps in owned[mid]]
                    res = r.request(88, HB_V, hb_body(g, mid, epochs[mid], active_tasks=tasks, standby_tasks=[],
                                                      warmup_tasks=[]))
                    assert res["error_code"] == 0, res
                    if res["active_tasks"] is not None:
                        owned[mid] = [(x["subtopology_id"], x["partitions"]) for x in res["active_tasks"]]
                        changes.append((mid, res["member_epoch"] - e1, owned[mid]))
                    epochs[mid] = res["member_epoch"]
                d = r.request(89, 1, {"group_ids": [g], "include_authorized_operations": False,
                                      "include_topology_description": False})["groups"][0]
                if d["group_state"] == "Stable":
                    break
                assert time.monotonic() < deadline, d
                time.sleep(0.3)
            steps.append(("rebalance", changes, {m: e - e1 for m, e in epochs.items()}))
            e2 = epochs["m2"]
            fenced = short(r.request(88, HB_V, hb_body(g, "m2", e2 + 5)))
            steps.append(("fenced", fenced[0], fenced[1].replace("(%d)" % (e2 + 5), "(E+5)").replace("(%d)" % e2, "(E)"),
                          fenced[2:]))
            steps.append(("unknown member", short(r.request(88, HB_V, hb_body(g, "zz", e2)))))
            d = r.request(89, 1, {"group_ids": [g, "sg-none"], "include_authorized_operations": True,
                                  "include_topology_description": True})
            for x in d["groups"]:
                if x["error_code"] == 0:
                    x["group_epoch"] -= e1
                    x["assignment_epoch"] -= e1
                x["members"].sort(key=lambda m: m["member_id"])   # Kafka's order is a hash map's
                for m in x["members"]:
                    m["client_host"] = "-"
                    m["member_epoch"] -= e1
            steps.append(("describe", d["groups"]))
            lg = r.request(16, 5, {"states_filter": [], "types_filter": ["streams"]})
            steps.append(("list", [x for x in lg["groups"] if x["group_id"] == g]))
            steps.append(("describe classic", r.request(15, 6, {"groups": [g], "include_authorized_operations": False})))
            steps.append(("describe consumer", r.request(69, 1, {"group_ids": [g], "include_authorized_operations": False})))
            cg = r.request(68, 1, {"group_id": g, "member_id": "x", "member_epoch": 0, "instance_id": None,
                                   "rack_id": None, "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["a"],
                                   "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
            steps.append(("consumer heartbeat", cg["error_code"], cg["error_message"]))
            jg = r.request(11, 9, {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                   "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                   "protocols": [{"name": "range", "metadata": b""}], "reason": None})
            steps.append(("join group", jg["error_code"]))
            steps.append(("delete non-empty", r.request(42, 2, {"groups_names": [g]})))
            of = r.request(9, 9, {"groups": [{"group_id": g, "member_id": "m2", "member_epoch": e2 + 1, "topics": None}],
                                  "require_stable": True})
            steps.append(("offset fetch stale", [x["error_code"] for x in of["groups"]]))
            # offsets: a member commits at its epoch; another epoch, an unknown member, no member
            def commit(member, epoch, offset):
                res = r.request(8, 9, {"group_id": g, "generation_id_or_member_epoch": epoch, "member_id": member,
                                       "group_instance_id": None, "topics": [{"name": src, "partitions": [
                                           {"partition_index": 0, "committed_offset": offset,
                                            "committed_leader_epoch": -1, "committed_metadata": "x"}]}]})
                return res["topics"][0]["partitions"][0]["error_code"]
            steps.append(("commits", commit("m2", e2, 5), commit("m2", e2 + 7, 6), commit("zz", e2, 7),
                          commit("", -1, 8)))
            of = r.request(9, 9, {"groups": [{"group_id": g, "member_id": "m2", "member_epoch": e2,
                                              "topics": [{"name": src, "partition_indexes": [0]}]}],
                                  "require_stable": False})
            steps.append(("committed", [(p["partition_index"], p["committed_offset"], p["error_code"])
                                        for tp in of["groups"][0]["topics"] for p in tp["partitions"]]))
            od = r.request(47, 0, {"group_id": g, "topics": [{"name": src, "partitions": [{"partition_index": 0}]}]})
            steps.append(("offset delete of a source topic", od["error_code"],
                          [p["error_code"] for tp in od["topics"] for p in tp["partitions"]]))
            steps.append(("describe classic v5", r.request(15, 5, {"groups": [g], "include_authorized_operations": False})))
            steps.append(("leave m1", short(r.request(88, HB_V, hb_body(g, "m1", -1)))))
            after = short(r.request(88, HB_V, hb_body(g, "m2", e2)))
            steps.append(("m2 after m1 left", after[:2], after[2] - e2))
            steps.append(("leave m2", short(r.request(88, HB_V, hb_body(g, "m2", -1)))))
            steps.append(("delete empty", r.request(42, 2, {"groups_names": [g]})))
        return steps
    p, k = both.at_once(scenario)
    assert p == k, explain(p, k)


def test_endpoint_information(both):
    """Interactive Queries: a member with a user endpoint learns which source partitions every
    endpoint serves; the endpoint epoch moves with the assignment, and the map is sent while the
    member's epoch differs from the group's."""
    def scenario(t):
        g, src = "sg-iq", "sg-iq-src"
        wait_coordinator(t, g)
        create_topic(t, src, 2)
        with connect(t) as r:
            wait_for_topic(r, src, 2)
        topo = {"epoch": 0, "subtopologies": [
            {"subtopology_id": "0", "source_topics": [src], "source_topic_regex": [], "state_changelog_topics": [],
             "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
        out = []
        with connect(t) as r:
            deadline = time.monotonic() + 30
            while True:
                j = r.request(88, HB_V, hb_body(g, "m1", 0, topology=topo,
                                                user_endpoint={"host": "iq-host", "port": 8080}))
                # Kafka 4.4 answers UNKNOWN_SERVER_ERROR (and keeps no member) to a join with a
                # user endpoint while its coordinator does not see the source topic yet (also
                # when the topic is missing): not mimicked, the join is retried
                if j["error_code"] != -1 or t.name != "kafka":
                    break
                assert time.monotonic() < deadline, j
                time.sleep(0.5)
            out.append((j["error_code"], j["endpoint_information_epoch"], j["partitions_by_user_endpoint"]))
            epoch, deadline = j["member_epoch"], time.monotonic() + 30
            while True:
                x = r.request(88, HB_V, hb_body(g, "m1", epoch))
                epoch = x["member_epoch"]
                if x["active_tasks"]:
                    break
                assert x["error_code"] == 0 and time.monotonic() < deadline, x
                time.sleep(0.5)
            out.append((x["endpoint_information_epoch"], x["partitions_by_user_endpoint"]))
            known = x["endpoint_information_epoch"]
            x = r.request(88, HB_V, hb_body(g, "m1", epoch, endpoint_information_epoch=known))
            out.append((x["endpoint_information_epoch"], x["partitions_by_user_endpoint"]))
            out.append(short(r.request(88, HB_V, hb_body(g, "m1", -1)))[:3])
        return out
    p, k = both.at_once(scenario)
    assert p == k, explain(p, k)


def test_internal_topic_creation_failure_is_reported(both):
    """An internal topic the broker cannot create (replication factor 3 on one broker): the next
    heartbeats' MISSING_INTERNAL_TOPICS status ends "; Creation failed: <topic> (<why>)." (Kafka
    4.4 keeps the error for two heartbeat intervals)."""
    def scenario(t):
        g, src = "sg-fail", "sg-fail-src"
        create_topic(t, src, 1)
        wait_for_topic(t, src, 1)
        wait_coordinator(t, g)
        topo = {"epoch": 0, "subtopologies": [
            {"subtopology_id": "0", "source_topics": [src], "source_topic_regex": [], "repartition_sink_topics": [],
             "repartition_source_topics": [], "copartition_groups": [],
             "state_changelog_topics": [{"name": g + "-store-changelog", "partitions": 0, "replication_factor": 3,
                                         "topic_configs": []}]}]}
        with connect(t) as r:
            res = r.request(88, HB_V, hb_body(g, "m1", 0, topology=topo))
            deadline = time.monotonic() + 20
            while not any("Creation failed" in (s["status_detail"] or "") for s in res["status"] or []):
                assert time.monotonic() < deadline, res
                time.sleep(0.3)
                res = r.request(88, HB_V, hb_body(g, "m1", res["member_epoch"]))
            return [(s["status_code"], s["status_detail"]) for s in res["status"] if s["status_code"] == 3]

    p, k = both.at_once(scenario)
    assert p == k, explain(p, k)


def test_incorrectly_partitioned_internal_topics(both):
    """Internal topics that exist with another partition count than the topology's: Kafka 4.4's
    INCORRECTLY_PARTITIONED_TOPICS status names the first of them in its HashSet's order of the
    topology's topics ("Existing topic X has different number of partitions: expected N, found M"),
    and nothing is created."""
    def scenario(t):
        g, src = "sg-wrong", "sg-wrong-src"
        changelogs = [g + "-%s-changelog" % k for k in ("zeta", "alpha", "mid", "beta")]
        create_topic(t, src, 1)
        wait_for_topic(t, src, 1)
        # mid first: the first of the three in Kafka's order, so that it is in the coordinator's
        # metadata image by the heartbeat even if the last one created is not yet
        for i, name in enumerate([changelogs[2], changelogs[0], changelogs[1]]):
            create_topic(t, name, 2 + i)
            wait_for_topic(t, name, 2 + i)
        wait_coordinator(t, g)
        topo = {"epoch": 0, "subtopologies": [
            {"subtopology_id": "0", "source_topics": [src], "source_topic_regex": [], "repartition_sink_topics": [],
             "repartition_source_topics": [], "copartition_groups": [],
             "state_changelog_topics": [{"name": n, "partitions": 0, "replication_factor": 0, "topic_configs": []}
                                        for n in changelogs]}]}
        with connect(t) as r:
            res = r.request(88, HB_V, hb_body(g, "m1", 0, topology=topo))
            out = [(s["status_code"], s["status_detail"]) for s in res["status"] or []]
        time.sleep(0.5)
        missing = call(t, 3, 12, {"topics": [{"name": changelogs[3]}], "allow_auto_topic_creation": False})
        return out, missing["topics"][0]["error_code"]

    p, k = both.at_once(scenario)
    assert p == k, explain(p, k)
    assert k[1] == 3 and k[0][-1][0] == 2 and k[0][-1][1].startswith("Existing topic sg-wrong-"), k
