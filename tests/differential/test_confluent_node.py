"""@confluentinc/kafka-javascript (compat/node/confluent.js: librdkafka underneath, driven through
its KafkaJS-style API) against pykbroker and Apache Kafka: the same scenarios, the same
observations.  The round trip with every codec (the shared data set byte-exact at the offsets the
delivery reports named, the shapes read back, the codec of the batches stored), the idempotent
producer with every record in flight, transactions committed and aborted read read_committed
and read_uncommitted, the consumer group's verdict with librdkafka's eager and cooperative
assignors (every record once, the first member's commits resumed from, which partitions the
first rebalance revoked), and the admin calls this API has (createTopics again, metadata,
deleteTopicRecords, offsets and offsets by timestamp, deleteTopics) must be equal.  Skipped (a
failure in CI) without node/npm, compat/node's packages or the client's native module."""
from __future__ import annotations

from tests.node import noderun
from tests.node.noderun import native_packages  # noqa: F401 (autouse: waits for the packages)

noderun.skip_module_unless_usable(native=True)

RECORDS = 120


def _run(t, scenarios, prefix):
    rep = noderun.start("confluent.js", t.bootstrap, scenarios, prefix=prefix, rf=1, records=RECORDS).report()
    return {name: noderun.scenario(rep, name) for name in scenarios}


def test_roundtrip_idempotent_and_transactions_same_reads(both):
    def observe(t):
        r = _run(t, ["roundtrip", "idempotent", "txn"], "diff-ckjs-rt")
        # the codec of every batch stored (attributes & 7), read with a raw Fetch from the broker
        codecs = {name: sorted(noderun.batch_codecs(t.bootstrap, rt["topic"])) for name, rt in r["roundtrip"].items()}
        return {"roundtrip": r["roundtrip"], "stored_codecs": codecs, "idempotent": r["idempotent"], "txn": r["txn"]}
    p, k = both.at_once(observe)
    assert p == k
    rt = p["roundtrip"]
    assert set(rt) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert all(r["mismatches"] == [] and r["read"] == RECORDS and r["offsets_dense"] for r in rt.values()), rt
    assert p["stored_codecs"] == {"none": [0], "gzip": [1], "snappy": [2], "lz4": [3], "zstd": [4]}, p
    assert (p["idempotent"]["read"], p["idempotent"]["duplicates"], p["idempotent"]["out_of_order"]) == (RECORDS * 10, 0, 0)
    assert p["txn"]["read_committed"] == {"c1": 30, "c2": 30, "c3": 30}, p


def test_group_same_verdict(both):
    def observe(t):
        out = {}
        for assignor, r in _run(t, ["group"], "diff-ckjs-grp")["group"].items():
            a, b, c = (r["members"][m] for m in "ABC")
            c_first = next((x for x in c["assignments"] if x), [])
            out[assignor] = {"problems": r["problems"], "duplicates": r["duplicates"], "missing": r["missing"],
                             "committed_by_first": r["committed_by_first"], "first_processed": a["per"],
                             "b_first_assignment": b["assignments"][0], "c_got_a_share": 0 < len(c_first) < 3,
                             # eager: B gave up all three; cooperative: only the ones moving to C
                             "b_first_revocation_was": ("all" if b["revoked"][0] == [0, 1, 2] else
                                                        "moved" if b["revoked"][0] == c_first else b["revoked"][0]),
                             "committed_at_end": r["committed_at_end"]}
        return out
    p, k = both.at_once(observe)
    assert p == k
    assert p["roundRobin"]["b_first_revocation_was"] == "all" and p["cooperativeSticky"]["b_first_revocation_was"] == "moved", p
    assert p["roundRobin"]["duplicates"] == p["roundRobin"]["missing"] == 0 and p["roundRobin"]["committed_at_end"], p


def test_admin_client_same_report(both):
    p, k = both.at_once(lambda t: _run(t, ["admin"], "diff-ckjs-adm")["admin"])
    assert p == k
    assert p["delete_records"] == [[0, 4]] and p["offsets"] == [[0, 4, 10], [1, 0, 0]], p
    assert p["offset_for_timestamp"] == 7 and p["created_again"] is False, p
