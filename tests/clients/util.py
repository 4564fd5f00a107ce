"""Shared helpers for the real-client end-to-end tests.

Every helper drives a client through its public API exactly as a user would (no mocks, no
private attributes): create topics with the client's own admin API, produce records with keys,
null keys, null values, headers and explicit timestamps, and consume them back into a common
shape (``Rec``) so the tests can assert byte-exact equality and per-partition order.

This file is also a script (``python tests/clients/util.py produce-acked ...``): a producer that
runs in its own process and writes one line per *acknowledged* record, used by the
kill -9 mid-produce tests.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import time
import uuid

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclasses.dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((str, bytes | None), ...)
    timestamp: int


# The end-to-end round trips: this many records over this many partitions, per client.
N = 3000
PARTITIONS = 3


def unique_topic(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def now_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------
# Data sets


def make_records(n: int, partitions: int, seed: int, *, null_header_values: bool = True,
                 base_ts: int | None = None, max_value: int = 400, big_every: int = 97,
                 big_size: int = 6000, tag_index: bool = False,
                 null_key_and_value: bool = True) -> list[Rec]:
    """Deterministic records covering the corners clients and brokers get wrong.

    - keys: null, empty (distinct from null!), random binary;
    - values: null (tombstone), empty, random binary of all 256 byte values, an occasional
      large one (several KiB, spanning what a small batch holds);
    - headers: none, duplicate keys, null value (where the client can send one), empty value,
      non-ASCII keys with binary values;
    - timestamps: explicit CreateTime in the last hour (inside any retention / timestamp
      window), mostly increasing with a few going backwards, so that a timestamp lookup must
      find the *first* offset whose timestamp is >= the target, not just follow batches.
    ``tag_index`` prefixes each value with its index (values become unique, never null): used
    where duplicates must be detectable. ``null_key_and_value=False`` for clients that refuse a
    record with both null (aiokafka): the value is then empty.
    """
    rng = random.Random(seed)
    if base_ts is None:
        base_ts = now_ms() - 3_600_000
    out = []
    ts = base_ts
    for i in range(n):
        part = rng.randrange(partitions)
        k = i % 9
        key = None if k == 0 else b"" if k == 1 else rng.randbytes(rng.randint(1, 40))
        v = i % 13
        if tag_index:
            value = b"#%d#" % i + rng.randbytes(rng.randint(0, max_value))
        elif v == 0:
            value = None
        elif v == 1:
            value = b""
        elif big_every and i % big_every == 5:
            value = rng.randbytes(big_size)
        else:
            value = rng.randbytes(rng.randint(1, max_value))
        if key is None and value is None and not null_key_and_value:
            value = b""
        h = i % 5
        if h == 0:
            headers = ()
        elif h == 1:
            headers = (("dup", b"1"), ("dup", b"2"), ("other", b"x"), ("dup", b"3"))
        elif h == 2:
            headers = (("nullable", None if null_header_values else b""), ("e", b""))
        elif h == 3:
            headers = tuple(("kľúč-%d-ü" % j, rng.randbytes(rng.randint(0, 30)))
                            for j in range(rng.randint(1, 3)))
        else:
            headers = (("trace-id", b"%032x" % rng.getrandbits(128)),)
        ts += rng.randint(0, 5)
        stamp = ts - rng.randint(1, 2000) if i % 17 == 3 else ts
        out.append(Rec(part, key, value, headers, stamp))
    return out


def by_partition(records) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def first_index_at_or_after(recs: list[Rec], ts: int):
    """Kafka's ListOffsets-by-timestamp answer: the earliest offset whose timestamp >= ts."""
    for i, r in enumerate(recs):
        if r.timestamp >= ts:
            return i
    return None


def _short(r) -> str:
    s = repr(r)
    return s if len(s) < 400 else s[:400] + "..."


def assert_partitions_equal(expected: dict[int, list[Rec]], got: dict[int, list], *,
                            start: dict[int, int] | None = None, what: str = "") -> None:
    """``got[p]`` is a list of ``(offset, Rec)``; offsets must be contiguous from ``start[p]``
    (0 by default) and the records byte-identical to ``expected[p]``, in order."""
    for p, exp in sorted(expected.items()):
        s = (start or {}).get(p, 0)
        recs = got.get(p, [])
        offs = [o for o, _ in recs]
        assert offs == list(range(s, s + len(offs))), (
            "%s partition %d: offsets not contiguous from %d: first few %r" % (what, p, s, offs[:10]))
        for i, (e, (o, g)) in enumerate(zip(exp, recs)):
            if e != g:
                raise AssertionError("%s partition %d offset %d differs:\n expected %s\n got      %s"
                                     % (what, p, o, _short(e), _short(g)))
        assert len(recs) == len(exp), ("%s partition %d: expected %d records, got %d"
                                       % (what, p, len(exp), len(recs)))


def assert_acks_match(records: list[Rec], acks: list, start: dict[int, int] | None = None) -> None:
    """Delivery reports: record i acknowledged at (partition, offset); per partition the offsets
    must be exactly start, start+1, ... in produce order."""
    nxt = dict(start or {})
    for i, (r, (p, o)) in enumerate(zip(records, acks)):
        assert p == r.partition, "record %d acknowledged on partition %d, sent to %d" % (i, p, r.partition)
        want = nxt.get(p, 0)
        assert o == want, "record %d on partition %d acknowledged at offset %d, expected %d" % (i, p, o, want)
        nxt[p] = want + 1


# --------------------------------------------------------------------------------------------
# kafka-python


def _wanting(out: dict[int, list], want: dict[int, tuple[int, int]], deadline: float,
             client: str) -> bool:
    """Whether some partition still has fewer records in out than want[p] = (start, count)
    asks for; fails once the (time.monotonic) deadline has passed."""
    if all(len(out[p]) >= n for p, (_, n) in want.items()):
        return False
    assert time.monotonic() < deadline, "%s: timed out; got %r of %r" % (
        client, {p: len(v) for p, v in out.items()}, want)
    return True


def _assign_at_starts(c, topic_partition, topic: str, want: dict[int, tuple[int, int]]) -> None:
    """Assign (kafka-python or aiokafka) consumer c the partitions of want, each at its start."""
    tps = {p: topic_partition(topic, p) for p in want}
    c.assign(list(tps.values()))
    for p, (s, _) in want.items():
        c.seek(tps[p], s)


def _add_polled(out: dict[int, list], batches) -> None:
    """Append what a kafka-python/aiokafka poll returned to out[p] as (offset, Rec)."""
    for tp, msgs in batches.items():
        for m in msgs:
            assert m.timestamp_type == 0, "expected CreateTime, got %r" % (m,)
            out[tp.partition].append((m.offset, Rec(m.partition, m.key, m.value,
                                                    tuple(m.headers), m.timestamp)))


# Replication factor -1 (the broker's default.replication.factor: 1 on a single node, 3 on the
# test cluster of tests/clients/test_on_cluster.py), except for aiokafka, whose NewTopic insists
# on a number: AK_REPLICATION_FACTOR (the cluster module sets it).
AK_REPLICATION_FACTOR = 1


def kp_create_topic(bootstrap: str, topic: str, partitions: int, configs: dict | None = None):
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                             client_id="pykbroker-tests")
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": -1,
                                     "configs": dict(configs or {})}},
                            timeout_ms=10000, wait_for_metadata=True)
    finally:
        admin.close()


def kp_produce(bootstrap: str, topic: str, records: list[Rec], codec: str = "none",
               check_ts: bool = True, **config) -> list[tuple[int, int]]:
    from kafka import KafkaProducer
    cfg = dict(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=15000,
               max_block_ms=15000, compression_type=None if codec == "none" else codec)
    cfg.update(config)
    p = KafkaProducer(**cfg)
    try:
        futs = [p.send(topic, value=r.value, key=r.key, headers=list(r.headers),
                       partition=r.partition, timestamp_ms=r.timestamp) for r in records]
        p.flush(timeout=30)
        mds = [f.get(timeout=30) for f in futs]
    finally:
        p.close(timeout=5)
    for r, md in zip(records, mds):
        # CreateTime topic: the broker must keep the client's timestamp (-1 in the response).
        assert not check_ts or md.timestamp == r.timestamp, (md, r)
    return [(md.partition, md.offset) for md in mds]


def kp_seeded_topic(bootstrap: str, prefix: str, seed: int, codec: str):
    """A new 2-partition topic with 2000 records produced once by kafka-python (no null
    header values, keys or values: it cannot send them); -> (topic, {p: [Rec, ...]})."""
    topic = unique_topic(prefix)
    kp_create_topic(bootstrap, topic, 2)
    records = make_records(2000, 2, seed=seed, null_header_values=False,
                           null_key_and_value=False)
    assert_acks_match(records, kp_produce(bootstrap, topic, records, codec))
    return topic, by_partition(records)


def kp_consume(bootstrap: str, topic: str, want: dict[int, tuple[int, int]],
               timeout: float = 20.0, **config) -> dict[int, list]:
    """``want[p] = (start_offset, count)`` → ``{p: [(offset, Rec), ...]}`` (exactly count each)."""
    from kafka import KafkaConsumer, TopicPartition
    cfg = dict(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
               auto_offset_reset="earliest", request_timeout_ms=15000, fetch_max_wait_ms=200)
    cfg.update(config)
    c = KafkaConsumer(**cfg)
    out: dict[int, list] = {p: [] for p in want}
    try:
        _assign_at_starts(c, TopicPartition, topic, want)
        deadline = time.monotonic() + timeout
        while _wanting(out, want, deadline, "kafka-python"):
            _add_polled(out, c.poll(timeout_ms=300))
    finally:
        c.close()
    return {p: v[:want[p][1]] for p, v in out.items()}


# --------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)


def ck_create_topic(bootstrap: str, topic: str, partitions: int, configs: dict | None = None):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=-1,
                                   config=dict(configs or {}))],
                         operation_timeout=10, request_timeout=15)
    fs[topic].result(timeout=20)


def ck_produce(bootstrap: str, topic: str, records: list[Rec], codec: str = "none",
               idempotence: bool = True, **config) -> list[tuple[int, int]]:
    from confluent_kafka import Producer
    cfg = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
           "enable.idempotence": idempotence, "message.timeout.ms": 30000}
    if not idempotence:
        cfg["acks"] = 1
    cfg.update(config)
    p = Producer(cfg)
    acks: list = [None] * len(records)

    def cb(i):
        def done(err, msg):
            acks[i] = (err, msg.partition(), msg.offset(), msg.timestamp())
        return done

    for i, r in enumerate(records):
        while True:
            try:
                p.produce(topic, value=r.value, key=r.key, partition=r.partition,
                          timestamp=r.timestamp, headers=list(r.headers), on_delivery=cb(i))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(30)
    assert left == 0, "confluent-kafka: %d records not delivered within 30 s" % left
    errs = [(i, a[0]) for i, a in enumerate(acks) if a is None or a[0] is not None]
    assert not errs, "confluent-kafka delivery errors (first 5): %r" % errs[:5]
    return [(a[1], a[2]) for a in acks]


def ck_consumer(bootstrap: str, **config):
    from confluent_kafka import Consumer
    cfg = {"bootstrap.servers": bootstrap, "group.id": "pykbroker-tests-" + uuid.uuid4().hex[:6],
           "enable.auto.commit": False, "auto.offset.reset": "earliest",
           "fetch.wait.max.ms": 100, "enable.partition.eof": False, "check.crcs": True}
    cfg.update(config)
    return Consumer(cfg)


def ck_msg_to_rec(m) -> Rec:
    from confluent_kafka import TIMESTAMP_CREATE_TIME
    tstype, ts = m.timestamp()
    assert tstype == TIMESTAMP_CREATE_TIME, "expected CreateTime, got %r" % (m.timestamp(),)
    return Rec(m.partition(), m.key(), m.value(), tuple(m.headers() or ()), ts)


def ck_consume(bootstrap: str, topic: str, want: dict[int, tuple[int, int]],
               timeout: float = 20.0, **config) -> dict[int, list]:
    from confluent_kafka import TopicPartition
    c = ck_consumer(bootstrap, **config)
    out: dict[int, list] = {p: [] for p in want}
    try:
        c.assign([TopicPartition(topic, p, s) for p, (s, _) in want.items()])
        deadline = time.monotonic() + timeout
        while _wanting(out, want, deadline, "confluent-kafka"):
            for m in c.consume(1000, timeout=0.3):
                if m.error():
                    raise AssertionError("confluent-kafka consume error: %s" % m.error())
                out[m.partition()].append((m.offset(), ck_msg_to_rec(m)))
    finally:
        c.close()
    return {p: v[:want[p][1]] for p, v in out.items()}


# --------------------------------------------------------------------------------------------
# aiokafka (asyncio; each helper runs its own loop)


def run(coro, timeout: float = 40.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def ak_create_topic(bootstrap: str, topic: str, partitions: int, configs: dict | None = None):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await a.start()
    try:
        resp = await a.create_topics([NewTopic(topic, partitions, AK_REPLICATION_FACTOR,
                                               topic_configs=dict(configs or {}))])
        errs = [t for t in resp.topic_errors if t[1] != 0]
        assert not errs, "aiokafka CreateTopics errors: %r" % errs
    finally:
        await a.close()


async def ak_produce(bootstrap: str, topic: str, records: list[Rec], codec: str = "none",
                     **config) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer
    cfg = dict(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=15000,
               compression_type=None if codec == "none" else codec)
    cfg.update(config)
    p = AIOKafkaProducer(**cfg)
    await p.start()
    try:
        futs = []
        for r in records:
            futs.append(await p.send(topic, value=r.value, key=r.key, partition=r.partition,
                                     timestamp_ms=r.timestamp, headers=list(r.headers)))
        mds = await asyncio.gather(*futs)
    finally:
        await p.stop()
    # The broker answers log_append_time -1 on a CreateTime topic (aiokafka: timestamp_type 0).
    # md.timestamp is not compared: aiokafka reports the batch's first record timestamp for
    # every record of the batch (it overwrites its loop variable in ProducerBatch.done).
    assert all(md.timestamp_type == 0 for md in mds)
    return [(md.partition, md.offset) for md in mds]


async def ak_consume(bootstrap: str, topic: str, want: dict[int, tuple[int, int]],
                     timeout: float = 20.0, **config) -> dict[int, list]:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    cfg = dict(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
               auto_offset_reset="earliest", request_timeout_ms=15000, fetch_max_wait_ms=200)
    cfg.update(config)
    c = AIOKafkaConsumer(**cfg)
    await c.start()
    out: dict[int, list] = {p: [] for p in want}
    try:
        _assign_at_starts(c, TopicPartition, topic, want)
        deadline = time.monotonic() + timeout
        while _wanting(out, want, deadline, "aiokafka"):
            _add_polled(out, await c.getmany(timeout_ms=300))
    finally:
        await c.stop()
    return {p: v[:want[p][1]] for p, v in out.items()}


# --------------------------------------------------------------------------------------------
# kcat (librdkafka's command-line client)

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
# Binary-safe output: a text line with lengths, then exactly that many key and value bytes.
KCAT_FMT = "%p %o %T %K %S\\n%k%s"


def kcat(args: list[str], *, input: bytes | None = None, timeout: float = 30.0) -> bytes:
    cmd = [KCAT] + args
    r = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, "kcat %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                          r.stderr.decode(errors="replace")[-2000:])
    return r.stdout


def parse_kcat(out: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """Parse KCAT_FMT output → [(partition, offset, timestamp, key, value)]."""
    res = []
    pos = 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        p, o, t, kl, vl = (int(x) for x in out[pos:nl].split(b" "))
        pos = nl + 1
        key = None if kl < 0 else out[pos:pos + kl]
        pos += max(kl, 0)
        val = None if vl < 0 else out[pos:pos + vl]
        pos += max(vl, 0)
        res.append((p, o, t, key, val))
    return res


def kcat_consume(bootstrap: str, topic: str, *, partition: int | None = None,
                 offset: str = "beginning", count: int | None = None,
                 extra: list[str] = (), timeout: float = 30.0):
    args = ["-C", "-b", bootstrap, "-t", topic, "-o", offset, "-e", "-q", "-f", KCAT_FMT]
    if partition is not None:
        args += ["-p", str(partition)]
    if count is not None:
        args += ["-c", str(count)]
    return parse_kcat(kcat(args + list(extra), timeout=timeout))


KCAT_HEADER_ARGS = ["-H", "dup=1", "-H", "dup=2", "-H", "empty=", "-H", "k=v=w"]
KCAT_HEADERS = (("dup", b"1"), ("dup", b"2"), ("empty", b""), ("k", b"v=w"))
# Bytes kcat's line reader gives meaning to (message delimiter, key delimiter).
_FORBIDDEN = set(b"\n:")
_ALPHABET = bytes(b for b in range(256) if b not in _FORBIDDEN)


def kcat_lines(n: int, seed: int):
    """[(key, value)] as kcat ``-K: -Z`` sends them from the file ``encode_lines`` writes.

    kcat's rules (checked against its behaviour): a line without ':' has a NULL key; with -Z an
    empty key (':value') and an empty value ('key:') are sent as NULL; an empty line is skipped.
    So here key b"" is written as ':value' and expected back as NULL."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = i % 7
        key = None if k == 0 else b"" if k == 1 else bytes(rng.choices(_ALPHABET, k=rng.randint(1, 30)))
        # NULL values only with random keys, so that every line is unique.
        value = None if i % 11 == 0 and k >= 2 else bytes(rng.choices(_ALPHABET, k=rng.randint(1, 300)))
        out.append((key, value))
    return out


def encode_lines(lines) -> bytes:
    buf = bytearray()
    for key, value in lines:
        if key is not None:
            buf += key + b":"
        buf += (value or b"") + b"\n"
    return bytes(buf)


def kcat_expected(lines):
    """What a consumer reads back for ``lines`` sent with ``-Z`` (empty key → NULL)."""
    return [(key or None, value) for key, value in lines]


def kcat_produce(bootstrap, topic, lines, codec, tmp_path, extra=()):
    f = tmp_path / ("in-%s.txt" % codec)
    f.write_bytes(encode_lines(lines))
    args = ["-P", "-b", bootstrap, "-t", topic, "-K", ":", "-Z", "-l", "-q"] + KCAT_HEADER_ARGS
    if codec != "none":
        args += ["-z", codec]
    kcat(args + list(extra) + [str(f)])


def check_kcat_subsequences(lines, got, what):
    """Every input line appears exactly once; within a partition in input order (kcat sends
    keyed lines by hash and NULL-key lines at random, so partitions are only known after)."""
    idx = {}
    for i, kv in enumerate(kcat_expected(lines)):
        idx.setdefault(kv, []).append(i)
    seen = set()
    for p, recs in got.items():
        last = -1
        for off, (key, value) in recs:
            cands = [i for i in idx.get((key, value), []) if i not in seen and i > last]
            assert cands, "%s: partition %d offset %d: unexpected or out-of-order record %r" % (
                what, p, off, (key, value))
            last = cands[0]
            seen.add(last)
    assert len(seen) == len(lines), "%s: %d of %d lines read back" % (what, len(seen), len(lines))


# --------------------------------------------------------------------------------------------
# A producer in its own process that logs every acknowledged record (kill -9 tests).


def _produce_acked(client: str, bootstrap: str, topic: str, out: str, seed: int, count: int,
                   partitions: int, idempotence: bool) -> None:
    records = make_records(count, partitions, seed, max_value=120, big_every=0, tag_index=True,
                           null_header_values=False,
                           base_ts=0)  # base_ts is replaced below: a fixed seed, fresh times
    f = open(out, "w", buffering=1)
    base = now_ms() - 200_000
    if client == "confluent":
        from confluent_kafka import Producer
        cfg = {"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": idempotence,
               "message.timeout.ms": 300000, "compression.type": "lz4"}
        if not idempotence:
            cfg["acks"] = "all"
        p = Producer(cfg)

        def cb(i):
            def done(err, msg):
                if err is None:
                    f.write("%d %d %d\n" % (i, msg.partition(), msg.offset()))
            return done

        for i, r in enumerate(records):
            while True:
                try:
                    p.produce(topic, value=r.value, key=r.key, partition=r.partition,
                              timestamp=base + r.timestamp, headers=list(r.headers),
                              on_delivery=cb(i))
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
            if i % 200 == 0:
                time.sleep(0.005)  # keep producing for a while rather than all at once
        p.flush(60)
    elif client == "kafka-python":
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, compression_type="gzip",
                          acks="all", enable_idempotence=idempotence, request_timeout_ms=30000,
                          delivery_timeout_ms=300000)

        def ok(i):
            return lambda md: f.write("%d %d %d\n" % (i, md.partition, md.offset))

        for i, r in enumerate(records):
            fut = p.send(topic, value=r.value, key=r.key, partition=r.partition,
                         timestamp_ms=base + r.timestamp, headers=list(r.headers))
            fut.add_callback(ok(i))
            if i % 200 == 0:
                time.sleep(0.005)
        p.flush(60)
    else:
        raise SystemExit("unknown client %r" % client)


def acked_records(path: str, seed: int, count: int, partitions: int) -> tuple[list[Rec], list]:
    """Re-read a produce-acked log: (all records as generated, [(i, partition, offset)]).
    Timestamps are not checked here (the producer shifts them to its own clock)."""
    records = make_records(count, partitions, seed, max_value=120, big_every=0, tag_index=True,
                           null_header_values=False,
                           base_ts=0)
    acks = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and line.endswith("\n"):
                acks.append(tuple(int(x) for x in parts))
    return records, acks


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["produce-acked"])
    ap.add_argument("--client", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--idempotence", type=int, default=1)
    a = ap.parse_args()
    _produce_acked(a.client, a.bootstrap, a.topic, a.out, a.seed, a.count, a.partitions,
                   bool(a.idempotence))
