"""Spark's Kafka delegation-token path against pykbroker (``spark.kafka.clusters.<id>.*``).

A real MIT KDC (pykbroker/testing/kdc.py) holds the broker's service key and Spark's principal
``spark@PYKBROKER.TEST``; the broker's SASL_PLAINTEXT listener serves GSSAPI and SCRAM-SHA-512
with Kafka's StandardAuthorizer, a super user ``admin`` (SCRAM password) and ``User:spark``
allowed only its topic and the connector's groups.  ``spark`` has no SCRAM password: it can
authenticate with SCRAM only through a delegation token.

A PySpark driver of its own (tests/spark/delegation_token_job.py: Spark's delegation-token
settings, Kerberos and the JVM's krb5.conf are process-wide, so they stay out of the suite's
shared SparkSession) has Spark's HadoopDelegationTokenManager obtain the token
(KafkaDelegationTokenProvider: an AdminClient logging in from the keytab, CreateDelegationToken),
hands it to the driver as the YARN/Kubernetes scheduler backends do, then writes and reads a
topic with only ``kafka.bootstrap.servers`` set: the connector authenticates with the token.

Checked: the broker created the token for ``User:spark`` (its log; DescribeDelegationToken by
the super user's separate Admin names the same id, owner and HMAC); every connection Spark's
sink and source made after that authenticated as ``User:spark`` with SCRAM-SHA-512 and the
token; confluent-kafka, as the super user, reads back byte-exact what Spark wrote; Spark read the
same records back.  Run time: ~30 s (one JVM start, the connector's jars from the Ivy cache).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import needs

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
    why = Kdc.missing()
    if why is None:
        try:
            import gssapi  # noqa: F401
        except ImportError:
            why = "the gssapi package (pip install 'pykbroker[kerberos]'; it builds against libkrb5-dev)"
    if why:
        needs.skip_missing(why)
    with Kdc() as k:
        k.keytabs = {"kafka": k.add_principal("kafka/localhost"), "spark": k.add_principal("spark")}
        yield k


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def broker(kdc):
    mp = pytest.MonkeyPatch()
    mp.setenv("KRB5_CONFIG", kdc.krb5_conf)   # MIT's library in this process reads the test realm
    port = _free_port()
    # Kerberos clients name the service kafka/<the host they connect to>: advertised as localhost
    cfg = {**TEST_CONFIG, "listeners": "SASL_PLAINTEXT://127.0.0.1:%d" % port,
           "advertised.listeners": "SASL_PLAINTEXT://localhost:%d" % port,
           "sasl.enabled.mechanisms": "GSSAPI,SCRAM-SHA-512", "sasl.kerberos.service.name": "kafka",
           "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
               'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
               'keyTab="%s" principal="kafka/localhost@%s";' % (kdc.keytabs["kafka"], kdc.realm),
           "delegation.token.secret.key": "spark-token-secret",
           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:" + ADMIN, "allow.everyone.if.no.acl.found": "false"}
    try:
        with pykbroker.Broker(port=port, security="SASL_PLAINTEXT", users={ADMIN: ADMIN_PASSWORD},
                              mechanisms=["SCRAM-SHA-512"], config=cfg) as b:
            yield b, "localhost:%d" % port
    finally:
        mp.undo()


def _admin_config(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD}


def test_spark_obtains_a_delegation_token_and_reads_and_writes_with_it(kdc, broker, tmp_path, caplog):
    from confluent_kafka import Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING
    from confluent_kafka.admin import AdminClient, NewTopic

    b, bootstrap = broker
    topic = unique("dt")
    admin = AdminClient(_admin_config(bootstrap))   # kept: its futures die with it
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    # spark may only write and read its topic, with the connector's generated group ids
    b.acls.allow("User:spark", "WRITE", topic=topic)
    b.acls.allow("User:spark", "READ", topic=topic)
    b.acls.allow("User:spark", "READ", group="spark-kafka-", pattern="PREFIXED")

    records = [(b"k-%d" % i, bytes(range(256))[i:] + ("é✓ %d" % i).encode()) for i in range(12)]
    records.append((b"\x00\xff", b""))
    settings = tmp_path / "job.json"
    settings.write_text(json.dumps({
        "bootstrap": bootstrap, "krb5_conf": kdc.krb5_conf, "keytab": kdc.keytabs["spark"],
        "principal": "spark@" + kdc.realm, "topic": topic, "admin": ADMIN, "admin_password": ADMIN_PASSWORD,
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

    # Spark's provider obtained one token, as a Hadoop token of its cluster's service (the
    # provider logs a failed CreateDelegationToken as a warning and obtains none)
    assert len(out["tokens"]) == 1, r.stderr[-6000:]
    (token,) = out["tokens"]
    assert token["kind"] == "KAFKA_DELEGATION_TOKEN", (token, r.stderr[-4000:])
    assert token["service"] == "kafka.server.delegation.token.pykbroker"
    messages = [rec.getMessage() for rec in caplog.records]
    # ...created on pykbroker by Spark's Kerberos login (owner and requester User:spark)
    assert ("Created a delegation token: %s for owner: User:spark (requester User:spark)" % token["token_id"]
            in messages), messages
    # DescribeDelegationToken through another client (the super user's own Admin) names it
    (described,) = [t for t in out["described"] if t["token_id"] == token["token_id"]]
    assert described["owner"] == "User:spark" and described["requester"] == "User:spark"
    assert described["hmac_b64"] == token["hmac_b64"]

    created = messages.index("Created a delegation token: %s for owner: User:spark (requester User:spark)"
                             % token["token_id"])
    # the provider's AdminClient logged in with Kerberos (the keytab) before it asked
    assert any(m.endswith("authenticated as User:spark with GSSAPI") for m in messages[:created]), messages
    # every authentication as spark after that (the sink's producer, the source's admin client
    # and consumers) used SCRAM with the token
    spark_logins = [m for m in messages[created:] if "authenticated as User:spark with" in m]
    assert spark_logins, messages
    assert all(m.endswith("with SCRAM-SHA-512 (delegation token %s)" % token["token_id"]) for m in spark_logins), \
        spark_logins

    # a separate real client reads back byte-exact what Spark wrote
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
                if m.error().code() == KafkaError._PARTITION_EOF and len(seen) >= len(records):
                    break
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            seen.append((m.key(), m.value() or b""))
    finally:
        c.close()
    assert seen == records
    # ...and Spark's source read the same back with the token
    assert [(bytes.fromhex(k), bytes.fromhex(v)) for k, v, _ in out["read"]] == records
