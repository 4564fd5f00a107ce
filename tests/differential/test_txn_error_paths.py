"""AddOffsetsToTxn and WriteTxnMarkers error paths as raw requests, pykbroker against Apache Kafka:
the same requests give the same error codes, and a marker written by hand has the same effect on
the partition (its log end offset and last stable offset, what a read_committed Fetch returns).

AddOffsetsToTxn (v0-v4): a transactional id never initialised, a producer id that is not the
id's, an epoch older than the id's (fenced by a second InitProducerId), the current producer (the
offsets partition joins; EndTxn then aborts), an empty group id.  WriteTxnMarkers (v1): an unknown
topic, a partition past the topic's count, a COMMIT marker for a producer that never wrote there,
an ABORT marker closing an open transactional write, and an epoch older than the partition has
seen.  Producer ids differ between brokers and are only used, never compared."""
from __future__ import annotations

import time
import uuid

import pytest

from .helpers import absorbed, batch, call, create_topic, explain, list_offsets, wait_for_topic
from .test_transactions import _coordinator, _end, _init, _produce

MARKER_VERSION = 1
CONCURRENT_TRANSACTIONS = 51


def _add_offsets(t, tid, pid, epoch, group, version):
    deadline = time.monotonic() + 30
    while True:
        code = call(t, 25, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                     "group_id": group})["error_code"]
        # CONCURRENT_TRANSACTIONS: the previous EndTxn's markers are still being written, which
        # Kafka's clients retry (noted in the summary)
        if code != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return code
        absorbed(t, "AddOffsetsToTxn", code)
        time.sleep(0.1)


def _marker(t, topic, parts, pid, epoch, commit, coordinator_epoch=0):
    r = call(t, 27, MARKER_VERSION, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "topics": [{"name": topic, "partition_indexes": parts}], "coordinator_epoch": coordinator_epoch}]})
    return sorted((x["name"], p["partition_index"], p["error_code"])
                  for m in r["markers"] for x in m["topics"] for p in x["partitions"])


def _offsets(t, topic, part=0):
    """(log end offset, last stable offset) of the partition."""
    return (list_offsets(t, topic, part, -1)["offset"], list_offsets(t, topic, part, -1, isolation_level=1)["offset"])


def _offsets_after_marker(t, topic, part, end):
    """:func:`_offsets` once the log end reaches ``end`` (the marker just written), or as they are
    after 10 s (a marker a broker did not write)."""
    deadline = time.monotonic() + 10
    while True:
        o = _offsets(t, topic, part)
        if o[0] >= end or time.monotonic() > deadline:
            return o
        time.sleep(0.05)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_add_offsets_to_txn_errors(both, version):
    run = uuid.uuid4().hex[:6]

    def scenario(t):
        tid, group = "ao-%d-%s" % (version, run), "ao-group-%d-%s" % (version, run)
        out = {"never_initialised": _add_offsets(t, "ao-none-%d-%s" % (version, run), 1000, 0, group, version)}
        _coordinator(t, tid)
        first = _init(t, tid)
        assert first["error_code"] == 0, first
        pid, epoch = first["producer_id"], first["producer_epoch"]
        out["other_producer_id"] = _add_offsets(t, tid, pid + 1, epoch, group, version)
        again = _init(t, tid)   # bumps the epoch: the first one is fenced
        assert again["error_code"] == 0 and again["producer_id"] == pid, again
        out["fenced_epoch"] = _add_offsets(t, tid, pid, epoch, group, version)
        out["current"] = _add_offsets(t, tid, pid, again["producer_epoch"], group, version)
        out["abort"] = _end(t, tid, pid, again["producer_epoch"], False)
        out["empty_group"] = _add_offsets(t, tid, pid, again["producer_epoch"], "", version)
        return out

    p, k = both(scenario)
    assert p == k, explain(p, k)
    assert k["current"] == 0 and k["fenced_epoch"] != 0 and k["never_initialised"] != 0, k


def test_write_txn_markers_errors_and_effects(both):
    run = uuid.uuid4().hex[:6]

    def scenario(t):
        topic, tid = "wm-%s" % run, "wm-tx-%s" % run
        create_topic(t, topic, 2)
        wait_for_topic(t, topic, 2)
        out = {"unknown_topic": _marker(t, "wm-none-%s" % run, [0], 5000, 0, True),
               "partition_past_count": _marker(t, topic, [7], 5000, 0, True)}
        # a plain record, then a COMMIT marker for a producer that never wrote to the partition
        # (retried until written: a new partition's leader may not take writes yet on Kafka,
        # which left its log empty, (0, 0) below, in a loaded run)
        deadline = time.monotonic() + 15
        while True:
            r = call(t, 0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 1, "records": batch([b"plain"])}]}]})
            code = r["responses"][0]["partition_responses"][0]["error_code"]
            if code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert code == 0, r
        out["stray_commit"] = _marker(t, topic, [1], 777777, 0, True)
        # where the stray marker leaves the log: compared below as a relation (Kafka varies)
        out["stray_commit_offsets"] = _offsets_after_marker(t, topic, 1, 2)
        # an open transactional write on partition 0, closed by a hand-written ABORT marker
        _coordinator(t, tid)
        r = _init(t, tid)
        pid, epoch = r["producer_id"], r["producer_epoch"]
        add = call(t, 24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                              "v3_and_below_producer_epoch": epoch,
                              "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        out["added"] = [x["partition_error_code"] for tr in add["results_by_topic_v3_and_below"]
                        for x in tr["results_by_partition"]]
        out["produce"] = _produce(t, tid, topic, 0, [b"a", b"b"], pid, epoch, 0)
        out["open_offsets"] = _offsets(t, topic, 0)
        out["abort_marker"] = _marker(t, topic, [0], pid, epoch, False)
        out["after_abort_offsets"] = _offsets_after_marker(t, topic, 0, out["open_offsets"][0] + 1)
        out["older_epoch"] = _marker(t, topic, [0], pid, epoch - 1, True) if epoch > 0 else "n/a"
        # the coordinator's own EndTxn still closes its (already aborted) transaction
        out["end_txn"] = _end(t, tid, pid, epoch, False)
        return out

    p, k = both(scenario)
    # Kafka 4.4 writes a stray COMMIT marker (a producer with no transaction on the partition)
    # in most runs and drops it in others: (2, 2) or (1, 1) as (log end, LSO), the same request,
    # still (1, 1) after 10 s (seen in about one run in five).  Compared: the marker never holds
    # the LSO back, on both brokers; pykbroker writes it.
    strays = p.pop("stray_commit_offsets"), k.pop("stray_commit_offsets")
    assert all(end == lso and end in (1, 2) for end, lso in strays), strays
    assert strays[0] == (2, 2), strays
    assert p == k, explain(p, k)
    assert k["unknown_topic"][0][2] == 3 and k["abort_marker"][0][2] == 0, k
    # the hand-written marker really closed the transaction: the LSO caught up with the log end
    assert k["after_abort_offsets"][0] == k["after_abort_offsets"][1], k
