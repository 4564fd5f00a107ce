"""The one raw Kafka wire client of the launchers (pykbroker/local), the embedded broker's
introspection, the tests, the tools and the Apache Kafka oracle.

The only module of ``protocol/`` that does I/O: the broker never imports it (its codecs are
sans-IO; trio code moves their bytes), clients of a broker do.

A small blocking socket client that frames requests with a request header (v1, or v2 with
tagged fields for flexible versions) and encodes/decodes bodies with pykbroker's protocol codec
(``APIS``, whose specs are checked against Kafka's own message definitions by tests/protocol),
at any API version.  For malformed-input tests it also sends arbitrary bytes and reads frames
without decoding them; for behaviour without an answer it tells whether the peer closed the
connection.  :func:`call_kafka_python` sends a request built by kafka-python's protocol classes
instead (an independent codec, for tests that must not trust ours).

Record batches are built and parsed by kafka-python's DefaultRecordBatchBuilder /
DefaultRecordBatch (an independent implementation); kafka-python is imported only by those
helpers, so the client itself needs nothing but pykbroker.

    with WireClient(broker) as c:          # broker: "host:port", (host, port), or an object
        resp = c.request(3, 12, body)      # with .bootstrap, .host/.port or .port
"""
from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

from .codec import APIS

if TYPE_CHECKING:
    # A request body: a message dict the codec encodes, or bytes sent as they are.
    Body = Union[dict[str, Any], bytes, bytearray, memoryview]

__all__ = [
    "WireClient", "ZERO_UUID", "address_of", "request_frame", "decode_response", "call",
    "call_kafka_python", "make_batch", "decode_batches", "produce", "produce_part", "fetch",
    "fetch_part", "metadata", "list_offsets", "create_topic", "wait_for_topic", "init_producer_id",
]

ZERO_UUID = bytes(16)
DEFAULT_CLIENT_ID = "pykbroker-tests"
API_VERSIONS = 18   # its responses keep header v0 even for flexible versions (KIP-511)


def address_of(target: Any) -> tuple[str, int]:
    """(host, port) of ``"host:port"``, a (host, port) tuple, or an object with a ``bootstrap``
    string, ``host`` and ``port``, or only ``port`` (loopback)."""
    if isinstance(target, tuple):
        return target[0], int(target[1])
    boot = target if isinstance(target, str) else getattr(target, "bootstrap", None)
    if isinstance(boot, str):
        host, port = boot.rsplit(":", 1)
        return host, int(port)
    return getattr(target, "host", "127.0.0.1"), int(target.port)


def request_frame(api_key: int, version: int, corr: int, body: Body, client_id: str | None = DEFAULT_CLIENT_ID,
                  flexible: bool | None = None) -> bytes:
    """A size-prefixed request: header v1 (v2 when ``flexible``; default: as the API's version
    says, non-flexible for an API the codec does not know) then ``body`` (a dict encoded by the
    codec, or bytes sent as they are)."""
    if flexible is None:
        api = APIS.get(api_key)
        flexible = api is not None and api.flexible(version)
    if client_id is None:
        hdr = struct.pack(">hhih", api_key, version, corr, -1)
    else:
        cid = client_id.encode()
        hdr = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid
    if flexible:
        hdr += b"\x00"   # no tagged fields
    if not isinstance(body, (bytes, bytearray, memoryview)):
        body = APIS[api_key].encode_bytes("request", version, body)
    payload = hdr + bytes(body)
    return struct.pack(">i", len(payload)) + payload


def decode_response(frame: bytes, api_key: int, version: int, corr: int | None = None) -> dict:
    """Decode a response frame (without its size prefix); checks the correlation id if given."""
    (got,) = struct.unpack_from(">i", frame, 0)
    if corr is not None:
        assert got == corr, (got, corr)
    pos = 4
    api = APIS[api_key]
    if api.flexible(version) and api_key != API_VERSIONS:
        assert frame[pos] == 0  # empty tagged fields
        pos += 1
    return api.decode("response", version, memoryview(frame)[pos:])


class WireClient:
    """One blocking connection.  ``send``/``recv`` may be split to pipeline or to park a request
    (a JoinGroup that waits for a rebalance) while others go on other connections."""

    def __init__(self, target: Any, timeout: float = 15.0, client_id: str | None = DEFAULT_CLIENT_ID,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host, self.port = address_of(target)
        self.name = getattr(target, "name", None) or "%s:%d" % (self.host, self.port)
        self.client_id = client_id
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
        if ssl_context is not None:   # a TLS listener (SSL, SASL_SSL)
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=self.host)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    # -- sending ---------------------------------------------------------------------------
    def send(self, api_key: int, version: int, body: Body, flexible: bool | None = None) -> int:
        """Send one request (``body``: dict or raw bytes); returns its correlation id."""
        self.corr += 1
        self.sock.sendall(request_frame(api_key, version, self.corr, body, self.client_id, flexible))
        return self.corr

    def send_bytes(self, data: bytes) -> None:
        """Send bytes as they are (a hand-made or deliberately malformed frame)."""
        self.sock.sendall(data)

    # -- receiving -------------------------------------------------------------------------
    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("%s closed the connection after %d of %d bytes" % (self.name, len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        """The next response frame, undecoded (correlation id first, no size prefix)."""
        (n,) = struct.unpack(">i", self.recv_exact(4))
        return self.recv_exact(n)

    def recv(self, api_key: int, version: int, corr: int) -> dict:
        return decode_response(self.recv_frame(), api_key, version, corr)

    def request(self, api_key: int, version: int, body: Body) -> dict:
        return self.recv(api_key, version, self.send(api_key, version, body))

    def wait_closed(self, timeout: float | None = None) -> bool:
        """True if the peer closes the connection (or resets it) before sending anything."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):   # reset, aborted, broken pipe, TLS EOF: closed as well
            return True

    def closed_after(self, api_key: int, version: int, body: Body, flexible: bool | None = None) -> bool:
        """Send a request expecting no answer: True if the peer closed the connection."""
        self.send(api_key, version, body, flexible)
        return self.wait_closed()


@contextlib.contextmanager
def _connection(conn: Any) -> Iterator[WireClient]:
    """``conn`` itself if it is a WireClient, else a new connection to it, closed afterwards."""
    if isinstance(conn, WireClient):
        yield conn
    else:
        with WireClient(conn) as c:
            yield c


def call(target: Any, api_key: int, version: int, body: Body, **kw: Any) -> dict:
    """One request on a new connection (``kw``: WireClient's timeout and client_id)."""
    with WireClient(target, **kw) as c:
        return c.request(api_key, version, body)


def call_kafka_python(target: Any, request: Any, version: int, response_cls: Any, timeout: float = 10.0) -> Any:
    """One request encoded, and its response decoded, by kafka-python's protocol classes (an
    independent client codec), for behaviour no high-level client API exposes directly."""
    request.with_header(correlation_id=7, client_id=DEFAULT_CLIENT_ID)
    with WireClient(target, timeout=timeout) as c:
        c.send_bytes(request.encode(version=version, header=True, framed=True))
        frame = c.recv_frame()
    return response_cls.decode(frame, version=version, header=True)


# -- record batches (kafka-python's independent implementation) ---------------------------------
def make_batch(values: Sequence[bytes | None], producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = -1, timestamps: Sequence[int] | None = None,
               compression: int = 0, transactional: bool = False,
               keys: Sequence[bytes | None] | None = None) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 24)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamps[i] if timestamps else now, key=keys[i] if keys else None,
                 value=v, headers=[])
    return bytes(b.build())


def decode_batches(data: bytes | bytearray | memoryview | None) -> list:
    """[(base_offset, partition_leader_epoch, [(offset, timestamp, value), ...]), ...] parsed by
    kafka-python's DefaultRecordBatch."""
    from kafka.record.default_records import DefaultRecordBatch

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


# -- requests ---------------------------------------------------------------------------------
# ``conn`` is a WireClient, or anything WireClient accepts (then a new connection is used).
def produce(conn: Any, topic: str, partition: int, records: Any, acks: int = -1, version: int = 9,
            timeout_ms: int = 10000) -> dict:
    with _connection(conn) as c:
        return c.request(0, version, {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
                                      "topic_data": [{"name": topic, "partition_data": [
                                          {"index": partition, "records": records}]}]})


def produce_part(resp: dict[str, Any]) -> dict:
    return resp["responses"][0]["partition_responses"][0]


def fetch(conn: Any, topic: str, partition: int, offset: int, version: int = 12, max_wait_ms: int = 0,
          min_bytes: int = 1, max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20,
          isolation_level: int = 0, current_leader_epoch: int = -1, session_id: int = 0,
          session_epoch: int = -1) -> dict:
    with _connection(conn) as c:
        return c.request(1, version, {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": isolation_level, "session_id": session_id, "session_epoch": session_epoch,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": current_leader_epoch,
                "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""})


def fetch_part(resp: dict[str, Any]) -> dict:
    return resp["responses"][0]["partitions"][0]


def metadata(conn: Any, topics: Iterable[str] | None, version: int = 12, auto_create: bool = False) -> dict:
    body = {"topics": None if topics is None else [{"name": t, "topic_id": ZERO_UUID} for t in topics],
            "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    with _connection(conn) as c:
        return c.request(3, version, body)


def list_offsets(conn: Any, topic: str, partition: int, timestamp: int, version: int = 7,
                 isolation_level: int = 0) -> dict:
    """The one partition's answer."""
    with _connection(conn) as c:
        r = c.request(2, version, {"replica_id": -1, "isolation_level": isolation_level, "timeout_ms": 30000, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                            "timestamp": timestamp, "max_num_offsets": 1}]}]})
    return r["topics"][0]["partitions"][0]


def create_topic(conn: Any, name: str, partitions: int = 1, configs: dict[str, str | None] | None = None,
                 version: int = 5, exist_ok: bool = False) -> dict:
    """CreateTopics (replication factor 1), then wait until every partition has a leader;
    returns the topic's answer.  An error fails the test (TOPIC_ALREADY_EXISTS only without
    ``exist_ok``)."""
    with _connection(conn) as c:
        resp = c.request(19, version, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 15000, "validate_only": False})
        t = resp["topics"][0]
        assert t["error_code"] == 0 or (exist_ok and t["error_code"] == 36), (c.name, t)
        wait_for_topic(c, name, partitions)
    return t


def wait_for_topic(conn: Any, name: str, partitions: int, timeout: float = 15.0) -> dict:
    """Until every partition of the topic has a leader (Kafka's metadata propagates
    asynchronously); returns the Metadata response."""
    deadline = time.monotonic() + timeout
    with _connection(conn) as c:
        while True:
            m = metadata(c, [name])
            t = m["topics"][0]
            if t["error_code"] == 0 and len(t["partitions"]) == partitions and \
                    all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"]):
                return m
            if time.monotonic() > deadline:
                raise AssertionError("%s: topic %s not ready: %r" % (c.name, name, t))
            time.sleep(0.05)


def init_producer_id(conn: Any, version: int = 4, timeout: float = 30.0) -> tuple[int, int]:
    """A new idempotent producer's (id, epoch)."""
    deadline = time.monotonic() + timeout
    with _connection(conn) as c:
        while True:
            r = c.request(22, version, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                        "producer_id": -1, "producer_epoch": -1})
            # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first producer id block arrives
            if r["error_code"] not in (14, 15) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r["error_code"] == 0, (c.name, r)
    return r["producer_id"], r["producer_epoch"]
