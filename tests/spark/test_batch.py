"""Spark batch queries through the real spark-sql-kafka-0-10 connector.

``spark.read.format("kafka")`` (subscribe, subscribePattern, assign; startingOffsets/endingOffsets as
earliest/latest and per-partition JSON; startingOffsetsByTimestamp) and ``df.write.format("kafka")``
(keys, headers, explicit partitions, a topic column).  What Spark writes is read back by
confluent-kafka and kafka-python; what Spark reads is compared to what confluent-kafka produced.
Only ``kafka.*`` options a user would set are given to Spark.
"""
from __future__ import annotations

import json

import pytest

from .util import (create_topic, produce, read_all, read_all_kafka_python, skip_in_quick_mode,
                   unique)

pytestmark = [skip_in_quick_mode, pytest.mark.timeout(180)]

BASE_TS = 1_700_000_000_000   # fixed CreateTime timestamps (ms) for the timestamp lookups


def kafka_read(spark, bootstrap, **options):
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v if isinstance(v, str) else json.dumps(v))
    return r.load()


def rows(df):
    """Spark rows as plain tuples keyed for comparison."""
    out = []
    for r in df.collect():
        d = r.asDict()
        d["key"] = None if d["key"] is None else bytes(d["key"])
        d["value"] = None if d["value"] is None else bytes(d["value"])
        if "headers" in d:
            d["headers"] = [(h["key"], None if h["value"] is None else bytes(h["value"]))
                            for h in (d["headers"] or [])]
        out.append(d)
    return out


@pytest.fixture(scope="module")
def topic3(bootstrap):
    """3 partitions x 10 records, produced by confluent-kafka with keys, headers and timestamps
    BASE_TS + 1000 * i (i = index within the partition)."""
    t = create_topic(bootstrap, unique("batch"), 3)
    recs = []
    for p in range(3):
        for i in range(10):
            recs.append({"partition": p, "key": b"k%d-%d" % (p, i), "value": b"v%d-%d" % (p, i),
                         "headers": [("h", b"%d" % i), ("dup", b"a"), ("dup", b"b")],
                         "timestamp": BASE_TS + 1000 * i})
    produce(bootstrap, t, recs)
    return t, recs


def test_subscribe_earliest_latest_with_headers(spark, bootstrap, topic3):
    t, recs = topic3
    got = rows(kafka_read(spark, bootstrap, subscribe=t, startingOffsets="earliest",
                          endingOffsets="latest", includeHeaders="true"))
    assert len(got) == 30
    by = {(g["partition"], g["offset"]): g for g in got}
    for p in range(3):
        for i in range(10):
            g = by[(p, i)]
            assert g["topic"] == t
            assert g["key"] == b"k%d-%d" % (p, i) and g["value"] == b"v%d-%d" % (p, i)
            assert g["headers"] == [("h", b"%d" % i), ("dup", b"a"), ("dup", b"b")]
            assert int(g["timestamp"].timestamp() * 1000) == BASE_TS + 1000 * i
            assert g["timestampType"] == 0   # CreateTime
    # The defaults for batch are earliest..latest too.
    assert len(kafka_read(spark, bootstrap, subscribe=t).collect()) == 30


def test_subscribe_pattern(spark, bootstrap):
    stem = unique("pat")
    a = create_topic(bootstrap, stem + "-a", 2)
    b = create_topic(bootstrap, stem + "-b", 1)
    other = create_topic(bootstrap, unique("nopat"), 1)
    produce(bootstrap, a, [{"partition": i % 2, "value": b"a%d" % i} for i in range(6)])
    produce(bootstrap, b, [{"value": b"b%d" % i} for i in range(3)])
    produce(bootstrap, other, [{"value": b"x"}])
    got = rows(kafka_read(spark, bootstrap, subscribePattern=stem.replace("-", "\\-") + "-.*"))
    assert sorted((g["topic"], g["value"]) for g in got) == sorted(
        [(a, b"a%d" % i) for i in range(6)] + [(b, b"b%d" % i) for i in range(3)])


def test_assign_partitions(spark, bootstrap, topic3):
    t, _ = topic3
    got = rows(kafka_read(spark, bootstrap, assign={t: [0, 2]}))
    assert sorted((g["partition"], g["offset"]) for g in got) == \
        [(p, i) for p in (0, 2) for i in range(10)]
    # minPartitions splits each Kafka partition's range across several Spark tasks (several
    # consumers seeking into one partition); the result is the same records, once each.
    df = kafka_read(spark, bootstrap, assign={t: [0, 2]}, minPartitions="6")
    assert df.rdd.getNumPartitions() >= 6
    assert sorted((g["partition"], g["offset"]) for g in rows(df)) == \
        [(p, i) for p in (0, 2) for i in range(10)]


def test_offsets_json_per_partition(spark, bootstrap, topic3):
    t, _ = topic3
    # -2 = earliest, -1 = latest (allowed for the ending side of a batch query only).
    got = rows(kafka_read(spark, bootstrap, subscribe=t,
                          startingOffsets={t: {"0": 3, "1": -2, "2": 9}},
                          endingOffsets={t: {"0": 5, "1": 2, "2": -1}}))
    assert sorted((g["partition"], g["offset"], g["value"]) for g in got) == [
        (0, 3, b"v0-3"), (0, 4, b"v0-4"), (1, 0, b"v1-0"), (1, 1, b"v1-1"), (2, 9, b"v2-9")]


def test_starting_and_ending_offsets_by_timestamp(spark, bootstrap, topic3):
    t, _ = topic3
    # Partition 0 from the first record at/after BASE_TS+2500 (offset 3); partition 1 from an exact
    # match (offset 7); partition 2 from before everything (offset 0).  Ending by timestamp: the
    # first offset at/after the timestamp is exclusive.
    got = rows(kafka_read(
        spark, bootstrap, subscribe=t,
        startingOffsetsByTimestamp={t: {"0": BASE_TS + 2500, "1": BASE_TS + 7000, "2": 0}},
        endingOffsetsByTimestamp={t: {"0": BASE_TS + 5000, "1": BASE_TS + 60_000,
                                      "2": BASE_TS + 1000}}))
    # partition 1's ending timestamp matches nothing: with the default strategy Spark reads to latest.
    assert sorted((g["partition"], g["offset"]) for g in got) == \
        [(0, 3), (0, 4), (1, 7), (1, 8), (1, 9), (2, 0)]
    # A single starting timestamp for every partition (startingTimestamp).
    got = rows(kafka_read(spark, bootstrap, subscribe=t, startingTimestamp=str(BASE_TS + 8000)))
    assert sorted((g["partition"], g["offset"]) for g in got) == \
        [(p, i) for p in range(3) for i in (8, 9)]


def test_starting_timestamp_without_match(spark, bootstrap, topic3):
    t, _ = topic3
    future = {t: {"0": BASE_TS + 10**9, "1": BASE_TS + 10**9, "2": BASE_TS + 10**9}}
    # Default strategy "error": no offset matches the timestamp -> the query fails.
    with pytest.raises(Exception) as ei:
        kafka_read(spark, bootstrap, subscribe=t, startingOffsetsByTimestamp=future).collect()
    assert "No offset matched from request of topic-partition %s-" % t in str(ei.value)
    # Strategy "latest": start at the end -> nothing to read.
    df = kafka_read(spark, bootstrap, subscribe=t, startingOffsetsByTimestamp=future,
                    startingOffsetsByTimestampStrategy="latest")
    assert df.count() == 0


def test_write_keys_headers_partitions(spark, bootstrap):
    t = create_topic(bootstrap, unique("write"), 3)
    data = [("k%d" % i if i % 5 else None, "v%d" % i, i % 3,
             [("trace", bytearray(b"t%d" % i)), ("n", None)] if i % 2 else [])
            for i in range(40)]
    df = spark.createDataFrame(
        data, "key string, value string, partition int, "
              "headers array<struct<key: string, value: binary>>")
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", t).save()

    def expected():
        out = []
        for k, v, p, h in data:
            out.append((p, None if k is None else k.encode(), v.encode(),
                        tuple((hk, None if hv is None else bytes(hv)) for hk, hv in h)))
        return sorted(out, key=repr)

    conf = read_all(bootstrap, t, 3)
    assert sorted(((r["partition"], r["key"], r["value"], tuple(r["headers"])) for r in conf),
                  key=repr) == expected()
    kp = read_all_kafka_python(bootstrap, t, 3)
    assert sorted(((r["partition"], r["key"], r["value"], tuple(r["headers"])) for r in kp),
                  key=repr) == expected()
    # Offsets per partition are dense from 0 (the idempotent producer neither lost nor duplicated).
    for p in range(3):
        assert sorted(r["offset"] for r in conf if r["partition"] == p) == list(range(len(
            [d for d in data if d[2] == p])))
    # And Spark reads its own writes back, headers included.
    got = rows(kafka_read(spark, bootstrap, subscribe=t, includeHeaders="true"))
    assert sorted(((g["partition"], g["key"], g["value"], tuple(g["headers"])) for g in got),
                  key=repr) == expected()


def test_write_topic_column_and_binary(spark, bootstrap):
    t1 = create_topic(bootstrap, unique("wtopic"), 1)
    t2 = create_topic(bootstrap, unique("wtopic"), 2)
    blob = bytes(range(256))
    data = [(t1 if i % 2 else t2, bytearray(b"key%d" % i), bytearray(blob + b"%d" % i))
            for i in range(20)]
    df = spark.createDataFrame(data, "topic string, key binary, value binary")
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()
    got1 = read_all(bootstrap, t1, 1)
    got2 = read_all(bootstrap, t2, 2)
    assert sorted(r["value"] for r in got1) == sorted(bytes(d[2]) for d in data if d[0] == t1)
    assert sorted(r["value"] for r in got2) == sorted(bytes(d[2]) for d in data if d[0] == t2)
    # No partition column: the Java producer's default partitioner places each key by murmur2
    # hash; every record of one key is in one partition.
    by_key = {}
    for r in got2:
        by_key.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(ps) == 1 for ps in by_key.values())
