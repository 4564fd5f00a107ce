#!/usr/bin/env python3
"""Does Spark's Kafka delegation-token provider obtain a token from pykbroker on this machine?

    python3 compat/spark/delegation_token_probe.py            # Hadoop security off (Spark's default)
    python3 compat/spark/delegation_token_probe.py kerberos   # hadoop.security.authentication=kerberos

A SASL_PLAINTEXT pykbroker with delegation tokens on; a local PySpark session configured with
``spark.kafka.clusters.c1.*`` (the token provider's cluster) reads a topic as a PLAIN user.  The
script prints the rows read, whether Hadoop security is on, the tokens in Spark's credentials
and the tokens the broker stored.  Measured with PySpark 4.0.0: without Kerberos Spark asks for
no token (0 in its credentials, 0 stored; ``HadoopDelegationTokenManager`` obtains tokens only
when the real user has Kerberos credentials); with ``kerberos`` the SparkContext does not start
("Can't get Kerberos realm": there is no KDC here).  SKIPPED.md (Security) keeps the result.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pykbroker  # noqa: E402
from pykbroker.embedded import TEST_CONFIG  # noqa: E402
from pykbroker.pipeline.spark import build_session  # noqa: E402


def main() -> None:
    cfg = dict(TEST_CONFIG, **{"delegation.token.secret.key": "spark-secret"})
    with pykbroker.Broker(security="SASL_PLAINTEXT", users={"alice": "alice-secret"}, config=cfg,
                          mechanisms=["PLAIN", "SCRAM-SHA-512"]) as b:
        from confluent_kafka import Producer
        pr = Producer(b.client_config("alice", "PLAIN"))
        for v in (b"v1", b"v2"):
            pr.produce("spark-dt", v)
        assert pr.flush(20) == 0
        conf = {"spark.kafka.clusters.c1.auth.bootstrap.servers": b.bootstrap_servers,
                "spark.kafka.clusters.c1.security.protocol": "SASL_PLAINTEXT",
                "spark.kafka.clusters.c1.sasl.token.mechanism": "SCRAM-SHA-512",
                "spark.security.credentials.kafka.enabled": "true"}
        if sys.argv[1:] == ["kerberos"]:
            conf["spark.hadoop.hadoop.security.authentication"] = "kerberos"
        jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'
        spark = build_session("delegation-token-probe", conf=conf)
        try:
            df = (spark.read.format("kafka").option("kafka.bootstrap.servers", b.bootstrap_servers)
                  .option("kafka.security.protocol", "SASL_PLAINTEXT").option("kafka.sasl.mechanism", "PLAIN")
                  .option("kafka.sasl.jaas.config", jaas).option("subscribe", "spark-dt").load())
            print("rows read:", df.count())
            ugi = spark._jvm.org.apache.hadoop.security.UserGroupInformation
            print("hadoop security enabled:", ugi.isSecurityEnabled())
            print("tokens in Spark's credentials:", ugi.getCurrentUser().getCredentials().numberOfTokens())
        finally:
            spark.stop()
        print("tokens stored by pykbroker:", len(b.broker.controller.delegation_tokens()))


if __name__ == "__main__":
    main()
