"""A minimal raw Kafka client for protocol-level tests: encodes requests with pykbroker's codec
(whose specs are checked against Kafka's own definitions by tests/protocol) and builds record
batches with kafka-python's independent DefaultRecordBatchBuilder."""
from __future__ import annotations

import socket
import struct
import time

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from pykbroker.protocol.codec import APIS


class RawClient:
    def __init__(self, broker, timeout: float = 15.0):
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout)
        self.corr = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, api_key: int, version: int, body: dict) -> int:
        api = APIS[api_key]
        flexible = api.flexible(version)
        self.corr += 1
        hdr = struct.pack(">hhi", api_key, version, self.corr) + struct.pack(">h", 8) + b"raw-test"
        if flexible:
            hdr += b"\x00"
        payload = hdr + api.encode_bytes("request", version, body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.corr

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return bytes(buf)

    def recv(self, api_key: int, version: int, corr: int) -> dict:
        (n,) = struct.unpack(">i", self._recv_exact(4))
        frame = self._recv_exact(n)
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == corr, (got, corr)
        pos = 4
        api = APIS[api_key]
        if api.flexible(version) and api_key != 18:
            assert frame[pos] == 0  # empty tagged fields
            pos += 1
        return api.decode("response", version, memoryview(frame)[pos:])

    def request(self, api_key: int, version: int, body: dict) -> dict:
        corr = self.send(api_key, version, body)
        return self.recv(api_key, version, corr)


def make_batch(values, producer_id=-1, producer_epoch=-1, base_sequence=-1, timestamps=None,
               compression=0, transactional=False, keys=None) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 24)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        ts = timestamps[i] if timestamps else now
        k = keys[i] if keys else None
        b.append(i, timestamp=ts, key=k, value=v, headers=[])
    return bytes(b.build())


def decode_batches(data) -> list:
    """[(base_offset, partition_leader_epoch, [(offset, timestamp, value), ...]), ...] parsed by
    kafka-python's DefaultRecordBatch."""
    data = bytes(data or b"")
    out = []
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if end > len(data):
            break  # partial trailing batch: clients skip it
        batch = DefaultRecordBatch(data[pos:end])
        recs = [(r.offset, r.timestamp, r.value) for r in batch]
        (epoch,) = struct.unpack_from(">i", data, pos + 12)
        out.append((batch.base_offset, epoch, recs))
        pos = end
    return out


def produce(client, topic, partition, batch, acks=-1, version=9, timeout_ms=10000):
    return client.request(0, version, {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
                                       "topic_data": [{"name": topic, "partition_data": [
                                           {"index": partition, "records": batch}]}]})


def produce_part(resp) -> dict:
    return resp["responses"][0]["partition_responses"][0]


def fetch(client, topic, partition, offset, version=12, max_wait_ms=0, min_bytes=1,
          max_bytes=50 << 20, partition_max_bytes=1 << 20, isolation_level=0,
          current_leader_epoch=-1, session_id=0, session_epoch=-1):
    return client.request(1, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": isolation_level, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": current_leader_epoch,
            "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": partition_max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def fetch_part(resp) -> dict:
    return resp["responses"][0]["partitions"][0]


def create_topic(broker, name, partitions=1, configs=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = a.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=10)
    for f in fs.values():
        f.result(15)
