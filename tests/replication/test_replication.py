"""Replication between in-process pykbroker brokers (tests/replication/conftest.py): real
clients produce to the leader, followers copy whole batches, the HW moves with the ISR, the ISR
shrinks and expands, failover keeps every acknowledged record, a diverged follower truncates.
Assertions read real bytes back (wire-level fetches and the replicas' log files)."""
import struct
import threading
import time

import pytest

from tests import needs

from pykbroker.protocol.errors import ErrorCode
from pykbroker.local.broker_process import wait_until
from pykbroker.protocol import wire

from .helpers import fetch_values, followers, produce, wait_isr, wait_replicated


def _batches(raw: bytes):
    """(base offset, leader epoch, bytes) of every batch in a log."""
    out, pos = [], 0
    while pos + 12 <= len(raw):
        (base, length, epoch) = struct.unpack_from(">qii", raw, pos)
        out.append((base, epoch, raw[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def test_followers_hold_byte_identical_batches(cluster):
    confluent_kafka = needs.module("confluent_kafka")
    cluster.create_topic("rep", 2, 3)
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 5})
    acked = []
    for i in range(300):
        p.produce("rep", value=b"v%03d" % i, partition=i % 2,
                  on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
    assert p.flush(30) == 0
    assert len(acked) == 300
    for part in (0, 1):
        leo = wait_replicated(cluster, "rep", part)
        assert leo == 150
        logs = {b: cluster.log_bytes(b, "rep", part) for b in (1, 2, 3)}
        leader = cluster.state("rep", part).leader
        assert logs[1] == logs[2] == logs[3], "replica logs differ"
        batches = _batches(logs[leader])
        assert batches and batches[0][0] == 0
        assert {e for _, e, _ in batches} == {0}   # written under leader epoch 0
        # the producer's state went along: every follower knows the producer id
        pids = [cluster.call(lambda b=b: set(cluster.partition(b, "rep", part).log.producer_state.producers))
                for b in (1, 2, 3)]
        assert pids[0] and pids[0] == pids[1] == pids[2]
    # kafka-python reads everything back from the leaders
    kafka = needs.module("kafka")
    c = kafka.KafkaConsumer("rep", bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                            consumer_timeout_ms=5000)
    # both logs end at 150 (asserted above): the 300 records are all there is, so the read stops
    # at the 300th rather than after 5 s without records (a missing one still ends it at the timeout)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 300:
            break
    c.close()
    assert sorted(got) == sorted(acked)


def test_followers_copy_large_fetch_answers_byte_for_byte(cluster):
    """Fetch answers of up to 1 MiB per partition: the followers read them straight into the
    frame's buffer over several socket reads and append the batches from a view of it
    (cluster/replica_fetcher.py); every replica must end up with the leader's bytes, over
    several 1 MiB segments."""
    import os as _os
    confluent_kafka = needs.module("confluent_kafka")
    cluster.create_topic("big", 1, 3)
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1",
                                  "linger.ms": 50, "batch.size": 900_000, "compression.type": "none"})
    values = [_os.urandom(20_000) for _ in range(250)]   # 5 MB, incompressible
    acked = []
    for v in values:
        p.produce("big", value=v, partition=0,
                  on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None)
    assert p.flush(60) == 0
    assert len(acked) == 250
    leo = wait_replicated(cluster, "big", 0, timeout=60)
    assert leo == 250
    logs = {b: cluster.log_bytes(b, "big", 0) for b in (1, 2, 3)}
    assert len(logs[1]) > 5_000_000
    assert logs[1] == logs[2] == logs[3], "replica logs differ"
    leader = cluster.state("big", 0).leader
    assert max(len(raw) for _, _, raw in _batches(logs[leader])) > 100_000   # large batches went over
    for b in (1, 2, 3):
        assert len(cluster.call(lambda b=b: cluster.partition(b, "big", 0).log.segments)) >= 5
    assert [v for _, _, recs in wire.decode_batches(logs[leader]) for (_, _, v) in recs] == values


def test_non_leader_answers_not_leader_and_fences_epochs(cluster):
    cluster.create_topic("nl", 1, 3)
    leader, (f1, _) = followers(cluster, "nl", 0)
    r = produce(cluster, f1, "nl", 0, [b"x"])
    assert r["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Produce v10+: KIP-951 names the current leader and its endpoint
    with wire.WireClient(cluster.address(f1)) as w:
        resp = wire.produce(w, "nl", 0, wire.make_batch([b"x"]), version=11)
    pr = wire.produce_part(resp)
    assert pr["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert pr["current_leader"] == {"leader_id": leader, "leader_epoch": 0}
    host, port = cluster.address(leader).split(":")
    assert [(n["node_id"], n["host"], n["port"]) for n in resp["node_endpoints"]] == [(leader, host, int(port))]
    p, _ = fetch_values(cluster, f1, "nl", 0)
    assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p["current_leader"] == {"leader_id": leader, "leader_epoch": 0}
    with wire.WireClient(cluster.address(f1)) as w:
        assert wire.list_offsets(w, "nl", 0, -1)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert produce(cluster, leader, "nl", 0, [b"y"])["error_code"] == 0
    st = cluster.elect("nl", 0)          # leader epoch 1 now
    assert st.leader_epoch == 1
    wait_until(lambda: cluster.call(lambda: cluster.partition(st.leader, "nl", 0).is_leader), 10)
    p, _ = fetch_values(cluster, st.leader, "nl", 0, current_leader_epoch=0)
    assert p["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    p, _ = fetch_values(cluster, st.leader, "nl", 0, current_leader_epoch=2)
    assert p["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
    # the new leader knew the old high watermark only from its last fetch as a follower: the
    # acknowledged record becomes visible once the followers' fetches at epoch 1 advance it
    # (Kafka's new leader also serves up to the high watermark it has)
    p, vals = wait_until(lambda: (lambda r: r if r[1] or r[0]["error_code"] else None)(
        fetch_values(cluster, st.leader, "nl", 0, current_leader_epoch=1)), 10, what="y visible at the new leader")
    assert p["error_code"] == 0 and vals == [b"y"]
    # the old leader is a follower now
    assert produce(cluster, leader, "nl", 0, [b"z"])["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_consumers_never_see_past_the_high_watermark_then_isr_shrinks(cluster):
    cluster.create_topic("hw", 1, 3)
    leader, fs = followers(cluster, "hw", 0)
    assert produce(cluster, leader, "hw", 0, [b"a", b"b"])["error_code"] == 0
    wait_replicated(cluster, "hw", 0)
    for f in fs:                       # the followers hang (the controller does not notice)
        cluster.stop_broker(f, fail=False)
    r = produce(cluster, leader, "hw", 0, [b"c"], acks=1)
    assert r["error_code"] == 0 and r["base_offset"] == 2
    assert cluster.offsets(leader, "hw", 0) == (0, 2, 3)     # appended, not committed
    p, vals = fetch_values(cluster, leader, "hw", 0)
    assert vals == [b"a", b"b"] and p["high_watermark"] == 2
    with wire.WireClient(cluster.address(leader)) as w:
        assert wire.list_offsets(w, "hw", 0, -1)["offset"] == 2
    # replica.lag.time.max.ms (4 s) later the leader drops them from the ISR; the HW moves on
    # a consumer long-polling at the HW wakes up when the HW moves (the ISR shrink), not when
    # the record was appended
    t0 = time.monotonic()
    p, vals = fetch_values(cluster, leader, "hw", 0, offset=2, max_wait_ms=9000)
    assert vals == [b"c"] and p["high_watermark"] == 3
    assert time.monotonic() - t0 < 8.5
    assert cluster.state("hw", 0).isr == (leader,)
    p, vals = fetch_values(cluster, leader, "hw", 0)
    assert vals == [b"a", b"b", b"c"]


def test_follower_fetch_waits_for_data_not_for_a_new_high_watermark(cluster):
    """A follower's parked fetch completes when data arrives (at once), not when only the high
    watermark moved (Kafka's DelayedFetch since KAFKA-9952): the new HW goes out with the next
    data or when max_wait_ms ends.  Here the test's own fetches take a hung follower's place."""
    cluster.create_topic("hwf", 1, 3)
    leader, (a, b) = followers(cluster, "hwf", 0)
    assert produce(cluster, leader, "hwf", 0, [b"a"])["error_code"] == 0
    wait_replicated(cluster, "hwf", 0)
    cluster.stop_broker(b, fail=False)     # still in the ISR: the HW waits for b's fetches
    epoch = cluster.call(lambda: cluster.partition(leader, "hwf", 0).leader_epoch)

    with wire.WireClient(cluster.address(leader), timeout=30) as w:
        def fetch(session_id, session_epoch, offset, max_wait_ms):
            named = [] if offset is None else [{"topic": "hwf", "partitions": [{
                "partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                "last_fetched_epoch": epoch, "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]
            t0 = time.monotonic()
            r = w.request(1, 12, {"replica_id": b, "max_wait_ms": max_wait_ms, "min_bytes": 1,
                                  "max_bytes": 1 << 20, "isolation_level": 0, "session_id": session_id,
                                  "session_epoch": session_epoch, "topics": named,
                                  "forgotten_topics_data": [], "rack_id": ""})
            assert r["error_code"] == 0, r
            parts = [p for t in r["responses"] for p in t["partitions"]]
            return r, parts, time.monotonic() - t0

        r, _, _ = fetch(0, 0, 1, 0)        # full fetch at b's log end: a session
        sid = r["session_id"]
        assert sid
        # a record a copies and b (this test) does not yet: the HW stays at 1
        assert produce(cluster, leader, "hwf", 0, [b"b"], acks=1)["error_code"] == 0
        wait_until(lambda: cluster.offsets(a, "hwf", 0)[2] == 2, 10, what="a copied offset 1")
        _, parts, took = fetch(sid, 1, 1, 5000)
        assert wire.decode_batches(parts[0]["records"])[0][2][0][2] == b"b" and took < 4
        assert cluster.offsets(leader, "hwf", 0)[1] == 1
        # b "appended" it: this fetch moves the HW to 2, and then waits, since nothing new is
        # there to send (answered at once before: twice the follower requests under load)
        _, parts, took = fetch(sid, 2, 2, 1000)
        assert cluster.offsets(leader, "hwf", 0)[1] == 2
        assert took >= 0.8, "a new high watermark alone completed a follower's fetch (%.2f s)" % took
        assert parts[0]["high_watermark"] == 2 and not parts[0]["records"]   # told when it ends
        # new data completes a parked follower fetch at once
        timer = threading.Timer(0.3, produce, (cluster, leader, "hwf", 0, [b"c"], 1))
        timer.start()
        _, parts, took = fetch(sid, 3, None, 8000)
        timer.join()
        assert took < 6 and wire.decode_batches(parts[0]["records"])[0][2][0][2] == b"c"


def test_min_insync_replicas(cluster):
    cluster.create_topic("mi", 1, 3, {"min.insync.replicas": "3"})
    leader, (f1, f2) = followers(cluster, "mi", 0)
    assert produce(cluster, leader, "mi", 0, [b"a"])["error_code"] == 0
    cluster.stop_broker(f1)            # the controller removes it from the ISR
    wait_isr(cluster, "mi", 0, [leader, f2])
    assert produce(cluster, leader, "mi", 0, [b"b"])["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(cluster, leader, "mi", 0, [b"c"], acks=1)["error_code"] == 0
    # it comes back: catches up, the leader adds it to the ISR again
    cluster.start_broker(f1)
    wait_isr(cluster, "mi", 0, [leader, f1, f2])
    assert produce(cluster, leader, "mi", 0, [b"d"])["error_code"] == 0
    wait_replicated(cluster, "mi", 0)
    assert cluster.log_bytes(f1, "mi", 0) == cluster.log_bytes(leader, "mi", 0)
    _, vals = fetch_values(cluster, leader, "mi", 0)
    assert vals == [b"a", b"c", b"d"]


def test_high_watermark_stays_while_the_isr_is_below_min_insync_replicas(cluster):
    """Kafka 3.7+ (KAFKA-15583; Partition.maybeIncrementLeaderHW in 3.9 and 4.4, unconditional):
    the HW does not move while the ISR is smaller than min.insync.replicas.  An acks=all write
    appended before the ISR shrank to the leader alone is therefore never acknowledged (it times
    out, it does not answer NOT_ENOUGH_REPLICAS_AFTER_APPEND as before 3.7), an acks=1 write is
    appended but no read_uncommitted consumer sees it, and both become visible once a follower
    is back in the ISR.  Kafka 4.4 (3 KRaft nodes, rf 3, min.insync.replicas 3, one node
    killed): acks=1 appended at offset 2, Fetch and ListOffsets answer HW 2, acks=all
    NOT_ENOUGH_REPLICAS."""
    cluster.create_topic("mia", 1, 3, {"min.insync.replicas": "2"})
    leader, fs = followers(cluster, "mia", 0)
    assert produce(cluster, leader, "mia", 0, [b"a"])["error_code"] == 0
    for f in fs:
        cluster.stop_broker(f, fail=False)
    # the ISR is still 3: appended, then the ISR shrinks to the leader alone (replica.lag.time.max.ms
    # 4 s) and the HW stays below the write
    r = produce(cluster, leader, "mia", 0, [b"b"], timeout_ms=6000)
    assert r["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    wait_isr(cluster, "mia", 0, [leader])
    assert produce(cluster, leader, "mia", 0, [b"c"])["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    r = produce(cluster, leader, "mia", 0, [b"d"], acks=1)
    assert r["error_code"] == 0 and r["base_offset"] == 2
    assert cluster.offsets(leader, "mia", 0) == (0, 1, 3)     # appended, not committed
    p, vals = fetch_values(cluster, leader, "mia", 0)
    assert vals == [b"a"] and p["high_watermark"] == 1
    with wire.WireClient(cluster.address(leader)) as w:
        assert wire.list_offsets(w, "mia", 0, -1)["offset"] == 1
    cluster.start_broker(fs[0])       # back: catches up to the HW, rejoins, the HW moves on
    wait_isr(cluster, "mia", 0, [leader, fs[0]])
    wait_until(lambda: fetch_values(cluster, leader, "mia", 0)[1] == [b"a", b"b", b"d"], 10,
               what="the records appended below min ISR visible after the ISR grew back")


def _a_follower_stopped_and_out_of_the_isr(cluster, topic):
    """``topic`` (one partition, three replicas) written, a follower stopped, a write more, and
    the ISR shrunk without it: -> (leader, the stopped follower, the other one)."""
    cluster.create_topic(topic, 1, 3)
    leader, (f1, f2) = followers(cluster, topic, 0)
    assert produce(cluster, leader, topic, 0, [b"a"])["error_code"] == 0
    cluster.stop_broker(f1, fail=False)
    # an idle partition keeps a silent follower that has everything (Kafka's isCaughtUp: same
    # log end); a write makes it lag
    assert produce(cluster, leader, topic, 0, [b"a2"], acks=1)["error_code"] == 0
    wait_isr(cluster, topic, 0, [leader, f2], timeout=20)
    return leader, f1, f2


def test_isr_shrinks_and_expands_with_a_stopped_follower(cluster):
    leader, f1, f2 = _a_follower_stopped_and_out_of_the_isr(cluster, "ise")
    for i in range(5):
        assert produce(cluster, leader, "ise", 0, [b"b%d" % i])["error_code"] == 0
    cluster.start_broker(f1)
    wait_isr(cluster, "ise", 0, [leader, f1, f2], timeout=15)
    wait_replicated(cluster, "ise", 0)
    assert cluster.log_bytes(f1, "ise", 0) == cluster.log_bytes(leader, "ise", 0)


def test_an_isr_expansion_refused_once_is_asked_again_by_the_next_fetches(cluster, monkeypatch):
    """The controller refuses the first expansion back to a caught-up follower (as a ZooKeeper
    controller does with INELIGIBLE_REPLICA while that broker is not registered again).  With
    nothing more written, the follower's incremental fetches no longer name the partition; the
    leader still reads it at each of them while the follower is out of the ISR (Kafka reads
    every partition of a follower's session) and asks again: the ISR is whole within a few
    fetches, not at the session's next full sweep (FULL_SWEEP_S, 10 s)."""
    import time
    from pykbroker.protocol.errors import ErrorCode, KafkaError
    from pykbroker.testing.memory_cluster import MemoryController

    leader, f1, f2 = _a_follower_stopped_and_out_of_the_isr(cluster, "isx")
    refused = []
    real = MemoryController.alter_partition

    async def refuse_first_expansion(self, topic, partition, partition_epoch, leader=None, isr=None,
                                     leader_epoch=None):
        if isr is not None and f1 in isr and not refused:
            refused.append(time.monotonic())
            raise KafkaError(ErrorCode.INELIGIBLE_REPLICA, "not registered yet")
        return await real(self, topic, partition, partition_epoch, leader=leader, isr=isr,
                          leader_epoch=leader_epoch)

    monkeypatch.setattr(MemoryController, "alter_partition", refuse_first_expansion)
    cluster.start_broker(f1)
    wait_until(lambda: refused, 15, what="the first expansion, refused")
    wait_isr(cluster, "isx", 0, [leader, f1, f2], timeout=15)
    assert time.monotonic() - refused[0] < 5, "asked again only after %.1f s" % (time.monotonic() - refused[0])


def test_an_expansion_refused_at_the_full_fetch_that_opens_a_session_is_asked_again(cluster, monkeypatch):
    """As above, but the refusal comes at a restarted follower's first (full) fetch, the one
    that opens its fetch session, with the follower already caught up: nothing written after,
    so no later fetch names the partition.  The session still reads it at every fetch while the
    ISR lacks the follower, from that full fetch on (the chaos campaign: a follower restarted
    before it was registered again waited for the 10 s sweep on every idle partition)."""
    import time
    from pykbroker.protocol.errors import ErrorCode, KafkaError
    from pykbroker.testing.memory_cluster import MemoryController

    leader, f1, f2 = _a_follower_stopped_and_out_of_the_isr(cluster, "isf")
    refusing, refused = [True], []
    real = MemoryController.alter_partition

    async def refuse_while_told(self, topic, partition, partition_epoch, leader=None, isr=None, leader_epoch=None):
        if isr is not None and f1 in isr and refusing[0]:
            refused.append(time.monotonic())
            raise KafkaError(ErrorCode.INELIGIBLE_REPLICA, "not registered yet")
        return await real(self, topic, partition, partition_epoch, leader=leader, isr=isr, leader_epoch=leader_epoch)

    monkeypatch.setattr(MemoryController, "alter_partition", refuse_while_told)
    cluster.start_broker(f1)   # catches up; every expansion refused
    wait_until(lambda: refused and cluster.log_bytes(f1, "isf", 0) == cluster.log_bytes(leader, "isf", 0), 15,
               what="the follower caught up, its expansion refused")
    cluster.stop_broker(f1, fail=False)
    n = len(refused)
    cluster.start_broker(f1)   # caught up at its first fetch: the expansion asked there, refused once
    wait_until(lambda: len(refused) > n, 15, what="the expansion at the session's full fetch, refused")
    refusing[0] = False
    t = time.monotonic()
    wait_isr(cluster, "isf", 0, [leader, f1, f2], timeout=15)
    assert time.monotonic() - t < 5, "asked again only after %.1f s" % (time.monotonic() - t)
    assert cluster.state("isf", 0).leader == leader


def test_failover_keeps_every_acknowledged_record(cluster):
    confluent_kafka = needs.module("confluent_kafka")
    cluster.create_topic("fo", 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.state("fo", 0).leader
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000,
                                  "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000})
    acked, errors = [], []

    def cb(err, msg):
        (acked if err is None else errors).append(msg.value() if err is None else err)
    stop = threading.Event()

    def run():
        i = 0
        while not stop.is_set():
            p.produce("fo", value=b"m%05d" % i, partition=0, on_delivery=cb)
            p.poll(0.002)
            i += 1
        p.flush(60)
    t = threading.Thread(target=run)
    t.start()
    wait_until(lambda: len(acked) > 200, 20)
    cluster.stop_broker(leader)        # crash: the controller elects another ISR member
    st = cluster.state("fo", 0)
    assert st.leader != leader and st.leader_epoch == 1
    n_at_failover = len(acked)
    wait_until(lambda: len(acked) > n_at_failover + 200, 30, what="produce after failover")
    stop.set()
    t.join(90)
    assert not errors, errors[:3]
    new_leader = st.leader
    wait_replicated(cluster, "fo", 0, brokers=[b for b in (1, 2, 3) if b != leader])
    _, vals = fetch_values(cluster, new_leader, "fo", 0, max_bytes=64 << 20, partition_max_bytes=64 << 20)
    got = []
    off = 0
    with wire.WireClient(cluster.address(new_leader)) as w:
        while True:
            part = wire.fetch_part(wire.fetch(w, "fo", 0, off))
            recs = [(o, v) for _, _, rs in wire.decode_batches(part["records"]) for o, _, v in rs if o >= off]
            if not recs:
                break
            got += [v for _, v in recs]
            off = recs[-1][0] + 1
    assert len(got) == len(set(got)), "duplicates after failover"
    assert set(acked) <= set(got), "acknowledged records lost"
    # ordered as produced
    assert got == sorted(got)


def test_diverged_follower_truncates(cluster):
    cluster.create_topic("dv", 1, 3)
    st = cluster.state("dv", 0)
    old, (f1, f2) = st.leader, [b for b in st.replicas if b != st.leader]
    assert produce(cluster, old, "dv", 0, [b"a", b"b"])["error_code"] == 0
    wait_replicated(cluster, "dv", 0)
    # followers hang; the leader takes an acks=1 write nobody else gets
    cluster.stop_broker(f1, fail=False)
    cluster.stop_broker(f2, fail=False)
    assert produce(cluster, old, "dv", 0, [b"lost1", b"lost2"], acks=1)["error_code"] == 0
    assert cluster.offsets(old, "dv", 0)[2] == 4
    # the leader dies; the controller elects f1 (still in the ISR), which comes back
    cluster.stop_broker(old, fail=True)
    assert cluster.state("dv", 0).leader == f1
    cluster.start_broker(f1)
    cluster.start_broker(f2)
    wait_until(lambda: cluster.call(lambda: cluster.partition(f1, "dv", 0).is_leader), 10)
    assert produce(cluster, f1, "dv", 0, [b"c"])["error_code"] == 0
    # the old leader returns as a follower: its epoch-0 suffix diverges and is truncated
    cluster.start_broker(old)
    wait_isr(cluster, "dv", 0, [old, f1, f2], timeout=20)
    wait_replicated(cluster, "dv", 0)
    logs = {b: cluster.log_bytes(b, "dv", 0) for b in (old, f1, f2)}
    assert logs[old] == logs[f1] == logs[f2]
    batches = _batches(logs[old])
    assert [(b, e) for b, e, _ in batches] == [(0, 0), (2, 1)]
    _, vals = fetch_values(cluster, f1, "dv", 0)
    assert vals == [b"a", b"b", b"c"]
    # the epoch cache was truncated too: epoch 0 ends at 2 on every replica
    for b in (old, f1, f2):
        assert cluster.call(lambda b=b: cluster.partition(b, "dv", 0).log.epoch_cache.entries) == [(0, 0), (1, 2)]


def test_reassignment_adds_and_removes_a_replica(cluster):
    cluster.create_topic("ra", 1, 2)
    st = cluster.state("ra", 0)
    (other,) = [b for b in (1, 2, 3) if b not in st.replicas]
    for i in range(3):
        assert produce(cluster, st.leader, "ra", 0, [b"r%d" % i])["error_code"] == 0
    assert cluster.call(lambda: cluster.partition(other, "ra", 0)) is None
    # add a replica: it creates its log, catches up and joins the ISR
    cluster.reassign("ra", 0, list(st.replicas) + [other])
    wait_isr(cluster, "ra", 0, list(st.replicas) + [other])
    wait_replicated(cluster, "ra", 0, brokers=[st.leader, other])
    assert cluster.log_bytes(other, "ra", 0) == cluster.log_bytes(st.leader, "ra", 0)
    # drop the other follower: its replica is deleted
    (gone,) = [b for b in st.replicas if b != st.leader]
    path = cluster.call(lambda: cluster.partition(gone, "ra", 0).log.dir)
    cluster.reassign("ra", 0, [st.leader, other])
    wait_until(lambda: cluster.call(lambda: cluster.partition(gone, "ra", 0)) is None, 10)
    import os
    wait_until(lambda: not os.path.exists(path), 10, what="replica directory removed")
    assert produce(cluster, st.leader, "ra", 0, [b"after"])["error_code"] == 0
    _, vals = fetch_values(cluster, st.leader, "ra", 0)
    assert vals == [b"r0", b"r1", b"r2", b"after"]


def test_group_coordinator_follows_offsets_leadership(cluster):
    kafka = needs.module("kafka")
    cluster.create_topic("gt", 1, 3)
    leader = cluster.state("gt", 0).leader
    for i in range(5):
        assert produce(cluster, leader, "gt", 0, [b"g%d" % i])["error_code"] == 0

    def consume(n):
        c = kafka.KafkaConsumer("gt", group_id="grp", bootstrap_servers=cluster.bootstrap,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                consumer_timeout_ms=8000)
        got = []
        for m in c:
            got.append(m.value)
            if len(got) == n:
                break
        c.commit()
        c.close()
        return got
    assert consume(3) == [b"g0", b"g1", b"g2"]
    from pykbroker.coordinator.group.offsets import partition_for
    op = partition_for("grp", 3)
    coord = cluster.state("__consumer_offsets", op).leader
    wait_replicated(cluster, "__consumer_offsets", op)
    # only the leader of the group's offsets partition coordinates it
    async def status(b):
        gc = cluster.brokers[b].group_coordinator
        await gc.ensure_topic()          # what every group request does first
        return gc.coordinator_error("grp")
    for b in (1, 2, 3):
        code = cluster.acall(status, b)
        assert (code == 0) == (b == coord), (b, coord, code)
    # a transaction marker for the offsets partition sent to a follower: the group coordinator
    # there refuses (NOT_COORDINATOR), answered NOT_LEADER_OR_FOLLOWER as Kafka's
    # handleWriteTxnMarkersRequest does (the sender's retriable error); the leader takes it
    def marker(b):
        with wire.WireClient(cluster.address(b)) as c:
            r = c.request(27, 1, {"markers": [{"producer_id": 4243, "producer_epoch": 0, "transaction_result": False,
                                               "coordinator_epoch": 0,
                                               "topics": [{"name": "__consumer_offsets", "partition_indexes": [op]}]}]})
        return r["markers"][0]["topics"][0]["partitions"][0]["error_code"]
    assert [marker(b) for b in (1, 2, 3)] == [0 if b == coord else ErrorCode.NOT_LEADER_OR_FOLLOWER for b in (1, 2, 3)]
    cluster.stop_broker(coord)                      # the coordinator dies
    new = cluster.state("__consumer_offsets", op).leader
    assert new not in (coord, -1)
    wait_until(lambda: cluster.acall(status, new) == 0, 10)
    # the committed offset survived on the new coordinator
    if leader == coord:
        wait_until(lambda: cluster.state("gt", 0).leader != coord, 5)
    assert consume(2) == [b"g3", b"g4"]


def test_group_commits_are_acks_all_writes(tmp_path):
    """The group coordinator appends to __consumer_offsets with acks=all, as Kafka's
    (offsets.commit.required.acks -1): with the ISR below min.insync.replicas an OffsetCommit
    is refused (NOT_ENOUGH_REPLICAS), and one whose ISR shrank below it before the HW covered
    it fails after offsets.commit.timeout.ms (REQUEST_TIMED_OUT: the HW stays put below min
    ISR), both answered COORDINATOR_NOT_AVAILABLE; an OffsetFetch keeps the last acknowledged
    offset.  (The chaos campaign's split with the
    controller frozen: a new coordinator elected with the ISR [itself] acknowledged commits that
    no other replica held.)"""
    from pykbroker.coordinator.group.offsets import partition_for
    from pykbroker.testing.memory_cluster import ClusterRunner

    from .conftest import CLUSTER_CONFIG
    with ClusterRunner(str(tmp_path), 3, dict(CLUSTER_CONFIG, **{"min.insync.replicas": "2"})) as cluster:
        cluster.create_topic("acg", 1, 3)
        with wire.WireClient(cluster.address(1)) as c:   # creates __consumer_offsets
            c.request(10, 4, {"key_type": 0, "coordinator_keys": ["acg-group"]})
        op = partition_for("acg-group", 3)
        wait_until(lambda: cluster.call(lambda: ("__consumer_offsets", op) in cluster.cluster.states), 10)
        coord, (f1, f2) = followers(cluster, "__consumer_offsets", op)

        def commit(offset):
            with wire.WireClient(cluster.address(coord)) as c:
                r = c.request(8, 8, {"group_id": "acg-group", "generation_id_or_member_epoch": -1, "member_id": "",
                                     "group_instance_id": None,
                                     "topics": [{"name": "acg", "partitions": [
                                         {"partition_index": 0, "committed_offset": offset,
                                          "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            return r["topics"][0]["partitions"][0]["error_code"]

        def fetched():
            with wire.WireClient(cluster.address(coord)) as c:
                g = c.request(9, 8, {"groups": [{"group_id": "acg-group", "topics": [
                    {"name": "acg", "partition_indexes": [0]}]}], "require_stable": False})["groups"][0]
            return g["topics"][0]["partitions"][0]["committed_offset"]
        wait_until(lambda: commit(1) == 0, 10)             # once the coordinator has loaded
        cluster.stop_broker(f1)                            # the ISR [coord, f2] still meets 2
        wait_isr(cluster, "__consumer_offsets", op, [coord, f2])
        assert commit(2) == 0
        cluster.stop_broker(f2, fail=False)                # hangs: appended, the HW waits for f2
        # not committed within offsets.commit.timeout.ms (the ISR shrinks to coord meanwhile and
        # the HW stays put below min ISR): REQUEST_TIMED_OUT, answered COORDINATOR_NOT_AVAILABLE
        t0 = time.monotonic()
        assert commit(3) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert time.monotonic() - t0 < 12     # Kafka's 5 s default, not the coordinator's unload
        wait_isr(cluster, "__consumer_offsets", op, [coord])
        leo = cluster.offsets(coord, "__consumer_offsets", op)[2]
        assert commit(4) == ErrorCode.COORDINATOR_NOT_AVAILABLE   # refused before appending:
        assert cluster.offsets(coord, "__consumer_offsets", op)[2] == leo   # nothing written
        assert fetched() == 2
        cluster.start_broker(f2)
        wait_isr(cluster, "__consumer_offsets", op, [coord, f2])
        assert commit(5) == 0 and fetched() == 5


def test_transaction_state_and_markers_need_min_insync_replicas(cluster):
    """__transaction_state is created with Kafka's topic configs (4.4's
    transactionStateTopicConfigs: min.insync.replicas = transaction.state.log.min.isr, default 2,
    unclean.leader.election.enable false; __consumer_offsets keeps the broker's min ISR, as
    Kafka 4.4 answers DescribeConfigs), so with the ISR at the coordinator alone a state write is
    refused (InitProducerId: COORDINATOR_NOT_AVAILABLE).  Transaction markers on data partitions
    are acks=all appends (Kafka's WriteTxnMarkers appends with requiredAcks -1): refused with
    NOT_ENOUGH_REPLICAS below the topic's min.insync.replicas, which the coordinator retries."""
    from pykbroker.coordinator.group.offsets import partition_for
    from pykbroker.coordinator.txn.state_log import TRANSACTION_STATE_TOPIC
    cluster.create_topic("mk", 1, 3, {"min.insync.replicas": "2"})
    with wire.WireClient(cluster.address(1)) as c:
        c.request(10, 4, {"key_type": 1, "coordinator_keys": ["isr-tx"]})   # creates the topic
    tp = partition_for("isr-tx", 3)   # transaction.state.log.num.partitions (conftest)
    wait_until(lambda: cluster.call(lambda: (TRANSACTION_STATE_TOPIC, tp) in cluster.cluster.states), 10)

    def configs(node, topic):
        with wire.WireClient(cluster.address(node)) as c:
            r = c.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                 "configuration_keys": None}],
                                  "include_synonyms": False, "include_documentation": False})
        return {e["name"]: e["value"] for e in r["results"][0]["configs"]}
    coord, others = followers(cluster, TRANSACTION_STATE_TOPIC, tp)
    txn = configs(coord, TRANSACTION_STATE_TOPIC)
    assert (txn["min.insync.replicas"], txn["unclean.leader.election.enable"], txn["cleanup.policy"],
            txn["compression.type"]) == ("2", "false", "compact", "uncompressed")
    with wire.WireClient(cluster.address(coord)) as c:
        c.request(10, 4, {"key_type": 0, "coordinator_keys": ["isr-g"]})
    wait_until(lambda: cluster.call(lambda: "__consumer_offsets" in {t for t, _ in cluster.cluster.states}), 10)
    assert configs(coord, "__consumer_offsets")["min.insync.replicas"] == "1"

    def init_pid():
        with wire.WireClient(cluster.address(coord)) as c:
            return c.request(22, 4, {"transactional_id": "isr-tx", "transaction_timeout_ms": 60000,
                                     "producer_id": -1, "producer_epoch": -1})["error_code"]
    wait_until(lambda: init_pid() == 0, 15, what="InitProducerId with the full ISR")
    for f in others:
        cluster.stop_broker(f)        # the controller shrinks every ISR to coord
    wait_isr(cluster, TRANSACTION_STATE_TOPIC, tp, [coord])
    wait_isr(cluster, "mk", 0, [coord])
    assert init_pid() == ErrorCode.COORDINATOR_NOT_AVAILABLE
    with wire.WireClient(cluster.address(coord)) as c:
        r = c.request(27, 1, {"markers": [{"producer_id": 4242, "producer_epoch": 0, "transaction_result": True,
                                           "coordinator_epoch": 0, "topics": [{"name": "mk", "partition_indexes": [0]}]}]})
    assert r["markers"][0]["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.offsets(coord, "mk", 0)[2] == 0     # nothing appended


def test_commit_markers_are_retried_until_min_insync_replicas(cluster):
    """A transaction committed while its data partition's ISR is below min.insync.replicas:
    the coordinator's COMMIT marker is refused (NOT_ENOUGH_REPLICAS) and retried, as Kafka's
    marker channel retries it, so the transaction stays open there (a read_committed reader's
    last stable offset stays before it) until the ISR is back, then the marker is written."""
    confluent_kafka = needs.module("confluent_kafka")
    cluster.create_topic("mkr", 1, 3, {"min.insync.replicas": "3"})
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "mkr-tx",
                                  "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for v in (b"t1", b"t2"):
        p.produce("mkr", value=v, partition=0)
    assert p.flush(20) == 0
    with wire.WireClient(cluster.address(1)) as c:
        coord = c.request(10, 4, {"key_type": 1, "coordinator_keys": ["mkr-tx"]})["coordinators"][0]["node_id"]
    victim = [b for b in sorted(cluster.brokers) if b != coord][0]
    cluster.stop_broker(victim)        # mkr-0's ISR: 2 < 3; __transaction_state's: 2, its min ISR
    wait_until(lambda: victim not in cluster.state("mkr", 0).isr, 10, what="mkr-0's ISR shrunk")
    p.commit_transaction(30)           # PrepareCommit is written: the client is answered

    def lso():
        leader = cluster.state("mkr", 0).leader
        return fetch_values(cluster, leader, "mkr", 0, isolation_level=1)[0]["last_stable_offset"]
    time.sleep(1)
    assert lso() == 0                  # no COMMIT marker in: the transaction is open there
    assert cluster.offsets(cluster.state("mkr", 0).leader, "mkr", 0)[2] == 2   # refused, not appended
    cluster.start_broker(victim)
    wait_until(lambda: lso() == 3, 20, what="the COMMIT marker written once the ISR is back")
    leader = cluster.state("mkr", 0).leader
    assert fetch_values(cluster, leader, "mkr", 0, isolation_level=1)[1][:2] == [b"t1", b"t2"]   # then the marker


def _delete_records(cluster, node, topic, partition, offset):
    with wire.WireClient(cluster.address(node)) as w:
        r = w.request(21, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "offset": offset}]}], "timeout_ms": 10000})
    return r["topics"][0]["partitions"][0]


def test_log_start_follows_the_leader_and_a_lagging_follower_starts_over(cluster):
    cluster.create_topic("ls", 1, 3)
    leader, (f1, f2) = followers(cluster, "ls", 0)
    for i in range(4):
        assert produce(cluster, leader, "ls", 0, [b"a%d" % i])["error_code"] == 0
    wait_replicated(cluster, "ls", 0)
    # an in-sync follower's log start follows the leader's (DeleteRecords there)
    r = _delete_records(cluster, leader, "ls", 0, 2)
    assert r["error_code"] == 0 and r["low_watermark"] == 2
    assert produce(cluster, leader, "ls", 0, [b"b"])["error_code"] == 0
    wait_until(lambda: cluster.offsets(f2, "ls", 0)[0] == 2, 10, what="follower log start")
    # a stopped follower falls behind the leader's log start: OFFSET_OUT_OF_RANGE when it
    # returns, so it truncates fully and starts at the leader's log start (Kafka's handling)
    cluster.stop_broker(f1)
    wait_isr(cluster, "ls", 0, [leader, f2])
    for i in range(3):
        assert produce(cluster, leader, "ls", 0, [b"c%d" % i])["error_code"] == 0
    assert _delete_records(cluster, leader, "ls", 0, 7)["error_code"] == 0
    cluster.start_broker(f1)
    wait_isr(cluster, "ls", 0, [leader, f1, f2], timeout=20)
    wait_replicated(cluster, "ls", 0)
    assert cluster.offsets(f1, "ls", 0) == (7, 8, 8)
    assert cluster.log_bytes(f1, "ls", 0) == cluster.log_bytes(leader, "ls", 0)
    _, vals = fetch_values(cluster, leader, "ls", 0, offset=7)
    assert vals == [b"c2"]


def test_delete_replicated_topic_everywhere(cluster):
    cluster.create_topic("del", 2, 3)
    dirs = [cluster.call(lambda b=b: cluster.partition(b, "del", 0).log.dir) for b in (1, 2, 3)]
    cluster.acall(cluster.brokers[2].controller.delete_topic, "del")
    for b in (1, 2, 3):
        assert cluster.call(lambda b=b: cluster.partition(b, "del", 0)) is None
    import os
    wait_until(lambda: not any(os.path.exists(d) for d in dirs), 10, what="replica dirs removed")


def test_acks_all_waiter_returns_on_leadership_loss(cluster):
    cluster.create_topic("ll", 1, 3)
    leader, fs = followers(cluster, "ll", 0)
    assert produce(cluster, leader, "ll", 0, [b"a"])["error_code"] == 0
    for f in fs:
        cluster.stop_broker(f, fail=False)
    out = {}
    t = threading.Thread(target=lambda: out.update(produce(cluster, leader, "ll", 0, [b"b"], timeout_ms=20000)))
    t.start()
    wait_until(lambda: cluster.offsets(leader, "ll", 0)[2] == 2, 10, what="appended")
    cluster.elect("ll", 0, fs[0])      # leadership moves away while the produce waits
    t.join(10)
    assert not t.is_alive()
    assert out["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_idempotent_sequences_survive_failover(cluster):
    """A new leader continues the producer's sequences from what it replicated: the next batch is
    accepted, a retry of an acknowledged batch is answered as a duplicate with its original
    offset, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER."""
    cluster.create_topic("ids", 1, 3)
    leader = cluster.state("ids", 0).leader
    pid, epoch = wire.init_producer_id(cluster.address(leader))

    def send(node, values, seq):
        with wire.WireClient(cluster.address(node)) as w:
            return wire.produce_part(wire.produce(w, "ids", 0, wire.make_batch(
                values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)))
    assert send(leader, [b"a", b"b"], 0)["base_offset"] == 0
    last = send(leader, [b"c"], 2)
    assert last["error_code"] == 0 and last["base_offset"] == 2
    wait_replicated(cluster, "ids", 0)
    cluster.stop_broker(leader)
    new = cluster.state("ids", 0).leader
    wait_until(lambda: cluster.call(lambda: cluster.partition(new, "ids", 0).is_leader), 10)
    dup = send(new, [b"c"], 2)            # the client's retry of an acknowledged batch
    assert dup["error_code"] == 0 and dup["base_offset"] == 2
    assert send(new, [b"e"], 5)["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = send(new, [b"d"], 3)
    assert nxt["error_code"] == 0 and nxt["base_offset"] == 3
    _, vals = fetch_values(cluster, new, "ids", 0)
    assert vals == [b"a", b"b", b"c", b"d"]


def test_idempotent_retry_below_min_isr_is_refused_and_the_next_sequence_is_out_of_order(cluster):
    """The answers a new leader gave in the split-sigstop-controller duplicate
    (compat/chaos/results/nemeses.md), in Kafka's order: while the ISR is below
    min.insync.replicas an acks=all batch is refused NOT_ENOUGH_REPLICAS before the log is
    touched, even a retry of a batch already in the log (Kafka's Partition.appendRecordsToLeader
    checks the ISR size before UnifiedLog finds the duplicate); once the ISR is back, the batch
    sent after a refused one is OUT_OF_ORDER_SEQUENCE_NUMBER (its predecessor was never
    written), and the retry is answered with its original offset, nothing appended."""
    cluster.create_topic("idr", 1, 3, {"min.insync.replicas": "3"})
    leader, (f1, f2) = followers(cluster, "idr", 0)
    pid, epoch = wire.init_producer_id(cluster.address(leader))

    def send(values, seq):
        with wire.WireClient(cluster.address(leader)) as w:
            return wire.produce_part(wire.produce(w, "idr", 0, wire.make_batch(
                values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)))
    first = send([b"a"], 0)
    assert first["error_code"] == 0 and first["base_offset"] == 0
    cluster.stop_broker(f1)            # the controller removes it from the ISR
    wait_isr(cluster, "idr", 0, [leader, f2])
    assert send([b"a"], 0)["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS   # a retry of offset 0
    assert send([b"b"], 1)["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    cluster.start_broker(f1)
    wait_isr(cluster, "idr", 0, [leader, f1, f2])
    assert send([b"c"], 2)["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    dup = send([b"a"], 0)
    assert dup["error_code"] == 0 and dup["base_offset"] == 0
    nxt = send([b"b"], 1)
    assert nxt["error_code"] == 0 and nxt["base_offset"] == 1
    _, vals = fetch_values(cluster, leader, "idr", 0)
    assert vals == [b"a", b"b"]


def test_whole_cluster_restart_keeps_committed_records(cluster):
    cluster.create_topic("rs", 2, 3)
    for p in (0, 1):
        leader = cluster.state("rs", p).leader
        assert produce(cluster, leader, "rs", p, [b"p%d-a" % p, b"p%d-b" % p])["error_code"] == 0
        wait_replicated(cluster, "rs", p)
    for b in (1, 2, 3):
        cluster.stop_broker(b, fail=False)
    for b in (3, 1, 2):
        cluster.start_broker(b)
    for p in (0, 1):
        leader = cluster.state("rs", p).leader
        wait_until(lambda: cluster.call(lambda: cluster.partition(leader, "rs", p).is_leader), 10)
        # the HW came back from the checkpoints: the committed records are readable at once
        _, vals = fetch_values(cluster, leader, "rs", p)
        assert vals == [b"p%d-a" % p, b"p%d-b" % p]
        assert produce(cluster, leader, "rs", p, [b"p%d-c" % p])["error_code"] == 0
        wait_replicated(cluster, "rs", p)
        assert cluster.log_bytes(1, "rs", p) == cluster.log_bytes(2, "rs", p) == cluster.log_bytes(3, "rs", p)
