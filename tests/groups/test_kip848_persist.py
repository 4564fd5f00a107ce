"""KIP-848 group state persisted in ``__consumer_offsets`` and replayed on load, driven in-process
on trio's MockClock: members keep their ids, epochs and assignments across a coordinator
restart, session timers start again at load, leaves/expiry/deletion write tombstones, classic
and consumer groups coexist in the topic, and heartbeats are answered only after their records
are in the log.  The record bytes are checked against Apache Kafka's own deserializer when the
Kafka jars are available (compat/kafka/oracle.py fetch)."""
import subprocess
import uuid
from pathlib import Path

import trio
import trio.testing

from pykbroker.config import BrokerConfig
from pykbroker.coordinator.group import consumer_records as R
from pykbroker.coordinator.group import offsets as O
from pykbroker.coordinator.group.coordinator import GroupCoordinator, MemoryOffsetsLog
from pykbroker.protocol.errors import ErrorCode as E
from pykbroker.protocol.records import decode_records, iter_batches

SESSION_MS = 10000


class TopicInfo:
    def __init__(self, name, n):
        self.name, self.num_partitions, self.topic_id = name, n, uuid.uuid4().bytes


class FakeMetadata:
    def __init__(self, *topics):
        self.topics = {t.name: t for t in topics}

    def get(self, name):
        return self.topics.get(name)

    def name_of(self, tid):
        return next((t.name for t in self.topics.values() if t.topic_id == tid), None)


class FakeBroker:
    def __init__(self, md):
        self.config = BrokerConfig({"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 100,
                                     "offsets.topic.num.partitions": 4, "group.consumer.session.timeout.ms": SESSION_MS,
                                     "group.consumer.heartbeat.interval.ms": 1000})
        self.metadata = md


def hb(gid, mid, epoch, topics=None, owned=None):
    return {"group_id": gid, "member_id": mid, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000 if epoch == 0 else -1, "subscribed_topic_names": topics,
            "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": None if owned is None else
            [{"topic_id": t, "partitions": sorted(p for tt, p in owned if tt == t)} for t in {t for t, _ in owned}]}


async def beat(gc, req):
    res, written = gc.consumer.heartbeat(req, 1, "cid", "/127.0.0.1")
    code = await written.get()
    assert code == 0
    return res


def owned_of(res, prev):
    if res["assignment"] is None:
        return prev
    return {(tp["topic_id"], p) for tp in res["assignment"]["topic_partitions"] for p in tp["partitions"]}


async def converge(gc, gid, members, topics, rounds=8):
    """Heartbeat every member (reporting what it owns) until the group is Stable."""
    for _ in range(rounds):
        for mid, st in members.items():
            res = await beat(gc, hb(gid, mid, st["epoch"], topics if st["epoch"] == 0 else None, st["owned"]))
            assert res["error_code"] == 0, res
            st["epoch"], st["owned"] = res["member_epoch"], owned_of(res, st["owned"])
        if gc.groups[gid].summary_state() == "Stable":
            return
    raise AssertionError("group did not stabilise: %s" % gc.groups[gid].summary_state())


def snapshot(g):
    return {"epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "hash": g.metadata_hash,
            "target": {m: set(t) for m, t in g.target.items()},
            "members": {mid: (m.epoch, m.prev_epoch, set(m.assigned), set(m.revoking), list(m.topics), m.client_id,
                              m.rebalance_timeout_ms) for mid, m in g.members.items()}}


def run(test, log=None, md=None):
    clock = trio.testing.MockClock(autojump_threshold=0)
    log = log or MemoryOffsetsLog()
    md = md or FakeMetadata(TopicInfo("t", 6))

    async def main():
        async def start(n):
            gc = GroupCoordinator(FakeBroker(md).config, md)
            await gc.startup(n, backend=log)
            await gc.ensure_topic()
            return gc
        await test(start, log, md)
    trio.run(main, clock=clock)


def all_records(log):
    out = []
    for p in sorted(log.partitions):
        for batch in log.partitions[p]:
            for h in iter_batches(batch):
                for rec in decode_records(memoryview(batch)[h.position:h.position + h.size]):
                    out.append((bytes(rec.key), None if rec.value is None else bytes(rec.value)))
    return out


async def start_converged(start, n):
    """Start a coordinator in nursery n with three new members of group "g" (topic "t")
    converged; returns it and the members' state (as converge keeps it)."""
    members = {"m%d" % i: {"epoch": 0, "owned": set()} for i in range(3)}
    gc = await start(n)
    await converge(gc, "g", members, ["t"])
    return gc, members


def test_members_keep_ids_epochs_and_assignments_across_restart():
    async def t(start, log, md):
        async with trio.open_nursery() as n:
            gc, members = await start_converged(start, n)
            # a classic group and committed offsets in the same topic (coexistence)
            await gc.commit("g", {("t", 0): O.OffsetAndMetadata(42, -1, "meta", 1)}).get()
            await gc.commit("classic", {("t", 1): O.OffsetAndMetadata(7, -1, "", 1)}).get()
            before = snapshot(gc.groups["g"])
            assert len(before["members"]) == 3 and before["epoch"] >= 3
            n.cancel_scope.cancel()  # the broker dies: nothing more is written
        async with trio.open_nursery() as n:
            gc = await start(n)
            g = gc.groups["g"]
            assert g.kind == "consumer" and snapshot(g) == before
            assert g.summary_state() == "Stable"
            assert gc.offsets["g"][("t", 0)].offset == 42 and gc.groups["classic"].kind == "classic"
            n_before = len(all_records(log))
            # every member resumes with the epoch it had: no UNKNOWN_MEMBER_ID, no fencing, same
            # partitions, no epoch bump (nothing changed while the coordinator was down)
            for mid, st in members.items():
                res = await beat(gc, hb("g", mid, st["epoch"]))
                assert res["error_code"] == 0 and res["member_epoch"] == st["epoch"], res
                assert owned_of(res, st["owned"]) == st["owned"]
            assert g.group_epoch == before["epoch"]
            # and an unchanged heartbeat writes nothing
            assert len(all_records(log)) == n_before
            n.cancel_scope.cancel()
    run(t)


def test_session_timers_rearmed_on_load_and_tombstones_replayed():
    async def t(start, log, md):
        async with trio.open_nursery() as n:
            gc, members = await start_converged(start, n)
            # m2 leaves: tombstones for its three keys, and the others converge again
            res = await beat(gc, hb("g", "m2", -1))
            assert res["error_code"] == 0
            del members["m2"]
            await converge(gc, "g", members, ["t"])
            n.cancel_scope.cancel()
        recs = all_records(log)
        tomb = {k for k, v in recs if v is None}
        for kind in (R.CG_MEMBER_METADATA, R.CG_TARGET_MEMBER, R.CG_CURRENT_ASSIGNMENT):
            assert R.key(kind, "g", "m2") in tomb
        async with trio.open_nursery() as n:
            t0 = trio.current_time()
            gc = await start(n)
            g = gc.groups["g"]
            assert set(g.members) == {"m0", "m1"}
            # m0 comes back, m1 never does: m1 expires one session after the load, not before
            await trio.sleep(SESSION_MS / 1000 * 0.6)
            await beat(gc, hb("g", "m0", members["m0"]["epoch"], owned=members["m0"]["owned"]))
            assert set(g.members) == {"m0", "m1"}
            await trio.sleep(SESSION_MS / 1000 * 0.5)
            assert set(g.members) == {"m0"}, "m1's session timer was not re-armed at load"
            assert trio.current_time() - t0 >= SESSION_MS / 1000
            # m0 takes all six partitions once it heartbeats again
            members = {"m0": members["m0"]}
            await converge(gc, "g", members, ["t"])
            assert len(members["m0"]["owned"]) == 6
            await trio.sleep(0.1)  # let the expiry's write land
            n.cancel_scope.cancel()
        async with trio.open_nursery() as n:
            gc = await start(n)
            g = gc.groups["g"]
            assert set(g.members) == {"m0"} and g.target["m0"] == members["m0"]["owned"]
            # m0 leaves; the empty group is deleted: every key gets a tombstone
            await beat(gc, hb("g", "m0", members["m0"]["epoch"]))
            assert (await beat(gc, hb("g", "m0", -1)))["error_code"] == 0
            assert await gc.delete_group("g").get() == 0
            n.cancel_scope.cancel()
        live = {}
        for k, v in all_records(log):
            live[k] = v
        assert not [k for k, v in live.items() if v is not None and k[:2] != b"\x00\x01"], "records left"
        async with trio.open_nursery() as n:
            gc = await start(n)
            assert gc.get_group("g") is None
            res, _ = gc.consumer.heartbeat(hb("g", "m0", 5), 1, "c", "/h")
            assert res["error_code"] == E.UNKNOWN_MEMBER_ID
            n.cancel_scope.cancel()
    run(t)


def test_classic_then_consumer_then_classic_replays_the_latest_kind():
    async def t(start, log, md):
        async with trio.open_nursery() as n:
            gc = await start(n)
            gc.persist_group(gc.get_or_create_classic("x"))  # a classic group record for "x"
            await trio.sleep(0.01)
            gc.groups["x"].members.clear()
            # an empty classic group becomes a consumer group (classic tombstone written)
            st = {"m": {"epoch": 0, "owned": set()}}
            await converge(gc, "x", st, ["t"])
            n.cancel_scope.cancel()
        assert (O.group_key("x"), None) in all_records(log)
        async with trio.open_nursery() as n:
            gc = await start(n)
            assert gc.groups["x"].kind == "consumer" and set(gc.groups["x"].members) == {"m"}
            await beat(gc, hb("x", "m", -1))
            # an empty consumer group becomes classic again on JoinGroup: consumer tombstones
            gc.consumer.drop(gc.groups["x"])
            gc.persist_group(gc.get_or_create_classic("x"))
            await trio.sleep(0.01)
            n.cancel_scope.cancel()
        async with trio.open_nursery() as n:
            gc = await start(n)
            assert gc.groups["x"].kind == "classic"
            n.cancel_scope.cancel()
    run(t)


class GatedLog(MemoryOffsetsLog):
    def __init__(self):
        super().__init__()
        self.gate = trio.Event()

    async def append(self, partition, batch):
        await self.gate.wait()
        return await super().append(partition, batch)


def test_heartbeat_answered_only_after_its_records_are_written():
    async def t(start, log, md):
        async with trio.open_nursery() as n:
            gc = await start(n)
            res, written = gc.consumer.heartbeat(hb("g", "m", 0, ["t"]), 1, "c", "/h")
            assert res["error_code"] == 0 and res["member_epoch"] >= 1
            await trio.sleep(1)
            assert not written.done() and not log.partitions[gc.partition_for("g")]
            # a heartbeat that changes nothing still waits for the group's pending write
            res2, written2 = gc.consumer.heartbeat(hb("g", "m", res["member_epoch"]), 1, "c", "/h")
            assert res2["error_code"] == 0
            assert not written2.done()
            log.gate.set()
            assert await written.get() == 0 and await written2.get() == 0
            n.cancel_scope.cancel()
    run(t, log=GatedLog())


def test_records_read_by_apache_kafka_deserializer(tmp_path):
    """The bytes pykbroker writes are what Apache Kafka 4.4's GroupCoordinatorRecordSerde reads."""
    from tests import needs
    libs = needs.kafka_libs()
    recs = []

    async def t(start, log, md):
        async with trio.open_nursery() as n:
            gc = await start(n)
            members = {"a": {"epoch": 0, "owned": set()}, "b": {"epoch": 0, "owned": set()}}
            await converge(gc, "g", members, ["t"])
            await beat(gc, hb("g", "b", -1))
            del members["b"]
            await converge(gc, "g", members, ["t"])
            n.cancel_scope.cancel()
        recs.extend(all_records(log))
    md = FakeMetadata(TopicInfo("t", 4))
    run(t, md=md)
    recs = [(k, v) for k, v in recs if 3 <= int.from_bytes(k[:2], "big") <= 8]
    src = Path(__file__).parent / "oracle" / "CoordinatorRecords.java"
    stdin = "".join("%s %s\n" % (k.hex(), v.hex() if v is not None else "-") for k, v in recs)
    out = subprocess.run(["java", "-cp", str(libs / "*"), str(src)], input=stdin, capture_output=True, text=True,
                         timeout=120)
    lines = out.stdout.splitlines()
    assert len(lines) == len(recs), out.stderr
    assert not [ln for ln in lines if ln.startswith("ERROR")], lines
    tid = md.topics["t"].topic_id
    import base64
    tid_b64 = base64.urlsafe_b64encode(tid).decode().rstrip("=")
    text = "\n".join(lines)
    assert "ConsumerGroupMemberMetadataValue(instanceId=null, rackId=null, clientId='cid', clientHost='/127.0.0.1', " \
           "subscribedTopicNames=[t], subscribedTopicRegex=null, rebalanceTimeoutMs=30000" in text
    assert "ConsumerGroupCurrentMemberAssignmentKey(groupId='g', memberId='b') null" in text
    last_a = [ln for ln in lines if ln.startswith("8 ") and "memberId='a'" in ln][-1]
    assert "state=0" in last_a and "topicId=%s, partitions=[0, 1, 2, 3]" % tid_b64 in last_a, last_a
    epochs = [ln for ln in lines if ln.startswith("3 ")]
    assert "metadataHash=0" not in epochs[-1]
    print("%d KIP-848 records read back by Kafka 4.4's serde" % len(lines))


def test_empty_consumer_group_without_offsets_is_cleaned_up():
    async def t(start, log, md):
        async with trio.open_nursery() as n:
            gc = await start(n)
            await converge(gc, "e", {"m": {"epoch": 0, "owned": set()}}, ["t"])
            await converge(gc, "k", {"m": {"epoch": 0, "owned": set()}}, ["t"])
            await gc.commit("k", {("t", 0): O.OffsetAndMetadata(3, -1, "", 1)}).get()
            for gid in ("e", "k"):
                await beat(gc, hb(gid, "m", -1))
            gc.expire_offsets(2)  # long before any retention: only the group without offsets goes
            await trio.sleep(0.1)
            assert gc.get_group("e") is None and gc.get_group("k").summary_state() == "Empty"
            n.cancel_scope.cancel()
        async with trio.open_nursery() as n:
            gc = await start(n)
            assert gc.get_group("e") is None and gc.get_group("k").kind == "consumer"
            n.cancel_scope.cancel()
    run(t)
