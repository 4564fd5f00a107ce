#!/usr/bin/env python3
"""What the authorizer costs a Fetch (and a Produce): pykbroker with Kafka's StandardAuthorizer
and the bench's 10,000 bindings against the same broker without it, per request (prints JSON
lines and a table; not a test).

    python compat/bench/micro/bench_acl_fetch.py [--pairs 6] [--mb 64] [--seconds 4] [--consume]

Both brokers run throughout (compat/bench/brokers.py ``PyKAcl`` and ``PyKNoAuth``), each with one
topic of ``--mb`` MiB of 1 KiB records (16 KiB batches).  Each pair, in alternating order:

* ``fetch``: one connection, a closed loop of Fetch v12 requests of 1 MiB (``partition_max_bytes``)
  for ``--seconds``, walking the log from offset 0 and wrapping (the answers are served with
  sendfile); the broker's CPU per request (every thread's time on a CPU,
  /proc/PID/task/*/schedstat) and the requests per second.
* ``session``: the same with a fetch session (epoch 0, then incremental requests naming the
  partition with its new offset), as librdkafka and the Java consumer fetch.
* ``produce``: a closed loop of acks=1 Produce requests of one 16 KiB batch.
* ``--consume``: a confluent-kafka consumer (compat/bench/loadgen.py consume, as bench.py's
  catch-up consumer) reading the whole topic: MB/s and broker CPU seconds per GB.

The table gives, per metric, the medians on and off and the median (min-max) of the per-pair
ratios on/off, and the CPU difference per request in microseconds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

from _boot import BENCH   # compat/bench and the repository root on sys.path
import brokers as B
from procstat import thread_cpu_seconds
from pykbroker.protocol.wire import WireClient, create_topic, decode_response, make_batch, request_frame

TOPIC = "bench-acl-micro"
ON, OFF = B.ON, B.OFF


cpu_seconds = thread_cpu_seconds   # every thread's time on a CPU (compat/bench/procstat.py)


def fill(bootstrap: str, mb: int) -> int:
    """The topic with ``mb`` MiB of 1 KiB records; returns its log end offset."""
    create_topic(bootstrap, TOPIC)
    per_batch = 16
    batch = make_batch([os.urandom(1024)] * per_batch)
    n = mb * 1024 * 1024 // (per_batch * 1024)
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    with WireClient(bootstrap, timeout=60) as c:
        inflight = []
        for _ in range(n):
            inflight.append(c.send(0, 9, body))
            if len(inflight) >= 8:
                c.recv(0, 9, inflight.pop(0))
        for corr in inflight:
            c.recv(0, 9, corr)
    return n * per_batch


def _fetch_body(offset: int, session_id: int = 0, epoch: int = -1) -> dict:
    return {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _next_offset(frame: bytes, end: int) -> tuple[int, int]:
    """The offset after the last whole batch of a one-partition Fetch v12 answer (batch headers
    read in place) and the session id; wraps to 0 at the log end."""
    r = decode_response(frame, 1, 12)
    part = r["responses"][0]["partitions"][0] if r["responses"] else None
    if part is None:   # an incremental answer with nothing new (cannot happen mid-log)
        return 0, r["session_id"]
    assert part["error_code"] == 0, part
    data = part["records"]
    pos, last = 0, None
    while pos + 61 <= len(data):
        length, = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + length > len(data):
            break
        base, = struct.unpack_from(">q", data, pos)
        last = base + struct.unpack_from(">i", data, pos + 23)[0] + 1
        pos += 12 + length
    return (0 if last is None or last >= end else last), r["session_id"]


def fetch_loop(bootstrap: str, pid: int, end: int, seconds: float, session: bool) -> dict:
    with WireClient(bootstrap, timeout=30) as c:
        offset, sid, epoch = 0, 0, (0 if session else -1)
        nbytes = n = 0
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        while True:
            body = _fetch_body(offset, sid, epoch)
            c.corr += 1
            c.sock.sendall(request_frame(1, 12, c.corr, body, c.client_id))
            frame = c.recv_frame()
            nbytes += len(frame)
            n += 1
            offset, got_sid = _next_offset(frame, end)
            if session:
                sid, epoch = got_sid, epoch + 1
                if offset == 0:   # wrapped: a full fetch again, closing the session (epoch 0)
                    epoch = 0
            if time.perf_counter() - t0 >= seconds:
                break
        c1, t1 = cpu_seconds(pid), time.perf_counter()
    return {"req_s": n / (t1 - t0), "cpu_us_per_req": (c1 - c0) / n * 1e6, "mb_per_req": nbytes / n / 1e6}


def produce_loop(bootstrap: str, pid: int, seconds: float) -> dict:
    batch = make_batch([os.urandom(1024)] * 16)
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    with WireClient(bootstrap, timeout=30) as c:
        frame_of = request_frame(0, 9, 1, body, c.client_id)
        n = 0
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            c.sock.sendall(frame_of)
            c.recv_frame()
            n += 1
        c1, t1 = cpu_seconds(pid), time.perf_counter()
    return {"req_s": n / (t1 - t0), "cpu_us_per_req": (c1 - c0) / n * 1e6}


def consume(bootstrap: str, pid: int, records: int) -> dict:
    cmd = [sys.executable, str(BENCH / "loadgen.py"), "consume", "--bootstrap", bootstrap, "--topic", TOPIC,
           "--records", str(records)]
    c0 = cpu_seconds(pid)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    c1 = cpu_seconds(pid)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    return {"mb_s": got["mb_s"], "cpu_s_per_gb": (c1 - c0) / (got["bytes"] / 1e9)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--bindings", type=int, default=B.BINDINGS)
    ap.add_argument("--consume", action="store_true", help="also a confluent-kafka catch-up consumer")
    ap.add_argument("--no-produce", action="store_true")
    ap.add_argument("--no-session", action="store_true")
    ap.add_argument("--aa", action="store_true",
                    help="control run: the 'on' broker without the authorizer too (the noise floor)")
    ap.add_argument("--out", help="write every run's JSON here")
    a = ap.parse_args(argv)
    result: dict = B.ab_result(vars(a))
    with B.acl_on_off("pykbroker-acl-micro-", None if a.aa else a.bindings) as targets:
        ends = {k: fill(t.bootstrap, a.mb) for k, t in targets.items()}
        for k, t in targets.items():   # warm-up (page cache, first requests), not recorded
            fetch_loop(t.bootstrap, t.pids()[0], ends[k], 1.0, False)
        runs: dict = {ON: [], OFF: []}
        for i, order in B.pair_orders(a.pairs):
            got: dict = {k: {} for k in order}
            for k in order:
                t = targets[k]
                pid = t.pids()[0]
                for kind, fn in (("fetch", lambda: fetch_loop(t.bootstrap, pid, ends[k], a.seconds, False)),
                                 ("session", lambda: fetch_loop(t.bootstrap, pid, ends[k], a.seconds, True)))[
                                     :1 if a.no_session else 2]:
                    for m, v in fn().items():
                        got[k]["%s_%s" % (kind, m)] = v
                if not a.no_produce:
                    for m, v in produce_loop(t.bootstrap, pid, a.seconds / 2).items():
                        got[k]["produce_%s" % m] = v
                if a.consume:
                    for m, v in consume(t.bootstrap, pid, ends[k]).items():
                        got[k]["consume_%s" % m] = v
            for k in order:
                runs[k].append(got[k])
                print(json.dumps({"pair": i, "broker": k, **{m: round(v, 3) for m, v in got[k].items()}}), flush=True)
        result["runs"] = runs
    rows = ["| metric | on | off | on/off per pair: median (min-max) | on - off (median of pairs) |",
            "|---|---|---|---|---|"]
    for m in runs[ON][0]:
        on_v = [r[m] for r in runs[ON]]
        off_v = [r[m] for r in runs[OFF]]
        ratios = [x / y for x, y in zip(on_v, off_v)]
        diffs = [x - y for x, y in zip(on_v, off_v)]
        rows.append("| %s | %.3f | %.3f | %.3f (%.2f-%.2f) | %+.3f |" % (
            m, statistics.median(on_v), statistics.median(off_v), statistics.median(ratios), min(ratios),
            max(ratios), statistics.median(diffs)))
    return B.ab_report(result, "\n".join(rows), a.out)

if __name__ == "__main__":
    sys.exit(main())
