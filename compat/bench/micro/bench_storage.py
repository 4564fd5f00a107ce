#!/usr/bin/env python3
"""Micro-benchmark of the storage hot paths (not a test).

    python compat/bench/micro/bench_storage.py [--batches N] [--records R] [--value-bytes V] [--codec C]

Measures validate_produce_records + Log.append (per-batch header parse, CRC,
in-place patch, pwrite; no fsync) and Log.read (offset -> FileRegion) plus
reading the regions' bytes with pread.
"""
import argparse
import sys
import os
import shutil
import tempfile
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

from pykbroker.protocol.records import Record, encode_batch
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import LogConfig, load_log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20000)
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--codec", type=int, default=0)
    ap.add_argument("--fetch-bytes", type=int, default=1 << 20)
    ap.add_argument("--segment-bytes", type=int, default=64 << 20)
    args = ap.parse_args()

    payload = encode_batch([Record(None, 1_700_000_000_000 + i, b"key-%d" % i,
                                   os.urandom(args.value_bytes // 2).hex().encode()[:args.value_bytes], [])
                            for i in range(args.records)], codec=args.codec)
    d = tempfile.mkdtemp(prefix="pykb-bench-")
    try:
        lg = load_log(os.path.join(d, "bench-0"), LogConfig(segment_bytes=args.segment_bytes))
        n = args.batches
        t = time.perf_counter()
        for _ in range(n):
            lg.append(validate_produce_records(payload, 1 << 20), 1)
        dt = time.perf_counter() - t
        total = n * len(payload)
        print(f"append: {n} batches of {len(payload)} B ({args.records} records): "
              f"{n / dt:,.0f} batches/s, {total / dt / 1e6:,.1f} MB/s, {dt / n * 1e6:.1f} us/batch")

        # read: consumer-style sequential fetches
        t = time.perf_counter()
        off, fetches, got = 0, 0, 0
        while off < lg.log_end_offset:
            regions = lg.read(off, args.fetch_bytes)
            fetches += 1
            for r in regions:
                got += r.length
            last = regions[-1]
            # next fetch offset: the log end of what we got (header scan of the last batch)
            seg = next(s for s in lg.segments if s.fd == last.fd)
            h = None
            for h, _ in seg.iter_batches(seg.offset_index.lookup_position(last.position + last.length - 1),
                                         last.position + last.length):
                pass
            off = h.last_offset + 1
        dt = time.perf_counter() - t
        print(f"read (FileRegion lookup): {fetches} fetches of <= {args.fetch_bytes} B: "
              f"{fetches / dt:,.0f} fetches/s, {got / dt / 1e6:,.1f} MB/s, {n / dt:,.0f} batches/s")

        t = time.perf_counter()
        got = 0
        off = 0
        for _ in range(fetches):
            for r in lg.read(0, args.fetch_bytes):
                got += len(r.read())
        dt = time.perf_counter() - t
        print(f"read + pread bytes: {got / dt / 1e6:,.1f} MB/s")

        t = time.perf_counter()
        lg.flush()
        print(f"flush (fsync {total / 1e6:.1f} MB): {time.perf_counter() - t:.3f} s")
        lg.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
