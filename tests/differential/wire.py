"""Raw requests for the differential suite: pykbroker's codec (``APIS``, whose specs are checked
against Kafka's own message definitions by tests/protocol) on a plain socket, for fields no
high-level client exposes; record batches are built by kafka-python's independent builder."""
from __future__ import annotations

import socket
import struct
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from pykbroker.protocol.codec import APIS

ZERO_UUID = bytes(16)


class Raw:
    def __init__(self, target, timeout: float = 20.0, client_id: str = "differential"):
        self.target = target
        self.sock = socket.create_connection((target.host, target.port), timeout=timeout)
        self.corr = 0
        self.client_id = client_id.encode()

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, api_key: int, version: int, body: dict) -> int:
        api = APIS[api_key]
        self.corr += 1
        hdr = struct.pack(">hhih", api_key, version, self.corr, len(self.client_id)) + self.client_id
        if api.flexible(version):
            hdr += b"\x00"
        payload = hdr + api.encode_bytes("request", version, body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.corr

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("%s closed the connection" % self.target.name)
            buf += chunk
        return bytes(buf)

    def recv(self, api_key: int, version: int, corr: int) -> dict:
        (n,) = struct.unpack(">i", self._exact(4))
        frame = self._exact(n)
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == corr, (got, corr)
        pos = 4
        api = APIS[api_key]
        if api.flexible(version) and api_key != 18:   # ApiVersions responses keep header v0
            pos += 1
        return api.decode("response", version, memoryview(frame)[pos:])

    def request(self, api_key: int, version: int, body: dict) -> dict:
        return self.recv(api_key, version, self.send(api_key, version, body))

    def closed_after(self, api_key: int, version: int, body: dict) -> bool:
        """Send a request expecting no answer: True if the peer closed the connection."""
        self.send(api_key, version, body)
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True


def call(target, api_key, version, body, **kw):
    with Raw(target, **kw) as r:
        return r.request(api_key, version, body)


def batch(values, producer_id=-1, producer_epoch=-1, base_sequence=-1, timestamps=None, keys=None,
          compression=0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 24)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamps[i] if timestamps else now, key=keys[i] if keys else None,
                 value=v, headers=[])
    return bytes(b.build())


def produce(target, topic, partition, records, acks=-1, version=9, timeout_ms=10000, raw=None):
    body = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if raw is not None:
        resp = raw.request(0, version, body)
    else:
        resp = call(target, 0, version, body)
    return resp["responses"][0]["partition_responses"][0]


def fetch(target, topic, partition, offset, version=12, max_wait_ms=0, max_bytes=1 << 20, isolation_level=0,
          current_leader_epoch=-1):
    resp = call(target, 1, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
            "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return resp


def create_topic(target, name, partitions=1, configs=None, version=5):
    resp = call(target, 19, version, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 15000, "validate_only": False})
    t = resp["topics"][0]
    assert t["error_code"] in (0, 36), (target, t)
    wait_for_topic(target, name, partitions)
    return t


def metadata(target, topics, version=12, auto_create=False):
    body = {"topics": None if topics is None else [{"name": t, "topic_id": ZERO_UUID} for t in topics],
            "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    return call(target, 3, version, body)


def wait_for_topic(target, name, partitions, timeout=15.0):
    """Until every partition of the topic has a leader (Kafka's metadata propagates asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        m = metadata(target, [name])
        t = m["topics"][0]
        if t["error_code"] == 0 and len(t["partitions"]) == partitions and \
                all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"]):
            return m
        if time.monotonic() > deadline:
            raise AssertionError("%s: topic %s not ready: %r" % (target.name, name, t))
        time.sleep(0.05)


def init_producer_id(target, version=4):
    deadline = time.monotonic() + 30
    while True:
        r = call(target, 22, version, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                       "producer_id": -1, "producer_epoch": -1})
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first producer id block arrives
        if r["error_code"] not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r["error_code"] == 0, (target, r)
    return r["producer_id"], r["producer_epoch"]


def list_offsets(target, topic, partition, timestamp, version=7, isolation_level=0):
    r = call(target, 2, version, {"replica_id": -1, "isolation_level": isolation_level, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": timestamp, "max_num_offsets": 1}]}]})
    return r["topics"][0]["partitions"][0]


def differences(a, b, path="", out=None) -> list:
    """Every path where a (pykbroker) and b (Kafka) differ, as readable lines."""
    out = [] if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append("%s.%s: pykbroker=%r, kafka has no such key" % (path, k, a[k]))
            elif k not in a:
                out.append("%s.%s: kafka=%r, pykbroker has no such key" % (path, k, b[k]))
            else:
                differences(a[k], b[k], "%s.%s" % (path, k), out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, "%s[%d]" % (path, i), out)
    elif a != b:
        out.append("%s: pykbroker=%r kafka=%r" % (path or "<value>", a, b))
    return out


def explain(a, b) -> str:
    d = differences(a, b)
    return "pykbroker and Apache Kafka differ:\n  " + "\n  ".join(d[:40])
