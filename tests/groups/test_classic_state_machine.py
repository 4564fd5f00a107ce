"""The classic group state machine driven in-process on trio's MockClock (timeouts included).

These exercise Kafka's semantics that real clients hit only by accident (timeouts, fencing,
protocol checks); the real-client tests in this folder cover the happy paths end to end.
"""
import pytest
import trio
import trio.testing

from pykbroker.config import BrokerConfig
from pykbroker.coordinator.group.classic import JoinRequest
from pykbroker.coordinator.group.coordinator import GroupCoordinator, MemoryOffsetsLog
from pykbroker.protocol.errors import ErrorCode as E


class FakeBroker:
    def __init__(self, **cfg):
        self.config = BrokerConfig({"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 100,
                                     "offsets.topic.num.partitions": 4, **cfg})
        self.metadata = None


def run(test, **cfg):
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main():
        async with trio.open_nursery() as n:
            gc = GroupCoordinator(FakeBroker(**cfg).config)
            await gc.startup(n, backend=MemoryOffsetsLog())
            await gc.ensure_topic()
            await test(gc, n)
            n.cancel_scope.cancel()
    trio.run(main, clock=clock)


def jreq(member_id="", proto=(("range", b"m1"),), session=10000, rebalance=30000, ptype="consumer",
         instance=None, version=9, client="c"):
    return JoinRequest(member_id=member_id, group_instance_id=instance, client_id=client, client_host="/127.0.0.1",
                       session_timeout_ms=session, rebalance_timeout_ms=rebalance, protocol_type=ptype,
                       protocols=list(proto), version=version)


async def join_new(g, **kw):
    r = await g.join(jreq(**kw)).get()
    if kw.get("instance") is None and kw.get("version", 9) >= 4:
        assert r["error_code"] == E.MEMBER_ID_REQUIRED
        assert r["member_id"].startswith(kw.get("client", "c") + "-")
        kw["member_id"] = r["member_id"]
        return g.join(jreq(**kw))
    return g.join(jreq(**kw)) if False else _done(r)


def _done(r):
    from pykbroker.coordinator.group.classic import Future
    return Future(r, done=True)


def test_two_members_rebalance_and_sync_relays_leader_assignment():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        r1 = await (await join_new(g)).get()
        assert r1["error_code"] == 0 and r1["generation_id"] == 1 and r1["leader"] == r1["member_id"]
        assert [m["member_id"] for m in r1["members"]] == [r1["member_id"]]
        s1 = await g.sync(r1["member_id"], None, 1, None, None, {r1["member_id"]: b"A"}).get()
        assert s1["assignment"] == b"A" and g.state == "Stable"
        # second member: the leader learns of the rebalance by heartbeat
        f2 = await join_new(g, client="d")
        assert g.state == "PreparingRebalance"
        assert g.heartbeat(r1["member_id"], None, 1) == E.REBALANCE_IN_PROGRESS
        f1 = g.join(jreq(member_id=r1["member_id"]))
        a, b = await f1.get(), await f2.get()
        assert a["generation_id"] == b["generation_id"] == 2
        assert a["protocol_name"] == "range" and len(a["members"]) == 2 and b["members"] == []
        # follower waits for the leader's SyncGroup
        fs = g.sync(b["member_id"], None, 2, "consumer", "range", {})
        await trio.sleep(1)
        assert not fs.done()
        sl = await g.sync(a["member_id"], None, 2, None, None, {a["member_id"]: b"x", b["member_id"]: b"\x00y"}).get()
        assert sl["assignment"] == b"x" and (await fs.get())["assignment"] == b"\x00y"
        assert g.sync(a["member_id"], None, 1, None, None, {}).value["error_code"] == E.ILLEGAL_GENERATION
        assert g.sync("nobody", None, 2, None, None, {}).value["error_code"] == E.UNKNOWN_MEMBER_ID
        assert g.sync(a["member_id"], None, 2, "consumer", "roundrobin", {}).value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    run(t)


def test_protocol_checks_and_selection():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        assert (await g.join(jreq(proto=())).get())["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        f1 = await join_new(g, proto=[("roundrobin", b""), ("range", b"")])
        await f1.get()
        assert (await g.join(jreq(ptype="connect")).get())["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        assert (await g.join(jreq(proto=[("sticky", b"")])).get())["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        f2 = await join_new(g, proto=[("range", b""), ("roundrobin", b"")])
        f3 = await join_new(g, proto=[("range", b"")])
        r1 = await g.join(jreq(member_id=f1.value["member_id"] if f1.done() else "",
                               proto=[("roundrobin", b""), ("range", b"")])).get()
        r2, r3 = await f2.get(), await f3.get()
        # only "range" is supported by all three members
        assert r1["protocol_name"] == r2["protocol_name"] == r3["protocol_name"] == "range"
    run(t)


async def stable_then_second_joins(g, **timeouts):
    """Member a alone and Stable in generation 1, then a second member (client "d") joins:
    returns a's JoinGroup response and the second member's pending JoinGroup."""
    a = await (await join_new(g, **timeouts)).get()
    await g.sync(a["member_id"], None, 1, None, None, {}).get()
    return a, await join_new(g, client="d", **timeouts)


def test_session_timeout_expires_member_and_rebalances():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        a, fb = await stable_then_second_joins(g, session=1000)
        ra = await g.join(jreq(member_id=a["member_id"], session=1000)).get()
        rb = await fb.get()
        await g.sync(ra["member_id"], None, 2, None, None, {}).get()
        await g.sync(rb["member_id"], None, 2, None, None, {}).get()
        # only a heartbeats; b goes silent
        t0 = trio.current_time()
        while g.state == "Stable":
            assert g.heartbeat(ra["member_id"], None, 2) == E.NONE
            await trio.sleep(0.3)
        assert 1.0 <= trio.current_time() - t0 <= 1.4
        assert rb["member_id"] not in g.members
        assert g.heartbeat(ra["member_id"], None, 2) == E.REBALANCE_IN_PROGRESS
        r = await g.join(jreq(member_id=ra["member_id"], session=1000)).get()
        assert r["generation_id"] == 3 and len(r["members"]) == 1
    run(t)


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        a, fb = await stable_then_second_joins(g, rebalance=5000)
        t0 = trio.current_time()
        rb = await fb.get()  # a never rejoins: after the rebalance timeout b goes on alone
        assert 4.9 <= trio.current_time() - t0 <= 5.1
        assert rb["generation_id"] == 2 and rb["leader"] == rb["member_id"] and a["member_id"] not in g.members
    run(t)


def test_pending_sync_timeout_and_member_id_required_expiry():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        r = await g.join(jreq(session=2000, version=5)).get()
        assert r["error_code"] == E.MEMBER_ID_REQUIRED and g.pending
        await trio.sleep(2.1)
        assert not g.pending and g.state == "Empty"
        a = await (await join_new(g, rebalance=3000)).get()
        assert g.state == "CompletingRebalance"
        await trio.sleep(3.1)  # the leader never syncs
        assert a["member_id"] not in g.members and g.state == "Empty"
    run(t)


def test_leave_group_and_static_membership():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        a = await (await join_new(g, instance="i1")).get()
        assert a["error_code"] == 0 and a["member_id"].startswith("i1-")
        await g.sync(a["member_id"], None, 1, None, None, {a["member_id"]: b"asg"}).get()
        # the same instance restarts with a fresh member id: no rebalance, old id fenced
        b = await g.join(jreq(instance="i1")).get()
        assert b["error_code"] == 0 and b["generation_id"] == 1 and g.state == "Stable"
        assert b["skip_assignment"] is True and b["leader"] == b["member_id"] != a["member_id"]
        assert g.heartbeat(a["member_id"], "i1", 1) == E.FENCED_INSTANCE_ID
        assert (await g.sync(b["member_id"], "i1", 1, None, None, {}).get())["assignment"] == b"asg"
        assert g.leave(a["member_id"], "i1") == E.FENCED_INSTANCE_ID
        assert g.leave("", "nope") == E.UNKNOWN_MEMBER_ID
        assert g.leave("", "i1") == E.NONE
        assert g.state == "Empty" or g.state == "PreparingRebalance"
        await trio.sleep(0.01)
        assert g.state == "Empty" and not g.members
        assert g.leave("x", None) == E.UNKNOWN_MEMBER_ID
    run(t)


def test_initial_rebalance_delay_collects_members():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        f1 = await join_new(g, rebalance=10000)
        await trio.sleep(2)
        f2 = await join_new(g, rebalance=10000, client="d")
        r1, r2 = await f1.get(), await f2.get()
        assert r1["generation_id"] == r2["generation_id"] == 1
        assert len([r for r in (r1, r2) if r["members"]]) == 1
    run(t, **{"group.initial.rebalance.delay.ms": 3000})


def test_offsets_commit_reload_and_expiry():
    async def t(gc, n):
        from pykbroker.coordinator.group.offsets import OffsetAndMetadata
        assert (await gc.commit("g", {("t", 0): OffsetAndMetadata(5, 3, "meta", 1000)}).get()) == 0
        backend = gc.log
        async with trio.open_nursery() as n2:
            gc2 = GroupCoordinator(FakeBroker().config)
            await gc2.startup(n2, backend=backend)
            om = gc2.fetch_offsets("g", [("t", 0)])[("t", 0)]
            assert (om.offset, om.leader_epoch, om.metadata) == (5, 3, "meta")
            assert gc2.get_group("g").state == "Empty"
            # retention (default 7 days) counted from the commit for a standalone group
            assert gc2.expire_offsets(1000 + 7 * 24 * 3600 * 1000 - 1) == 0
            assert gc2.expire_offsets(1000 + 7 * 24 * 3600 * 1000) == 1
            await trio.sleep(0.01)
            assert gc2.fetch_offsets("g") == {} and gc2.get_group("g") is None
            n2.cancel_scope.cancel()
    run(t)


def test_java_hash_partitioning():
    from pykbroker.coordinator.group.offsets import java_string_hash, partition_for
    # values computed by java.lang.String.hashCode
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50
