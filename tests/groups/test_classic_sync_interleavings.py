"""What happens to members waiting in SyncGroup when something else happens during
CompletingRebalance — Kafka's classic group rules, driven in-process on trio's MockClock.

Kafka (GroupMetadataManager, classic join/sync paths):
- a follower's SyncGroup is parked until the leader's SyncGroup (and the append of its
  assignment) completes the generation;
- anything that starts a new rebalance while CompletingRebalance (a new member, a member or
  the leader rejoining with changed metadata, a member leaving or expiring) answers every
  parked SyncGroup with REBALANCE_IN_PROGRESS;
- the leader (or any member) rejoining with unchanged metadata during CompletingRebalance is a
  retry: it gets the current generation again (the leader with the member list), nothing else
  changes and the parked SyncGroups keep waiting;
- Heartbeat during CompletingRebalance is a normal heartbeat (NONE); OffsetCommit from a
  member of the generation gets REBALANCE_IN_PROGRESS, after the member and generation checks;
- a leader that neither syncs nor heartbeats is expired after its session timeout, and one
  that heartbeats without syncing is dropped by the pending-sync timeout (the rebalance
  timeout): a follower never waits longer than that.
"""
import trio

from pykbroker.protocol.errors import ErrorCode as E

from .test_classic_state_machine import join_new, jreq, run

P1 = (("range", b"m1"),)
P2 = (("range", b"m2"),)


async def generation_of_two(g, session=10000, rebalance=30000):
    """Leader a and follower b in CompletingRebalance of generation 2 (b's SyncGroup not sent)."""
    a = await (await join_new(g, session=session, rebalance=rebalance)).get()
    await g.sync(a["member_id"], None, 1, None, None, {}).get()
    fb = await join_new(g, client="d", session=session, rebalance=rebalance)
    ra = await g.join(jreq(member_id=a["member_id"], session=session, rebalance=rebalance)).get()
    rb = await fb.get()
    assert g.state == "CompletingRebalance" and ra["generation_id"] == rb["generation_id"] == 2
    assert ra["leader"] == ra["member_id"] and rb["members"] == []
    return ra["member_id"], rb["member_id"]


async def follower_parked_in_sync(gc, **timeouts):
    """generation_of_two in group "g", with follower b's SyncGroup sent and parked (future fs)."""
    g = gc.get_or_create_classic("g")
    a, b = await generation_of_two(g, **timeouts)
    return g, a, b, g.sync(b, None, 2, "consumer", "range", {})


async def heartbeat_until_answered(g, fs, member, interval):
    """Heartbeat as member every interval seconds until the parked SyncGroup fs is answered;
    returns the (mock) time that took and the set of heartbeat results."""
    t0 = trio.current_time()
    results = set()
    while not fs.done():
        results.add(g.heartbeat(member, None, 2))
        await trio.sleep(interval)
    return trio.current_time() - t0, results


def rebalance_answer(f):
    assert f.done(), "parked SyncGroup not answered"
    assert f.value["error_code"] == E.REBALANCE_IN_PROGRESS and f.value["assignment"] == b""


def test_leader_rejoining_with_same_metadata_is_a_retry_and_followers_keep_waiting():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc)
        r = await g.join(jreq(member_id=a)).get()
        assert r["error_code"] == 0 and r["generation_id"] == 2 and r["leader"] == a
        assert sorted(m["member_id"] for m in r["members"]) == sorted([a, b])
        # a follower retrying its JoinGroup gets the generation without the member list
        rf = await g.join(jreq(member_id=b)).get()
        assert rf["generation_id"] == 2 and rf["members"] == []
        assert g.state == "CompletingRebalance" and g.generation == 2
        await trio.sleep(1)
        assert not fs.done()
        # the follower retried its JoinGroup and must sync again; its first SyncGroup still waits
        fs2 = g.sync(b, None, 2, "consumer", "range", {})
        sl = await g.sync(a, None, 2, None, None, {a: b"A", b: b"B"}).get()
        assert sl["error_code"] == 0 and sl["assignment"] == b"A" and g.state == "Stable"
        assert (await fs2.get())["assignment"] == b"B"
    run(t)


def test_leader_rejoining_with_changed_metadata_answers_parked_syncs():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc)
        fa = g.join(jreq(member_id=a, proto=P2))
        await trio.sleep(0)
        rebalance_answer(fs)
        assert g.state == "PreparingRebalance"
        assert g.heartbeat(b, None, 2) == E.REBALANCE_IN_PROGRESS
        rb = await g.join(jreq(member_id=b)).get()
        ra = await fa.get()
        assert ra["generation_id"] == rb["generation_id"] == 3 and ra["leader"] == a
    run(t)


def test_new_member_during_completing_rebalance_answers_parked_syncs():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc)
        fc = await join_new(g, client="e")
        rebalance_answer(fs)
        assert g.state == "PreparingRebalance" and not fc.done()
        # the leader's SyncGroup for the superseded generation is refused too
        late = await g.sync(a, None, 2, None, None, {a: b"A", b: b"B"}).get()
        assert late["error_code"] == E.REBALANCE_IN_PROGRESS
        fa, fb = g.join(jreq(member_id=a)), g.join(jreq(member_id=b))
        res = [await f.get() for f in (fa, fb, fc)]
        assert {r["generation_id"] for r in res} == {3} and len(res[0]["members"]) == 3
    run(t)


def test_leader_leaving_during_completing_rebalance_answers_parked_syncs():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc)
        assert g.leave(a, None) == E.NONE
        rebalance_answer(fs)
        r = await g.join(jreq(member_id=b)).get()
        assert r["generation_id"] == 3 and r["leader"] == b and [m["member_id"] for m in r["members"]] == [b]
        s = await g.sync(b, None, 3, None, None, {b: b"all"}).get()
        assert s["assignment"] == b"all" and g.state == "Stable"
    run(t)


def test_heartbeat_and_commit_during_completing_rebalance():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc)
        assert g.heartbeat(a, None, 2) == E.NONE and g.heartbeat(b, None, 2) == E.NONE
        assert g.heartbeat(b, None, 1) == E.ILLEGAL_GENERATION
        assert gc.validate_commit("g", 2, b, None)[0] == E.REBALANCE_IN_PROGRESS
        # member and generation are checked before the state
        assert gc.validate_commit("g", 2, "nobody", None)[0] == E.UNKNOWN_MEMBER_ID
        assert gc.validate_commit("g", 1, b, None)[0] == E.ILLEGAL_GENERATION
        assert gc.validate_commit("g", -1, "", None)[0] == E.UNKNOWN_MEMBER_ID
        assert g.state == "CompletingRebalance" and not fs.done()
        await g.sync(a, None, 2, None, None, {a: b"A", b: b"B"}).get()
        assert (await fs.get())["assignment"] == b"B"
        assert gc.validate_commit("g", 2, b, None)[0] == E.NONE
    run(t)


def test_silent_leader_is_expired_after_its_session_timeout():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc, session=2000, rebalance=300000)
        took, _ = await heartbeat_until_answered(g, fs, b, 0.25)
        # not the 300 s rebalance timeout: the leader stopped heartbeating
        assert took <= 2.3
        rebalance_answer(fs)
        assert a not in g.members
        r = await g.join(jreq(member_id=b, session=2000, rebalance=300000)).get()
        assert r["generation_id"] == 3 and r["leader"] == b
    run(t)


def test_heartbeating_leader_that_never_syncs_is_dropped_at_the_rebalance_timeout():
    async def t(gc, n):
        g, a, b, fs = await follower_parked_in_sync(gc, session=1000, rebalance=5000)
        took, results = await heartbeat_until_answered(g, fs, a, 0.2)
        assert results <= {E.NONE, E.UNKNOWN_MEMBER_ID}
        assert 4.9 <= took <= 5.2
        rebalance_answer(fs)
        assert a not in g.members and b in g.members
        assert g.heartbeat(a, None, 2) == E.UNKNOWN_MEMBER_ID
    run(t)
