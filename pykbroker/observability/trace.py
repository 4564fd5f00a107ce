"""Protocol trace: requests and responses decoded to JSON lines.

``pykbroker serve --trace FILE`` installs :class:`TraceWriter` as a request observer;
``pykbroker trace proxy`` (``proxy.py``) writes the same lines for a conversation it relays.  One
line per request, written once it was answered::

    {"time": 1732406400.123, "connection": "127.0.0.1:50312", "api": "Produce", "api_key": 0,
     "api_version": 9, "header": {"correlation_id": 7, "client_id": "rdkafka"},
     "request": {...}, "response": {...} | null, "total_ms": 1.9}

``request`` and ``response`` are the bodies as the project's generated codecs decode them
(Kafka's field names in snake_case), made JSON: a ``records`` field becomes a list of batches
(header fields, and each record's offset, timestamp, key, value and headers; keys and values as
UTF-8 text when they are, else ``{"base64": ...}``), a Uuid its text form, other bytes base64.
``response`` is ``null`` for an acks=0 Produce (Kafka sends nothing back).  The server-side
trace decodes the response from the bytes actually written (file regions read back), so both
writers decode with the same code from the same bytes as a client would see them.

Writing is synchronous and line-buffered: tracing is for debugging and comparing, not for a
broker under load.
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Iterable

from ..protocol import primitives as P
from ..protocol.codec import APIS, Chunks
from ..protocol.primitives import uuid_to_str
from .observer import RequestObserver, api_name

if TYPE_CHECKING:
    from ..server.connection import Connection
    from ..server.dispatch import HandleRequest

MAX_RECORDS_PER_BATCH = 1000   # a trace line stays readable; the rest of a batch is counted only


def _text_or_b64(b: bytes | memoryview | None) -> str | dict[str, str] | None:
    if b is None:
        return None
    b = bytes(b)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def records_json(buf: Any) -> list[dict[str, Any]] | None:
    """A records value as a list of batches (partial trailing batch: ``{"partial_bytes": n}``)."""
    from ..protocol.records import RecordError, decode_records, parse_header

    if buf is None:
        return None
    buf = bytes(buf)
    out, pos = [], 0
    while pos < len(buf):
        try:
            h = parse_header(buf, pos)
        except RecordError:
            out.append({"partial_bytes": len(buf) - pos})
            break
        if pos + h.size > len(buf):
            out.append({"partial_bytes": len(buf) - pos})
            break
        batch = {k: getattr(h, k) for k in (
            "base_offset", "partition_leader_epoch", "magic", "attributes", "last_offset_delta",
            "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
            "records_count")}
        batch["size"] = h.size
        try:
            recs = decode_records(buf[pos:pos + h.size])
            batch["records"] = [{"offset": r.offset, "timestamp": r.timestamp, "key": _text_or_b64(r.key),
                                 "value": _text_or_b64(r.value),
                                 "headers": [[k, _text_or_b64(v)] for k, v in r.headers]}
                                for r in recs[:MAX_RECORDS_PER_BATCH]]
        except Exception as e:   # undecodable records are reported, not fatal
            batch["records_error"] = str(e)
        out.append(batch)
        pos += h.size
    return out


def to_json(value: Any, key: str | None = None) -> Any:
    """A decoded body (dicts, lists, scalars, bytes) as JSON-able values."""
    if isinstance(value, dict):
        return {k: to_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if key == "records":
        return records_json(value)
    if value.__class__ is bytes and len(value) == 16:
        return uuid_to_str(value)   # read_uuid returns bytes; other byte fields are memoryviews
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode()}
    return value


def materialize(parts: Iterable[Any]) -> bytes:
    """The bytes of framed response parts (bytes and file regions read back with pread)."""
    out = bytearray()
    for p in parts:
        if hasattr(p, "fd"):
            out += os.pread(p.fd, p.length, p.position)
        elif isinstance(p, Chunks):
            out += materialize(p.parts)
        else:
            out += p
    return bytes(out)


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, dict]:
    """(correlation id, body) of a response frame without its size prefix.  ApiVersions always
    answers with header v0 (KIP-511); other APIs use header v1 from their first flexible version."""
    spec = APIS[api_key]
    corr = P.I32.unpack_from(frame, 0)[0]
    pos = 4
    if api_key != 18 and api_version >= spec.flexible_from:
        ntag, pos = P.read_uvarint(frame, pos)
        for _ in range(ntag):
            _tag, pos = P.read_uvarint(frame, pos)
            size, pos = P.read_uvarint(frame, pos)
            pos += size
    if api_key == 18 and len(frame) >= 6 and P.I16.unpack_from(frame, 4)[0] == 35 and api_version > 0:
        # UNSUPPORTED_VERSION answers to ApiVersions come as v0 bodies (KIP-511)
        try:
            return corr, spec.decode("response", api_version, memoryview(frame)[pos:], exact=False)
        except Exception:
            return corr, spec.decode("response", 0, memoryview(frame)[pos:], exact=False)
    return corr, spec.decode("response", api_version, memoryview(frame)[pos:], exact=False)


def _redacted(api_key: int, body: Any) -> Any:
    """A body without its secrets: SaslAuthenticate tokens (a PLAIN token is the password) and
    AlterUserScramCredentials' salts and salted passwords are replaced by their length."""
    if not isinstance(body, dict):
        return body
    if api_key == 36 and body.get("auth_bytes") is not None:
        return {**body, "auth_bytes": "<redacted %d bytes>" % len(body["auth_bytes"])}
    if api_key == 51 and body.get("upsertions"):
        return {**body, "upsertions": [{**u, "salt": "<redacted>", "salted_password": "<redacted>"}
                                       for u in body["upsertions"]]}
    return body


def exchange(connection: str, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
             request: Any, response: Any, t_start: float, total_ms: float, **extra: Any) -> dict[str, Any]:
    spec = APIS.get(api_key)
    if api_key in (36, 51):   # never a secret in a trace
        request, response = _redacted(api_key, request), _redacted(api_key, response)
    line = {"time": round(t_start, 6), "connection": connection,
            "api": api_name(spec) if spec is not None else str(api_key), "api_key": api_key,
            "api_version": api_version, "header": {"correlation_id": correlation_id, "client_id": client_id},
            "request": to_json(request), "response": to_json(response) if response is not None else None,
            "total_ms": round(total_ms, 3)}
    line.update(extra)
    return line


class TraceFile:
    """JSON lines appended to a file, one per exchange (thread-safe; flushed per line)."""

    def __init__(self, path: str) -> None:
        self._fh = open(path, "a", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, line: dict) -> None:
        text = json.dumps(line, default=str)
        with self._lock:
            self._fh.write(text + "\n")

    def close(self) -> None:
        self._fh.close()


class TraceWriter(RequestObserver):
    """Request observer of ``pykbroker serve --trace FILE``."""

    def __init__(self, path: str) -> None:
        self.out = TraceFile(path)

    def request_done(self, conn: Connection, event: HandleRequest, response: dict[str, Any] | None,
                     parts: list[Any] | None, error: BaseException | None, t0: float, t1: float,
                     t2: float) -> None:
        ctx = event.ctx
        body = None
        extra = {}
        if parts is not None:
            frame = materialize(parts)[4:]
            try:
                _corr, body = decode_response(frame, ctx.api_key, ctx.api_version)
            except Exception as e:
                extra["response_error"] = "undecodable: %s" % e
        if error is not None:
            extra["handler_error"] = repr(error)
        self.out.write(exchange(conn.peer, ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id,
                                event.request, body, time.time() - (time.perf_counter() - t0),
                                (t2 - t0) * 1000.0, **extra))

    def close(self) -> None:
        self.out.close()
