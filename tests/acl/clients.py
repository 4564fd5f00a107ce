"""The broker of the authorization tests (tests/acl, the acls command of tests/tools) and the
confluent-kafka producer and consumer they drive as a principal: what was delivered and read, and
the error codes seen."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

import pykbroker
from pykbroker.embedded import TEST_CONFIG

# Kafka's StandardAuthorizer with admin as the super user: every other principal needs its ACLs
CONFIG = {**TEST_CONFIG, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "super.users": "User:admin"}


def authorizing_broker(users, config=CONFIG):
    """A SASL_PLAINTEXT (PLAIN) broker of ``users`` (name: password), not yet started."""
    return pykbroker.Broker(security="SASL_PLAINTEXT", users=users, mechanisms=["PLAIN"], config=config)

# the codes that tell a consumer it is not allowed (the topic's or the group's Read)
DENIED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


def produce(cfg, topic, values):
    """Delivery errors per value (None: delivered)."""
    p = Producer({**cfg, "message.timeout.ms": 5000, "retries": 0})
    errors = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    return errors


def consume(cfg, topic, group, n, timeout=15, stop_when_denied=False, commit=False):
    """(values read, error codes seen) reading ``n`` values of ``topic`` from the earliest offset
    as member of ``group``.  ``stop_when_denied``: stop at the first :data:`DENIED` code.
    ``commit``: commit what was read (synchronously), a commit error counted among the errors."""
    c = Consumer({**cfg, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, errors, deadline = [], [], time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error().code())
                if stop_when_denied and m.error().code() in DENIED:
                    break
                continue
            got.append(m.value())
        if commit and got:
            c.commit(asynchronous=False)
    except KafkaException as e:
        if not commit:
            raise
        errors.append(e.args[0].code())
    finally:
        c.close()
    return got, errors
