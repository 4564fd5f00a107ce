"""SyncGroup answers only once the leader's assignment is in ``__consumer_offsets``.

As Kafka's coordinator does: the leader's SyncGroup writes the group-metadata record (with the
new assignment) first; the group becomes Stable and the members get their assignments only when
that append is done; a failed append answers every waiting member with the mapped error
(Kafka's appendGroupMetadataErrorToResponseError) and starts a new rebalance.  Driven in-process
on trio's MockClock with an offsets-log stand-in whose appends can be held or made to fail.
"""
import trio
import trio.testing

from pykbroker.coordinator.group import offsets as O
from pykbroker.coordinator.group.coordinator import GroupCoordinator, MemoryOffsetsLog
from pykbroker.protocol.errors import ErrorCode as E, KafkaError
from pykbroker.protocol.records import decode_records, iter_batches

from .test_classic_state_machine import FakeBroker, jreq


class GatedLog(MemoryOffsetsLog):
    def __init__(self):
        super().__init__()
        self.gate: trio.Event | None = None
        self.fail: int | None = None

    async def append(self, partition, batch):
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise KafkaError(self.fail, "injected")
        return await super().append(partition, batch)

    def group_records(self, gid):
        out = []
        for batches in self.partitions.values():
            for b in batches:
                for h in iter_batches(b):
                    for r in decode_records(memoryview(b)[h.position:h.position + h.size]):
                        if r.key is not None and O.parse_key(r.key) == ("group", gid) and r.value is not None:
                            out.append(O.parse_group_value(r.value))
        return out


def run(test):
    async def main():
        async with trio.open_nursery() as n:
            log = GatedLog()
            gc = GroupCoordinator(FakeBroker().config)
            await gc.startup(n, backend=log)
            await gc.ensure_topic()
            await test(gc, log)
            n.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def two_members_completing(g):
    """Two members joined generation 1 (CompletingRebalance); returns (leader id, follower id)."""
    ids = []
    for c in ("a", "b"):
        r = await g.join(jreq(client=c)).get()
        assert r["error_code"] == E.MEMBER_ID_REQUIRED
        ids.append(r["member_id"])
    f = [g.join(jreq(member_id=i)) for i in ids]
    res = [await x.get() for x in f]
    assert g.state == "CompletingRebalance" and res[0]["generation_id"] == 1
    leader = res[0]["leader"]
    return leader, [i for i in ids if i != leader][0]


def test_sync_answers_after_the_group_record_is_appended():
    async def t(gc, log):
        g = gc.get_or_create_classic("g")
        leader, follower = await two_members_completing(g)
        log.gate = trio.Event()
        ff = g.sync(follower, None, 1, None, None, {})
        fl = g.sync(leader, None, 1, None, None, {leader: b"L", follower: b"F"})
        await trio.sleep(5)
        # the record is being written: nobody is answered, the group is not Stable yet
        assert not fl.done() and not ff.done()
        assert g.state == "CompletingRebalance"
        assert not log.group_records("g")
        log.gate.set()
        sl, sf = await fl.get(), await ff.get()
        assert (sl["error_code"], sl["assignment"]) == (0, b"L")
        assert (sf["error_code"], sf["assignment"]) == (0, b"F")
        assert g.state == "Stable"
        # what was written is the generation with the leader's assignment
        rec = log.group_records("g")[-1]
        assert rec.generation == 1 and rec.leader == leader
        assert {m.member_id: m.assignment for m in rec.members} == {leader: b"L", follower: b"F"}
    run(t)


def test_failed_append_answers_the_mapped_error_and_rebalances():
    for injected, expected in ((E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                               (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
                               (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
                               (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS)):
        async def t(gc, log):
            g = gc.get_or_create_classic("g")
            leader, follower = await two_members_completing(g)
            log.fail = injected
            ff = g.sync(follower, None, 1, None, None, {})
            sl = await g.sync(leader, None, 1, None, None, {leader: b"L", follower: b"F"}).get()
            sf = await ff.get()
            assert sl["error_code"] == sf["error_code"] == expected, (injected, sl, sf)
            assert sl["assignment"] == sf["assignment"] == b""
            assert g.state == "PreparingRebalance"
            assert all(m.assignment == b"" for m in g.members.values())
            # the members rejoin and the next generation completes once appends work again
            log.fail = None
            fj = [g.join(jreq(member_id=i)) for i in (leader, follower)]
            res = [await x.get() for x in fj]
            assert res[0]["generation_id"] == 2
            s2 = await g.sync(res[0]["leader"], None, 2, None, None, {leader: b"L2", follower: b"F2"}).get()
            assert s2["error_code"] == 0 and g.state == "Stable"
        run(t)


def test_rebalance_during_the_append_wins():
    async def t(gc, log):
        g = gc.get_or_create_classic("g")
        leader, follower = await two_members_completing(g)
        log.gate = trio.Event()
        fl = g.sync(leader, None, 1, None, None, {leader: b"L", follower: b"F"})
        await trio.sleep(1)
        # a third member arrives while the assignment is being written
        r = await g.join(jreq(client="c")).get()
        fc = g.join(jreq(member_id=r["member_id"], client="c"))
        assert (await fl.get())["error_code"] == E.REBALANCE_IN_PROGRESS
        assert g.state == "PreparingRebalance"
        log.gate.set()
        await trio.sleep(1)
        # the late append completion must not move the group to Stable with the old generation
        assert g.state == "PreparingRebalance" and g.generation == 1
        assert not fc.done()
    run(t)
