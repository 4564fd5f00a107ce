"""The coordinator runtime on its own, sans I/O: a fake partition whose reads can be held and whose
high watermark the test moves by hand, on trio's MockClock.  Loading replays a shard's partition,
resigning drops it (NOT_COORDINATOR after), writes are answered only once the high watermark
passes them; then the group coordinator's leadership hooks on top of it."""
import trio
import trio.testing

from pykbroker.coordinator.group import offsets as O
from pykbroker.coordinator.group.coordinator import GroupCoordinator, MemoryOffsetsLog
from pykbroker.coordinator.group.offsets import OffsetAndMetadata
from pykbroker.coordinator.runtime import CoordinatorRuntime
from pykbroker.protocol.errors import ErrorCode as E, KafkaError
from pykbroker.protocol.records import Record, encode_batch

from .test_classic_state_machine import FakeBroker, jreq


class FakePartitions:
    """Partitions as lists of (key, value) records; offsets count records; ``hw`` moves only when
    the test says so (a follower catching up), unless ``auto_hw``."""

    def __init__(self, n=2, auto_hw=False):
        self.records = {p: [] for p in range(n)}
        self.hw = {p: 0 for p in range(n)}
        self.auto_hw = auto_hw
        self.read_gate: trio.Event | None = None
        self.fail: int | None = None
        self._hw_moved = trio.Event()

    def seed(self, p, *recs):
        self.records[p].extend(recs)
        self.hw[p] = len(self.records[p])

    def move_hw(self, p, hw):
        self.hw[p] = hw
        self._hw_moved.set()
        self._hw_moved = trio.Event()

    async def append(self, p, batch):
        await trio.sleep(0)
        if self.fail is not None:
            raise KafkaError(self.fail, "injected")
        from pykbroker.protocol.records import decode_records, iter_batches
        for h in iter_batches(batch):
            for r in decode_records(memoryview(batch)[h.position:h.position + h.size]):
                self.records[p].append((bytes(r.key), None if r.value is None else bytes(r.value)))
        if self.auto_hw:
            self.move_hw(p, len(self.records[p]))
        return len(self.records[p])

    async def wait_for_high_watermark(self, p, offset):
        while self.hw[p] < offset:
            await self._hw_moved.wait()

    async def read(self, p):
        if self.read_gate is not None:
            await self.read_gate.wait()
        for i in range(0, len(self.records[p]), 2):  # two records a batch
            yield encode_batch([Record(None, 0, k, v) for k, v in self.records[p][i:i + 2]])


class Shard:
    def __init__(self, p, events):
        self.p, self.events, self.state = p, events, {}

    def replay(self, key, value):
        if key == b"bad":
            raise ValueError("unreadable")
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def loaded(self):
        self.events.append(("loaded", self.p, dict(self.state)))

    def unloaded(self):
        self.events.append(("unloaded", self.p))


def run(test, parts=None):
    async def main():
        async with trio.open_nursery() as n:
            fp = parts or FakePartitions()
            events = []
            rt = CoordinatorRuntime("__test", fp, lambda p: Shard(p, events), n, now_ms=lambda: 0)
            await test(rt, fp, events)
            n.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def leading(rt, p=0, epoch=0):
    """Lead and load partition ``p``; returns (answers so far, a write callback recording them)."""
    rt.on_become_leader(p, epoch)
    await rt.wait_loaded()
    got = []
    return got, got.append


def test_a_write_not_committed_in_time_fails_with_request_timed_out():
    """Kafka's CoordinatorRuntime write timeout (offsets.commit.timeout.ms for groups): a write
    whose high watermark does not come within the timeout after its append fails with
    REQUEST_TIMED_OUT (the OffsetCommit then answers COORDINATOR_NOT_AVAILABLE); later writes
    are still answered as the HW passes them, and a write's own shorter timeout counts even
    behind an older pending write."""
    fp = FakePartitions()

    async def main():
        async with trio.open_nursery() as n:
            rt = CoordinatorRuntime("__test", fp, lambda p: Shard(p, []), n, now_ms=lambda: 0,
                                    write_timeout_ms=5000)
            got, cb = await leading(rt)
            t0 = trio.current_time()
            rt.write(0, [(b"k1", b"v1")], lambda c: cb(("w1", c, trio.current_time() - t0)))
            await trio.sleep(1)
            rt.write(0, [(b"k2", b"v2")], lambda c: cb(("w2", c, trio.current_time() - t0)))
            rt.write(0, [(b"k3", b"v3")], lambda c: cb(("w3", c, trio.current_time() - t0)), timeout_ms=500)
            await trio.sleep(0.6 + 0.1)
            assert got == [("w3", E.REQUEST_TIMED_OUT, 1.5)]   # its own deadline, before w1's
            await trio.sleep(5)
            assert got[1] == ("w1", E.REQUEST_TIMED_OUT, 5.0) and got[2] == ("w2", E.REQUEST_TIMED_OUT, 6.0)
            assert fp.records[0] == [(b"k1", b"v1"), (b"k2", b"v2"), (b"k3", b"v3")]   # still in the log
            rt.write(0, [(b"k4", b"v4")], lambda c: cb(("w4", c)))
            await trio.sleep(1)
            fp.move_hw(0, 4)   # the replicas caught up: the later write is committed
            await trio.sleep(0.1)
            assert got[3:] == [("w4", 0)]
            n.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_load_replays_the_partition_then_serves():
    async def t(rt, fp, events):
        fp.seed(0, (b"a", b"1"), (b"b", b"2"), (b"a", None), (b"bad", b"x"), (b"c", b"3"))
        fp.read_gate = trio.Event()
        assert rt.status(0) == E.NOT_COORDINATOR
        rt.on_become_leader(0, 5)
        await trio.sleep(1)
        assert rt.status(0) == E.COORDINATOR_LOAD_IN_PROGRESS
        got = []
        rt.write(0, [(b"x", b"y")], got.append)
        assert got == [E.COORDINATOR_LOAD_IN_PROGRESS]  # no write before the state is loaded
        fp.read_gate.set()
        await rt.wait_loaded([0])
        assert rt.status(0) == 0 and rt.leader_epoch(0) == 5 and rt.active_partitions() == [0]
        assert events == [("loaded", 0, {b"b": b"2", b"c": b"3"})]  # tombstone applied, bad record skipped
        assert rt.status(1) == E.NOT_COORDINATOR  # another shard: not led here
    run(t)


def test_write_answered_only_once_the_high_watermark_passes_it():
    async def t(rt, fp, events):
        got, cb = await leading(rt)
        rt.write(0, [(b"k1", b"v1")], lambda c: cb(("w1", c)))
        rt.write(0, [(b"k2", b"v2"), (b"k3", b"v3")], lambda c: cb(("w2", c)))
        await trio.sleep(1)
        assert fp.records[0] == [(b"k1", b"v1"), (b"k2", b"v2"), (b"k3", b"v3")]  # appended in order
        assert got == []  # in the log, not committed
        fp.move_hw(0, 1)
        await trio.sleep(1)
        assert got == [("w1", 0)]
        fp.move_hw(0, 2)
        await trio.sleep(1)
        assert got == [("w1", 0)]  # w2 ends at offset 3
        fp.move_hw(0, 3)
        await trio.sleep(1)
        assert got == [("w1", 0), ("w2", 0)]
    run(t)


def test_append_error_answers_at_once():
    async def t(rt, fp, events):
        got, cb = await leading(rt)
        fp.fail = E.NOT_LEADER_OR_FOLLOWER
        rt.write(0, [(b"k", b"v")], cb)
        await trio.sleep(1)
        assert got == [E.NOT_LEADER_OR_FOLLOWER]
    run(t)


def test_resign_unloads_and_fails_uncommitted_writes():
    async def t(rt, fp, events):
        got, cb = await leading(rt, 0, 3)
        rt.write(0, [(b"k", b"v")], cb)
        await trio.sleep(1)
        assert got == [] and fp.records[0] == [(b"k", b"v")]
        rt.on_resign(0, 2)  # a stale resignation (older epoch) is ignored
        assert rt.status(0) == 0
        rt.on_resign(0, 3)
        assert events[-1] == ("unloaded", 0)
        await trio.sleep(1)
        assert got == [E.NOT_COORDINATOR]  # never confirmed: the new leader may truncate it
        assert rt.status(0) == E.NOT_COORDINATOR
        rt.write(0, [(b"k2", b"v")], cb)
        assert got[-1] == E.NOT_COORDINATOR and len(fp.records[0]) == 1
        fp.move_hw(0, 1)
        await trio.sleep(1)
        assert got == [E.NOT_COORDINATOR, E.NOT_COORDINATOR]
        # leading again: the state is replayed from the log, committed write included
        rt.on_become_leader(0, 4)
        await rt.wait_loaded()
        assert rt.status(0) == 0 and events[-1] == ("loaded", 0, {b"k": b"v"})
    run(t)


def test_resign_while_loading_never_loads():
    async def t(rt, fp, events):
        fp.seed(1, (b"a", b"1"))
        fp.read_gate = trio.Event()
        rt.on_become_leader(1, 0)
        await trio.sleep(1)
        rt.on_resign(1, None)
        fp.read_gate.set()
        await trio.sleep(1)
        assert events == [] and rt.status(1) == E.NOT_COORDINATOR
    run(t)


# -- the group coordinator on the runtime -------------------------------------------------------
def run_gc(test, log=None):
    async def main():
        async with trio.open_nursery() as n:
            gc = GroupCoordinator(FakeBroker().config)
            await gc.startup(n, backend=log or MemoryOffsetsLog())
            await gc.ensure_topic()
            await test(gc, n)
            n.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_group_coordinator_resign_drops_groups_and_become_leader_reloads_them():
    async def t(gc, n):
        p = gc.partition_for("g")
        other = next(gid for gid in ("h%d" % i for i in range(100)) if gc.partition_for(gid) != p)
        assert gc.coordinator_error("g") == 0
        assert await gc.commit("g", {("t", 0): OffsetAndMetadata(7, 1, "m", 1000)}).get() == 0
        assert await gc.commit(other, {("t", 0): OffsetAndMetadata(9, 1, "", 1000)}).get() == 0
        g = gc.get_or_create_classic("g")
        r = await g.join(jreq(client="c")).get()
        r = await g.join(jreq(member_id=r["member_id"])).get()
        mid = r["member_id"]
        assert r["error_code"] == 0 and g.state == "CompletingRebalance"
        assert (await g.sync(mid, None, 1, None, None, {mid: b"A"}).get())["error_code"] == 0
        assert g.state == "Stable" and gc.timer.pending(g._tkey("hb", mid))
        gc.on_resign(p, 0)
        assert gc.coordinator_error("g") == E.NOT_COORDINATOR
        assert gc.get_group("g") is None and gc.fetch_offsets("g") == {}
        assert not gc.timer.pending(g._tkey("hb", mid))  # its timers stopped
        assert gc.coordinator_error(other) == 0 and gc.fetch_offsets(other)[("t", 0)].offset == 9
        assert await gc.commit("g", {("t", 0): OffsetAndMetadata(8, 1, "", 1000)}).get() == E.NOT_COORDINATOR
        gc.on_become_leader(p, 1)
        assert gc.coordinator_error("g") in (0, E.COORDINATOR_LOAD_IN_PROGRESS)
        await gc.runtime.wait_loaded([p])
        assert gc.coordinator_error("g") == 0
        assert gc.fetch_offsets("g")[("t", 0)].offset == 7
        # the group written at SyncGroup is back, its member's session timer armed again
        g2 = gc.get_group("g")
        assert g2 is not g and g2.generation == 1 and g2.state == "Stable" and g2.members[mid].assignment == b"A"
        assert gc.timer.pending(g2._tkey("hb", mid))
    run_gc(t)


def test_group_requests_wait_for_the_load():
    class SlowLog(MemoryOffsetsLog):
        gate = None

        async def read(self, partition):
            if self.gate is not None:
                await self.gate.wait()
            async for b in super().read(partition):
                yield b

    async def t(gc, n):
        assert await gc.commit("g", {("t", 0): OffsetAndMetadata(3, 1, "", 1000)}).get() == 0
        p = gc.partition_for("g")
        gc.log.gate = trio.Event()
        gc.on_resign(p)
        gc.on_become_leader(p, 1)
        await trio.sleep(1)
        assert gc.coordinator_error("g") == E.COORDINATOR_LOAD_IN_PROGRESS
        gc.log.gate.set()
        await gc.runtime.wait_loaded([p])
        assert gc.coordinator_error("g") == 0 and gc.fetch_offsets("g")[("t", 0)].offset == 3
    run_gc(t, SlowLog())


def test_records_keep_kafka_layout():
    """The runtime writes the same records as before (offset commit key/value in the group's
    partition)."""
    async def t(gc, n):
        assert await gc.commit("g", {("t", 2): OffsetAndMetadata(4, 0, "", 1000)}).get() == 0
        from pykbroker.protocol.records import decode_records, iter_batches
        (batch,) = gc.log.partitions[gc.partition_for("g")]
        (h,) = list(iter_batches(batch))
        (r,) = list(decode_records(memoryview(batch)[h.position:h.position + h.size]))
        assert O.parse_key(r.key) == ("offset", "g", "t", 2)
        assert O.parse_offset_value(r.value).offset == 4
    run_gc(t)


def test_resign_answers_members_waiting_in_join_group():
    async def t(gc, n):
        g = gc.get_or_create_classic("g")
        r = await g.join(jreq(client="c")).get()
        a = g.join(jreq(member_id=r["member_id"]))
        r2 = await g.join(jreq(client="d")).get()
        await a.get()  # generation 1 formed with the first member
        f = g.join(jreq(member_id=r2["member_id"]))  # second member joins: rebalance, waiting
        await trio.sleep(0.1)
        assert not f.done() and g.state == "PreparingRebalance"
        gc.on_resign(gc.partition_for("g"))
        res = await f.get()
        assert res["error_code"] == E.NOT_COORDINATOR and g.state == "Dead"
    run_gc(t)


def test_with_a_controller_only_led_partitions_load():
    async def main():
        log = MemoryOffsetsLog()
        await log.create(4, 1, 0)
        async with trio.open_nursery() as n:
            gc = GroupCoordinator(FakeBroker().config, log=log, leads_every_partition=False)
            await gc.startup(n)
            p = gc.partition_for("g")
            assert gc.coordinator_error("g") == E.NOT_COORDINATOR and gc.runtime.active_partitions() == []
            gc.on_become_leader(p, 0)  # what the controller's leader event does
            await gc.runtime.wait_loaded()
            assert gc.coordinator_error("g") == 0 and gc.runtime.active_partitions() == [p]
            n.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_resign_stops_the_session_timers_of_share_group_members():
    """A share group's members have session timers of their own kind ("sg-hb"); losing the
    partition must stop them like a consumer group's, or a timer left over could expire a member
    of the group loaded again later."""
    async def t(gc, n):
        p = gc.partition_for("sg")
        resp, fut = gc.share.heartbeat({"group_id": "sg", "member_id": "m1", "member_epoch": 0,
                                        "rack_id": None, "subscribed_topic_names": ["t"]}, "c", "/h")
        assert resp["error_code"] == 0, resp
        assert await fut.get() == 0
        g = gc.get_group("sg")
        assert g.kind == "share" and g.timer_kind == "sg-hb"
        assert gc.timer.pending(("sg-hb", "sg", "m1"))
        gc.on_resign(p, 0)
        assert gc.get_group("sg") is None
        assert not gc.timer.pending(("sg-hb", "sg", "m1"))
    run_gc(t)
