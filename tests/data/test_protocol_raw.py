"""Protocol-level behaviour of the data-path APIs, on raw sockets (requests encoded with the
codec, batches built by kafka-python's record builder): idempotence (duplicates, gaps, fencing),
acks handling, validation errors, Fetch long-poll / sessions / limits / epochs, ListOffsets,
OffsetForLeaderEpoch, InitProducerId."""
import threading
import time
import uuid

import pytest

from pykbroker.protocol.wire import (WireClient, create_topic, decode_batches, fetch, fetch_part, make_batch, produce,
                                    produce_part)

pytestmark = pytest.mark.timeout(60)

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUIRED_ACKS = 21
INVALID_REQUEST = 42
COORDINATOR_NOT_AVAILABLE = 15
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
FETCH_SESSION_ID_NOT_FOUND = 70
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INVALID_RECORD = 87


@pytest.fixture
def topic(broker):
    name = "raw-" + uuid.uuid4().hex[:8]
    create_topic(broker, name)
    return name


def init_pid(c, version=4, txn_id=None, pid=-1, epoch=-1):
    return c.request(22, version, {"transactional_id": txn_id, "transaction_timeout_ms": 60000,
                                   "producer_id": pid, "producer_epoch": epoch})


def leo(c, topic):
    r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return r["topics"][0]["partitions"][0]["offset"]


def test_idempotent_duplicates_gaps_and_fencing(broker, topic):
    with WireClient(broker) as c:
        r = init_pid(c)
        assert r["error_code"] == NONE and r["producer_epoch"] == 0
        pid = r["producer_id"]
        b0 = make_batch([b"a", b"b", b"c"], pid, 0, 0)
        p = produce_part(produce(c, topic, 0, b0))
        assert (p["error_code"], p["base_offset"]) == (NONE, 0)
        # A retried batch (same epoch and sequences) is answered with its original offset and
        # NONE, and nothing is appended again.
        p = produce_part(produce(c, topic, 0, b0))
        assert (p["error_code"], p["base_offset"]) == (NONE, 0)
        assert leo(c, topic) == 3
        p = produce_part(produce(c, topic, 0, make_batch([b"d"], pid, 0, 3)))
        assert (p["error_code"], p["base_offset"]) == (NONE, 3)
        # The first batch is still among the last five: still a duplicate.
        p = produce_part(produce(c, topic, 0, b0))
        assert (p["error_code"], p["base_offset"]) == (NONE, 0)
        # A gap in the sequence.
        p = produce_part(produce(c, topic, 0, make_batch([b"x"], pid, 0, 10)))
        assert p["error_code"] == OUT_OF_ORDER_SEQUENCE_NUMBER and p["base_offset"] == -1
        # A bumped epoch must restart at sequence 0 ...
        p = produce_part(produce(c, topic, 0, make_batch([b"x"], pid, 1, 5)))
        assert p["error_code"] == OUT_OF_ORDER_SEQUENCE_NUMBER
        p = produce_part(produce(c, topic, 0, make_batch([b"e"], pid, 1, 0)))
        assert (p["error_code"], p["base_offset"]) == (NONE, 4)
        # ... and the old epoch is fenced.
        p = produce_part(produce(c, topic, 0, make_batch([b"f"], pid, 0, 4)))
        assert p["error_code"] == INVALID_PRODUCER_EPOCH
        assert leo(c, topic) == 5
        # What a consumer reads back: exactly one copy of each accepted batch.
        f = fetch_part(fetch(c, topic, 0, 0))
        vals = [v for _, _, recs in decode_batches(f["records"]) for _, _, v in recs]
        assert vals == [b"a", b"b", b"c", b"d", b"e"]


def test_unknown_producer_accepts_any_sequence(broker, topic):
    # Kafka (KIP-360) accepts a producer it has no state for at any sequence.
    with WireClient(broker) as c:
        pid = init_pid(c)["producer_id"]
        p = produce_part(produce(c, topic, 0, make_batch([b"a"], pid, 0, 42)))
        assert (p["error_code"], p["base_offset"]) == (NONE, 0)
        p = produce_part(produce(c, topic, 0, make_batch([b"b"], pid, 0, 43)))
        assert (p["error_code"], p["base_offset"]) == (NONE, 1)


def test_init_producer_id(broker):
    with WireClient(broker) as c:
        a = init_pid(c, version=0)
        b = init_pid(c, version=4)
        assert a["error_code"] == b["error_code"] == NONE
        assert b["producer_id"] > a["producer_id"] >= 0
        # Null transactional id with an existing producer: Kafka hands out a new id, epoch 0.
        d = init_pid(c, version=4, pid=b["producer_id"], epoch=0)
        assert d["error_code"] == NONE and d["producer_epoch"] == 0 and d["producer_id"] > b["producer_id"]
        assert init_pid(c, version=4, pid=5, epoch=-1)["error_code"] == INVALID_REQUEST
        assert init_pid(c, version=4, txn_id="")["error_code"] == INVALID_REQUEST
        # A transactional id: its coordinator first (creates __transaction_state), then a producer
        # id with epoch 0; the same id again bumps the epoch (fencing the first producer).
        assert c.request(10, 3, {"key": "tx", "key_type": 1})["error_code"] == NONE
        t1 = init_pid(c, version=4, txn_id="tx")
        t2 = init_pid(c, version=4, txn_id="tx")
        assert (t1["error_code"], t1["producer_epoch"]) == (NONE, 0)
        assert (t2["error_code"], t2["producer_id"], t2["producer_epoch"]) == (NONE, t1["producer_id"], 1)


def test_producer_ids_never_repeat_across_restart(fresh_broker):
    with WireClient(fresh_broker) as c:
        before = init_pid(c)["producer_id"]
    fresh_broker.restart(clean=False)  # kill -9
    with WireClient(fresh_broker) as c:
        after = init_pid(c)["producer_id"]
    assert after > before


def test_acks_handling(broker, topic):
    with WireClient(broker) as c:
        p = produce_part(produce(c, topic, 0, make_batch([b"a"]), acks=2))
        assert p["error_code"] == INVALID_REQUIRED_ACKS
        # acks=0: no response; the next request's answer is the next frame on the wire.
        c.send(0, 9, {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": make_batch([b"b"])}]}]})
        p = produce_part(produce(c, topic, 0, make_batch([b"c"]), acks=1))
        assert (p["error_code"], p["base_offset"]) == (NONE, 1)
        assert p["log_append_time_ms"] == -1 and p["log_start_offset"] == 0


def test_acks0_failure_closes_connection(broker):
    with WireClient(broker) as c:
        c.send(0, 9, {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
            {"name": "no-such-topic-" + uuid.uuid4().hex[:6], "partition_data": [
                {"index": 0, "records": make_batch([b"b"])}]}]})
        c.sock.settimeout(10)
        assert c.sock.recv(1) == b""


def test_validation_errors(broker, topic):
    with WireClient(broker) as c:
        p = produce_part(produce(c, "missing-" + uuid.uuid4().hex[:6], 0, make_batch([b"a"])))
        assert p["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
        p = produce_part(produce(c, topic, 7, make_batch([b"a"])))
        assert p["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
        bad = bytearray(make_batch([b"hello"]))
        bad[-1] ^= 0xFF  # breaks the CRC
        p = produce_part(produce(c, topic, 0, bytes(bad)))
        assert p["error_code"] == CORRUPT_MESSAGE
        # Two batches in one partition's records: Kafka accepts exactly one (v3+).
        p = produce_part(produce(c, topic, 0, make_batch([b"a"]) + make_batch([b"b"])))
        # A request-level check in Kafka: no error_message, log_start_offset -1 (Kafka 4.4).
        assert p["error_code"] == INVALID_RECORD and p["error_message"] is None
        assert p["log_start_offset"] == -1
        p = produce_part(produce(c, topic, 0, make_batch([b"t"], 77, 0, 0, transactional=True)))
        assert p["error_code"] == INVALID_TXN_STATE
        assert leo(c, topic) == 0


def test_fetch_basics(broker, topic):
    with WireClient(broker) as c:
        produce(c, topic, 0, make_batch([b"a", b"b"]))
        produce(c, topic, 0, make_batch([b"c"]))
        r = fetch(c, topic, 0, 1, session_epoch=0)  # a session-creation request
        assert r["error_code"] == NONE and r["session_id"] > 0  # a fetch session (KIP-227)
        f = fetch_part(r)
        assert f["error_code"] == NONE
        assert (f["high_watermark"], f["last_stable_offset"], f["log_start_offset"]) == (3, 3, 0)
        assert f["aborted_transactions"] is None and f["preferred_read_replica"] == -1
        batches = decode_batches(f["records"])
        # Offset 1 is inside the first batch: the whole batch comes back; epoch 0 stamped.
        assert [(b, e) for b, e, _ in batches] == [(0, 0), (2, 0)]
        # At the end: empty bytes, not null.
        f = fetch_part(fetch(c, topic, 0, 3))
        assert f["error_code"] == NONE and f["records"] is not None and len(f["records"]) == 0
        f = fetch_part(fetch(c, topic, 0, 4))
        assert f["error_code"] == OFFSET_OUT_OF_RANGE and f["high_watermark"] == -1
        assert f["aborted_transactions"] is None  # a log-read error: null, as Kafka
        f = fetch_part(fetch(c, topic, 0, 0, isolation_level=1))
        assert f["aborted_transactions"] == [] and len(decode_batches(f["records"])) == 2
        # Unknown session, incremental epoch.
        r = fetch(c, topic, 0, 0, session_id=1234, session_epoch=3)
        assert r["error_code"] == FETCH_SESSION_ID_NOT_FOUND and r["responses"] == []
        assert fetch_part(fetch(c, topic, 0, 0, current_leader_epoch=1))["error_code"] == UNKNOWN_LEADER_EPOCH
        assert fetch_part(fetch(c, topic, 0, 0, current_leader_epoch=0))["error_code"] == NONE
        f = fetch_part(fetch(c, "missing-" + uuid.uuid4().hex[:6], 0, 0))
        assert f["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
        assert f["aborted_transactions"] == []  # Kafka's metadata-check error: empty, not null


def test_fetch_size_limits(broker, topic):
    with WireClient(broker) as c:
        for i in range(3):
            produce(c, topic, 0, make_batch([bytes([65 + i]) * 1000]))
        # A limit smaller than the first batch still returns that whole batch (KIP-74) ...
        f = fetch_part(fetch(c, topic, 0, 0, partition_max_bytes=10))
        assert [b for b, _, _ in decode_batches(f["records"])] == [0]
        f = fetch_part(fetch(c, topic, 0, 0, max_bytes=10))
        assert [b for b, _, _ in decode_batches(f["records"])] == [0]
        # ... and never more than the limit otherwise (whole batches).
        f = fetch_part(fetch(c, topic, 0, 0, partition_max_bytes=2500))
        assert [b for b, _, _ in decode_batches(f["records"])] == [0, 1]
        assert len(f["records"]) <= 2500


def test_fetch_long_poll_woken_by_append(broker, topic):
    with WireClient(broker) as c, WireClient(broker) as prod:
        def later():
            time.sleep(0.5)
            produce(prod, topic, 0, make_batch([b"wake"]))
        th = threading.Thread(target=later)
        t0 = time.monotonic()
        th.start()
        f = fetch_part(fetch(c, topic, 0, 0, max_wait_ms=10000, min_bytes=1))
        elapsed = time.monotonic() - t0
        th.join()
        assert 0.4 <= elapsed < 5.0
        assert [v for _, _, recs in decode_batches(f["records"]) for _, _, v in recs] == [b"wake"]
        # Nothing arrives: the answer comes after max_wait_ms, empty.
        t0 = time.monotonic()
        f = fetch_part(fetch(c, topic, 0, 1, max_wait_ms=400, min_bytes=1))
        elapsed = time.monotonic() - t0
        assert 0.35 <= elapsed < 3.0 and len(f["records"]) == 0 and f["error_code"] == NONE


def test_list_offsets(broker, topic):
    base = 1_600_000_000_000
    with WireClient(broker) as c:
        for i, ts in enumerate([base + 10, base + 50, base + 30]):
            produce(c, topic, 0, make_batch([b"%d" % i], timestamps=[ts]))

        def lo(ts, version=7, cle=-1, iso=0):
            r = c.request(2, version, {"replica_id": -1, "isolation_level": iso, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": cle,
                                                "timestamp": ts}]}]})
            return r["topics"][0]["partitions"][0]
        p = lo(-2)
        assert (p["error_code"], p["offset"], p["timestamp"], p["leader_epoch"]) == (0, 0, -1, 0)
        p = lo(-1)
        assert (p["offset"], p["timestamp"], p["leader_epoch"]) == (3, -1, 0)
        assert lo(-1, iso=1)["offset"] == 3
        p = lo(-3)  # max timestamp: the record carrying it, with its timestamp
        assert (p["offset"], p["timestamp"]) == (1, base + 50)
        p = lo(base + 20)
        assert (p["offset"], p["timestamp"]) == (1, base + 50)
        p = lo(base + 60)
        assert (p["error_code"], p["offset"], p["timestamp"]) == (0, -1, -1)
        p = lo(-1, version=1)
        assert p["offset"] == 3
        assert lo(-1, cle=3)["error_code"] == UNKNOWN_LEADER_EPOCH
        r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}] * 2}]})
        assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [INVALID_REQUEST] * 2


def test_offset_for_leader_epoch(broker, topic):
    with WireClient(broker) as c:
        def ofle(epoch, version=4, cle=-1):
            r = c.request(23, version, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": cle, "leader_epoch": epoch}]}]})
            return r["topics"][0]["partitions"][0]
        p = ofle(0)
        assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (0, 0, 0)
        produce(c, topic, 0, make_batch([b"a", b"b"]))
        p = ofle(0, version=2)
        assert (p["leader_epoch"], p["end_offset"]) == (0, 2)
        p = ofle(5)  # an epoch from the future
        assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (0, -1, -1)
        assert ofle(0, cle=1)["error_code"] == UNKNOWN_LEADER_EPOCH


def test_every_advertised_version_round_trips(broker, topic):
    """Produce 3-13 (advertised from 0, as Kafka 4; v13 by topic id), Fetch 4-18, ListOffsets 1-7, OffsetForLeaderEpoch 2-4, DeleteRecords 0-2,
    InitProducerId 0-5: each version encodes, decodes and answers consistently."""
    with WireClient(broker) as c:
        api = {k: v for k, v in ((a["api_key"], (a["min_version"], a["max_version"]))
                                 for a in c.request(18, 3, {"client_software_name": "raw",
                                                            "client_software_version": "1"})["api_keys"])}
        assert api[0] == (0, 13) and api[1] == (4, 18) and api[2] == (1, 11)
        assert api[21] == (0, 2) and api[22] == (0, 5) and api[23] == (2, 4)
        topic_id = c.request(3, 12, {"topics": [{"name": topic, "topic_id": b"\0" * 16}],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})["topics"][0]["topic_id"]
        for v in range(3, 14):
            if v < 13:
                p = produce_part(produce(c, topic, 0, make_batch([b"v%d" % v]), version=v))
            else:   # v13: the topic by id, answered by id
                r = c.request(0, v, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                    {"topic_id": topic_id, "partition_data": [{"index": 0, "records": make_batch([b"v%d" % v])}]}]})
                assert r["responses"][0]["topic_id"] == topic_id
                p = produce_part(r)
            assert (p["error_code"], p["base_offset"]) == (NONE, v - 3)
            if v >= 5:
                assert p["log_start_offset"] == 0
        unknown = c.request(0, 13, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"topic_id": b"\1" * 16, "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}]})
        assert produce_part(unknown)["error_code"] == 100   # UNKNOWN_TOPIC_ID
        for v in range(4, 19):
            if v < 13:
                f = fetch_part(fetch(c, topic, 0, 2, version=v))
            else:   # v13+: the topic by id
                f = fetch_part(c.request(1, v, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic_id": topic_id, "partitions": [{
                        "partition": 0, "current_leader_epoch": -1, "fetch_offset": 2, "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}))
            assert f["error_code"] == NONE and f["high_watermark"] == 11
            vals = [val for _, _, recs in decode_batches(f["records"]) for o, _, val in recs if o >= 2]
            assert vals == [b"v%d" % i for i in range(5, 14)]
        for v in range(1, 8):
            r = c.request(2, v, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                "timestamp": -1}]}]})
            assert r["topics"][0]["partitions"][0]["offset"] == 11
        for v in range(2, 5):
            r = c.request(23, v, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
            assert r["topics"][0]["partitions"][0]["end_offset"] == 11
        for v in range(0, 6):
            assert init_pid(c, version=v)["error_code"] == NONE
        for v in range(0, 3):
            r = c.request(21, v, {"topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "offset": v + 1}]}], "timeout_ms": 1000})
            assert r["topics"][0]["partitions"][0]["low_watermark"] == v + 1


def test_acks_all_with_min_insync_replicas_above_the_replica_count(broker):
    """min.insync.replicas 2 on a single-replica topic: Kafka's effective min ISR is capped by
    the replica count (Partition.effectiveMinIsr, 3.9 and 4.4), so acks=all is taken (Kafka 4.4
    answers 0 to the same produce); NOT_ENOUGH_REPLICAS needs a replica out of the ISR
    (tests/replication)."""
    t = "misr-" + uuid.uuid4().hex[:8]
    create_topic(broker, t, configs={"min.insync.replicas": "2"})
    with WireClient(broker) as c:
        p = produce_part(produce(c, t, 0, make_batch([b"a"]), acks=-1))
        assert (p["error_code"], p["base_offset"]) == (NONE, 0)
        p = produce_part(produce(c, t, 0, make_batch([b"a"]), acks=1))
        assert (p["error_code"], p["base_offset"]) == (NONE, 1)
