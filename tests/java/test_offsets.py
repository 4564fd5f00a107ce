"""Java AdminClient and consumer 3.9.x and 4.x: ListOffsets, offsetsForTimes, DeleteRecords.

A JVM per profile runs the ``offsets`` scenario, beside other modules' scenarios, (compat/java/.../OffsetsScenario.java): one
partition with 10 records whose timestamps are out of order (base + 1000*TS[i]), in two batches,
and an empty topic.
"""
import pytest

from tests.java.batch import batch, reports

pytestmark = [pytest.mark.timeout(900), pytest.mark.parametrize("profile", ["kafka39", "kafka4"])]

BASE = 1_700_000_000_000
TS = [5, 1, 9, 3, 7, 2, 8, 0, 6, 4]   # mirror of OffsetsScenario.TS


def offsets_args(profile):
    return {"topic": "java-offsets-" + profile, "base_ts": BASE}


# both profiles' scenarios at once, one JVM each, on the session's shared broker with other
# modules' (tests/java/conftest.py, batch.py)
JAVA_BATCH = batch("offsets", offsets_args)
JAVA_SHARED_BROKER = True
_offsets = reports("offsets", "offsets", offsets_args)


def first_at_or_after(target, start=0):
    """Kafka's timestamp lookup: the first offset >= start whose timestamp >= target."""
    for off in range(start, len(TS)):
        if BASE + 1000 * TS[off] >= target:
            return off, BASE + 1000 * TS[off]
    return -1, -1


def test_list_offsets(offsets, profile):
    r = offsets(profile)
    r.assert_phase("setup")
    r.assert_phase("list_offsets")
    lo = {c: (e["offset"], e["timestamp"]) for c, e in r.by_case("list_offsets").items()}
    assert lo["earliest"] == (0, -1)
    assert lo["latest"] == (10, -1)
    assert lo["latest_read_committed"] == (10, -1)   # no transactions: LSO == high watermark
    assert lo["max_timestamp"] == (2, BASE + 9000)   # the record's own offset, not its batch's last
    for t in (0, 3000, 5000, 5001, 9000, 9001):
        assert lo["ts_%d" % t] == first_at_or_after(BASE + t), t
    assert lo["empty_earliest"] == (0, -1)
    assert lo["empty_latest"] == (0, -1)
    assert lo["empty_max_timestamp"] == (-1, -1)
    assert lo["empty_ts_0"] == (-1, -1)
    epochs = {c: e["leader_epoch"] for c, e in r.by_case("list_offsets").items()}
    assert epochs["latest"] is not None and epochs["latest"] >= 0
    assert epochs["ts_9001"] is None          # no match: no epoch either
    assert r.one("list_offsets_error", case="unknown_topic")["error"] == "UnknownTopicOrPartitionException"


def test_consumer_offsets_for_times(offsets, profile):
    r = offsets(profile)
    r.assert_phase("consumer_offsets")
    c = r.one("consumer_offsets", phase="before_delete")
    assert (c["beginning"], c["end"]) == (0, 10)
    for case, t in (("ts_0", 0), ("ts_5001", 5001), ("ts_9001", 9001)):
        e = r.one("offsets_for_times", phase="before_delete", case=case)
        want = first_at_or_after(BASE + t)
        assert (e["offset"], e["timestamp"]) == (want if want[0] >= 0 else (None, None))


def test_delete_records(offsets, profile):
    r = offsets(profile)
    r.assert_phase("delete_records")
    assert r.one("deleted")["low_watermark"] == 4
    assert r.one("delete_records_error", case="beyond_high_watermark")["error"] == "OffsetOutOfRangeException"
    lo = {c: (e["offset"], e["timestamp"]) for c, e in r.by_case("list_offsets").items()}
    assert lo["after_delete_earliest"] == (4, -1)
    assert lo["after_delete_latest"] == (10, -1)
    # Timestamp lookups start at the log start offset.
    assert lo["after_delete_ts_0"] == first_at_or_after(BASE, start=4)
    assert lo["after_delete_ts_7500"] == first_at_or_after(BASE + 7500, start=4)


def test_consumer_below_log_start(offsets, profile):
    r = offsets(profile)
    r.assert_phase("consumer_after_delete")
    c = r.one("consumer_offsets", phase="after_delete")
    assert (c["beginning"], c["end"]) == (4, 10)
    e = r.one("offsets_for_times", phase="after_delete", case="ts_0")
    assert (e["offset"], e["timestamp"]) == first_at_or_after(BASE, start=4)
    # auto.offset.reset=none: seeking below the log start offset surfaces OFFSET_OUT_OF_RANGE.
    assert r.one("out_of_range", reset="none")["error"] == "OffsetOutOfRangeException"
    assert r.all("record", phase="reset_none") == []
    # auto.offset.reset=earliest: the consumer resets to the log start offset.
    recs = r.all("record", phase="reset_earliest")
    assert [e["offset"] for e in recs] == list(range(4, 10))
    assert [bytes.fromhex(e["value"]) for e in recs] == [b"r%d" % i for i in range(4, 10)]
    assert [e["timestamp"] for e in recs] == [BASE + 1000 * TS[i] for i in range(4, 10)]
