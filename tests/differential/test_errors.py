"""Error codes (and messages) for bad Produce/Fetch requests, raw so every field is visible:
unknown topic/partition, offset out of range (above the high watermark, below the log start
offset after DeleteRecords), MESSAGE_TOO_LARGE, invalid required acks, corrupt CRC, producing to
an internal topic, and the idempotent producer's sequence/epoch checks."""
import os

import pytest

from .helpers import explain, connect, batch, call, create_topic, fetch, init_producer_id, list_offsets, produce

PRODUCE_VERSIONS = [3, 5, 7, 8, 9, 11]
FETCH_VERSIONS = [4, 5, 7, 11, 12]


def norm_produce(p):
    p = dict(p)
    if p["log_append_time_ms"] not in (-1,):
        p["log_append_time_ms"] = "<time>"
    return p


def norm_fetch(resp):
    out = {"error_code": resp["error_code"], "topics": []}
    for tp in resp["responses"]:
        parts = []
        for p in tp["partitions"]:
            q = {k: v for k, v in p.items() if k != "records"}
            q["records_len"] = None if p["records"] is None else len(p["records"])
            parts.append(q)
        out["topics"].append((tp["topic"], parts))
    return out


def assert_same(both, scenario):
    """Run scenario on pykbroker and on Kafka: both must observe the same (printed with
    PYKBROKER_DIFF_SHOW set)."""
    p, k = both(scenario)
    if os.environ.get("PYKBROKER_DIFF_SHOW"):
        print("\n", p)
    assert p == k, explain(p, k)


def setup(t, name, partitions=1, configs=None):
    create_topic(t, name, partitions, configs)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_unknown_topic(both, version):
    assert_same(both, lambda t: norm_produce(produce(t, "err-no-such-topic", 0, batch([b"x"]), version=version)))


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_unknown_partition(both, version):
    def scenario(t):
        setup(t, "err-one", 1)
        return norm_produce(produce(t, "err-one", 3, batch([b"x"]), version=version))
    assert_same(both, scenario)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_unknown_topic(both, version):
    assert_same(both, lambda t: norm_fetch(fetch(t, "err-no-such-topic", 0, 0, version=version)))


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_unknown_partition(both, version):
    def scenario(t):
        setup(t, "err-one", 1)
        return norm_fetch(fetch(t, "err-one", 5, 0, version=version))
    assert_same(both, scenario)


@pytest.mark.parametrize("case", ["ok", "at-hwm", "out-of-range", "unknown-leader-epoch", "unknown-topic",
                                  "unknown-partition"])
@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize("version", [4, 9, 12])
def test_fetch_aborted_transactions(both, version, isolation, case):
    """Null vs empty aborted_transactions per outcome and isolation level (and the rest of the
    partition entry)."""
    if case == "unknown-leader-epoch" and version < 9:
        pytest.skip("current_leader_epoch needs v9")

    def scenario(t):
        setup(t, "err-abt", 1)
        if produce(t, "err-abt", 0, batch([b"x"]))["error_code"] != 0:
            raise AssertionError("produce failed")
        topic, part, offset, cle = {
            "ok": ("err-abt", 0, 0, -1), "at-hwm": ("err-abt", 0, 10 ** 6, -1),
            "out-of-range": ("err-abt", 0, 10 ** 9, -1), "unknown-leader-epoch": ("err-abt", 0, 0, 7),
            "unknown-topic": ("err-no-such-topic", 0, 0, -1), "unknown-partition": ("err-abt", 4, 0, -1)}[case]
        if case == "at-hwm":
            offset = list_offsets(t, "err-abt", 0, -1)["offset"]
        r = norm_fetch(fetch(t, topic, part, offset, version=version, isolation_level=isolation,
                             current_leader_epoch=cle))
        for _, parts in r["topics"]:
            for q in parts:   # the high watermark grows as the scenario repeats
                q["high_watermark"] = q["high_watermark"] >= 0
                q["last_stable_offset"] = q["last_stable_offset"] >= 0
        return r
    p, k = both(scenario)
    assert p == k, explain(p, k)


_oor = set()


def oor_topic(t):
    """err-oor: 10 records, log start moved to 4 by DeleteRecords."""
    if t.name not in _oor:
        setup(t, "err-oor", 1)
        assert produce(t, "err-oor", 0, batch([b"%d" % i for i in range(5)]))["error_code"] == 0
        assert produce(t, "err-oor", 0, batch([b"%d" % i for i in range(5, 10)]))["error_code"] == 0
        r = call(t, 21, 2, {"topics": [{"name": "err-oor", "partitions": [{"partition_index": 0, "offset": 4}]}],
                            "timeout_ms": 10000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
        _oor.add(t.name)


@pytest.mark.parametrize("offset", [0, 3, 4, 5, 10, 11, 1000, -1])
@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_offsets(both, version, offset):
    """Below the log start offset, inside the first kept batch, at and above the high watermark."""
    def scenario(t):
        oor_topic(t)
        return norm_fetch(fetch(t, "err-oor", 0, offset, version=version))
    assert_same(both, scenario)


def test_delete_records_errors(both):
    def scenario(t):
        oor_topic(t)
        out = []
        for part, off in ((0, 100), (0, 2), (0, -1), (9, 1)):
            r = call(t, 21, 2, {"topics": [{"name": "err-oor", "partitions": [{"partition_index": part, "offset": off}]}],
                                "timeout_ms": 10000})
            out.append(r["topics"][0]["partitions"][0])
        r = call(t, 21, 2, {"topics": [{"name": "err-nope", "partitions": [{"partition_index": 0, "offset": 1}]}],
                            "timeout_ms": 10000})
        out.append(r["topics"][0]["partitions"][0])
        return out
    assert_same(both, scenario)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_message_too_large(both, version):
    def scenario(t):
        setup(t, "err-small", 1, {"max.message.bytes": "1024"})
        return norm_produce(produce(t, "err-small", 0, batch([b"x" * 2000]), version=version))
    assert_same(both, scenario)


@pytest.mark.parametrize("acks", [2, -2, 5])
@pytest.mark.parametrize("version", [3, 9])
def test_invalid_required_acks(both, version, acks):
    def scenario(t):
        setup(t, "err-one", 1)
        return norm_produce(produce(t, "err-one", 0, batch([b"x"]), acks=acks, version=version))
    assert_same(both, scenario)


def _log_end(t, topic):
    """The partition's log end offset, once the new partition answers (Kafka's may briefly
    answer NOT_LEADER_OR_FOLLOWER right after creation)."""
    import time
    for _ in range(100):
        r = list_offsets(t, topic, 0, -1)
        if r["error_code"] == 0:
            return r["offset"]
        time.sleep(0.1)
    raise AssertionError("%s: %s-0 never became ready: %s" % (t.name, topic, r))


def _set_length(b, n):
    b[8:12] = n.to_bytes(4, "big", signed=True)


def _fix_crc(b):
    import crc32c
    b[17:21] = crc32c.crc32c(bytes(b[21:])).to_bytes(4, "big")


# Malformed records, each a function of one good 2-record batch: framing (length, magic, short or
# trailing bytes), request checks (magic, batch count) and per-batch checks (base offset, counts,
# control bit, sequence).  Codes and v8+ error messages must match.
CORRUPTIONS = {
    "crc": lambda b: b.__setitem__(17, b[17] ^ 0xFF),             # inside the CRC field (17..20)
    "payload": lambda b: b.__setitem__(-3, b[-3] ^ 0x55),         # inside the last record
    "length": lambda b: _set_length(b, len(b) - 12 + 10),         # batch length beyond the data
    "length-13": lambda b: _set_length(b, 13),                    # below Kafka's 14-byte minimum
    "length-negative": lambda b: _set_length(b, -1),
    "length-20": lambda b: _set_length(b, 20),                    # a whole but too short v2 batch
    "only-11-bytes": lambda b: b.__delitem__(slice(11, None)),
    "only-15-bytes": lambda b: b.__delitem__(slice(15, None)),
    "truncated": lambda b: b.__delitem__(slice(-3, None)),
    "magic-1": lambda b: b.__setitem__(16, 1),
    "magic-3": lambda b: b.__setitem__(16, 3),
    "magic-negative": lambda b: b.__setitem__(16, 0xFF),
    "trailing-5-bytes": lambda b: b.extend(b"\x00" * 5),              # dropped, the batch is kept
    "trailing-partial-batch": lambda b: b.extend(bytes(b[:30])),
    "trailing-zero-header": lambda b: b.extend(b"\x00" * 20),          # length 0 after the batch
    "two-batches": lambda b: b.extend(bytes(b)),
    "base-offset": lambda b: (b.__setitem__(slice(0, 8), (5).to_bytes(8, "big")), _fix_crc(b)),
    "count": lambda b: (b.__setitem__(slice(57, 61), (3).to_bytes(4, "big")), _fix_crc(b)),
    "count-zero": lambda b: (b.__setitem__(slice(57, 61), bytes(4)), _fix_crc(b)),
    "control": lambda b: (b.__setitem__(slice(21, 23), (0x20).to_bytes(2, "big")), _fix_crc(b)),
    "producer-without-sequence": lambda b: (b.__setitem__(slice(43, 51), (1000).to_bytes(8, "big")), _fix_crc(b)),
}


@pytest.mark.parametrize("where", sorted(CORRUPTIONS))
@pytest.mark.parametrize("version", [3, 9])
def test_corrupt_batch(both, version, where):
    def scenario(t):
        setup(t, "err-one", 1)
        b = bytearray(batch([b"hello", b"world"]))
        CORRUPTIONS[where](b)
        before = _log_end(t, "err-one")
        r = norm_produce(produce(t, "err-one", 0, bytes(b), version=version))
        r["base_offset"] = r["base_offset"] - before if r["base_offset"] >= 0 else r["base_offset"]
        r["appended"] = _log_end(t, "err-one") - before
        return r
    assert_same(both, scenario)


@pytest.mark.parametrize("where", ["length-13", "magic-3"])
@pytest.mark.parametrize("version", [3, 9])
def test_corrupt_first_batch_fails_whole_request(both, version, where):
    """A first batch header Kafka's batch iterator rejects fails every partition of the request
    (with the message on v8+) and nothing is appended, not even the good partition's batch."""
    def scenario(t):
        setup(t, "err-two", 2)
        b = bytearray(batch([b"bad"]))
        CORRUPTIONS[where](b)
        before = _log_end(t, "err-two")
        r = call(t, 0, version, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": "err-two", "partition_data": [{"index": 0, "records": batch([b"good"])},
                                                   {"index": 1, "records": bytes(b)}]},
            {"name": "err-no-such-topic", "partition_data": [{"index": 0, "records": batch([b"x"])}]}]})
        out = sorted((tp["name"], [norm_produce(p) for p in tp["partition_responses"]]) for tp in r["responses"])
        return out, _log_end(t, "err-two") - before
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_produce_to_internal_topic(both):
    def scenario(t):
        # make sure __consumer_offsets exists
        import time
        for _ in range(300):
            if call(t, 10, 3, {"key": "err-group", "key_type": 0})["error_code"] == 0:
                break
            time.sleep(0.1)
        return norm_produce(produce(t, "__consumer_offsets", 0, batch([b"x"])))
    assert_same(both, scenario)


def test_idempotent_sequences(both):
    """One producer id through a script of sequences and epochs; (error, base offset) per step."""
    def scenario(t):
        setup(t, "err-idem", 1)
        pid, epoch = init_producer_id(t)
        steps = [
            ("first", epoch, 0, 3),
            ("duplicate of first", epoch, 0, 3),
            ("gap", epoch, 5, 1),
            ("next", epoch, 3, 2),
            ("old duplicate", epoch, 0, 3),
            ("overlap", epoch, 4, 2),
            ("bumped epoch seq 0", epoch + 1, 0, 1),
            ("bumped epoch", epoch + 1, 1, 1),
            ("fenced old epoch", epoch, 5, 1),
            ("bumped epoch gap", epoch + 1, 9, 1),
            ("bumped epoch nonzero new", epoch + 2, 3, 1),
        ]
        out = []
        with connect(t) as r:
            for what, ep, seq, n in steps:
                res = produce(t, "err-idem", 0, batch([b"v%d" % i for i in range(n)], producer_id=pid,
                                                       producer_epoch=ep, base_sequence=seq), raw=r)
                out.append((what, res["error_code"], res["base_offset"], res["error_message"]))
            # a producer id the broker never saw, sequence 0 and non-zero
            for what, seq in (("unknown pid seq 5", 5), ("unknown pid seq 0", 0)):
                res = produce(t, "err-idem", 0, batch([b"u"], producer_id=pid + 1000, producer_epoch=0,
                                                       base_sequence=seq), raw=r)
                out.append((what, res["error_code"], res["base_offset"], res["error_message"]))
        return out
    assert_same(both, scenario)


@pytest.mark.parametrize("acks", [1, -1])
def test_idempotent_requires_acks_all(both, acks):
    """An idempotent batch with acks=1: Kafka refuses it (INVALID_REQUIRED_ACKS? or accepts)."""
    def scenario(t):
        setup(t, "err-idem2", 1)
        pid, epoch = init_producer_id(t)
        return norm_produce(produce(t, "err-idem2", 0, batch([b"a"], producer_id=pid, producer_epoch=epoch,
                                                              base_sequence=0), acks=acks))
    assert_same(both, scenario)
