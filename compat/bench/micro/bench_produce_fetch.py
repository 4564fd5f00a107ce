"""Produce/Fetch throughput of a real pykbroker process over loopback (prints numbers; not a test).

    python compat/bench/micro/bench_produce_fetch.py [--mb 200] [--batch-kib 16] [--pipeline 8]

Produce: pre-built 16 KiB batches (kafka-python's record builder), acks=1, ``--pipeline``
requests in flight on one connection.  Fetch: one consumer connection reading everything back
with 1 MiB partition limits (served with sendfile).  Also reports the produce round-trip latency
of a single small batch (p50/p99).
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))

from pykbroker.local.broker_process import BrokerProcess  # noqa: E402
from pykbroker.protocol.wire import WireClient, create_topic, fetch, fetch_part, make_batch, produce  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description="Produce/Fetch throughput of a pykbroker process")
    ap.add_argument("--mb", type=int, default=200, help="MiB to produce and fetch back")
    ap.add_argument("--batch-kib", type=int, default=16, help="size of each produced batch")
    ap.add_argument("--pipeline", type=int, default=8, help="produce requests in flight")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        broker = BrokerProcess(os.path.join(d, "data"), {}).start()
        try:
            create_topic(broker, "bench")
            rec = os.urandom(1000)
            per_batch = max(1, args.batch_kib * 1024 // 1010)
            batch = make_batch([rec] * per_batch)
            n = args.mb * 1024 * 1024 // len(batch)
            body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": "bench", "partition_data": [{"index": 0, "records": batch}]}]}
            with WireClient(broker, timeout=60) as c:
                t0 = time.perf_counter()
                inflight = []
                for _ in range(n):
                    inflight.append(c.send(0, 9, body))
                    if len(inflight) >= args.pipeline:
                        c.recv(0, 9, inflight.pop(0))
                for corr in inflight:
                    c.recv(0, 9, corr)
                dt = time.perf_counter() - t0
                total = n * len(batch)
                print("produce: %d batches of %d B (%d records each) in %.2fs = %.1f MB/s, %.0f batches/s"
                      % (n, len(batch), per_batch, dt, total / dt / 1e6, n / dt))
                lat = []
                small = dict(body, topic_data=[{"name": "bench", "partition_data": [
                    {"index": 0, "records": make_batch([b"x" * 100])}]}])
                for _ in range(500):
                    t1 = time.perf_counter()
                    c.request(0, 9, small)
                    lat.append((time.perf_counter() - t1) * 1e6)
                lat.sort()
                print("produce latency (1 small batch, acks=1): p50 %.0f us, p99 %.0f us"
                      % (statistics.median(lat), lat[int(len(lat) * 0.99)]))
            with WireClient(broker, timeout=60) as c:
                off, got = 0, 0
                t0 = time.perf_counter()
                while True:
                    f = fetch_part(fetch(c, "bench", 0, off, max_bytes=50 << 20, partition_max_bytes=1 << 20))
                    data = bytes(f["records"])
                    if not data:
                        break
                    got += len(data)
                    pos = 0
                    while pos + 12 <= len(data):
                        base, length = struct.unpack_from(">qi", data, pos)
                        if pos + 12 + length > len(data):
                            break
                        (delta,) = struct.unpack_from(">i", data, pos + 23)
                        off = base + delta + 1
                        pos += 12 + length
                dt = time.perf_counter() - t0
                print("fetch: %.1f MB in %.2fs = %.1f MB/s (decode of the response in Python included)"
                      % (got / 1e6, dt, got / dt / 1e6))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
