"""Cost of each flush setting on this machine (prints numbers; not a test).

    python compat/bench/micro/bench_durability.py [--seconds 5] [--records 10] [--record-bytes 100]

For each setting a real pykbroker process (real file system, fsync for real) gets produce
requests one at a time (acks=all, one batch of ``--records`` records per request, the next
request sent when the previous answer arrived), for ``--seconds``; reported: acknowledged
appends per second and the p50/p99 produce round trip.  Settings:

* ``flush.messages=1``        fsync before every acknowledgement;
* ``default``                 flush.messages = flush.ms = Long.MAX: never fsync while running;
* ``flush.ms=100``            fsync in the background every 100 ms
                              (log.flush.scheduler.interval.ms=100 so that the flusher runs).

The storage-only figure (``Log.append`` + flush policy, no network) is printed too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))

from pykbroker.protocol.records import Record, encode_batch  # noqa: E402
from pykbroker.storage.log_validator import validate_produce_records  # noqa: E402
from pykbroker.storage import LogConfig, load_log  # noqa: E402
from pykbroker.local.broker_process import BrokerProcess  # noqa: E402
from pykbroker.protocol.wire import WireClient, create_topic, make_batch, produce, produce_part  # noqa: E402

SETTINGS = [
    ("flush.messages=1", {"flush.messages": "1"}, {}),
    ("default", {}, {}),
    ("flush.ms=100", {"flush.ms": "100"}, {"log.flush.scheduler.interval.ms": "100"}),
]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def bench_broker(name, topic_cfg, broker_cfg, seconds, batch):
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        b = BrokerProcess(os.path.join(d, "data"), broker_cfg).start()
        try:
            create_topic(b, "bench", 1, topic_cfg)
            lat = []
            with WireClient(b) as c:
                for _ in range(20):   # warm-up
                    produce(c, "bench", 0, batch)
                end = time.perf_counter() + seconds
                while True:
                    t0 = time.perf_counter()
                    r = produce_part(produce(c, "bench", 0, batch))
                    t1 = time.perf_counter()
                    assert r["error_code"] == 0, r
                    lat.append(t1 - t0)
                    if t1 >= end:
                        break
        finally:
            b.stop()
    n = len(lat)
    return n / sum(lat), pct(lat, 0.5) * 1e3, pct(lat, 0.99) * 1e3


def bench_storage(name, flush_messages, seconds, raw):
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        lg = load_log(os.path.join(d, "t-0"), LogConfig(flush_interval_messages=flush_messages))
        lat = []
        end = time.perf_counter() + seconds
        while True:
            v = validate_produce_records(bytearray(raw), 1 << 20)
            t0 = time.perf_counter()
            lg.append(v, 0)
            t1 = time.perf_counter()
            lat.append(t1 - t0)
            if t1 >= end:
                break
        lg.close()
    return len(lat) / sum(lat), pct(lat, 0.5) * 1e3, pct(lat, 0.99) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--record-bytes", type=int, default=100)
    args = ap.parse_args()
    value = os.urandom(args.record_bytes)
    batch = make_batch([value] * args.records)
    raw = encode_batch([Record(None, 1_700_000_000_000, None, value, []) for _ in range(args.records)])
    print("batch: %d records x %d B (%d B on disk); %.0f s per setting; file system under %s"
          % (args.records, args.record_bytes, len(batch), args.seconds,
             os.environ.get("BENCH_DIR") or tempfile.gettempdir()))
    print("%-22s %14s %10s %10s" % ("broker (acks=all)", "appends/s", "p50 ms", "p99 ms"))
    for name, tcfg, bcfg in SETTINGS:
        r = bench_broker(name, tcfg, bcfg, args.seconds, batch)
        print("%-22s %14.0f %10.3f %10.3f" % (name, *r))
    print("%-22s %14s %10s %10s" % ("storage (Log.append)", "appends/s", "p50 ms", "p99 ms"))
    for name, fm in (("flush.messages=1", 1), ("default", (1 << 63) - 1)):
        r = bench_storage(name, fm, min(args.seconds, 3.0), raw)
        print("%-22s %14.0f %10.3f %10.3f" % (name, *r))


if __name__ == "__main__":
    main()
