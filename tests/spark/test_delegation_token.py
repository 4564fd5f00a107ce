"""Spark's Kafka delegation-token path against pykbroker (``spark.kafka.clusters.<id>.*``).

A real MIT KDC (pykbroker/testing/kdc.py) holds the broker's service key and Spark's principal
``spark@PYKBROKER.TEST``; the broker's SASL_PLAINTEXT and SASL_SSL listeners serve GSSAPI and
SCRAM-SHA-512, with Kafka's StandardAuthorizer, a super user ``admin`` (SCRAM password) and
``User:spark`` allowed only its topics and the connector's groups.  ``spark`` has no SCRAM
password: it can authenticate with SCRAM only through a delegation token.

A PySpark driver of its own (tests/spark/delegation_token_job.py: Spark's token settings, its
Kerberos login and the JVM's krb5.conf are process-wide, so they stay out of the suite's shared
SparkSession) has Spark's HadoopDelegationTokenManager obtain a token per configured cluster (one
per listener; KafkaDelegationTokenProvider: an AdminClient logging in from the keytab, over TLS
with the cluster's ``ssl.truststore.*`` for the SASL_SSL one, asks CreateDelegationToken), hands
them to the driver as the YARN/Kubernetes scheduler backends do, then writes (batch, over
SASL_SSL), reads (batch, over each listener) and streams (micro-batch source over SASL_PLAINTEXT
into the streaming sink over SASL_SSL) with only ``kafka.bootstrap.servers`` (and, over TLS, the
truststore) set: the connector logs in with the token whose cluster's
``target.bootstrap.servers.regex`` matches.

Checked: the broker created both tokens for ``User:spark`` after Kerberos logins (its log;
DescribeDelegationToken by the super user's separate Admin names the same ids, owner and HMACs);
every later login as ``User:spark`` was SCRAM-SHA-512 with one of the tokens, and both were used;
confluent-kafka, as the super user, reads back byte-exact what Spark's batch and streaming sinks
wrote; Spark's batch source read the same back over both listeners.  Run time: ~35 s on a quiet
machine, ~50 s under load (one JVM: session start ~20 s, the first job's warm-up ~10 s).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import needs
from tests.ports import free_port

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.testing.kdc import Kdc

from .conftest import AGAINST_KAFKA
from .util import skip_in_quick_mode, unique

pytestmark = [skip_in_quick_mode, pytest.mark.timeout(300),
              pytest.mark.skipif(AGAINST_KAFKA, reason="a Kerberized pykbroker of its own")]

JOB = Path(__file__).with_name("delegation_token_job.py")
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"


@pytest.fixture(scope="module")
def kdc():
    needs.require_kerberos()
    with Kdc() as k:
        k.keytabs = {"kafka": k.add_principal("kafka/localhost"), "spark": k.add_principal("spark")}
        yield k


@pytest.fixture(scope="module")
def broker(kdc):
    """Two listeners, SASL_PLAINTEXT and SASL_SSL (the throw-away CA's certificate for
    localhost), each serving GSSAPI and SCRAM-SHA-512."""
    mp = pytest.MonkeyPatch()
    mp.setenv("KRB5_CONFIG", kdc.krb5_conf)   # MIT's library in this process reads the test realm
    plain, tls = free_port(), free_port()
    jaas = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
            'keyTab="%s" principal="kafka/localhost@%s";' % (kdc.keytabs["kafka"], kdc.realm))
    # Kerberos clients name the service kafka/<the host they connect to>: advertised as localhost
    cfg = {**TEST_CONFIG, "listeners": "SASL_PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d" % (plain, tls),
           "advertised.listeners": "SASL_PLAINTEXT://localhost:%d,SASL_SSL://localhost:%d" % (plain, tls),
           "sasl.enabled.mechanisms": "GSSAPI,SCRAM-SHA-512", "sasl.kerberos.service.name": "kafka",
           "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
           "listener.name.sasl_ssl.gssapi.sasl.jaas.config": jaas,
           "delegation.token.secret.key": "spark-token-secret",
           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:" + ADMIN, "allow.everyone.if.no.acl.found": "false"}
    try:
        with pykbroker.Broker(port=plain, security="SASL_SSL", users={ADMIN: ADMIN_PASSWORD},
                              mechanisms=["SCRAM-SHA-512"], config=cfg) as b:
            yield b, "localhost:%d" % plain, "localhost:%d" % tls
    finally:
        mp.undo()


def _admin_config(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD}


def _read_back(bootstrap: str, topic: str) -> list:
    """(key, value) of every record of partition 0, through confluent-kafka as the super user."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING

    c = Consumer({**_admin_config(bootstrap), "group.id": unique("check"), "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = []
    try:
        for _ in range(60):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            seen.append((m.key(), m.value() or b""))
    finally:
        c.close()
    return seen


def test_spark_obtains_a_delegation_token_and_reads_and_writes_with_it(kdc, broker, tmp_path, caplog):
    from confluent_kafka.admin import AdminClient, NewTopic

    b, bootstrap, bootstrap_tls = broker
    topic, stream_topic = unique("dt"), unique("dt-stream")
    admin = AdminClient(_admin_config(bootstrap))   # kept: its futures die with it
    for t in (topic, stream_topic):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(15)
        # spark may only write and read its topics, with the connector's generated group ids
        b.acls.allow("User:spark", "WRITE", topic=t)
        b.acls.allow("User:spark", "READ", topic=t)
    b.acls.allow("User:spark", "READ", group="spark-kafka-", pattern="PREFIXED")

    records = [(b"k-%d" % i, bytes(range(256))[i:] + ("é✓ %d" % i).encode()) for i in range(12)]
    records.append((b"\x00\xff", b""))
    settings = tmp_path / "job.json"
    settings.write_text(json.dumps({
        "bootstrap": bootstrap, "bootstrap_tls": bootstrap_tls,
        "ca_file": b.spark_options(ADMIN)["kafka.ssl.truststore.location"],   # the throw-away CA (PEM)
        "krb5_conf": kdc.krb5_conf, "keytab": kdc.keytabs["spark"],
        "principal": "spark@" + kdc.realm, "topic": topic, "stream_topic": stream_topic,
        "checkpoint": str(tmp_path / "checkpoint"), "admin": ADMIN, "admin_password": ADMIN_PASSWORD,
        "records": [(k.hex(), v.hex()) for k, v in records]}))
    caplog.set_level(logging.DEBUG, logger="pykbroker.security")
    env = kdc.env(PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                           os.environ.get("PYTHONPATH")])),
                  SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run([sys.executable, str(JOB), str(settings)], capture_output=True, text=True,
                       env=env, timeout=240)
    result = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and result, (r.stdout[-3000:], r.stderr[-6000:])
    out = json.loads(result[0][len("RESULT "):])

    # Spark's provider obtained a token per cluster, as a Hadoop token of the cluster's service
    # (it logs a failed CreateDelegationToken as a warning and obtains none)
    tokens = {t["service"]: t for t in out["tokens"]}
    assert sorted(tokens) == ["kafka.server.delegation.token.plain", "kafka.server.delegation.token.tls"], \
        (out["tokens"], r.stderr[-6000:])
    assert {t["kind"] for t in tokens.values()} == {"KAFKA_DELEGATION_TOKEN"}
    ids = {t["token_id"] for t in tokens.values()}
    assert len(ids) == 2
    messages = [rec.getMessage() for rec in caplog.records]
    created = []
    for t in tokens.values():
        # ...created on pykbroker by Spark's Kerberos login (owner and requester User:spark)
        line = "Created a delegation token: %s for owner: User:spark (requester User:spark)" % t["token_id"]
        assert line in messages, messages
        created.append(messages.index(line))
        # DescribeDelegationToken through another client (the super user's own Admin) names it
        (described,) = [d for d in out["described"] if d["token_id"] == t["token_id"]]
        assert described["owner"] == "User:spark" and described["requester"] == "User:spark"
        assert described["hmac_b64"] == t["hmac_b64"]
    # the provider's AdminClients logged in with Kerberos (the keytab) before they asked
    assert any(m.endswith("authenticated as User:spark with GSSAPI") for m in messages[:min(created)]), messages
    # every authentication as spark after that (the sink's producer, the sources' admin clients
    # and consumers, over both listeners) used SCRAM with one of the tokens, and both were used
    spark_logins = [m for m in messages[max(created):] if "authenticated as User:spark with" in m]
    used = {m.rsplit("(delegation token ", 1)[-1].rstrip(")") for m in spark_logins}
    assert all(" with SCRAM-SHA-512 (delegation token " in m for m in spark_logins), spark_logins
    assert used == ids, spark_logins

    # a separate real client reads back byte-exact what Spark's batch and streaming sinks wrote
    assert _read_back(bootstrap, topic) == records
    assert out["stream_exception"] is None, out["stream_exception"]
    assert _read_back(bootstrap, stream_topic) == records
    # ...and Spark's source read the same back with the tokens, over each listener
    for name in ("read_plain", "read_tls"):
        assert [(bytes.fromhex(k), bytes.fromhex(v)) for k, v, _ in out[name]] == records, name
