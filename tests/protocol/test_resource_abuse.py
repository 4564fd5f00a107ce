"""Resource abuse against a live broker: connection churn, slow senders holding partial frames,
huge declared frame sizes, thousands of pipelined requests, a client that never reads its answers.

In each test a real client (confluent-kafka) produces during the abuse and its records are read
back afterwards, so "the broker stays up and other clients keep working" is measured, not
assumed; the broker's RSS and open fds are read from /proc (compat.fuzz.fuzzer.proc_stats).
The scale is what a 2-core machine does in about ten seconds.
"""
import os
import socket
import struct
import threading
import time
import uuid

import pytest

from pykbroker.local.broker_process import BrokerProcess, wait_until
from compat.fuzz.fuzzer import proc_stats
from pykbroker.protocol.wire import WireClient, create_topic, make_batch, request_frame

pytestmark = pytest.mark.timeout(180)

API_VERSIONS_V0 = request_frame(18, 0, 1, b"", flexible=False)


@pytest.fixture(scope="module")
def abused(tmp_path_factory):
    d = tmp_path_factory.mktemp("abuse")
    with BrokerProcess(str(d / "data"), {"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def stats(broker):
    """(RSS MB, open sockets) of the broker: sockets, not all fds, since the bystander's topics
    and the group coordinator's partitions open segment files as the tests go."""
    rss, _, _ = proc_stats(broker.proc.pid)
    d = "/proc/%d/fd" % broker.proc.pid
    socks = 0
    for fd in os.listdir(d):
        try:
            socks += os.readlink(os.path.join(d, fd)).startswith("socket:")
        except OSError:
            pass
    return rss, socks


class RealClient:
    """A confluent-kafka producer sending one record every 20 ms from a thread, each record's
    acknowledgement latency kept; ``stop()`` then reads them all back with a consumer."""

    def __init__(self, broker):
        from confluent_kafka import Producer
        self.broker = broker
        self.topic = "bystander-%s" % uuid.uuid4().hex[:8]
        create_topic(broker, self.topic, 1)
        self.p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                           "enable.idempotence": True})
        self.sent = []
        self.latencies = []
        self.errors = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        i = 0
        while not self._stop.is_set():
            v = b"bystander-%d" % i
            t0 = time.monotonic()

            def cb(err, msg, v=v, t0=t0):
                if err is not None:
                    self.errors.append(err)
                else:
                    self.latencies.append(time.monotonic() - t0)
                    self.sent.append(v)
            self.p.produce(self.topic, value=v, on_delivery=cb)
            self.p.poll(0.02)
            i += 1

    def stop(self):
        from confluent_kafka import Consumer, TopicPartition
        # at least 20 records acknowledged before it stops (a broker that never serves it fails
        # here after 30 s): on a loaded machine the abuse can end before the 20th (19 in one run)
        deadline = time.monotonic() + 30
        while len(self.sent) < 20 and not self.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._t.join(10)
        assert self.p.flush(30) == 0
        assert not self.errors, self.errors[:3]
        assert len(self.sent) >= 20, "the real client barely got to produce: %d records" % len(self.sent)
        c = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": "bystander-reader",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(self.topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(self.sent) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert got == self.sent
        self.p = None   # the producer's connections close now, not at garbage collection
        lat = sorted(self.latencies)
        return lat[int(len(lat) * 0.99) - 1]


def test_connection_churn(abused):
    """Thousands of connections opened and closed (half ask ApiVersions, half just go away):
    every question is answered, the fds come back, RSS stays put, a real client carries on."""
    rss0, fds0 = stats(abused)
    client = RealClient(abused)
    host, port = "127.0.0.1", abused.port
    counts = {"opened": 0, "answered": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + 8

    def churn(k):
        n = a = 0
        while time.monotonic() < deadline:
            s = socket.create_connection((host, port), timeout=10)
            n += 1
            if n % 2:
                s.sendall(API_VERSIONS_V0)
                hdr = s.recv(8)
                a += len(hdr) == 8 and struct.unpack(">ii", hdr)[1] == 1
            else:
                # an abortive close (RST) half of those times
                if n % 4 == 0:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        with lock:
            counts["opened"] += n
            counts["answered"] += a

    threads = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p99 = client.stop()
    print("connections opened and closed: %d, real client's p99 ack %.3fs" % (counts["opened"], p99))
    assert counts["opened"] >= 1000, counts
    assert counts["answered"] == (counts["opened"] + 3) // 2 or counts["answered"] >= counts["opened"] // 2 - 4
    # every connection's fd is given back (allow the bystander's and the log's few)
    wait_until(lambda: stats(abused)[1] <= fds0 + 10, 20, what="broker sockets back to %d (+10)" % fds0)
    assert stats(abused)[0] < rss0 + 64, "RSS grew from %.0f to %.0f MB" % (rss0, stats(abused)[0])
    assert p99 < 5.0


def test_slowloris_partial_frames(abused):
    """Hundreds of connections each hold an unfinished frame (a size prefix and a few bytes,
    one more byte now and then), and a few announce 100 MB and send 1 MB: nothing is allocated
    for what has not arrived, and a real client is served meanwhile."""
    rss0, fds0 = stats(abused)
    client = RealClient(abused)
    slow = []
    for i in range(300):
        s = socket.create_connection(("127.0.0.1", abused.port), timeout=10)
        s.sendall(struct.pack(">i", 200) + b"\x00\x03\x00\x01")   # 4 of 200 bytes
        slow.append(s)
    big = []
    for i in range(20):
        s = socket.create_connection(("127.0.0.1", abused.port), timeout=10)
        s.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * (1024 * 1024))
        big.append(s)
    t_end = time.monotonic() + 5
    while time.monotonic() < t_end:
        for s in slow[:50]:
            s.sendall(b"\x00")   # one byte more: never a whole frame
        time.sleep(0.5)
    rss1, fds1 = stats(abused)
    # none of them got an answer or was closed: the broker waits for the rest, as Kafka does
    for i, s in enumerate(slow[:5] + big[:5]):
        s.setblocking(False)
        try:
            got = s.recv(1)
        except BlockingIOError:
            continue
        pytest.fail("slow sender %d: %s" % (i, "closed by the broker" if got == b"" else "answered %r" % got))
    p99 = client.stop()
    for s in slow + big:
        s.close()
    print("slowloris: RSS %.0f -> %.0f MB, fds %d -> %d, real client's p99 ack %.3fs" % (rss0, rss1, fds0, fds1, p99))
    # 20 x 100 MB announced (2 GB) but 20 MB sent: the broker holds about what it received
    assert rss1 < rss0 + 120, "RSS grew from %.0f to %.0f MB" % (rss0, rss1)
    assert fds1 >= 320 + 1, "the broker holds %d sockets, not the 320 slow ones and its listener" % fds1
    wait_until(lambda: stats(abused)[1] <= fds0 + 10, 20, what="broker sockets back to %d (+10)" % fds0)
    assert p99 < 5.0


@pytest.mark.parametrize("size", [2**31 - 1, 100 * 1024 * 1024 + 1, -1, -(2**31)])
def test_frame_declaring_a_huge_size_is_closed(abused, size):
    """socket.request.max.bytes (100 MiB): a larger (or negative) size prefix closes the
    connection at once, before any body (Kafka's InvalidReceiveException)."""
    with WireClient(abused, timeout=10) as c:
        c.send_bytes(struct.pack(">i", size))
        assert c.wait_closed(10)
    with WireClient(abused, timeout=10) as c:   # and the broker serves the next one
        assert c.request(18, 0, {})["error_code"] == 0


def test_frame_of_exactly_the_limit_is_accepted(abused):
    """A size prefix equal to socket.request.max.bytes is within the limit: the broker waits for
    the body instead of closing (Kafka's check is receiveSize > maxSize)."""
    with WireClient(abused, timeout=10) as c:
        c.send_bytes(struct.pack(">i", 100 * 1024 * 1024) + b"\x00\x12")
        c.settimeout(1.5)
        with pytest.raises(socket.timeout):
            c.sock.recv(1)


def test_thousands_of_pipelined_requests_on_one_connection(abused):
    """5,000 requests written back to back before reading anything (ApiVersions, Metadata and
    acks=1 Produce): every one is answered, in order, and a real client is served meanwhile."""
    topic = "pipelined-%s" % uuid.uuid4().hex[:8]
    create_topic(abused, topic, 1)
    client = RealClient(abused)
    batch = make_batch([b"p" * 100])
    frames, kinds = [], []
    for corr in range(5000):
        k = corr % 3
        if k == 0:
            frames.append(request_frame(18, 3, corr, {"client_software_name": "pipe",
                                                      "client_software_version": "1"}))
        elif k == 1:
            frames.append(request_frame(3, 12, corr, {"topics": [{"name": topic, "topic_id": bytes(16)}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False}))
        else:
            frames.append(request_frame(0, 9, corr, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                     "topic_data": [{"name": topic, "partition_data": [
                                                         {"index": 0, "records": batch}]}]}))
        kinds.append(k)
    data = b"".join(frames)
    s = socket.create_connection(("127.0.0.1", abused.port), timeout=30)
    sender = threading.Thread(target=s.sendall, args=(data,))
    sender.start()
    got = []
    buf = bytearray()
    while len(got) < len(frames):
        chunk = s.recv(1 << 20)
        assert chunk, "closed after %d answers" % len(got)
        buf += chunk
        while len(buf) >= 8:
            (n,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + n:
                break
            got.append(struct.unpack_from(">i", buf, 4)[0])
            del buf[:4 + n]
    sender.join()
    s.close()
    assert got == list(range(5000))
    with WireClient(abused) as c:
        lo = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]})
    assert lo["topics"][0]["partitions"][0]["offset"] == kinds.count(2)   # every Produce appended
    assert client.stop() < 5.0


def test_client_that_never_reads_its_answers(abused):
    """A client pipelines Fetch requests whose answers are ~1 MB each and never reads: once
    the socket buffers are full the broker stops reading that connection (Kafka's muted
    channel / queued.max.requests back-pressure), so it neither buffers the answers (GBs asked
    for) nor starves other clients; closing the connection frees everything."""
    topic = "never-read-%s" % uuid.uuid4().hex[:8]
    create_topic(abused, topic, 1)
    with WireClient(abused) as c:
        for _ in range(8):   # ~1 MB of records to fetch, again and again
            resp = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                    "topic_data": [{"name": topic, "partition_data": [
                                        {"index": 0, "records": make_batch([b"x" * 8192] * 16)}]}]})
            assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    rss0, fds0 = stats(abused)
    client = RealClient(abused)
    fetch = request_frame(1, 12, 7, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 10485760}]}], "forgotten_topics_data": [],
        "rack_id": ""})
    s = socket.create_connection(("127.0.0.1", abused.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.setblocking(False)
    accepted = 0
    stalled_since = None
    t_end = time.monotonic() + 10
    # write Fetch after Fetch, never reading; the broker takes them until its answers back up
    while time.monotonic() < t_end:
        try:
            accepted += s.send(fetch * 64)
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 2:
                break
            time.sleep(0.05)
    rss1, fds1 = stats(abused)
    asked = accepted // len(fetch)
    p99 = client.stop()
    print("never-reading client: %d Fetches written (asking for ~%d MB of answers) before its socket stalled; "
          "RSS %.0f -> %.0f MB; real client's p99 ack %.3fs" % (asked, asked, rss0, rss1, p99))
    assert stalled_since is not None, "the broker kept reading %d Fetches whose answers nobody read" % asked
    # (most of what was "sent" waits in the two kernels' buffers, unread by the broker; what
    # it carried out is a few answers' worth, in its socket send buffer)
    assert rss1 < rss0 + 100, "RSS grew from %.0f to %.0f MB" % (rss0, rss1)
    assert p99 < 5.0
    s.close()
    wait_until(lambda: stats(abused)[1] <= fds0 + 10, 20, what="broker sockets back to %d (+10)" % fds0)
