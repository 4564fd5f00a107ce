"""Capture the request bytes real clients send, for the fuzzer's mutation corpus.

    python compat/fuzz/capture.py            # rewrites compat/fuzz/corpus/*.bin

A broker is started whose advertised listener is a small recording proxy, so every connection
the clients open (bootstrap, then the advertised address from Metadata) goes through it.  Each
client library's sessions go to one file: the bytes its connections sent, one connection after
the other, i.e. Kafka request frames back to back (size prefix included).  The sessions use the
fuzzer's pool names (topics fz-0..fz-2, groups fzg-*, transactional ids fzt-*), so mutated
requests meet the state the fuzzer's broker has.
"""
import os
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from pykbroker.local.broker_process import BrokerProcess  # noqa: E402


class RecordingProxy:
    def __init__(self, upstream):
        self.upstream = upstream
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.streams = []          # one bytearray per client connection, in accept order
        self.label = "none"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            buf = bytearray()
            with self.lock:
                self.streams.append((self.label, buf))
            threading.Thread(target=self._serve, args=(c, buf), daemon=True).start()

    def _serve(self, c, buf):
        try:
            u = socket.create_connection(self.upstream)
        except OSError:
            c.close()
            return

        def pump(src, dst, record):
            try:
                while True:
                    d = src.recv(65536)
                    if not d:
                        break
                    if record is not None:
                        record += d
                    dst.sendall(d)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pump, args=(u, c, None), daemon=True).start()
        pump(c, u, buf)


def confluent_session(bs):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, 2, 1, config={"retention.ms": "86400000"})
                                  for t in ("fz-0", "fz-1", "fz-2")]).values():
        try:
            f.result(20)
        except Exception:
            pass
    for f in admin.describe_configs([ConfigResource("topic", "fz-0")]).values():
        f.result(10)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "compression.type": codec,
                      "linger.ms": 2})
        for i in range(10):
            p.produce("fz-%d" % (i % 3), key=b"key-%d" % i, value=b"value-%s-%d" % (codec.encode(), i) * 3,
                      headers=[("h", b"v%d" % i)])
        p.flush(20)
    p = Producer({"bootstrap.servers": bs, "acks": 0})
    p.produce("fz-0", value=b"fire-and-forget")
    p.flush(10)
    tp = Producer({"bootstrap.servers": bs, "transactional.id": "fzt-0"})
    tp.init_transactions(20)
    for commit in (True, False):
        tp.begin_transaction()
        tp.produce("fz-1", value=b"txn-%s" % str(commit).encode())
        tp.commit_transaction(20) if commit else tp.abort_transaction(20)
    c = Consumer({"bootstrap.servers": bs, "group.id": "fzg-0", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["fz-0", "fz-1"])
    got = 0
    deadline = time.time() + 20
    while got < 10 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    c.committed([TopicPartition("fz-0", 0)], timeout=10)
    c.close()
    # a transactional consume-transform-produce offset commit
    tp.begin_transaction()
    tp.produce("fz-2", value=b"ctp")
    c2 = Consumer({"bootstrap.servers": bs, "group.id": "fzg-1", "enable.auto.commit": False})
    tp.send_offsets_to_transaction([TopicPartition("fz-0", 0, 1)], c2.consumer_group_metadata(), 20)
    tp.commit_transaction(20)
    c2.close()
    admin.list_consumer_groups().result(10)
    admin.describe_consumer_groups(["fzg-0"])["fzg-0"].result(10)
    admin.create_partitions([NewPartitions("fz-2", 3)])["fz-2"].result(10)
    admin.list_topics(timeout=10)
    try:   # (delete_records needs a recent confluent-kafka)
        for f in admin.delete_records([TopicPartition("fz-2", 0, 1)]).values():
            f.result(10)
    except Exception as e:
        print("confluent-kafka delete_records skipped: %r" % e)
    for f in admin.delete_topics(["fz-new"]).values():
        try:
            f.result(10)
        except Exception:
            pass


def kafka_python_session(bs):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType

    p = KafkaProducer(bootstrap_servers=bs, compression_type="gzip", linger_ms=2)
    for i in range(10):
        p.send("fz-%d" % (i % 3), key=b"kp-%d" % i, value=b"kafka-python-%d" % i, headers=[("k", b"v")])
    p.flush(20)
    p.close()
    c = KafkaConsumer("fz-0", "fz-1", bootstrap_servers=bs, group_id="fzg-2", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    n = 0
    for _ in c:
        n += 1
        if n >= 10:
            break
    c.commit()
    c.close()
    a = KafkaAdminClient(bootstrap_servers=bs)
    calls = [lambda: a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "fz-1")]),
             a.list_groups, lambda: a.describe_groups(["fzg-2"]), lambda: a.list_group_offsets("fzg-2"),
             a.describe_cluster, a.describe_log_dirs, a.list_transactions, a.list_partition_reassignments,
             lambda: a.describe_topic_partitions(["fz-0"]), lambda: a.describe_topics(["fz-1"]),
             lambda: a.describe_transactions(["fzt-0"]), lambda: a.describe_producers(["fz-1"])]
    for call in calls:   # whatever this kafka-python offers: the bytes are what matters here
        try:
            call()
        except Exception as e:
            print("kafka-python admin call skipped: %r" % e)
    a.close()


def whole_frames(stream: bytes) -> bytes:
    """The complete frames of one connection's stream (a client may close mid-request)."""
    pos = 0
    while pos + 4 <= len(stream):
        n = int.from_bytes(stream[pos:pos + 4], "big", signed=True)
        if n < 0 or pos + 4 + n > len(stream):
            break
        pos += 4 + n
    return stream[:pos]


def main():
    out = os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        # the broker first, on its own port; the proxy in front of it; then the broker again,
        # advertising the proxy (a restart keeps the data dir and the port)
        b = BrokerProcess(os.path.join(d, "data"), {"group.initial.rebalance.delay.ms": "0"})
        b.start()
        proxy = RecordingProxy(("127.0.0.1", b.port))
        b.overrides["advertised.listeners"] = "PLAINTEXT://127.0.0.1:%d" % proxy.port
        b.restart()
        bs = "127.0.0.1:%d" % proxy.port
        try:
            for label, session in (("confluent-kafka", confluent_session), ("kafka-python", kafka_python_session)):
                proxy.label = label
                session(bs)
                time.sleep(0.5)
        finally:
            b.stop()
        for label in ("confluent-kafka", "kafka-python"):
            data = b"".join(whole_frames(bytes(buf)) for lab, buf in proxy.streams if lab == label)
            with open(os.path.join(out, label + ".bin"), "wb") as fh:
                fh.write(data)
            print("%s: %d bytes" % (label, len(data)))


if __name__ == "__main__":
    main()
