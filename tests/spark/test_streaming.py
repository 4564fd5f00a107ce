"""Spark Structured Streaming through the real spark-sql-kafka-0-10 connector.

``readStream.format("kafka")`` with the availableNow and processingTime triggers, restart from the
checkpoint without loss or duplicates, ``failOnDataLoss`` true/false after DeleteRecords moved the
log start offset past the checkpointed position, and the ``writeStream.format("kafka")`` sink.

What Spark does against Apache Kafka in the data-loss case (connector 4.0 source): the driver plans
[checkpointed offset, latest) per partition; the executor's consumer (assign + seek,
``auto.offset.reset=none``) gets OFFSET_OUT_OF_RANGE, asks for the earliest/latest offsets (ListOffsets)
and then either fails the task with "Cannot fetch offset N ... Some data may have been lost"
(failOnDataLoss=true; local mode does not retry tasks, so the query fails) or logs a warning and
continues from the new log start offset (false).
"""
from __future__ import annotations

import time

import pytest

from .util import create_topic, delete_records, produce, read_all, skip_in_quick_mode, unique

pytestmark = [skip_in_quick_mode, pytest.mark.timeout(240)]


def stream(spark, bootstrap, topic, **options):
    r = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def run_available_now(df, out_dir, checkpoint, timeout=120):
    """Parquet file sink (exactly-once with its own log) + checkpoint; one availableNow run."""
    q = (df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("parquet").option("path", out_dir)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(timeout), "availableNow query did not finish in %ss" % timeout
    finally:
        if q.isActive:
            q.stop()
    if q.exception() is not None:
        raise AssertionError(str(q.exception()))
    return q


def read_sink(spark, out_dir):
    return sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(out_dir).collect())


def test_available_now_restart_from_checkpoint(spark, bootstrap, tmp_path):
    t = create_topic(bootstrap, unique("avn"), 3)
    produce(bootstrap, t, [{"partition": i % 3, "value": b"a%d" % i} for i in range(30)])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    # maxOffsetsPerTrigger splits the backlog into several micro-batches within one availableNow run.
    q = run_available_now(stream(spark, bootstrap, t, maxOffsetsPerTrigger="12"), out, ckpt)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 30
    assert len([p for p in q.recentProgress if p["numInputRows"] > 0]) >= 3
    first = read_sink(spark, out)
    assert [(p, o) for p, o, _ in first] == [(p, o) for p in range(3) for o in range(10)]

    produce(bootstrap, t, [{"partition": i % 3, "value": b"b%d" % i} for i in range(15)])
    # Restart from the checkpoint: only the 15 new records, none lost, none twice.
    q = run_available_now(stream(spark, bootstrap, t, maxOffsetsPerTrigger="12"), out, ckpt)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 15
    both = read_sink(spark, out)
    assert [(p, o) for p, o, _ in both] == [(p, o) for p in range(3) for o in range(15)]
    values = {v for _, _, v in both}
    assert values == {"a%d" % i for i in range(30)} | {"b%d" % i for i in range(15)}

    # A third run with nothing new reads nothing.
    q = run_available_now(stream(spark, bootstrap, t), out, ckpt)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 0
    assert len(read_sink(spark, out)) == 45


def test_processing_time_trigger_live(spark, bootstrap):
    t = create_topic(bootstrap, unique("live"), 2)
    name = "live_" + unique("q").replace("-", "_")
    q = (stream(spark, bootstrap, t).selectExpr("partition", "offset", "CAST(value AS STRING) v")
         .writeStream.format("memory").queryName(name).trigger(processingTime="500 milliseconds")
         .start())
    try:
        sent = 0
        for rnd in range(3):
            produce(bootstrap, t, [{"partition": i % 2, "value": b"r%d-%d" % (rnd, i)}
                                   for i in range(10)])
            sent += 10
            deadline = time.monotonic() + 60
            while spark.sql("SELECT count(*) c FROM %s" % name).first().c < sent:
                assert q.exception() is None, q.exception()
                assert time.monotonic() < deadline, "live query did not catch up to %d" % sent
                time.sleep(0.3)
        got = spark.sql("SELECT partition, offset, v FROM %s" % name).collect()
        assert sorted((r.partition, r.offset) for r in got) == \
            [(p, o) for p in range(2) for o in range(15)]
        assert sorted(r.v for r in got) == sorted("r%d-%d" % (a, i) for a in range(3)
                                                  for i in range(10))
        # Several triggers fired, each picking up what arrived since the previous one.
        assert len([p for p in q.recentProgress if p["numInputRows"] > 0]) >= 3
    finally:
        q.stop()


def test_kafka_sink(spark, bootstrap, tmp_path):
    src = create_topic(bootstrap, unique("sink-src"), 2)
    dst = create_topic(bootstrap, unique("sink-dst"), 2)
    produce(bootstrap, src, [{"partition": i % 2, "key": b"k%d" % (i % 5), "value": b"hello %d" % i,
                              "headers": [("i", b"%d" % i)]} for i in range(25)])
    df = stream(spark, bootstrap, src, includeHeaders="true").selectExpr(
        "key", "upper(CAST(value AS STRING)) AS value", "headers", "partition")
    q = (df.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    got = read_all(bootstrap, dst, 2)
    assert sorted((r["partition"], r["key"], r["value"], tuple(r["headers"])) for r in got) == sorted(
        (i % 2, b"k%d" % (i % 5), b"HELLO %d" % i, (("i", b"%d" % i),)) for i in range(25))


@pytest.fixture
def lost_topic(spark, bootstrap, tmp_path):
    """A 2-partition topic; a checkpointed query consumed offsets 0..9 of each partition; then 10
    more per partition were produced and partition 0's log start moved to 15 by DeleteRecords."""
    t = create_topic(bootstrap, unique("loss"), 2)
    produce(bootstrap, t, [{"partition": i % 2, "value": b"a%d" % i} for i in range(20)])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    run_available_now(stream(spark, bootstrap, t), out, ckpt)
    assert len(read_sink(spark, out)) == 20
    produce(bootstrap, t, [{"partition": i % 2, "value": b"b%d" % i} for i in range(20)])
    assert delete_records(bootstrap, t, 0, 15) == 15
    return t, out, ckpt


def test_fail_on_data_loss_true(spark, bootstrap, lost_topic):
    t, out, ckpt = lost_topic
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException) as ei:
        run_available_now(stream(spark, bootstrap, t, failOnDataLoss="true"), out, ckpt)
    msg = str(ei.value)
    assert "Some data may have been lost" in msg, msg[:2000]
    # KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE: the executor could not read [10, 20) of partition 0.
    assert "Could not read records in offset [10, 20) for topic partition %s-0\n" % t in msg, msg[:2000]
    # Nothing from the failed batch was committed to the sink.
    assert len(read_sink(spark, out)) == 20


def test_fail_on_data_loss_false(spark, bootstrap, lost_topic):
    t, out, ckpt = lost_topic
    run_available_now(stream(spark, bootstrap, t, failOnDataLoss="false"), out, ckpt)
    got = read_sink(spark, out)
    # Partition 0 continues from the new log start (15); partition 1 loses nothing.
    assert [(p, o) for p, o, _ in got] == \
        [(0, o) for o in list(range(10)) + list(range(15, 20))] + [(1, o) for o in range(20)]


def wait_rows(spark, q, name, n, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        c = spark.sql("SELECT count(*) c FROM %s" % name).first().c
        if c >= n:
            return c
        assert q.exception() is None, q.exception()
        assert time.monotonic() < deadline, "query saw %d of %d rows" % (c, n)
        time.sleep(0.3)


def test_pattern_discovers_new_topics_and_partitions(spark, bootstrap):
    """subscribePattern while running: a new matching topic and new partitions of an existing one
    are picked up from offset 0 (Spark checks a new partition's earliest offset is 0)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    stem = unique("disc")
    a = create_topic(bootstrap, stem + "-a", 1)
    produce(bootstrap, a, [{"value": b"a%d" % i} for i in range(5)])
    name = "disc_" + unique("q").replace("-", "_")
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribePattern", stem + "-.*").option("startingOffsets", "earliest")
         # How often the driver's admin client refreshes metadata (pattern matching, partitions).
         .option("kafka.metadata.max.age.ms", "500").load()
         .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) v")
         .writeStream.format("memory").queryName(name).trigger(processingTime="500 milliseconds")
         .start())
    try:
        wait_rows(spark, q, name, 5)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(a, 3)])[a].result(15)
        b = create_topic(bootstrap, stem + "-b", 2)
        produce(bootstrap, a, [{"partition": p, "value": b"a-new%d" % p} for p in range(3)])
        produce(bootstrap, b, [{"partition": p, "value": b"b%d" % p} for p in range(2)])
        wait_rows(spark, q, name, 10)
        got = sorted((r.topic, r.partition, r.offset, r.v) for r in
                     spark.sql("SELECT * FROM %s" % name).collect())
        assert got == sorted([(a, 0, i, "a%d" % i) for i in range(5)] + [(a, 0, 5, "a-new0")]
                             + [(a, p, 0, "a-new%d" % p) for p in (1, 2)]
                             + [(b, p, 0, "b%d" % p) for p in range(2)])
    finally:
        q.stop()


def _restart_under_query(q, broker, clean, topic, prefix):
    """Wait until the running query q has read the 20 records produced before, restart the
    broker (clean: SIGTERM, else SIGKILL), produce 20 more (values prefix + i, partitions
    alternating) and wait until q has read those too; q is stopped either way and must end
    without an exception."""
    try:
        deadline = time.monotonic() + 90
        while sum(p["numInputRows"] for p in q.recentProgress) < 20:
            assert q.exception() is None and time.monotonic() < deadline, q.exception()
            time.sleep(0.3)
        broker.restart(clean=clean)
        produce(broker.bootstrap, topic, [{"partition": i % 2, "value": b"%s%d" % (prefix, i)}
                                          for i in range(20)])
        while sum(p["numInputRows"] for p in q.recentProgress) < 40:
            assert q.exception() is None, q.exception()
            assert time.monotonic() < deadline + 60, "query did not resume after the restart"
            time.sleep(0.3)
    finally:
        q.stop()
    assert q.exception() is None


def test_broker_restart_under_running_query(spark, fresh_broker, tmp_path):
    """A processingTime query keeps running while the broker is stopped (SIGTERM) and started
    again on the same port and data: nothing lost, nothing read twice."""
    bs = fresh_broker.bootstrap
    t = create_topic(bs, unique("restart"), 2)
    produce(bs, t, [{"partition": i % 2, "value": b"before%d" % i} for i in range(20)])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q = (stream(spark, bs, t).selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(processingTime="500 milliseconds").start())
    _restart_under_query(q, fresh_broker, True, t, b"after")
    got = read_sink(spark, out)
    assert [(p, o) for p, o, _ in got] == [(p, o) for p in range(2) for o in range(20)]
    assert {v for _, _, v in got} == {"before%d" % i for i in range(20)} | \
        {"after%d" % i for i in range(20)}


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_kafka_sink_across_broker_restart(spark, fresh_broker, tmp_path, clean):
    """The Kafka sink's cached (idempotent) Java producer keeps writing after the broker restarts
    (clean, or killed with SIGKILL between batches): its producer id and sequences survive the
    restart, so every record lands exactly once."""
    bs = fresh_broker.bootstrap
    src = create_topic(bs, unique("rs-src"), 2)
    dst = create_topic(bs, unique("rs-dst"), 2)
    produce(bs, src, [{"partition": i % 2, "value": b"one%d" % i} for i in range(20)])
    q = (stream(spark, bs, src).selectExpr("CAST(partition AS STRING) AS key", "value", "partition")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="500 milliseconds").start())
    _restart_under_query(q, fresh_broker, clean, src, b"two")
    got = read_all(bs, dst, 2)
    assert sorted((r["partition"], r["key"], r["value"]) for r in got) == sorted(
        [(i % 2, b"%d" % (i % 2), b"one%d" % i) for i in range(20)]
        + [(i % 2, b"%d" % (i % 2), b"two%d" % i) for i in range(20)])
