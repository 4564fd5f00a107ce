"""Crash and restart, partitions going offline, coordinator errors, and the broker clock, with
real clients; assertions on what the broker holds (records, committed offsets, group state)."""
import os
import threading
import time

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.errors import ErrorCode
from pykbroker.local.broker_process import wait_until
from pykbroker.protocol import wire
from tests.delivery import produce_each
from tests.polling import kafka_python_values


def _values(broker, topic, partition=0):
    return [r.value for r in broker.records(topic, partition)]


# -- crash and restart ------------------------------------------------------------------------
def test_in_process_crash_then_restart_recovers_from_the_data_dir(tmp_path):
    from confluent_kafka import Producer

    with pykbroker.Broker(log_dir=tmp_path, config=TEST_CONFIG) as b:
        port = b.port
        b.create_topic("crash-t")
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, "enable.idempotence": True,
                      "retry.backoff.ms": 20, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200})
        for i in range(20):
            p.produce("crash-t", value=b"a%d" % i, partition=0)
        assert p.flush(15) == 0
        b.crash()
        assert not b.running
        assert not os.path.exists(tmp_path / ".kafka_cleanshutdown")   # no clean shutdown written
        with pytest.raises(RuntimeError, match="down"):
            b.records("crash-t")
        with pytest.raises(OSError):   # nothing listens while it is down
            wire.WireClient(b.bootstrap_servers, timeout=2).close()
        b.restart()
        assert b.running and b.port == port   # same port: the clients reconnect by themselves
        assert b._sync(lambda br: br.log_manager.had_clean_shutdown) is False   # recovered
        for i in range(20, 30):   # the same producer (idempotent) goes on
            p.produce("crash-t", value=b"a%d" % i, partition=0)
        assert p.flush(30) == 0
        assert _values(b, "crash-t") == [b"a%d" % i for i in range(30)]
        b.restart(clean=True)
        assert b._sync(lambda br: br.log_manager.had_clean_shutdown) is True
        assert _values(b, "crash-t") == [b"a%d" % i for i in range(30)]


def test_subprocess_kill_9_then_restart_on_the_same_port(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with pykbroker.Broker.subprocess(log_dir=tmp_path, config=TEST_CONFIG) as b:
        port = b.port
        b.create_topic("sub-crash")
        prod = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all", retries=20,
                             retry_backoff_ms=50, reconnect_backoff_ms=50)
        for i in range(10):
            prod.send("sub-crash", value=b"s%d" % i, partition=0).get(15)
        pid = b.process.proc.pid
        b.crash()   # kill -9
        assert not b.running
        b.restart()
        assert b.port == port and b.process.proc.pid != pid
        for i in range(10, 15):
            prod.send("sub-crash", value=b"s%d" % i, partition=0).get(30)
        prod.close()
        c = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, enable_auto_commit=False)
        c.assign([TopicPartition("sub-crash", 0)])
        c.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 15 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += [r.value for r in recs]
        c.close()
        assert got == [b"s%d" % i for i in range(15)]
        assert _values(b, "sub-crash") == got


def test_lost_produce_responses_do_not_duplicate_with_an_idempotent_producer():
    from confluent_kafka import Producer

    with pykbroker.Broker(config=TEST_CONFIG) as b:
        b.create_topic("lost-t")
        # the broker appends, then the connection breaks before the answer: the producer
        # retries the same batch, which the broker recognises by its sequence numbers
        b.faults.drop_response("Produce", topic="lost-t", count=3)
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, "enable.idempotence": True,
                      "retry.backoff.ms": 20, "reconnect.backoff.ms": 20})
        errors = produce_each(p, "lost-t", [b"l%d" % i for i in range(10)], 0, after=lambda: p.poll(0))
        assert p.flush(30) == 0 and errors == []
        assert b.faults.rules == []
        assert _values(b, "lost-t") == [b"l%d" % i for i in range(10)]


# -- partitions going offline -----------------------------------------------------------------
def test_partition_offline_then_back_producer_delivers_exactly_once():
    from confluent_kafka import Producer

    with pykbroker.Broker(config=TEST_CONFIG) as b:
        b.create_topic("off-t", partitions=2)
        b.faults.partition_offline("off-t", 0)
        assert b.faults.offline == [("off-t", 0)]
        md = wire.metadata(b.bootstrap_servers, ["off-t"])["topics"][0]["partitions"]
        by = {p["partition_index"]: p for p in md}
        assert (by[0]["error_code"], by[0]["leader_id"], by[0]["offline_replicas"]) == (
            int(ErrorCode.LEADER_NOT_AVAILABLE), -1, [1])
        assert (by[1]["error_code"], by[1]["leader_id"]) == (0, 1)
        r = wire.produce(b.bootstrap_servers, "off-t", 0, wire.make_batch([b"x"]))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == int(ErrorCode.KAFKA_STORAGE_ERROR)
        r = wire.list_offsets(b.bootstrap_servers, "off-t", 0, -1)
        assert r["error_code"] == int(ErrorCode.KAFKA_STORAGE_ERROR)

        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, "enable.idempotence": True,
                      "retry.backoff.ms": 50, "retry.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 500})
        errors = produce_each(p, "off-t", [b"o%d" % i for i in range(5)], 0)
        p.produce("off-t", value=b"other", partition=1)
        p.flush(1.5)
        assert _values(b, "off-t", 0) == []            # nothing got in while offline
        assert _values(b, "off-t", 1) == [b"other"]    # the other partition kept serving
        b.faults.partition_online("off-t", 0)
        assert p.flush(30) == 0 and errors == []
        assert _values(b, "off-t", 0) == [b"o%d" % i for i in range(5)]
        md = wire.metadata(b.bootstrap_servers, ["off-t"])["topics"][0]["partitions"]
        assert {p_["partition_index"]: p_["leader_id"] for p_ in md} == {0: 1, 1: 1}
        assert b.faults.offline == []


def test_offline_partition_stays_offline_across_a_crash():
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        b.create_topic("off-crash")
        b.faults.partition_offline("off-crash", 0)
        b.crash()
        b.restart()
        md = wire.metadata(b.bootstrap_servers, ["off-crash"])["topics"][0]["partitions"][0]
        assert md["leader_id"] == -1
        b.faults.clear()   # back online with the rules
        md = wire.metadata(b.bootstrap_servers, ["off-crash"])["topics"][0]["partitions"][0]
        assert md["leader_id"] == 1
        with pytest.raises(KeyError):
            b.faults.partition_offline("no-such-topic", 0)


# -- coordinator errors -----------------------------------------------------------------------
def test_kafka_python_group_recovers_from_coordinator_errors():
    from kafka import KafkaConsumer

    with pykbroker.Broker(config=TEST_CONFIG) as b:
        b.create_topic("coord-t")
        for i in range(5):
            wire.produce(b.bootstrap_servers, "coord-t", 0, wire.make_batch([b"c%d" % i]))
        b.faults.fail("FindCoordinator", "COORDINATOR_NOT_AVAILABLE", count=2)
        b.faults.fail("JoinGroup", "COORDINATOR_LOAD_IN_PROGRESS", count=2)
        b.faults.fail("OffsetCommit", "NOT_COORDINATOR", count=1)
        c = KafkaConsumer("coord-t", group_id="coord-g", bootstrap_servers=b.bootstrap_servers,
                          auto_offset_reset="earliest", enable_auto_commit=False, retry_backoff_ms=50)
        try:
            assert kafka_python_values(c, 5, 30) == [b"c%d" % i for i in range(5)]
            for _ in range(20):   # the first commit meets NOT_COORDINATOR: the client retries
                try:
                    c.commit()
                    break
                except Exception:
                    time.sleep(0.1)
        finally:
            c.close()
        assert b.faults.rules == []   # every injected error was met
        assert b.committed_offsets("coord-g") == {("coord-t", 0): 5}


# -- the clock --------------------------------------------------------------------------------
def _join(c, group, session_ms, member_id=""):
    body = {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": session_ms,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}]}
    deadline = time.monotonic() + 15
    while True:
        r = c.request(11, 5, body)
        if r["error_code"] == int(ErrorCode.MEMBER_ID_REQUIRED):
            body["member_id"] = r["member_id"]
            continue
        if r["error_code"] in (int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                               int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)) and time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        return r


def _timers_fired(b):
    """Return once the broker's loop has fired every timer due at the clock's current reading.
    trio expires every passed deadline in the loop turn that first sees the new time and runs
    each woken task in that turn's batch; a call handed to the loop after ``advance`` runs in
    that batch or a later one, so a second call runs after the batch with the timers."""
    for _ in range(2):
        b._sync(lambda br: None)


def test_session_timeout_fires_when_the_clock_is_advanced():
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        with wire.WireClient(b.bootstrap_servers, timeout=20) as c:
            r = _join(c, "clk-g", 60_000)
            assert r["error_code"] == 0
            mid = r["member_id"]
            s = c.request(14, 3, {"group_id": "clk-g", "generation_id": r["generation_id"], "member_id": mid,
                                  "group_instance_id": None, "assignments": [{"member_id": mid, "assignment": b""}]})
            assert s["error_code"] == 0
            assert b.wait_for_group_stable("clk-g", members=1).members[0].member_id == mid
            # 50 s into the 60 s session (10 s of real time to spare): the member stays.  The
            # loop has fired every timer due by then once two calls queued after the advance
            # came back (see _timers_fired); a heartbeat is still accepted
            b.clock.advance(50)
            _timers_fired(b)
            assert len(b.group("clk-g").members) == 1
            h = c.request(12, 3, {"group_id": "clk-g", "generation_id": r["generation_id"], "member_id": mid,
                                  "group_instance_id": None})
            assert h["error_code"] == 0
            t0 = time.monotonic()
            b.clock.advance(61)
            wait_until(lambda: b.group("clk-g").state == "Empty", timeout=5, what="member expiry")
            assert time.monotonic() - t0 < 5 and b.group("clk-g").members == []
            # the member is gone for the broker: its heartbeat is refused
            h = c.request(12, 3, {"group_id": "clk-g", "generation_id": r["generation_id"], "member_id": mid,
                                  "group_instance_id": None})
            assert h["error_code"] == int(ErrorCode.UNKNOWN_MEMBER_ID)


def test_frozen_clock_holds_the_initial_rebalance_delay_until_advanced():
    # Kafka's default group.initial.rebalance.delay.ms (3 s): with the clock frozen the first
    # join waits for ever, and answers as soon as the clock is advanced past the delay
    with pykbroker.Broker(config={"offsets.topic.num.partitions": "1"}) as b:
        with wire.WireClient(b.bootstrap_servers, timeout=30) as c:
            _join(c, "warm-up", 10_000)   # the offsets topic exists; its delay runs on real time
        b.clock.freeze()
        t_before = b.clock.time_ms()
        answer = {}

        def join():
            with wire.WireClient(b.bootstrap_servers, timeout=30) as c2:
                answer["r"] = _join(c2, "frozen-g", 10_000)

        t = threading.Thread(target=join)
        t.start()
        # the join arrived (the group waits in PreparingRebalance), then more than the 3 s
        # delay in real time
        wait_until(lambda: getattr(b.group("frozen-g"), "state", None) == "PreparingRebalance",
                   timeout=10, what="the join to arrive")
        t.join(4)
        assert t.is_alive() and "r" not in answer
        assert b.clock.time_ms() == t_before   # frozen
        b.clock.advance(3.5)
        t.join(10)
        assert answer["r"]["error_code"] == 0 and answer["r"]["generation_id"] == 1
        assert b.clock.time_ms() == t_before + 3500
        b.clock.unfreeze()
        time.sleep(0.05)
        assert b.clock.time_ms() > t_before + 3500


def test_retention_ms_deletes_segments_when_the_clock_is_advanced():
    cfg = dict(TEST_CONFIG, **{"log.retention.check.interval.ms": "300000"})
    with pykbroker.Broker(config=cfg) as b:
        b.create_topic("ret-t", config={"retention.ms": "3600000", "segment.bytes": "200"})
        for i in range(6):   # one batch per segment (each batch is ~90 bytes)
            wire.produce(b.bootstrap_servers, "ret-t", 0, wire.make_batch([b"r%d" % i + b"x" * 40]))
        assert len(_values(b, "ret-t")) == 6
        segs = b._sync(lambda br: len(br.log_manager.get_log("ret-t", 0).segments))
        assert segs >= 3
        passes = b._sync(lambda br: br.log_manager.retention.passes)
        b.clock.advance(1800)   # half the retention: a retention pass runs and nothing goes
        wait_until(lambda: b._sync(lambda br: br.log_manager.retention.passes) > passes, timeout=10,
                   what="a retention pass")
        assert len(_values(b, "ret-t")) == 6
        b.clock.advance(3600)   # past retention.ms and past the 5-minute retention check
        wait_until(lambda: wire.list_offsets(b.bootstrap_servers, "ret-t", 0, -2)["offset"] > 0,
                   timeout=10, what="retention by time")
        start = wire.list_offsets(b.bootstrap_servers, "ret-t", 0, -2)["offset"]
        assert start >= 5   # every closed segment deleted
        assert [r.offset for r in b.records("ret-t")] == list(range(start, 6))
        # a record produced now is stamped with the broker's (advanced) time: not expired
        wire.produce(b.bootstrap_servers, "ret-t", 0,
                     wire.make_batch([b"late"], timestamps=[b.clock.time_ms()]))
        assert _values(b, "ret-t")[-1] == b"late"


def _advance_past_an_expiry_pass(b, seconds):
    """Advance the clock and wait until the group coordinator's offset-expiry pass has run."""
    passes = b._sync(lambda br: br.group_coordinator.expiry_passes)
    b.clock.advance(seconds)
    wait_until(lambda: b._sync(lambda br: br.group_coordinator.expiry_passes) > passes, timeout=10,
               what="an offset expiry pass")


def test_offsets_retention_expires_an_empty_groups_offsets():
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    # checked every minute (default 10): a check runs 5 minutes after the commit and finds the
    # offsets too young
    cfg = dict(TEST_CONFIG, **{"offsets.retention.minutes": "10", "offsets.retention.check.interval.ms": "60000"})
    with pykbroker.Broker(config=cfg) as b:
        b.create_topic("oret-t")
        c = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="oret-g", enable_auto_commit=False)
        try:
            c.commit({TopicPartition("oret-t", 0): OffsetAndMetadata(7, "", -1)})
        finally:
            c.close()
        assert b.committed_offsets("oret-g") == {("oret-t", 0): 7}
        _advance_past_an_expiry_pass(b, 5 * 60)
        assert b.committed_offsets("oret-g") == {("oret-t", 0): 7}
        b.clock.advance(6 * 60)   # past the 10 minutes: the next check expires them
        wait_until(lambda: b.committed_offsets("oret-g") == {}, timeout=10, what="offsets expiry")


def test_transactionally_committed_offsets_expire_on_the_broker_clock():
    """TxnOffsetCommit stamps the offsets with the broker's clock, as OffsetCommit does: with the
    clock an hour ahead of the wall clock they are not expired at once, and expire on it."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    # checked every minute: one check falls 5 minutes after the commit
    cfg = dict(TEST_CONFIG, **{"offsets.retention.minutes": "10", "offsets.retention.check.interval.ms": "60000"})
    with pykbroker.Broker(config=cfg) as b:
        b.create_topic("oret-tx")
        b.clock.advance(60 * 60)
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "oret-tx-id"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("oret-tx", b"v", partition=0)
        # a consumer that never subscribes: a standalone group, no members, no generation
        c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "oret-tx-g"})
        try:
            p.send_offsets_to_transaction([TopicPartition("oret-tx", 0, 5)], c.consumer_group_metadata(), 30)
        finally:
            c.close()
        p.commit_transaction(30)
        wait_until(lambda: b.committed_offsets("oret-tx-g") == {("oret-tx", 0): 5}, timeout=10, what="txn offsets")
        _advance_past_an_expiry_pass(b, 5 * 60)   # an expiry check runs: 5 minutes after the commit, not 65
        assert b.committed_offsets("oret-tx-g") == {("oret-tx", 0): 5}
        b.clock.advance(6 * 60)
        wait_until(lambda: b.committed_offsets("oret-tx-g") == {}, timeout=10, what="offsets expiry")


def test_fetch_max_wait_is_on_the_broker_clock():
    # a long-poll Fetch answers when the clock passes its max_wait_ms, not later
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        b.create_topic("fw-t")
        out = {}

        def long_poll():
            with wire.WireClient(b.bootstrap_servers, timeout=60) as c:
                t0 = time.monotonic()
                out["r"] = wire.fetch(c, "fw-t", 0, 0, max_wait_ms=45_000)
                out["s"] = time.monotonic() - t0

        t = threading.Thread(target=long_poll)
        t.start()
        time.sleep(0.5)
        b.clock.advance(46)
        t.join(10)
        assert not t.is_alive() and out["s"] < 10
        assert wire.fetch_part(out["r"])["error_code"] == 0


def test_async_broker_in_a_loop_run_on_a_broker_clock():
    import trio

    async def main():
        async with pykbroker.Broker(config=TEST_CONFIG) as b:
            assert b.clock is trio.lowlevel.current_clock()
            await b.create_topic_async("afw-t")
            t0 = time.monotonic()
            async with trio.open_nursery() as n:
                async def poll():
                    r = await trio.to_thread.run_sync(
                        lambda: wire.fetch(b.bootstrap_servers, "afw-t", 0, 0, max_wait_ms=45_000))
                    assert wire.fetch_part(r)["error_code"] == 0
                n.start_soon(poll)
                await trio.to_thread.run_sync(time.sleep, 0.5)   # real time: the Fetch is parked
                b.clock.advance(46)
            assert time.monotonic() - t0 < 10

    trio.run(main, clock=pykbroker.BrokerClock())


def test_runner_refuses_a_second_stop_while_one_is_under_way(tmp_path):
    import trio

    from pykbroker.config import BrokerConfig
    from pykbroker.run.runner import BrokerBusy, BrokerRunner
    from pykbroker.run.control import handle

    async def main():
        runner = BrokerRunner(BrokerConfig(dict(TEST_CONFIG, **{"listeners": "PLAINTEXT://127.0.0.1:0",
                                                                "log.dirs": str(tmp_path)})),
                              clock=trio.lowlevel.current_clock())
        async with trio.open_nursery() as n:
            await n.start(runner.run)
            runner._begin_change()   # as while another client's crash is under way
            with pytest.raises(BrokerBusy):
                await runner.stop()
            status, answer = await handle(runner, "POST", "/broker/restart", b"{}")
            assert status == 409 and "being" in answer["error"]
            assert runner.running
            runner._changing = False
            status, answer = await handle(runner, "POST", "/broker/restart", b'{"clean": false}')
            assert (status, answer["running"], answer["incarnation"]) == (200, True, 2)
            n.cancel_scope.cancel()

    trio.run(main, clock=pykbroker.BrokerClock())
