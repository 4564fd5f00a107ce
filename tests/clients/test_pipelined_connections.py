"""Several raw connections at once, each pipelining a mix of requests: every answer comes back,
in request order, with its correlation id, and the records are read back by confluent-kafka
in each connection's order at the offsets the answers gave.

The mix crosses every hand-over of the broker's connection poller (server/poller.py) and its
connection's task: fast-path Produce (carried out by the poller), acks=0 Produce (no answer),
acks=-1 Produce and a Produce to a partition that does not exist (the general path, by the
task), ApiVersions and Metadata (the task), an acks=1 Produce to a flush.messages=1 topic
(appended by the poller, the fsync awaited by the task), classic and flexible versions; the
bytes arrive in pieces cut anywhere, so frames are split across reads."""
import random
import socket
import struct
import threading

import pytest

from pykbroker.protocol.wire import create_topic, decode_response, make_batch, request_frame

from .util import ck_consume, unique_topic

pytestmark = pytest.mark.timeout(120)

CONNS = 6
REQUESTS = 240
PARTITIONS = 2


def _produce(corr, version, topic, partition, acks, value):
    return request_frame(0, version, corr, {
        "transactional_id": None, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": make_batch([value])}]}]})


def _plan(c, topic, flushed):
    """Connection ``c``'s requests: (frame, what its answer is checked against or None for no
    answer)."""
    p = c % PARTITIONS
    out = []
    for i in range(REQUESTS):
        corr = c * 100000 + i
        value = b"c%d-%d" % (c, i)
        k = i % 10
        if k == 0:
            out.append((request_frame(18, 3, corr, {"client_software_name": "pipe",
                                                    "client_software_version": "1"}), (18, 3, corr, None)))
        elif k == 1:
            out.append((request_frame(3, 12, corr, {"topics": [{"name": topic, "topic_id": bytes(16)}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False}),
                        (3, 12, corr, None)))
        elif k == 5:
            out.append((_produce(corr, 9, topic, p, -1, value), (0, 9, corr, (topic, p, value))))
        elif k == 7:
            out.append((_produce(corr, 9, flushed, p, 1, value), (0, 9, corr, (flushed, p, value))))
        elif k == 8:
            out.append((_produce(corr, 9, topic, p, 0, value), (None, None, None, (topic, p, value))))
        elif k == 9:
            out.append((_produce(corr, 9, topic, 99, 1, value), (0, 9, corr, (topic, 99, value))))
        else:
            version = 7 if i % 2 else 9
            out.append((_produce(corr, version, topic, p, 1, value), (0, version, corr, (topic, p, value))))
    return out


def _drive(bootstrap, plan, seed, result):
    """Send ``plan``'s requests in pieces cut anywhere; after a piece, now and then wait for the
    answers of every whole request sent so far.  The broker is faster than such a client, so
    its socket runs dry there (the connection's task parks on the poller) with a partial frame
    or none in its buffer, and the next bytes are read by the poller; between those waits the
    requests pile up in the socket, read by the task."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    data = b"".join(f for f, _ in plan)
    # after how many bytes sent how many answers are due (the ends of the frames with one)
    ends, due, pos = [], 0, 0
    for f, w in plan:
        pos += len(f)
        due += w[0] is not None
        ends.append((pos, due))
    rnd = random.Random(seed)
    frames = []
    buf = bytearray()

    def read_until(n):
        while len(frames) < n:
            chunk = s.recv(1 << 16)
            assert chunk, "closed after %d answers" % len(frames)
            buf.extend(chunk)
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + size:
                    break
                frames.append(bytes(buf[4:4 + size]))
                del buf[:4 + size]

    try:
        pos = k = 0
        while pos < len(data):
            sent, pos = pos, min(len(data), pos + rnd.randint(1, 700))
            s.sendall(data[sent:pos])
            while k < len(ends) and ends[k][0] <= pos:
                k += 1
            if rnd.random() < 0.5:
                read_until(ends[k - 1][1] if k else 0)
        read_until(due)
    except BaseException as e:   # reported by the test, with the answers read so far
        result.append(e)
        raise
    finally:
        s.close()
    result.extend(frames)


def test_pipelined_mixed_requests_on_many_connections(broker):
    topic = unique_topic("pipelined")
    flushed = unique_topic("pipelined-flushed")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    create_topic(broker.bootstrap, flushed, PARTITIONS, {"flush.messages": "1"})
    plans = [_plan(c, topic, flushed) for c in range(CONNS)]
    results = [[] for _ in range(CONNS)]
    threads = [threading.Thread(target=_drive, args=(broker.bootstrap, plans[c], c, results[c]))
               for c in range(CONNS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    # the offsets each answer gave, per (topic, partition): {offset: value}
    acked: dict = {}
    unanswered: dict = {}   # acks=0: appended, at an offset no answer gave
    for c in range(CONNS):
        failed = [r for r in results[c] if isinstance(r, BaseException)]
        assert not failed, "connection %d: %r" % (c, failed[0])
        answered = [w for _, w in plans[c] if w[0] is not None]
        assert len(results[c]) == len(answered), "connection %d: %d answers of %d" % (
            c, len(results[c]), len(answered))
        last = {}
        for frame, (api_key, version, corr, record) in zip(results[c], answered):
            # decode_response checks the correlation id: answers in request order
            body = decode_response(frame, api_key, version, corr)
            if api_key != 0:
                assert body["error_code"] == 0
                continue
            t, p, value = record
            part = body["responses"][0]["partition_responses"][0]
            assert body["responses"][0]["name"] == t and part["index"] == p
            if p == 99:
                assert part["error_code"] == 3   # UNKNOWN_TOPIC_OR_PARTITION
                continue
            assert part["error_code"] == 0, (c, corr, part)
            off = part["base_offset"]
            assert off > last.get((t, p), -1), "offsets of one connection's Produce go up"
            last[(t, p)] = off
            acked.setdefault((t, p), {})[off] = value
        for _, (api_key, _v, _c, record) in plans[c]:
            if api_key is None:
                unanswered.setdefault(record[:2], []).append(record[2])
    for t in (topic, flushed):
        sent = {p: [r[2] for c in range(CONNS) for _, (k, _v, _c, r) in plans[c]
                    if r is not None and r[0] == t and r[1] == p] for p in range(PARTITIONS)}
        got = ck_consume(broker.bootstrap, t, {p: (0, len(v)) for p, v in sent.items()})
        for p in range(PARTITIONS):
            values = [rec.value for _, rec in got[p]]
            assert sorted(values) == sorted(sent[p]), "%s/%d: not every record read back once" % (t, p)
            for off, rec in got[p]:
                if off in acked.get((t, p), {}):
                    assert acked[(t, p)][off] == rec.value, "%s/%d@%d" % (t, p, off)
            assert len(acked.get((t, p), {})) + len(unanswered.get((t, p), [])) == len(sent[p])
            for c in range(CONNS):   # each connection's records in the order it sent them
                mine = [v for v in values if v.startswith(b"c%d-" % c)]
                assert mine == [v for v in sent[p] if v.startswith(b"c%d-" % c)], "%s/%d: connection %d" % (t, p, c)
