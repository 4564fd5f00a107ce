#!/usr/bin/env python3
"""Load generators the benchmark runs as child processes; each prints one JSON line at the end.

    loadgen.py produce --bootstrap B --topic T --records N --size S [--acks 1] [--compression none]
                       [--linger-ms 5] [--rate R]          # confluent-kafka (librdkafka) producer
    loadgen.py consume --bootstrap B --topic T --records N   # catch-up: assign all partitions
                                                             # from the beginning, read N records
                                                             # (fetch.queue.backoff.ms 10: below)
    loadgen.py tail --bootstrap B --topic T --seconds D --rate R --size S [--acks 1]
                                     # end-to-end latency: a producer thread at a fixed rate
                                     # stamps each value, a tailing consumer thread reads it back
    loadgen.py conns --bootstrap B --topic T --n C --mode idle|active --seconds D --size S
                                     # C raw connections (asyncio): idle = ApiVersions once then
                                     # held; active = each one a closed loop of acks=1 Produce
    loadgen.py connect --bootstrap B --topic T --n C --config JSON
                                     # C connections one after the other, each to its first
                                     # answered request: TCP, the TLS handshake, SaslHandshake
                                     # and the SCRAM exchange, then Metadata for T

``--config JSON`` adds librdkafka settings (security.protocol, ssl.ca.location, sasl.*) to the
clients of produce, consume and tail; ``connect`` reads the same keys.

Several ``produce`` processes make the multi-producer cells (the parent starts them together).
Payloads are random upper-case letters, as Kafka's ProducerPerformance makes them, so that the
compression cells compress the same data with both tools.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def payload(size: int) -> bytes:
    rnd = random.Random(42)
    return bytes(rnd.randrange(65, 91) for _ in range(size))


def pct(s, q: float) -> float:
    """The q-quantile of sorted samples ``s`` (nearest rank)."""
    if not s:
        return 0.0
    return s[min(len(s) - 1, int(q * len(s)))]


# quantiles kept for the latency CDF plots (the raw samples would make the JSON huge)
CDF_Q = [i / 100 for i in range(1, 100)] + [0.995, 0.999, 0.9995, 0.9999]


def lat_summary(ms) -> dict:
    s = sorted(ms)
    return {"p50_ms": pct(s, 0.50), "p99_ms": pct(s, 0.99), "p999_ms": pct(s, 0.999),
            "samples": len(s), "cdf": [[q, pct(s, q)] for q in CDF_Q] if s else []}


def cmd_produce(a) -> dict:
    from confluent_kafka import Producer
    lat = []
    errors = [0]

    def on_delivery(err, msg):
        if err is not None:
            errors[0] += 1
        else:
            lat.append(msg.latency() * 1000.0)

    p = Producer({"bootstrap.servers": a.bootstrap, "acks": str(a.acks), "linger.ms": a.linger_ms,
                  "compression.type": a.compression, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20, "queue.buffering.max.messages": 1000000,
                  "on_delivery": on_delivery, **a.config})
    # metadata first: the timed part starts with a known leader (as ProducerPerformance's first
    # send waits for metadata too, but outside the records/s it reports would be better)
    p.list_topics(a.topic, timeout=30)
    value = payload(a.size)
    n = a.records
    interval = 1.0 / a.rate if a.rate else 0.0
    t0 = time.perf_counter()
    for i in range(n):
        if interval:
            due = t0 + i * interval
            now = time.perf_counter()
            if due > now:
                p.poll(due - now) if due - now > 0.001 else time.sleep(due - now)
        while True:
            try:
                p.produce(a.topic, value)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    # when the last record was handed to the client: flat out, an ack latency counts the time a
    # record waited in the client's queue behind the ones enqueued before it, which depends on
    # how fast this loop ran (the CPU it got beside the broker) as much as on the broker
    enqueued = time.perf_counter() - t0
    left = p.flush(120)
    dt = time.perf_counter() - t0
    sent = n - left - errors[0]
    return {"records": sent, "bytes": sent * a.size, "seconds": dt, "enqueue_seconds": enqueued, "errors": errors[0] + left,
            "rec_s": sent / dt, "mb_s": sent * a.size / dt / 1e6, "ack": lat_summary(lat)}


def _partitions(consumer, topic: str) -> list:
    md = consumer.list_topics(topic, timeout=30)
    return sorted(md.topics[topic].partitions)


def cmd_consume(a) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    # fetch.queue.backoff.ms: librdkafka stops fetching a partition for this long (1,000 ms by
    # default) whenever its prefetch queue holds queued.min.messages (100,000) records. Both
    # brokers fill that queue faster than this Python loop drains it, so with the default a
    # run's time is set by how many 1 s sleeps the client takes (compat/bench/results/
    # consume-backoff-2026-11-28.md: 400,000 x 100 B in 0.3-0.5 s without a pause, 1.3 s with
    # one, 2.4 s with two, a coin flip per run; a longer run converges on one pause per ~200,000
    # records whatever the broker). 10 ms keeps the queue bounded (the loop needs 50+ ms to
    # drain 100,000 records, so the queue never runs dry during a pause) and lets the cell
    # measure delivery; the same for both brokers. --config can set it back.
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "bench-consume-%d" % os.getpid(),
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 1 << 20, "fetch.wait.max.ms": 100,
                  "fetch.queue.backoff.ms": 10, **a.config})
    c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in _partitions(c, a.topic)])
    got = nbytes = 0
    t0 = time.perf_counter()
    deadline = t0 + a.timeout
    while got < a.records and time.perf_counter() < deadline:
        for m in c.consume(min(10000, a.records - got), 1.0):   # returns at n records or 1 s
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    dt = time.perf_counter() - t0
    c.close()
    return {"records": got, "bytes": nbytes, "seconds": dt, "rec_s": got / dt, "mb_s": nbytes / dt / 1e6,
            "complete": got >= a.records}


def cmd_tail(a) -> dict:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "bench-tail-%d" % os.getpid(),
                  "enable.auto.commit": False, "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    c.assign([TopicPartition(a.topic, p, OFFSET_END) for p in _partitions(c, a.topic)])
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": str(a.acks), "linger.ms": 0,
                  "compression.type": a.compression})
    p.list_topics(a.topic, timeout=30)
    # the consumer must be positioned before the first stamp is sent
    c.consume(1, 2.0)
    pad = payload(max(0, a.size - 8))
    n = int(a.seconds * a.rate)
    e2e = []
    done = threading.Event()

    def consume():
        while not done.is_set() or len(e2e) < n:
            m = c.poll(0.2)   # one at a time: consume(n, t) would wait for n records or t
            if m is not None and m.error() is None and len(m.value()) >= 8:
                e2e.append((time.time_ns() - struct.unpack_from(">q", m.value())[0]) / 1e6)
            if done.is_set() and time.monotonic() > stop_by:
                break

    stop_by = float("inf")
    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t0 = time.perf_counter()
    for i in range(n):
        due = t0 + i / a.rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        p.produce(a.topic, struct.pack(">q", time.time_ns()) + pad)
        p.poll(0)
    p.flush(60)
    stop_by = time.monotonic() + 30
    done.set()
    t.join(40)
    c.close()
    return {"records": len(e2e), "sent": n, "e2e": lat_summary(e2e)}


async def _conn_loop(host, port, frame, mode, state, lat, counts, idle_frame, ready):
    r, w = await asyncio.open_connection(host, port)
    try:
        w.write(idle_frame)   # ApiVersions v0: one served request on every connection
        await w.drain()
        size = struct.unpack(">i", await r.readexactly(4))[0]
        await r.readexactly(size)
        ready.append(1)
        await state["go"].wait()
        if mode == "idle":
            while time.perf_counter() < state["until"]:
                await asyncio.sleep(0.5)
            return
        while time.perf_counter() < state["until"]:
            t = time.perf_counter()
            w.write(frame)
            await w.drain()
            size = struct.unpack(">i", await r.readexactly(4))[0]
            body = await r.readexactly(size)
            lat.append((time.perf_counter() - t) * 1000.0)
            counts[0] += 1
            if len(counts) == 1:
                counts.append(body)
    finally:
        w.close()


def cmd_conns(a) -> dict:
    """Prints {"event": "ready"} once every connection is open and served, then holds (idle) or
    loads (active) them for --seconds: the parent measures something else meanwhile (idle) or
    takes these numbers (active)."""
    from pykbroker.protocol.wire import decode_response, make_batch, request_frame
    host, port = a.bootstrap.split(",")[0].rsplit(":", 1)
    port = int(port)
    value = payload(a.size)
    frames = [request_frame(0, 9, 1, {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                                      "topic_data": [{"name": a.topic, "partition_data": [
                                          {"index": i, "records": make_batch([value] * a.batch)}]}]},
                            client_id="bench-conns") for i in range(a.partitions)]
    idle_frame = request_frame(18, 0, 1, b"", client_id="bench-conns")
    lat: list = []
    counts = [0]
    ready: list = []

    async def run():
        state = {"go": asyncio.Event(), "until": 0.0}
        t_open = time.perf_counter()
        tasks = []
        for i in range(a.n):
            tasks.append(asyncio.ensure_future(_conn_loop(
                host, port, frames[i % len(frames)], a.mode, state, lat, counts, idle_frame, ready)))
            if i % 50 == 49:
                await asyncio.sleep(0)   # let the earlier ones connect: no SYN flood
        while len(ready) < a.n:
            failed = [t for t in tasks if t.done() and t.exception()]
            if failed:
                raise failed[0].exception()
            await asyncio.sleep(0.05)
        open_s = time.perf_counter() - t_open
        print(json.dumps({"event": "ready", "open_seconds": open_s}), flush=True)
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        state["until"] = t0 + a.seconds
        state["go"].set()
        await asyncio.gather(*tasks)
        return open_s, time.perf_counter() - t0, time.process_time() - cpu0

    open_s, dt, cpu_s = asyncio.run(run())
    reqs = counts[0]
    ok = True
    if reqs:
        resp = decode_response(counts[1], 0, 9)
        ok = all(p["error_code"] == 0 for t in resp["responses"] for p in t["partition_responses"])
    recs = reqs * a.batch
    # cpu_seconds: this process's own CPU over the loaded phase.  With the broker's CPU over the
    # same phase it shows where a closed loop's time goes: both sides pay per request.
    return {"connections": a.n, "mode": a.mode, "open_seconds": open_s, "seconds": dt,
            "cpu_seconds": cpu_s, "requests": reqs, "records": recs, "rec_s": recs / dt, "mb_s": recs * a.size / dt / 1e6,
            "produce_ok": ok, "ack": lat_summary(lat)}


def cmd_connect(a) -> dict:
    """Connection set-up cost: ``--n`` connections opened one after the other, each timed from
    the TCP connect to its first answered request (Metadata for the topic), through the TLS
    handshake and the SASL exchange its ``--config`` asks for.  The same Python client for both
    brokers: its own share (the TLS handshake and SCRAM's client proof) is equal on both sides,
    so the difference is the broker's."""
    import ssl

    from pykbroker.protocol.wire import WireClient
    from pykbroker.security.client import authenticate_sync
    conf = a.config
    host, port = a.bootstrap.split(",")[0].rsplit(":", 1)
    ctx = None
    if "SSL" in conf.get("security.protocol", "PLAINTEXT").upper():
        ctx = ssl.create_default_context(cafile=conf.get("ssl.ca.location"))
    sasl = conf.get("security.protocol", "").upper().startswith("SASL")
    lat = []
    cpu0 = time.process_time()
    t_all = time.perf_counter()
    for _ in range(a.n):
        t0 = time.perf_counter()
        with WireClient((host, int(port)), timeout=30, ssl_context=ctx) as c:
            if sasl:
                authenticate_sync(c.request, conf["sasl.mechanism"], conf["sasl.username"], conf["sasl.password"])
            resp = c.request(3, 12, {"topics": [{"name": a.topic, "topic_id": None}],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
            if resp["topics"][0]["error_code"]:
                raise RuntimeError("Metadata error %d" % resp["topics"][0]["error_code"])
            lat.append((time.perf_counter() - t0) * 1000.0)
    dt = time.perf_counter() - t_all
    return {"connections": a.n, "seconds": dt, "conn_s": a.n / dt,
            "cpu_ms_per_conn": (time.process_time() - cpu0) / a.n * 1000.0, "setup": lat_summary(lat)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "consume", "tail", "conns", "connect"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--records", type=int, default=100000)
        s.add_argument("--size", type=int, default=1024)
        s.add_argument("--acks", default="1")
        s.add_argument("--compression", default="none")
        s.add_argument("--linger-ms", type=int, default=5)
        s.add_argument("--rate", type=float, default=0.0)
        s.add_argument("--seconds", type=float, default=5.0)
        s.add_argument("--timeout", type=float, default=120.0)
        s.add_argument("--n", type=int, default=100)
        s.add_argument("--mode", default="idle")
        s.add_argument("--partitions", type=int, default=1)
        s.add_argument("--batch", type=int, default=10)
        s.add_argument("--config", type=json.loads, default={}, help="extra client settings (JSON object)")
    a = ap.parse_args(argv)
    out = {"produce": cmd_produce, "consume": cmd_consume, "tail": cmd_tail, "conns": cmd_conns,
           "connect": cmd_connect}[a.cmd](a)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
