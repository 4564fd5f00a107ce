"""segmentio/kafka-go against pykbroker and Apache Kafka: the same Go scenarios
(compat/go/cmd/kafkago), with kafka-go's own (mostly older) request versions and its own
consumer group client.

- ``roundtrip``: every codec kafka-go has (none, gzip, snappy, lz4, zstd), records of every
  shape (null/empty/binary keys and values, 6 KiB values, duplicate headers, out-of-order
  CreateTime timestamps) to 3 partitions, read back per partition: the same bytes at the same
  offsets (dense from 0) on both;
- ``group``: kafka-go's consumer group (range and round-robin balancers) with explicit
  CommitMessages: a member processes a third and leaves, two more resume from its commits;
  every record once, and the same committed offsets (OffsetFetch) at the end on both.  How the
  records were split between the members is timing, not compared.

Skipped without a Go toolchain."""
from __future__ import annotations

import pytest

from go import gobuild  # noqa: E402

gobuild.require_toolchain("the kafka-go scenarios")


@pytest.fixture(scope="module")
def kafkago(tmp_path_factory):
    return gobuild.build_or_fail(tmp_path_factory.mktemp("gobin")) / "kafkago"


def test_kafka_go_produce_consume_every_codec(both, kafkago):
    def observe(t, binary):
        return gobuild.run(binary, t.bootstrap, "roundtrip", prefix="diff-kg-rt", records=300)
    p, k = both.at_once(observe, kafkago)
    assert p == k
    assert set(p) == {"none", "gzip", "snappy", "lz4", "zstd"}, p
    assert all(r["mismatches"] == [] and r["produced"] == r["read"] == 300 for r in p.values()), p


@pytest.mark.parametrize("balancer", ["range", "roundrobin"])
def test_kafka_go_group_commits(both, kafkago, balancer):
    def observe(t, binary):
        rep = gobuild.run(binary, t.bootstrap, "group", prefix="diff-kg-grp-" + balancer, records=300,
                          balancer=balancer)
        return {"produced": rep["produced"], "duplicates": rep["duplicates"], "missing": rep["missing"],
                "problems": rep["problems"], "committed": rep["committed"],
                "processed": rep["first_member_processed"] + rep["later_members_processed"],
                "first_took_a_third": rep["first_member_processed"] >= 100}
    p, k = both.at_once(observe, kafkago)
    assert p == k
    assert p["committed"] == {"0": 100, "1": 100, "2": 100} and p["processed"] == 300, p
