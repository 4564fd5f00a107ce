"""Spark's Kafka connector through a SASL_SSL listener (SCRAM-SHA-512 over TLS, the CA as a PEM
truststore): only ``kafka.``-prefixed options a user would set (``broker.spark_options``).  Spark
writes, confluent-kafka reads the records back over the same listener, Spark reads them back;
a wrong password fails with the Java client's authentication error instead of hanging.  The
broker runs Kafka's StandardAuthorizer: a principal allowed only its own topic and group writes
and reads them through Spark, and is refused (TopicAuthorizationException) on any other topic."""
from __future__ import annotations

import time

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG

from .conftest import AGAINST_KAFKA
from .util import skip_in_quick_mode, unique

needs.module("cryptography")
pytestmark = [skip_in_quick_mode, pytest.mark.timeout(240),
              pytest.mark.skipif(AGAINST_KAFKA, reason="a secured pykbroker of its own")]

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


@pytest.fixture(scope="module")
def secure():
    with pykbroker.Broker(security="SASL_SSL", users=USERS, mechanisms=["SCRAM-SHA-512"],
                          config={**TEST_CONFIG, **AUTHORIZER}) as b:
        # alice may do everything; bob only what test_principal_allowed_only_its_topic_and_group grants
        for op, res in (("ALL", {"topic": "*"}), ("ALL", {"group": "*"}), ("ALL", {"cluster": True})):
            b.acls.allow("User:alice", op, **res)
        yield b


def test_spark_writes_and_reads_over_sasl_ssl(spark, secure):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique("sasl-ssl")
    admin = AdminClient(secure.client_config("alice"))   # kept: its futures die with it
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    opts = secure.spark_options("alice")
    assert opts["kafka.security.protocol"] == "SASL_SSL" and "ScramLoginModule" in opts["kafka.sasl.jaas.config"]
    rows = [("k%d" % i, "v%d" % i) for i in range(20)]
    spark.createDataFrame(rows, "key string, value string").write.format("kafka") \
        .options(**opts).option("topic", topic).save()
    # confluent-kafka, over the same SASL_SSL listener, sees what Spark wrote
    c = Consumer({**secure.client_config("alice"), "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = set()
    try:
        for _ in range(80):
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.add((m.key().decode(), m.value().decode()))
            if len(seen) == len(rows):
                break
    finally:
        c.close()
    assert seen == set(rows)
    got = spark.read.format("kafka").options(**opts).option("subscribe", topic).load() \
        .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect()
    assert sorted((r.k, r.v) for r in got) == sorted(rows)


def test_wrong_password_fails_with_an_authentication_error(spark, secure):
    opts = secure.spark_options("alice", password="not-the-password")
    t0 = time.monotonic()
    with pytest.raises(Exception, match="SaslAuthenticationException"):
        spark.read.format("kafka").options(**opts).option("subscribe", "anything").load().collect()
    assert time.monotonic() - t0 < 30   # the client's authentication error, not its timeouts


def test_principal_allowed_only_its_topic_and_group(spark, secure):
    """bob holds READ/WRITE on one topic and READ on one group (the connector's ``kafka.group.id``):
    Spark writes and reads that topic as bob; reading or writing alice's topic is refused with
    the Java client's TopicAuthorizationException."""
    from confluent_kafka.admin import AdminClient, NewTopic

    mine, theirs = unique("bob"), unique("alice")
    admin = AdminClient(secure.client_config("alice"))
    for t in (mine, theirs):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(15)
    group = "bob-spark-" + mine
    granted = [secure.acls.allow("User:bob", "WRITE", topic=mine), secure.acls.allow("User:bob", "READ", topic=mine),
               secure.acls.allow("User:bob", "READ", group=group)]
    opts = {**secure.spark_options("bob"), "kafka.group.id": group}
    rows = [("k%d" % i, "v%d" % i) for i in range(10)]
    try:
        spark.createDataFrame(rows, "key string, value string").write.format("kafka") \
            .options(**opts).option("topic", mine).save()
        got = spark.read.format("kafka").options(**opts).option("subscribe", mine).load() \
            .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect()
        assert sorted((r.k, r.v) for r in got) == sorted(rows)
        with pytest.raises(Exception, match="TopicAuthorizationException"):
            spark.read.format("kafka").options(**opts).option("subscribe", theirs).load().collect()
        with pytest.raises(Exception, match="TopicAuthorizationException"):
            spark.createDataFrame(rows, "key string, value string").write.format("kafka") \
                .options(**opts).option("topic", theirs).save()
    finally:
        secure.acls.remove(*granted)
