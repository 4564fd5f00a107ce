"""Scale checks of one pykbroker broker: many partitions, many idle connections.

    python compat/bench/scale.py                      # 100 topics x 100 partitions, 1,000 conns
    python compat/bench/scale.py --topics 20 --partitions 100 --nofile 512 --idle 5 --conns 0

1. Partitions: ``--topics`` x ``--partitions`` created with confluent-kafka's AdminClient, then
   ``--records`` records produced to every partition (confluent-kafka, acks=all) and every one
   read back by a consumer assigned to all of them, checked value by value.  The broker runs
   with ``RLIMIT_NOFILE`` lowered to ``--nofile`` (if given): its segment files stay inside the
   fd budget of ``pykbroker/storage/fdpool.py``.  Reports the broker's open fds (peak over the
   run, sampled from ``/proc/PID/fd``, and how many of them are segment files), RSS, and its CPU
   seconds over ``--idle`` seconds of idleness afterwards (``/proc/PID/stat``).
2. Per-request cost: the mean time of 500 acks=1 Produce requests to one partition and of 500
   Metadata requests for one topic, measured before the topics exist and after: nothing per
   request may cost O(all partitions), so the two should be about the same.
3. Connections: ``--conns`` raw TCP connections, each served one ApiVersions request, then held
   idle: RSS per connection, open fds, and the broker's CPU seconds over ``--idle`` seconds.

Prints one JSON object (also written to ``--out``).  tests/bench/test_scale.py runs a small
version of 1 with a lowered limit.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pykbroker.local.broker_process import BrokerProcess  # noqa: E402
from pykbroker.protocol.wire import (  # noqa: E402
    WireClient, make_batch, metadata, produce, produce_part, request_frame,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK   # utime + stime


def rss_mb(pid: int) -> float:
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * PAGE / 1e6


def fds(pid: int) -> tuple[int, int]:
    """(open fds, of which segment .log files)."""
    d = "/proc/%d/fd" % pid
    n = logs = 0
    for name in os.listdir(d):
        n += 1
        try:
            if os.readlink(os.path.join(d, name)).endswith(".log"):
                logs += 1
        except OSError:
            pass
    return n, logs


class FdSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = self.peak_logs = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                n, logs = fds(self.pid)
            except OSError:
                return
            self.peak, self.peak_logs = max(self.peak, n), max(self.peak_logs, logs)
            self.stop.wait(self.interval)


def idle_cpu(pid: int, seconds: float) -> float:
    c0 = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - c0


def per_request_ms(bootstrap: str, topic: str, n: int = 500) -> dict:
    """Mean ms of one acks=1 Produce to partition 0 and one Metadata for ``topic``."""
    with WireClient(bootstrap) as c:
        batch = make_batch([b"x" * 100])
        produce(c, topic, 0, batch, acks=1)
        t = time.perf_counter()
        for _ in range(n):
            r = produce_part(produce(c, topic, 0, batch, acks=1))
            assert r["error_code"] == 0, r
        p = (time.perf_counter() - t) / n * 1000
        t = time.perf_counter()
        for _ in range(n):
            metadata(c, [topic])
        m = (time.perf_counter() - t) / n * 1000
    return {"produce_ms": round(p, 3), "metadata_ms": round(m, 3)}


def create_topics(bootstrap: str, names: list, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), 10):   # ten topics per CreateTopics request
        futs = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i:i + 10]],
                                   operation_timeout=60, request_timeout=120)
        for f in futs.values():
            f.result(timeout=180)


def produce_all(bootstrap: str, names: list, partitions: int, records: int) -> int:
    from confluent_kafka import Producer
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "queue.buffering.max.messages": 1000000})

    def cb(err, msg):
        if err is not None:
            errors.append(err)
    sent = 0
    for t in names:
        for part in range(partitions):
            for r in range(records):
                p.produce(t, value=b"%s/%d/%d" % (t.encode(), part, r), partition=part, on_delivery=cb)
                sent += 1
        p.poll(0)
    left = p.flush(300)
    if left or errors:
        raise RuntimeError("produce: %d undelivered, errors %s" % (left, errors[:3]))
    return sent


def consume_all(bootstrap: str, names: list, partitions: int, records: int,
                timeout: float = 300.0, alive=None) -> int:
    """Reads every partition from offset 0 and checks every value; returns records read."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-check",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3})
    c.assign([TopicPartition(t, p, 0) for t in names for p in range(partitions)])
    seen: dict = {}
    want = len(names) * partitions * records
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < want:
            if time.monotonic() > deadline or (alive is not None and not alive()):
                raise RuntimeError("consume: %d of %d records read" % (n, want))
            for m in c.consume(10000, 1.0):
                if m.error():
                    raise RuntimeError(str(m.error()))
                k = (m.topic(), m.partition())
                i = seen.get(k, 0)
                expect = b"%s/%d/%d" % (m.topic().encode(), m.partition(), i)
                if m.value() != expect or m.offset() != i:
                    raise RuntimeError("%s offset %d: %r, expected %r at %d"
                                       % (k, m.offset(), m.value(), expect, i))
                seen[k] = i + 1
                n += 1
    finally:
        c.close()
    return n


def hold_connections(bootstrap: str, n: int) -> list:
    """n raw connections, each served one ApiVersions v0 request (a live Connection in the
    broker), returned open."""
    host, port = bootstrap.rsplit(":", 1)
    frame = request_frame(18, 0, 1, b"", client_id="scale-conns")
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=60)
        s.sendall(frame)
        socks.append(s)
    for s in socks:   # read every answer
        size = struct.unpack(">i", _recv(s, 4))[0]
        _recv(s, size)
    return socks


def _recv(s, n: int) -> bytes:
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise RuntimeError("connection closed")
        b += chunk
    return b


def run(a) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:   # this process holds the --conns sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    nofile = a.nofile

    def preexec():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    out: dict = {"topics": a.topics, "partitions_per_topic": a.partitions,
                 "partitions": a.topics * a.partitions, "records_per_partition": a.records,
                 "nofile": nofile or resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                 "loadavg_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="pyk-scale-") as d:
        # INFO: the "ready" line the helper waits for is an INFO line (the broker logs one
        # line per topic created, nothing per partition or request)
        b = BrokerProcess(d, log_level="INFO", overrides={"group.initial.rebalance.delay.ms": "0"},
                          preexec_fn=preexec)
        b.start(timeout=120)
        pid = b.proc.pid
        try:
            sampler = FdSampler(pid)
            sampler.start()
            out["rss_start_mb"] = round(rss_mb(pid), 1)
            out["fds_start"] = fds(pid)[0]
            with WireClient(b.bootstrap) as c:
                from pykbroker.protocol.wire import create_topic, wait_for_topic
                create_topic(c, "probe", 1)
                wait_for_topic(c, "probe", 1)
            if a.per_request:
                out["per_request_before"] = per_request_ms(b.bootstrap, "probe")
            names = ["scale-%03d" % i for i in range(a.topics)]
            t = time.monotonic()
            create_topics(b.bootstrap, names, a.partitions)
            out["create_seconds"] = round(time.monotonic() - t, 1)
            t = time.monotonic()
            out["produced"] = produce_all(b.bootstrap, names, a.partitions, a.records)
            out["produce_seconds"] = round(time.monotonic() - t, 1)
            t = time.monotonic()
            out["consumed"] = consume_all(b.bootstrap, names, a.partitions, a.records,
                                        alive=lambda: b.proc.poll() is None)
            out["consume_seconds"] = round(time.monotonic() - t, 1)
            if a.per_request:
                out["per_request_after"] = per_request_ms(b.bootstrap, "probe")
            time.sleep(2)   # let the clients' connections close
            sampler.stop.set()
            sampler.join()
            out["fds_peak"], out["segment_fds_peak"] = sampler.peak, sampler.peak_logs
            out["fds_after"], out["segment_fds_after"] = fds(pid)
            out["rss_after_partitions_mb"] = round(rss_mb(pid), 1)
            out["idle_seconds"] = a.idle
            out["idle_cpu_seconds_partitions"] = round(idle_cpu(pid, a.idle), 3)
            if a.conns:
                rss0, fds0 = rss_mb(pid), fds(pid)[0]
                t = time.monotonic()
                socks = hold_connections(b.bootstrap, a.conns)
                out["conns"] = a.conns
                out["conns_open_seconds"] = round(time.monotonic() - t, 2)
                time.sleep(1)
                out["rss_with_conns_mb"] = round(rss_mb(pid), 1)
                out["rss_per_conn_kb"] = round((rss_mb(pid) - rss0) * 1000 / a.conns, 1)
                out["fds_with_conns"] = fds(pid)[0]
                out["fds_per_conn"] = round((fds(pid)[0] - fds0) / a.conns, 2)
                out["idle_cpu_seconds_conns"] = round(idle_cpu(pid, a.idle), 3)
                if a.per_request:
                    out["per_request_with_conns"] = per_request_ms(b.bootstrap, "probe")
                for s in socks:
                    s.close()
            out["loadavg_end"] = os.getloadavg()[0]
        except BaseException:
            sys.stderr.write("broker log (tail):\n" + "".join(b.lines[-60:]))
            raise
        finally:
            try:
                b.stop(timeout=120)
            except Exception:
                b.kill()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    ap.add_argument("--records", type=int, default=3, help="records produced to every partition")
    ap.add_argument("--nofile", type=int, default=0,
                    help="the broker's RLIMIT_NOFILE (0: inherit this process's)")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of idleness measured")
    ap.add_argument("--conns", type=int, default=1000, help="idle connections held (0: skip)")
    ap.add_argument("--no-per-request", dest="per_request", action="store_false")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args(argv)
    out = run(a)
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
