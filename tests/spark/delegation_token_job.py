"""A PySpark driver of its own for tests/spark/test_delegation_token.py: Spark's Kafka
delegation-token path, end to end, in a JVM whose settings no other test shares.

Run as ``python delegation_token_job.py <settings.json>``; prints one JSON line (``RESULT ...``).

Spark obtains Kafka delegation tokens with ``HadoopDelegationTokenManager`` and its
``KafkaDelegationTokenProvider`` (spark-token-provider-kafka-0-10).  In a real deployment the
YARN and Kubernetes scheduler backends start that manager (``createTokenManager``); local and
standalone masters never do, so here the driver calls the same two steps those backends make, as
Spark's own KafkaDelegationTokenSuite does in local mode:

1. ``HadoopDelegationTokenManager(conf, hadoopConf, null).obtainDelegationTokens(creds)``: for
   every ``spark.kafka.clusters.<id>.*`` cluster whose ``security.protocol`` is SASL_SSL, SSL or
   SASL_PLAINTEXT, ``KafkaTokenUtil.obtainToken`` creates a Kafka AdminClient on
   ``auth.bootstrap.servers`` that logs in with Kerberos (Krb5LoginModule, the keytab and
   principal of ``spark.kerberos.keytab`` / ``spark.kerberos.principal``) and calls
   CreateDelegationToken; the token becomes a Hadoop token of service
   ``kafka.server.delegation.token.<id>``.
2. ``SparkHadoopUtil.addDelegationTokens(serialized, conf)``: what the scheduler backend's
   ``updateDelegationTokens`` does with the tokens, so the current user's credentials hold them.

Two clusters name the broker's two listeners (SASL_PLAINTEXT; SASL_SSL with the CA as the
cluster's ``ssl.truststore.*``), so two tokens are obtained.  Then the Kafka sinks and sources
(batch and Structured Streaming) are given nothing but ``kafka.bootstrap.servers`` (and over TLS
their truststore, which the connector does not take from the cluster): their
``KafkaConfigUpdater.setAuthenticationConfigIfNeeded`` finds the token whose cluster's
``target.bootstrap.servers.regex`` matches and logs in with SCRAM (``sasl.token.mechanism``,
default SCRAM-SHA-512) and ``tokenauth=true``.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

def describe_tokens(jvm, s: dict) -> list:
    """DescribeDelegationToken through another client: a Kafka Admin of its own (the connector's
    kafka-clients) logged in as the broker's super user with its SCRAM password, not Spark's."""
    props = jvm.java.util.Properties()
    for k, v in {"bootstrap.servers": s["bootstrap"], "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "SCRAM-SHA-512",
                 "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                     'username="%s" password="%s";' % (s["admin"], s["admin_password"]),
                 "default.api.timeout.ms": "30000"}.items():
        props.setProperty(k, v)
    admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
    try:
        found = admin.describeDelegationToken().delegationTokens().get()
        return [{"token_id": t.tokenInfo().tokenId(), "owner": t.tokenInfo().owner().toString(),
                 "requester": t.tokenInfo().tokenRequester().toString(),
                 "hmac_b64": t.hmacAsBase64String(), "expiry": t.tokenInfo().expiryTimestamp(),
                 "max": t.tokenInfo().maxTimestamp()} for t in found.toArray()]
    finally:
        admin.close()


def main(path: str) -> None:
    with open(path) as fh:
        s = json.load(fh)
    from pykbroker.pipeline.spark import build_session

    conf = {
        # the JDK's Kerberos reads the test realm from this file (KRB5_CONFIG is MIT's, not the JDK's)
        "spark.driver.extraJavaOptions": "-Djava.security.krb5.conf=%s" % s["krb5_conf"],
        "spark.kerberos.keytab": s["keytab"],
        "spark.kerberos.principal": s["principal"],
        # only the Kafka provider: there is no HDFS, HBase or Hive to ask for tokens
        "spark.security.credentials.hadoopfs.enabled": "false",
        "spark.security.credentials.hbase.enabled": "false",
        "spark.security.credentials.hive.enabled": "false",
    }
    # two clusters of Spark's token provider: the broker's SASL_PLAINTEXT listener and its
    # SASL_SSL one (the provider's AdminClient takes the truststore from the cluster's ssl.*)
    for cluster, bootstrap, protocol in (("plain", s["bootstrap"], "SASL_PLAINTEXT"),
                                         ("tls", s["bootstrap_tls"], "SASL_SSL")):
        prefix = "spark.kafka.clusters.%s." % cluster
        conf.update({prefix + "auth.bootstrap.servers": bootstrap, prefix + "security.protocol": protocol,
                     prefix + "sasl.kerberos.service.name": "kafka",
                     prefix + "target.bootstrap.servers.regex": re.escape(bootstrap)})
        if protocol == "SASL_SSL":
            conf.update({prefix + "ssl.truststore.type": "PEM", prefix + "ssl.truststore.location": s["ca_file"]})
    # WARN: the provider reports a failed CreateDelegationToken as a warning (and no token)
    t0 = time.monotonic()
    spark = build_session("pykbroker-delegation-token", conf=conf, log_level="WARN")
    marks = {"session": time.monotonic() - t0}
    jvm = spark._jvm
    out: dict = {}
    try:
        env_conf = jvm.org.apache.spark.SparkEnv.get().conf()
        manager = jvm.org.apache.spark.deploy.security.HadoopDelegationTokenManager(
            env_conf, spark.sparkContext._jsc.hadoopConfiguration(), None)
        creds = jvm.org.apache.hadoop.security.Credentials()
        manager.obtainDelegationTokens(creds)
        tokens = []
        for t in creds.getAllTokens().toArray():
            tokens.append({"service": t.getService().toString(), "kind": t.getKind().toString(),
                           "token_id": bytes(t.getIdentifier()).decode(),
                           "hmac_b64": bytes(t.getPassword()).decode()})
        out["tokens"] = tokens
        marks["tokens"] = time.monotonic() - t0
        out["described"] = describe_tokens(jvm, s)
        util = jvm.org.apache.spark.deploy.SparkHadoopUtil.get()
        util.addDelegationTokens(util.serialize(creds), env_conf)

        # the sink, over SASL_SSL: the bootstrap servers and the truststore (the connector takes
        # only the security protocol and SASL settings from the token's cluster)
        tls = {"kafka.bootstrap.servers": s["bootstrap_tls"], "kafka.ssl.truststore.type": "PEM",
               "kafka.ssl.truststore.location": s["ca_file"]}
        rows = [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in s["records"]]
        spark.createDataFrame(rows, "key binary, value binary").coalesce(1).write.format("kafka") \
            .options(**tls).option("topic", s["topic"]).save()
        marks["write"] = time.monotonic() - t0
        # the source (batch), over each listener; over SASL_PLAINTEXT nothing but the bootstrap servers
        for name, opts in (("read_plain", {"kafka.bootstrap.servers": s["bootstrap"]}), ("read_tls", tls)):
            got = spark.read.format("kafka").options(**opts).option("subscribe", s["topic"]).load() \
                .select("key", "value", "offset").collect()
            out[name] = [[bytes(r.key).hex(), bytes(r.value).hex(), r.offset]
                         for r in sorted(got, key=lambda r: r.offset)]
        marks["read"] = time.monotonic() - t0
        # Structured Streaming: the micro-batch source over SASL_PLAINTEXT into the streaming sink
        # over SASL_SSL (availableNow: everything there now, then the query stops)
        q = spark.readStream.format("kafka").option("kafka.bootstrap.servers", s["bootstrap"]) \
            .option("subscribe", s["topic"]).option("startingOffsets", "earliest").load() \
            .select("key", "value").writeStream.format("kafka").options(**tls) \
            .option("topic", s["stream_topic"]).option("checkpointLocation", s["checkpoint"]) \
            .trigger(availableNow=True).start()
        q.awaitTermination(120)
        out["stream_exception"] = None if q.exception() is None else str(q.exception())
        marks["stream"] = time.monotonic() - t0
        out["seconds"] = {k: round(v, 1) for k, v in marks.items()}
    finally:
        spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
