"""Cost of a topic ``compression.type`` other than ``producer``, pykbroker next to Apache Kafka
(prints numbers; not a test).

    python compat/bench/micro/bench_recompress.py [--records 50000] [--size 1024] [--codec lz4] [--no-kafka]

A confluent-kafka producer (linger 5 ms, acks=1) writes ``--records`` records of ``--size`` bytes
(half random, half repeated, so they compress) in the producer's codec ``--codec`` to two topics
on each broker: ``compression.type=producer`` (batches stored as sent) and
``compression.type=zstd`` (every batch rewritten by the broker record by record).  Printed: MB/s
and records/s of each cell and the ratio recompressing/as-sent per broker; pykbroker's rewrite
runs in Python (decode + encode + zstd), Kafka's in the JVM.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "compat", "kafka"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from pykbroker.local.broker_process import BrokerProcess  # noqa: E402


def run_cell(bootstrap: str, topic_codec: str, args) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "rc-%s-%s" % (topic_codec, uuid.uuid4().hex[:6])
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": topic_codec})])[topic].result(30)
    time.sleep(1.0)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "compression.type": args.codec,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000})
    half = args.size // 2
    value = os.urandom(half) + b"x" * (args.size - half)
    p.produce(topic, value=value)   # warm-up: metadata and connection
    p.flush(30)
    errors = []
    t0 = time.perf_counter()
    for i in range(args.records):
        while True:
            try:
                p.produce(topic, key=b"%d" % i, value=value,
                          on_delivery=lambda e, m: e is not None and errors.append(e))
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    dt = time.perf_counter() - t0
    if errors:
        raise SystemExit("%d delivery errors, first: %s" % (len(errors), errors[0]))
    return dt


def bench(name: str, bootstrap: str, args) -> None:
    out = {}
    for codec in ("producer", "zstd"):
        dt = run_cell(bootstrap, codec, args)
        mb = args.records * args.size / dt / 1e6
        out[codec] = mb
        print("  %-10s compression.type=%-8s %7.1f MB/s  %9.0f records/s" % (name, codec, mb, args.records / dt))
    print("  %-10s recompressing / as sent: %.2f" % (name, out["zstd"] / out["producer"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--codec", default="lz4", help="the producer's compression.type")
    ap.add_argument("--no-kafka", action="store_true")
    args = ap.parse_args()
    print("producer codec %s, %d records of %d B, one partition, acks=1 (load average %.2f)"
          % (args.codec, args.records, args.size, os.getloadavg()[0]))
    with tempfile.TemporaryDirectory() as d:
        b = BrokerProcess(os.path.join(d, "pyk"), {}).start()
        try:
            bench("pykbroker", b.bootstrap, args)
        finally:
            b.stop()
        if args.no_kafka:
            return
        from oracle import KafkaOracle
        k = KafkaOracle(os.path.join(d, "kafka"), {}).start()
        try:
            bench("kafka", k.bootstrap, args)
        finally:
            k.stop()


if __name__ == "__main__":
    main()
