"""Membership changes with real client processes: kill -9, cooperative rebalancing, static members."""
import time

import pytest

from pykbroker.local.broker_process import wait_until

from .helpers import (Worker, consumed, create_topic, produce, unique, wait_consumed, wait_stable)

SESSION_MS = 3000


@pytest.mark.parametrize("lib", ["confluent", "kafka-python"])
def test_killed_consumer_partitions_move_within_session_timeout(gbroker, tmp_path, lib):
    topic, group = unique("kill"), unique("g")
    create_topic(gbroker.bootstrap, topic)
    workers = [Worker(tmp_path, lib, gbroker.bootstrap, topic, group, "w%d" % i, session_ms=SESSION_MS)
               for i in range(3)]
    try:
        wait_stable(workers, timeout=40)
        produce(gbroker.bootstrap, topic, 300)
        wait_consumed(workers, 300)
        victim, rest = workers[0], workers[1:]
        victim.kill9()
        t0 = time.monotonic()
        produce(gbroker.bootstrap, topic, 300, start=300)
        wait_stable(rest, timeout=SESSION_MS / 1000 + 10)
        moved_after = time.monotonic() - t0
        # Kafka: expiry after session.timeout.ms, then one rebalance (members rejoin at their
        # next heartbeat/poll).  Allow the rejoin round trip on top of the session timeout.
        assert moved_after < SESSION_MS / 1000 + 6, moved_after
        seen = wait_consumed(workers, 600)
        assert sorted(seen) == list(range(600)), "records lost"
        dups = sum(c - 1 for c in seen.values())
        print("%s: partitions moved %.1fs after kill -9; %d duplicate(s) of 600" % (lib, moved_after, dups))
    finally:
        for w in workers:
            if w.alive():
                w.stop()


def test_cooperative_sticky_join_and_leave_under_load(gbroker, tmp_path):
    """confluent-kafka with cooperative-sticky (KIP-429): members join and leave while records
    flow; the broker only relays, the incremental protocol is the clients'."""
    topic, group = unique("coop"), unique("g")
    create_topic(gbroker.bootstrap, topic)
    opts = dict(assignor="cooperative-sticky", session_ms=SESSION_MS)
    w0 = Worker(tmp_path, "confluent", gbroker.bootstrap, topic, group, "c0", **opts)
    workers = [w0]
    try:
        wait_stable(workers)
        produce(gbroker.bootstrap, topic, 200)
        w1 = Worker(tmp_path, "confluent", gbroker.bootstrap, topic, group, "c1", **opts)
        workers.append(w1)
        produce(gbroker.bootstrap, topic, 200, start=200)
        w2 = Worker(tmp_path, "confluent", gbroker.bootstrap, topic, group, "c2", **opts)
        workers.append(w2)
        # cooperative: the first rebalance after a join only revokes, so a covering but uneven
        # assignment ([[3, 4, 5], [0, 2], [1]]) comes before the even one the follow-up round gives
        asgs = wait_stable(workers, each=2)
        assert all(len(a) == 2 for a in asgs), asgs
        produce(gbroker.bootstrap, topic, 200, start=400)
        w1.stop()  # clean leave: LeaveGroup, the others take over incrementally
        asgs = wait_stable([w0, w2])
        produce(gbroker.bootstrap, topic, 200, start=600)
        seen = wait_consumed(workers, 800)
        assert sorted(seen) == list(range(800))
        # sticky: w0 never lost a partition it held when w2 arrived
        print("cooperative-sticky: %d duplicate(s) of 800" % sum(c - 1 for c in seen.values()))
    finally:
        for w in workers:
            if w.alive():
                w.stop()


def _generations(workers):
    """Each worker's latest logged generation, or None until every one has logged one."""
    gens = []
    for w in workers:
        g = [int(ln.split()[1]) for ln in w.lines() if ln.startswith("G ")]
        if not g:
            return None
        gens.append(g[-1])
    return gens


def _heartbeat(bootstrap, group, generation, instance):
    """The error code of a Heartbeat for the static member ``instance`` (its member id from
    DescribeGroups) in ``generation``: what the broker's group state is right now."""
    from pykbroker.protocol import wire

    with wire.WireClient(bootstrap, timeout=20) as c:
        g = c.request(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        member = [m["member_id"] for m in g["members"] if m["group_instance_id"] == instance]
        assert len(member) == 1, g
        return c.request(12, 4, {"group_id": group, "generation_id": generation, "member_id": member[0],
                                 "group_instance_id": instance})["error_code"]


def test_static_member_restart_without_rebalance(gbroker, tmp_path):
    """KIP-345: a static member killed and restarted within its session timeout gets its
    partitions back and the other members see no rebalance at all."""
    topic, group = unique("static"), unique("g")
    create_topic(gbroker.bootstrap, topic)
    opts = dict(session_ms=10000)
    workers = [Worker(tmp_path, "confluent", gbroker.bootstrap, topic, group, "s%d" % i, instance="inst-%d" % i,
                      **opts) for i in range(3)]
    try:
        asgs = wait_stable(workers)
        # the generation every member was assigned in (each logs "G <generation> ...")
        gens = wait_until(lambda: _generations(workers), 20, 0.1, "every member's generation")
        assert len(set(gens)) == 1, gens
        generation = gens[0]
        assert _heartbeat(gbroker.bootstrap, group, generation, "inst-1") == 0
        before = [w.assignment_events() for w in workers]
        workers[0].kill9()
        w0b = Worker(tmp_path, "confluent", gbroker.bootstrap, topic, group, "s0b", instance="inst-0", **opts)
        wait_until(lambda: w0b.assignment(), 20, 0.1, "restarted static member assigned")
        assert w0b.assignment() == asgs[0]
        # no rebalance: the broker decided when the restarted member joined, before it got its
        # assignment, so the group is now still in the same generation and not rebalancing
        # (a survivor's heartbeat in that generation: 0, not REBALANCE_IN_PROGRESS or
        # ILLEGAL_GENERATION)
        assert _heartbeat(gbroker.bootstrap, group, generation, "inst-1") == 0
        produce(gbroker.bootstrap, topic, 120)
        seen = wait_consumed([workers[1], workers[2], w0b], 120)
        assert sorted(seen) == list(range(120))
        assert _heartbeat(gbroker.bootstrap, group, generation, "inst-2") == 0
        # and the survivors' assignment never changed
        assert [w.assignment_events() for w in workers[1:]] == before[1:]
        workers.append(w0b)
    finally:
        for w in workers:
            if w.alive():
                w.stop()
