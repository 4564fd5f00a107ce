"""The same consumer against several brokers over the *same* batches (consume-small-records.md).

    python compat/bench/fetch_compare.py copy  --segment DIR/t-0/00000000000000000000.log --topic same A B ...
    python compat/bench/fetch_compare.py sizes --topic same A B          # answer sizes, fetch by fetch
    python compat/bench/fetch_compare.py rounds --topic same --records N --rounds 6 A B [-- k=v ...]

``A``, ``B``: bootstrap addresses (a pykbroker, an Apache Kafka, ...), already running.  ``copy``
produces every batch of a segment file, byte for byte (base offset zeroed, as a producer sends
it), to a new one-partition topic on each broker: the harness's preload differs per broker
(the producer batches by how fast each broker acknowledges), this takes that out.  ``sizes``
walks partition 0 with raw Fetches (1 MiB per partition) and prints each answer's bytes, whole
batches and partial tail.  ``rounds`` runs the loadgen's catch-up consumer settings on each broker
in turn (the order rotating), with librdkafka's statistics and its ``fetch`` debug log, and prints
per run: seconds, Fetch requests, bytes received and how often librdkafka backed off because its
queue was full ("Queue full": ``queued.min.messages`` reached, ``fetch.queue.backoff.ms``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pykbroker.protocol import wire  # noqa: E402

MiB = 1 << 20


def _batches(data: bytes):
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            return pos
        yield base, struct.unpack_from(">i", data, pos + 57)[0], pos, 12 + length
        pos += 12 + length
    return pos


def cmd_copy(a) -> None:
    data = Path(a.segment).read_bytes()
    batches = [b"\0" * 8 + data[pos + 8:pos + size] for _, _, pos, size in _batches(data)]
    for bs in a.brokers:
        with wire.WireClient(bs) as c:
            wire.create_topic(c, a.topic, 1)
            wire.wait_for_topic(c, a.topic, 1)
            for b in batches:
                r = wire.produce_part(wire.produce(c, a.topic, 0, b, acks=1))
                if r["error_code"]:
                    raise SystemExit("%s: produce error %d" % (bs, r["error_code"]))
        print("%s: %d batches, %d bytes" % (bs, len(batches), sum(map(len, batches))))


def cmd_sizes(a) -> None:
    for bs in a.brokers:
        rows = []
        with wire.WireClient(bs) as c:
            off = 0
            while True:
                data = bytes(wire.fetch_part(wire.fetch(c, a.topic, 0, off, partition_max_bytes=a.max_bytes))["records"]
                             or b"")
                if not data:
                    break
                whole = list(_batches(data))
                end = whole[-1][2] + whole[-1][3]
                rows.append((off, len(data), len(whole), len(data) - end))
                off = whole[-1][0] + whole[-1][1]
        print(json.dumps({"broker": bs, "fetches": len(rows), "bytes": sum(r[1] for r in rows),
                          "with_partial_tail": sum(1 for r in rows if r[3]),
                          "answers": [{"offset": o, "bytes": n, "whole_batches": w, "partial_bytes": p}
                                      for o, n, w, p in rows]}))


CONSUMER = r'''
import json, os, sys, time
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
bs, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
stats = []
conf = {"bootstrap.servers": bs, "group.id": "cmp-%d" % os.getpid(), "enable.auto.commit": False,
        "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 1 << 20, "fetch.wait.max.ms": 100,
        "statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(s), "debug": "fetch"}
conf.update(dict(kv.split("=", 1) for kv in sys.argv[4:]))
c = Consumer(conf)
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
got, t0 = 0, time.perf_counter()
while got < n and time.perf_counter() < t0 + 120:
    got += sum(1 for m in c.consume(min(10000, n - got), 1.0) if m.error() is None)
dt = time.perf_counter() - t0
c.poll(0.2)
c.close()
b = [v for v in json.loads(stats[-1])["brokers"].values() if v["nodeid"] >= 0][0]
print(json.dumps({"records": got, "seconds": dt, "fetches": b["req"]["Fetch"], "rxbytes": b["rxbytes"]}))
'''


def cmd_rounds(a) -> None:
    n = len(a.brokers)
    for i in range(a.rounds):
        order = a.brokers[i % n:] + a.brokers[:i % n]
        for bs in order:
            r = subprocess.run([sys.executable, "-c", CONSUMER, bs, a.topic, str(a.records)] + a.conf,
                               capture_output=True, text=True, timeout=300)
            out = json.loads(r.stdout.strip().splitlines()[-1])
            out.update(round=i + 1, broker=bs, queue_full_backoffs=len(re.findall("Queue full", r.stderr)),
                       load=os.getloadavg()[0])
            print(json.dumps(out), flush=True)
            time.sleep(0.2)


def split_client_conf(argv: list) -> tuple[list, list]:
    """(the tool's own arguments, the librdkafka settings after ``--`` for every consumer it
    starts, e.g. ``fetch.queue.backoff.ms=10``)."""
    if "--" not in argv:
        return list(argv), []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("copy")
    p.add_argument("--segment", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("brokers", nargs="+")
    p = sub.add_parser("sizes")
    p.add_argument("--topic", required=True)
    p.add_argument("--max-bytes", type=int, default=MiB)
    p.add_argument("brokers", nargs="+")
    p = sub.add_parser("rounds")
    p.add_argument("--topic", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("brokers", nargs="+")
    argv, conf = split_client_conf(sys.argv[1:] if argv is None else argv)
    a = ap.parse_args(argv)
    a.conf = conf
    {"copy": cmd_copy, "sizes": cmd_sizes, "rounds": cmd_rounds}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
