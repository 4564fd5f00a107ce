"""Measure the generated codecs (prints numbers; not a test).

Compares pykbroker's codecs (spec -> Python source -> exec, lazily per API/version/direction)
with kafka-python 3.0's protocol classes, which interpret the same Kafka JSON schemas field by
field at run time.  Reports: import time, one-off compile cost per version, and decode/encode
throughput for a Metadata response (many small fields) and a Produce request.

    python compat/bench/micro/bench_codec.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def per_op(fn, n):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def main():
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pykbroker.protocol.codec"],
                         capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    line = [ln for ln in out.stderr.splitlines() if ln.rstrip().endswith("pykbroker.protocol.codec")][-1]
    print("import pykbroker.protocol.codec: %.1f ms (cumulative)" % (int(line.split("|")[1]) / 1000))

    from pykbroker.protocol import codec
    from pykbroker.protocol.codec import APIS

    t = time.perf_counter()
    n = 0
    for api in APIS.values():
        for v in range(api.min_version, api.max_version + 1):
            for kind in ("request", "response"):
                for d in ("decode", "encode"):
                    codec._compile(api.request if kind == "request" else api.response, v, api.flexible(v), d)
                    n += 1
    print("compile every (api, version, kind, direction): %d codecs, %.2f ms each" %
          (n, (time.perf_counter() - t) / n * 1000))

    meta = APIS[3]
    msg = {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
           "cluster_id": "abc", "controller_id": 1,
           "topics": [{"error_code": 0, "name": "topic-%d" % i, "topic_id": os.urandom(16), "is_internal": False,
                       "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                                       "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
                                      for p in range(6)], "topic_authorized_operations": -2147483648}
                      for i in range(50)]}
    for v in (1, 9, 12):
        data = meta.encode_bytes("response", v, msg)
        dec = per_op(lambda: meta.decode("response", v, data), 300)
        enc = per_op(lambda: meta.encode_bytes("response", v, msg), 300)
        line = "Metadata v%-2d response (50 topics x 6 partitions, %d bytes): pykbroker decode %.0f us, encode %.0f us" % (
            v, len(data), dec, enc)
        try:
            from kafka.protocol.metadata import MetadataResponse
            kp = per_op(lambda: MetadataResponse.decode(data, version=v), 50)
            line += "; kafka-python decode %.0f us (%.1fx)" % (kp, kp / dec)
        except Exception as e:  # kafka-python's classes are optional for this tool
            line += "; kafka-python: %s" % type(e).__name__
        print(line)

    prod = APIS[0]
    req = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": p, "records": os.urandom(16384)} for p in range(3)]}]}
    for v in (3, 9, 11):
        data = prod.encode_bytes("request", v, req)
        dec = per_op(lambda: prod.decode("request", v, data), 2000)
        print("Produce v%-2d request (3 x 16 KiB record sets): pykbroker decode %.1f us (records stay zero-copy views)" % (v, dec))


if __name__ == "__main__":
    main()
