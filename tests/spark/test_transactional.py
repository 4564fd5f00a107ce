"""Spark's Kafka connector (spark-sql-kafka-0-10) reading a transactional topic with
``kafka.isolation.level=read_committed``: a batch query sees exactly the committed records
(aborted ones and those of a still-open transaction are not there), read_uncommitted sees them all."""
from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.transactions.helpers import transaction

from .util import create_topic, skip_in_quick_mode, unique

pytestmark = [skip_in_quick_mode, pytest.mark.timeout(240)]


def _txn_producer(bootstrap, tid):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    return p


def test_read_committed_batch_query(spark, bootstrap):
    t = create_topic(bootstrap, unique("sparktx"), 2)
    p = _txn_producer(bootstrap, unique("tid"))
    transaction(p, t, [(b"%d" % i, b"committed-%d" % i, i % 2) for i in range(20)])
    transaction(p, t, [(b"%d" % i, b"aborted-%d" % i, i % 2) for i in range(10)], commit=False)
    transaction(p, t, [(b"%d" % i, b"committed-late-%d" % i, i % 2) for i in range(6)])
    openp = _txn_producer(bootstrap, unique("open"))
    openp.begin_transaction()
    openp.produce(t, value=b"open", partition=0)
    openp.flush(10)

    def read(isolation):
        df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", t)
              .option("startingOffsets", "earliest").option("endingOffsets", "latest")
              .option("kafka.isolation.level", isolation).load())
        return sorted(bytes(r["value"]) for r in df.select("value").collect())

    committed = sorted([b"committed-%d" % i for i in range(20)] + [b"committed-late-%d" % i for i in range(6)])
    assert read("read_committed") == committed
    assert read("read_uncommitted") == sorted(committed + [b"aborted-%d" % i for i in range(10)] + [b"open"])
    openp.abort_transaction(30)
