"""Produce's fast path: the common request from its bytes to its answer's bytes, with the
fewest steps, and the general path (handlers/k00_produce.py) for everything else.

The common request is what a producer sends when it has one batch ready: one topic, one
partition, no transactional id, acks 0 or 1, one whole magic-v2 batch, not transactional,
idempotent or not (compat/bench/loadgen.py's ``conns`` cells, and most of librdkafka's and the
Java client's requests at low load).  The general path decodes it into the generated codec's
dicts, walks them in the handler and the ``ReplicaManager``, validates with the loop for any
number of batches, builds a status object and a response dict and encodes that; here:

- ``decode``: the body read field by field straight from the frame (after the header the
  dispatcher already parsed) into a ``FastProduce``; any other shape (two topics or partitions,
  a transactional id, acks=-1, tagged fields, trailing bytes, a null records field, bytes that
  do not parse) returns None before anything is decided, and the dispatcher decodes it as
  usual.  Flexible versions (9+) and the classic ones (3-8); v13 names the topic by id.
- ``handle``: the same checks in the same order as the general path for this shape (the topic
  known to the metadata, the partition hosted here, online and led by this broker, not internal;
  a topic that neither recompresses nor walks records: ``compression.type=producer``, not
  compacted, no finite ``message.timestamp.before.max.ms``), the batch validated by
  ``storage/log_validator.validate_single_batch`` (CRC-32C, magic, counts, sequence, size,
  timestamp bound), then the same ``Partition.append_records_as_leader`` as the general path
  (the log's producer state checks the idempotent sequence; offsets, epoch, HW, followers'
  wake-up, ``flush.messages``).  Whatever is not the plain case *before the append* (an unknown
  topic, not the leader, an invalid batch, ...) goes to the general path with the whole request
  decoded: nothing has changed yet, so it answers exactly as it always did, with Kafka's error
  and message.  An append the partition refuses (out-of-order sequence, an old epoch, a
  storage error) is answered by the general path's code from its status (``k00_produce.answer``).
- The success answer (one partition, NONE) is written directly in its fixed layout, framed
  with the correlation id; tests/protocol/test_produce_fast_path.py compares it, and the log's
  bytes, with the general path's for the same requests, errors included.

The dispatcher takes this path only while nothing else looks at the request: no fault
injection rule, no authorizer session, no observer (metrics, traces, request logs) and no client
quota on the connection (server/dispatch.py ``Dispatcher._fast_produce_ok``); otherwise every
Produce takes the general path, as before.
"""
from __future__ import annotations

import struct
from typing import Any, Optional

from ...cluster.replica_manager import failed_status
from ...protocol.codec import APIS
from ...protocol.errors import KafkaError
from ...protocol.records import COMPRESSION_TYPES
from ...server.dispatch import NOT_NOW, Remainder, RequestContext
from ...storage.log_validator import LONG_MAX, validate_single_batch

_PRODUCE = APIS[0]
_ACKS_TIMEOUT = struct.Struct(">hi")
_FLEX_START = struct.Struct(">BhiB")   # v9+: null transactional_id, acks, timeout_ms, topics + 1
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class FastProduce:
    """A common Produce request as ``decode`` read it.  ``frame`` and ``body_offset``: the whole
    request, for the general path should the handler hand it over."""

    __slots__ = ("frame", "body_offset", "acks", "timeout_ms", "name", "topic_id", "index", "records", "_full")

    def __init__(self, frame: bytearray, body_offset: int, acks: int, timeout_ms: int, name: Optional[str],
                 topic_id: Optional[bytes], index: int, records: memoryview) -> None:
        self.frame = frame
        self.body_offset = body_offset
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.name = name
        self.topic_id = topic_id
        self.index = index
        self.records = records
        self._full: Optional[dict] = None

    def full(self, version: int) -> dict:
        """The request as the generated codec decodes it (the general path's input)."""
        if self._full is None:
            self._full = _PRODUCE.decode("request", version, memoryview(self.frame)[self.body_offset:],
                                         exact=False)
        return self._full


def decode(frame: bytearray, pos: int, version: int) -> Optional[FastProduce]:
    """The common request's fields from ``frame`` (its body at ``pos``), or None for any other
    request (the dispatcher then decodes it with the codec)."""
    body_offset = pos
    try:
        topic_id = name = None
        if version >= 9:
            # transactional_id null (0), acks, timeout_ms, one topic (compact array length 2)
            tid, acks, timeout_ms, ntopics = _FLEX_START.unpack_from(frame, pos)
            if tid != 0 or ntopics != 2:
                return None
            pos += 8
            if version >= 13:
                topic_id = bytes(frame[pos:pos + 16])
                pos += 16
            else:
                n = frame[pos]   # a compact string's length + 1 in one byte: names below 127 bytes
                if n == 0 or n >= 0x80:
                    return None
                name = str(frame[pos + 1:pos + n], "utf-8")
                pos += n
            if frame[pos] != 2:   # one partition
                return None
            (index,) = _I32.unpack_from(frame, pos + 1)
            pos += 5
            # records: compact bytes, length + 1 as an unsigned varint (null: 0); one or two
            # bytes (below 16 KiB) read straight, longer ones by the loop
            b = frame[pos]
            if b < 0x80:
                n = b
                pos += 1
            elif frame[pos + 1] < 0x80:
                n = (b & 0x7F) | frame[pos + 1] << 7
                pos += 2
            else:
                n = shift = 0
                while True:
                    b = frame[pos]
                    pos += 1
                    n |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                    if shift > 28:
                        return None
            if n == 0:
                return None
            end = pos + n - 1
            # then no tagged field in the partition, the topic and the request, and nothing more
            if end + 3 != len(frame) or frame[end] or frame[end + 1] or frame[end + 2]:
                return None
        else:
            (tid,) = _I16.unpack_from(frame, pos)
            if tid != -1:
                return None
            acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos + 2)
            if _I32.unpack_from(frame, pos + 8)[0] != 1:
                return None
            (n,) = _I16.unpack_from(frame, pos + 12)
            pos += 14
            if n < 0 or pos + n > len(frame):
                return None
            name = str(frame[pos:pos + n], "utf-8")
            pos += n
            if _I32.unpack_from(frame, pos)[0] != 1:
                return None
            index, n = struct.unpack_from(">ii", frame, pos + 4)
            pos += 12
            end = pos + n
            if n < 0 or end != len(frame):
                return None
        if acks != 1 and acks != 0:
            return None   # acks=-1 (the replication wait) and invalid acks: the general path
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    return FastProduce(frame, body_offset, acks, timeout_ms, name, topic_id, index, memoryview(frame)[pos:end])


class FlushThen(Remainder):
    """``FastPath.handle_now``: appended; ``part.flush()`` (flush.messages) is to be awaited
    before ``answer`` is sent.  The rest of the request's handling, as a handler of it: a
    failed flush is answered as a failed ``FastPath.handle``."""

    __slots__ = ("part", "answer", "fast")

    def __init__(self, part: Any, answer: Optional[bytearray], fast: FastPath) -> None:
        self.part = part
        self.answer = answer
        self.fast = fast

    async def handle(self, ctx: RequestContext, req: Any) -> Optional[bytearray]:
        await self.part.flush()   # flush.messages, as the general path
        return self.answer

    def error_response(self, ctx: RequestContext, request: Any, code: int) -> dict:
        return self.fast.error_response(ctx, request, code)


class FastPath:
    """The handler of a ``FastProduce`` (what ``HandleRequest.handler`` holds) and its decoder
    (``decode``, for the dispatcher).  ``handle`` returns the framed answer (a bytearray, sent as
    it is by ``Dispatcher.finish``), a response dict (the general path's), or None (acks=0).
    Built by k00_produce with the general path's functions (``general``: its ``handle``,
    ``answer``, ``error_response`` and ``resolve_request``), so this module does not import it."""

    decode = staticmethod(decode)

    def __init__(self, general: Any) -> None:
        self.general = general

    async def handle(self, ctx: RequestContext, req: FastProduce) -> Any:
        got = self.handle_now(ctx, req)
        if got is NOT_NOW:
            return await self.general.handle(ctx, req.full(ctx.api_version))
        if got.__class__ is FlushThen:
            return await got.handle(ctx, req)
        return got

    def handle_now(self, ctx: RequestContext, req: FastProduce) -> Any:
        """``handle`` as far as it goes without awaiting: the answer (as ``handle``'s), or
        ``NOT_NOW`` when the request is the general path's (nothing done yet: the general path
        may await, so the caller runs ``handle`` instead), or a ``FlushThen`` (a ``Remainder``)
        when the batch is appended and flush.messages asks for the fsync before answering.  The connection
        poller (server/poller.py) carries out what this returns without a task switch;
        ``handle`` is the same steps for a connection's own task."""
        general = self.general
        version = ctx.api_version
        services = ctx.services
        metadata = services.metadata_cache
        # (a v13 decode always sets topic_id)
        name = req.name if version < 13 else metadata.name_of(req.topic_id)  # type: ignore[arg-type]
        part = None
        if name is not None:
            info = metadata.topics.get(name)
            if info is not None and not info.internal:
                part = services.replica_manager.partitions.get((name, req.index))
        if part is None or part.offline or not part.is_leader:
            return NOT_NOW
        cfg = part.config
        facts = part.fast_produce_facts
        if facts is None or facts[0] is not cfg:
            facts = part.fast_produce_facts = _fast_facts(cfg)
        if not facts[1]:
            # recompression, or records to walk (keys, timestamps): the general path
            return NOT_NOW
        now_ms = services.clock.time_ms()
        validated = validate_single_batch(req.records, facts[2], version, now_ms, facts[3])
        if validated is None:
            return NOT_NOW
        try:
            res = part.append_records_as_leader(validated, now_ms)
        except KafkaError as e:
            # refused by the partition (its producer state, a storage error): nothing appended,
            # answered from the status as the general path answers it
            request = req.full(version)
            general.resolve_request(ctx, request)
            # (part is a Partition: an OfflinePartition is offline, sent to the general path above;
            # told to mypy by the two ignores, not by a check per request)
            return general.answer(ctx, request, [0], [failed_status(e, part)])  # type: ignore[arg-type]
        answer = None if req.acks == 0 else _success(ctx.correlation_id, version, req, name, res.base_offset,
                                                     res.log_append_time_ms, res.log_start_offset)
        if part.needs_flush():
            return FlushThen(part, answer, self)   # flush.messages: the fsync (awaited) before the answer
        return answer

    def error_response(self, ctx: RequestContext, request: Any, code: int) -> dict:
        """The handler raised (a flush failed, a bug) or the dispatcher refuses the request: the
        general path's error answer to the whole request."""
        if isinstance(request, FastProduce):
            request = request.full(ctx.api_version)
        return self.general.error_response(ctx, request, code)


def _fast_facts(cfg: Any) -> tuple:
    """What the fast path reads of a partition's topic config, read once per config dict (a
    config change replaces the partition's dict, Partition.update_config): (the dict, whether
    the fast path may append, ``max.message.bytes``, the CreateTime "after" bound or None).
    It may not when the topic recompresses (``compression.type`` other than producer), is
    compacted, or has a finite ``message.timestamp.before.max.ms`` (records to walk)."""
    create_time = cfg.get("message.timestamp.type") != "LogAppendTime"
    before = cfg.get("message.timestamp.before.max.ms") if create_time else None
    eligible = not (cfg.get("compression.type", "producer") in COMPRESSION_TYPES
                    or "compact" in (cfg.get("cleanup.policy") or ())
                    or (before is not None and before < LONG_MAX))
    return (cfg, eligible, cfg["max.message.bytes"] if eligible else None,
            cfg.get("message.timestamp.after.max.ms") if create_time else None)


def _success(correlation_id: int, version: int, req: FastProduce, name: Optional[str], base_offset: int,
             log_append_time_ms: int, log_start_offset: int) -> bytearray:
    """The framed answer of an appended partition: the generated encoder's bytes for
    {responses: [{name, partition_responses: [{index, NONE, offsets, record_errors: []}]}],
    throttle_time_ms: 0}, written in their fixed layout: the size and correlation id, the topic
    part (the same for every answer of a topic: cached), the partition and the tail, joined in
    one copy."""
    if version >= 9:
        topic = _flex_topic((req.topic_id or b"") if version >= 13 else None, name)
        part = _PART_FLEX.pack(req.index, 0, base_offset, log_append_time_ms, log_start_offset, _FLEX_TAIL)
    else:
        topic = _classic_topic(name or "")
        if version >= 8:
            part = _PART_V8.pack(req.index, 0, base_offset, log_append_time_ms, log_start_offset, _V8_TAIL)
        elif version >= 5:
            part = _PART_V5.pack(req.index, 0, base_offset, log_append_time_ms, log_start_offset, _V5_TAIL)
        else:
            part = _PART_V3.pack(req.index, 0, base_offset, log_append_time_ms, _V5_TAIL)
    return _JOIN((_HEAD.pack(4 + len(topic) + len(part), correlation_id), topic, part))


_JOIN = bytearray().join   # a bytearray: Dispatcher.finish sends it as it is
_HEAD = struct.Struct(">ii")   # the frame's size, the correlation id
# header tagged fields none, one topic (compact array) ... one partition (compact array)
_FLEX_TOPIC = b"\x00\x02%b\x02"
# the partition: index, error_code 0, base_offset, log_append_time_ms, log_start_offset, then
# record_errors [], error_message null, no tagged fields (partition, topic), throttle_time_ms 0,
# no tagged fields
_FLEX_TAIL = b"\x01\x00\x00\x00\x00\x00\x00\x00\x00"
_PART_FLEX = struct.Struct(">ihqqq9s")
# classic: record_errors [] and error_message null (v8+), throttle_time_ms 0
_V8_TAIL = b"\x00\x00\x00\x00\xff\xff\x00\x00\x00\x00"
_V5_TAIL = b"\x00\x00\x00\x00"
_PART_V8 = struct.Struct(">ihqqq10s")
_PART_V5 = struct.Struct(">ihqqq4s")
_PART_V3 = struct.Struct(">ihqq4s")
# The topic part of the answers by topic name or id, built once: bounded (a broker with more
# topics than this in use rebuilds some, which costs what building each answer's did).
_TOPIC_CACHE_MAX = 4096
_flex_topics: dict = {}
_classic_topics: dict = {}


def _flex_topic(topic_id: Optional[bytes], name: Optional[str]) -> bytes:
    key = topic_id if topic_id is not None else name
    got = _flex_topics.get(key)
    if got is None:
        if topic_id is not None:   # v13: the topic id (always set by a v13 decode)
            raw = topic_id
        else:   # a compact string (always set before v13; the decoder took names below 127 bytes)
            enc = (name or "").encode()
            raw = bytes((len(enc) + 1,)) + enc
        got = _FLEX_TOPIC % raw
        if len(_flex_topics) >= _TOPIC_CACHE_MAX:
            _flex_topics.clear()
        _flex_topics[key] = got
    return got


def _classic_topic(name: str) -> bytes:
    got = _classic_topics.get(name)
    if got is None:
        raw = name.encode()
        # one topic (array of 1), its name (int16 length), one partition (array of 1)
        got = b"\x00\x00\x00\x01" + _I16.pack(len(raw)) + raw + b"\x00\x00\x00\x01"
        if len(_classic_topics) >= _TOPIC_CACHE_MAX:
            _classic_topics.clear()
        _classic_topics[name] = got
    return got
