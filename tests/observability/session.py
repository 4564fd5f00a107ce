"""One confluent-kafka produce + consume session, the same against any broker (the traces of two
runs of it are compared with `pykbroker trace diff`)."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

N_RECORDS = 20


def create_topic(bootstrap: str, topic: str, partitions: int = 1, client_id: str = "rdkafka") -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic]
    fut.result(60)


def produce(bootstrap: str, topic: str, n: int = N_RECORDS, client_id: str = "trace-producer") -> None:
    # one batch per flush, no compression: the byte counts are the batch sizes
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "enable.idempotence": True,
                  "client.id": client_id})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=0, headers=[("h", b"x")])
    assert p.flush(60) == 0


def consume(bootstrap: str, topic: str, group: str, n: int = N_RECORDS, commit_upto: int | None = None,
            subscribe: bool = False, client_id: str = "trace-consumer") -> list:
    """Read ``n`` records with a group (``subscribe``: as a member of the classic group protocol,
    else by assignment); commit the offset after record ``commit_upto`` (or all)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": client_id})
    try:
        if subscribe:
            c.subscribe([topic])
        else:
            c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            got.append((m.offset(), m.key(), m.value()))
        upto = n if commit_upto is None else commit_upto
        c.commit(offsets=[TopicPartition(topic, 0, upto)], asynchronous=False)
    finally:
        c.close()
    return got


def wait_topic_ready(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Until the broker's metadata shows every partition of ``topic`` with a leader (Apache
    Kafka's metadata reaches its broker a moment after CreateTopics answers)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "warmup-admin"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and t.partitions and \
                all(p.leader >= 0 and p.error is None for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError("topic %s has no leader after %ss" % (topic, timeout))
