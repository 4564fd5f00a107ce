"""What an idle consumer's fetch costs over many partitions, with and without a fetch session
(KIP-227).

Starts one broker (``python -m pykbroker serve``), creates one topic of ``--partitions``
partitions with one record each, then sends ``--requests`` Fetch requests (``max_wait_ms`` 0, so
the broker's work is measured, not the long poll) from a consumer already at the end of every
partition: sessionless full fetches (every partition named and answered each time), then
incremental fetches on a session (nothing named, nothing answered).  Prints requests per second
and the request / response sizes.

Usage: python compat/bench/micro/bench_fetch_sessions.py [--partitions 1000] [--requests 300] [--version 12]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from pykbroker.protocol.codec import APIS  # noqa: E402
from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol import wire  # noqa: E402


def fetch_request(topic, topic_id, partitions, offset, session_id, epoch, version):
    ids = version >= 13
    parts = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in partitions]
    return {"cluster_id": None, "replica_id": -1, "replica_state": None, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 50 << 20, "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": parts}] if parts else [],
            "forgotten_topics_data": [], "rack_id": ""}


def run(c, n, make, version):
    size = len(APIS[1].encode_bytes("request", version, make(0)))
    t0 = time.perf_counter()
    resp_parts = 0
    for i in range(n):
        r = c.request(1, version, make(i))
        assert r["error_code"] == 0, r
        resp_parts = sum(len(t["partitions"]) for t in r["responses"])
    dt = time.perf_counter() - t0
    return n / dt, size, resp_parts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--version", type=int, default=12)
    a = ap.parse_args()
    topic = "bench-fs"
    with tempfile.TemporaryDirectory() as d:
        b = BrokerProcess(os.path.join(d, "data"), {}).start()
        try:
            with wire.WireClient(b.bootstrap, timeout=60) as c:
                wire.create_topic(c, topic, a.partitions)
                wire.wait_for_topic(c, topic, a.partitions, timeout=60)
                tid = wire.metadata(c, [topic])["topics"][0]["topic_id"]
                for p in range(a.partitions):
                    wire.produce(c, topic, p, wire.make_batch([b"x"]), acks=1)
                ps = list(range(a.partitions))
                full = run(c, a.requests, lambda i: fetch_request(topic, tid, ps, 1, 0, -1, a.version), a.version)
                sid = c.request(1, a.version, fetch_request(topic, tid, ps, 1, 0, 0, a.version))["session_id"]
                assert sid, "no session"
                inc = run(c, a.requests, lambda i: fetch_request(topic, tid, [], 1, sid, i + 1, a.version), a.version)
        finally:
            b.stop()
    print("idle consumer over %d partitions, Fetch v%d, max_wait_ms=0" % (a.partitions, a.version))
    print("  sessionless full fetch: %8.1f req/s, request %7d B, %4d partitions answered" % full)
    print("  incremental (session):  %8.1f req/s, request %7d B, %4d partitions answered" % inc)


if __name__ == "__main__":
    main()
