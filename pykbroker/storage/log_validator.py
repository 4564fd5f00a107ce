"""Kafka's ``LogValidator``: what a leader checks in a produce request's records before its log
appends them, and the rewrite of the batches in the topic's ``compression.type``.

The ReplicaManager calls it for each partition of a Produce request (``append_records``:
:func:`validate_produce_records`, then :func:`recompress` when the topic's codec is not
``producer``); the coordinators call it for the batches they write to their own topics.  The
log (storage/log.py, ``Log.append``) then assigns the offsets, the leader epoch and, on
LogAppendTime topics, the timestamp, in place: the fields outside the CRC cost no recompute.
The batch codecs it reads with are protocol/records.py's.

Hot path (produce): :func:`validate_produce_records` works per batch and never per record.
Apache Kafka's LogValidator does iterate the records of every batch (it decompresses
compressed ones) to check per-record offsets and timestamps; we deliberately do not: the
offset count comes from ``lastOffsetDelta`` (which must equal ``recordsCount - 1``, as Kafka
requires for client batches), the max timestamp from the header, and the CRC guarantees that
what the client's encoder wrote reaches consumers unchanged.  Malformed records inside a
CRC-valid batch are therefore stored and handed back to consumers as they were sent.  The
records are walked only where a per-record rule can fail (compacted topics' keys, a finite
timestamp window: :func:`per_record_errors`).
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple, Optional, Union

from ..protocol import records
from ..protocol.records import (
    BATCH_HEADER, CODEC_MASK, CODEC_NONE, CODEC_ZSTD, CONTROL_MASK, CORRUPT_MESSAGE, CREATE_TIME, CRC_START,
    HEADER_SIZE, HEADER_UP_TO_MAGIC, INT32_MAX, INVALID_RECORD, INVALID_TIMESTAMP, LOG_OVERHEAD, MAGIC_V2,
    MESSAGE_TOO_LARGE, RECORD_OVERHEAD_V0, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, UNSUPPORTED_COMPRESSION_TYPE,
    RecordError, compress, decode_records, decompress, increment_sequence, iter_batches, rewrite_crc)

__all__ = ["BatchInfo", "ValidatedRecords", "validate_produce_records", "validate_single_batch", "per_record_errors",
           "raise_record_errors", "recompress", "internal_validated"]

# what record bytes arrive as: a request frame's writable view, or bytes/bytearray from a caller
Buffer = Union[bytes, bytearray, memoryview]

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class BatchInfo(NamedTuple):
    """Per-batch facts the log needs to append a validated batch."""
    position: int            # offset of the batch inside ValidatedRecords.buffer
    size: int
    offset_count: int        # lastOffsetDelta + 1
    records_count: int
    base_timestamp: int
    max_timestamp: int
    timestamp_type: int
    codec: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool


class ValidatedRecords(NamedTuple):
    buffer: Any              # bytearray or writable memoryview, patched in place by the log
    batches: list            # list[BatchInfo]
    offset_count: int        # sum of offset_count over batches

    @property
    def size(self) -> int:
        return len(self.buffer)


def _frame_batches(buf: Buffer, n: int) -> list[tuple[int, int, int]]:
    """(position, size, magic) of each whole batch, as Kafka's ByteBufferLogInputStream finds
    them: stops silently at fewer bytes than a header or a batch that runs past the end;
    raises CORRUPT_MESSAGE for a length below 14 or a magic outside 0-2."""
    frames: list[tuple[int, int, int]] = []
    pos = 0
    while True:
        remaining = n - pos
        if remaining < LOG_OVERHEAD:
            return frames
        (batch_length,) = _I32.unpack_from(buf, pos + 8)
        if batch_length < RECORD_OVERHEAD_V0:
            raise RecordError(CORRUPT_MESSAGE, f"Record size {batch_length} is less than the minimum "
                              f"record overhead ({RECORD_OVERHEAD_V0})", client_message=None,
                              request_check=True)
        if remaining < HEADER_UP_TO_MAGIC:
            return frames
        magic = struct.unpack_from(">b", buf, pos + 16)[0]
        if magic < 0 or magic > MAGIC_V2:
            raise RecordError(CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}", client_message=None,
                              request_check=True)
        size = batch_length + LOG_OVERHEAD
        if size > remaining:
            return frames
        frames.append((pos, size, magic))
        pos += size


def validate_produce_records(
    buf: Any,   # a Buffer; anything else (a null records field) is answered CORRUPT_MESSAGE
    max_message_bytes: int,
    *,
    allow_multiple_batches: bool = False,
    api_version: Optional[int] = None,
    now_ms: Optional[int] = None,
    timestamp_before_max_ms: Optional[int] = None,
    timestamp_after_max_ms: Optional[int] = None,
    compacted_partition: Optional[str] = None,
) -> ValidatedRecords:
    """Validate the records of one partition of a ProduceRequest, per batch.

    Error codes follow Apache Kafka 4.4 (ByteBufferLogInputStream, ProduceRequest.validateRecords,
    UnifiedLog.analyzeAndValidateRecords, LogValidator), in Kafka's order; probed against a real
    broker.  Only RecordValidationException-style failures (timestamps, and the partition's own
    checks) report a client message (``RecordError.client_message``); these do not:

    1. Framing, as Kafka's batch iterator: a batch length below 14 (LegacyRecord overhead) or a
       magic byte outside 0-2 -> CORRUPT_MESSAGE.  Fewer bytes than a header, or a batch whose
       length runs past the end, ends the iteration: if that leaves no batch at all ->
       INVALID_RECORD ("must have at least one record batch"), else the trailing bytes are
       dropped and only the whole batches are appended (Kafka trims them the same way).
       (A corrupt *first* header fails the whole request in Kafka: see
       ``first_batch_corruption``, checked by the Produce handler.)
    2. Request checks: magic 0/1 -> INVALID_RECORD; zstd with produce api_version < 7 ->
       UNSUPPORTED_COMPRESSION_TYPE; more than one batch -> INVALID_RECORD
       (``allow_multiple_batches`` lifts this for internal callers).
    3. Per batch: baseOffset != 0 -> INVALID_RECORD; size > max_message_bytes ->
       MESSAGE_TOO_LARGE; shorter than the 61-byte v2 header or CRC mismatch -> CORRUPT_MESSAGE;
       lastOffsetDelta + 1 <= 0, recordsCount <= 0 or the two disagreeing -> INVALID_RECORD
       (Kafka requires lastOffsetDelta == recordsCount - 1 for every client batch); control
       batch -> INVALID_RECORD; producerId >= 0 with baseSequence < 0 -> INVALID_RECORD.
    4. Unknown codec (5-7) -> CORRUPT_MESSAGE (Kafka answers UNKNOWN_SERVER_ERROR there, from
       an IllegalArgumentException; pykbroker keeps a specific code).
    5. Kafka's per-record checks (LogValidator.validateRecord), with its ``record_errors`` (the
       index and text of each bad record) so that clients fail only those: keyless records on a
       compacted topic (``compacted_partition``: its "topic-partition" name) -> INVALID_RECORD,
       CreateTime timestamps outside [now - message.timestamp.before.max.ms,
       now + message.timestamp.after.max.ms] -> INVALID_TIMESTAMP.  The records are walked only
       where they can fail: on compacted topics, when the header's maxTimestamp (the exact
       maximum) is past the "after" bound, or when the topic sets a finite "before" bound (the
       minimum is not in the header).  The normal path stays per batch.
    """
    try:
        n = len(buf)
    except TypeError:
        raise RecordError(CORRUPT_MESSAGE, "records are not bytes")
    frames = _frame_batches(buf, n)
    if not frames:
        raise RecordError(INVALID_RECORD, "produce must have at least one record batch", client_message=None,
                          request_check=True)
    if frames[0][2] != MAGIC_V2:
        raise RecordError(INVALID_RECORD, "produce requests may only contain magic v2 batches",
                          client_message=None, request_check=True)
    if api_version is not None and api_version < 7:
        (attributes,) = _I16.unpack_from(buf, frames[0][0] + 21) if frames[0][1] >= 23 else (0,)
        if attributes & CODEC_MASK == CODEC_ZSTD:
            raise RecordError(UNSUPPORTED_COMPRESSION_TYPE, "zstd requires produce v7+", request_check=True)
    if len(frames) > 1 and not allow_multiple_batches:
        raise RecordError(INVALID_RECORD, "produce requests may contain exactly one batch per partition",
                          client_message=None, request_check=True)
    end = frames[-1][0] + frames[-1][1]
    # The whole batches only (trailing partial bytes are dropped, as Kafka), patched in place
    # by the log: a writable view (the records of a request frame, which FrameBuffer hands out
    # as a bytearray nothing else uses) is kept as it is; anything else gets a private copy.
    if type(buf) is memoryview and not buf.readonly and buf.contiguous and buf.format == "B":
        data: memoryview | bytearray = buf if end == n else buf[:end]
    else:
        data = bytearray(buf if end == n else memoryview(buf)[:end])
    mv = memoryview(data)
    batches = []
    total = 0
    unpack = BATCH_HEADER.unpack_from
    crc32c = records.crc32c   # the C function once loaded (records.crc32c)
    for pos, size, magic in frames:
        if magic != MAGIC_V2:
            raise RecordError(INVALID_RECORD, "produce requests may only contain magic v2 batches",
                              client_message=None)
        (base_offset,) = _I64.unpack_from(data, pos)
        if base_offset != 0:
            raise RecordError(INVALID_RECORD, f"batch baseOffset should be 0, is {base_offset}", client_message=None)
        if size > max_message_bytes:
            raise RecordError(MESSAGE_TOO_LARGE, f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
        if size < HEADER_SIZE:
            raise RecordError(CORRUPT_MESSAGE, "batch shorter than the v2 header")
        (_, _, _, _, crc, attributes, last_offset_delta, base_ts, max_ts,
         producer_id, producer_epoch, base_seq, count) = unpack(data, pos)
        if crc32c(mv[pos + CRC_START: pos + size]) != crc:
            raise RecordError(CORRUPT_MESSAGE, "batch CRC mismatch")
        offset_count = last_offset_delta + 1
        if offset_count <= 0:
            raise RecordError(INVALID_RECORD, "batch has an invalid offset range", client_message=None)
        if count <= 0:
            raise RecordError(INVALID_RECORD, f"invalid reported record count {count}", client_message=None)
        if offset_count != count:
            raise RecordError(INVALID_RECORD, "batch offset range and record count disagree", client_message=None)
        if attributes & CONTROL_MASK:
            raise RecordError(INVALID_RECORD, "clients may not write control batches", client_message=None)
        if producer_id >= 0 and base_seq < 0:
            raise RecordError(INVALID_RECORD, f"invalid sequence {base_seq} for producer {producer_id}",
                              client_message=None)
        codec = attributes & CODEC_MASK
        if codec > CODEC_ZSTD:
            raise RecordError(CORRUPT_MESSAGE, f"unknown compression codec {codec}")
        if codec == CODEC_ZSTD and api_version is not None and api_version < 7:
            raise RecordError(UNSUPPORTED_COMPRESSION_TYPE, "zstd requires produce v7+")
        ts_type = 1 if attributes & TIMESTAMP_TYPE_MASK else 0
        check_ts = now_ms is not None and ts_type == CREATE_TIME and (
            (timestamp_after_max_ms is not None and max_ts - now_ms > timestamp_after_max_ms)
            or (timestamp_before_max_ms is not None and timestamp_before_max_ms < LONG_MAX))
        if check_ts or compacted_partition is not None:
            errors = per_record_errors(
                mv[pos:pos + size], compacted_partition,
                (now_ms, timestamp_before_max_ms, timestamp_after_max_ms) if check_ts and now_ms is not None
                else None)
            if errors:
                raise_record_errors(errors)
        batches.append(BatchInfo(
            pos, size, offset_count, count, base_ts, max_ts, ts_type, codec,
            producer_id, producer_epoch, base_seq,
            increment_sequence(base_seq, last_offset_delta),
            bool(attributes & TRANSACTIONAL_MASK)))
        total += offset_count
    return ValidatedRecords(data, batches, total)


LONG_MAX = (1 << 63) - 1


def _java_long(v: int) -> int:
    """``v`` wrapped to a signed 64-bit value, as Java's long arithmetic does (Kafka prints the
    bounds of the timestamp window computed that way)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def per_record_errors(batch: Buffer, compacted_partition: Optional[str],
                      timestamps: Optional[tuple[int, Optional[int], Optional[int]]]) -> list[tuple[int, int, str]]:
    """Kafka's per-record validation of one client batch (LogValidator.validateRecord: the key
    first, then the timestamp; one error per record).  ``timestamps``: (now_ms, before_max_ms,
    after_max_ms) to check CreateTime timestamps, or None.  [(batch_index, code, message)]."""
    out: list[tuple[int, int, str]] = []
    now = before = after = 0
    if timestamps is not None:
        now = timestamps[0]
        before = LONG_MAX if timestamps[1] is None else timestamps[1]
        after = LONG_MAX if timestamps[2] is None else timestamps[2]
    for i, r in enumerate(decode_records(batch)):
        if compacted_partition is not None and r.key is None:
            out.append((i, INVALID_RECORD, "Compacted topic cannot accept message without key in topic "
                        "partition %s" % compacted_partition))
            continue
        if timestamps is None:
            continue
        ts = r.timestamp
        assert ts is not None   # decoded records always carry both (Record's Optional is for records being built)
        if now - ts > before or ts - now > after:
            out.append((i, INVALID_TIMESTAMP, "Timestamp %s of message with offset %s is out of range. The "
                        "timestamp should be within [%d, %d]" % (ts, r.offset, _java_long(now - before),
                                                                  _java_long(now + after))))
    return out


def raise_record_errors(errors: list[tuple[int, int, str]]) -> None:
    """The RecordValidationException Kafka throws for ``errors`` (see :func:`per_record_errors`):
    INVALID_TIMESTAMP when any record has a bad timestamp, else INVALID_RECORD, with Kafka's
    error_message (it lists at most the first three errors) and every record's error."""
    rec = [(i, m) for i, _, m in errors]
    if any(code == INVALID_TIMESTAMP for _, code, _ in errors):
        raise RecordError(INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
                          record_errors=rec)
    shown = ", ".join("RecordError(batchIndex=%d, message='%s')" % (i, m) for i, m in rec[:3])
    raise RecordError(INVALID_RECORD, "One or more records have been rejected due to %d record errors in total, "
                      "and only showing the first three errors at most: [%s]" % (len(rec), shown),
                      record_errors=rec)



def recompress(validated: ValidatedRecords, codec: int, level: Optional[int] = None) -> ValidatedRecords:
    """The batches of a validated produce request with their records in ``codec`` (a topic whose
    ``compression.type`` is not ``producer``), as Kafka's LogValidator rebuilds them.  A batch
    already in that codec is kept as it is.  Another keeps its header (producer id, epoch, base
    sequence, flags, timestamps, offset deltas) and its records' bytes: only the records section
    is decompressed and compressed again, then the codec bits, length and CRC are rewritten, so
    the cost is per batch (the codecs), not a Python loop per record.  Only for such topics."""
    if all(b.codec == codec for b in validated.batches):
        return validated
    out = bytearray()
    buf = validated.buffer
    for b in validated.batches:
        raw = memoryview(buf)[b.position:b.position + b.size]
        if b.codec == codec:
            out += raw
            continue
        body = raw[HEADER_SIZE:]
        plain = decompress(b.codec, body) if b.codec != CODEC_NONE else body
        payload = compress(codec, plain, level) if codec != CODEC_NONE else bytes(plain)
        start = len(out)
        out += raw[:HEADER_SIZE]
        out += payload
        _I32.pack_into(out, start + 8, HEADER_SIZE + len(payload) - LOG_OVERHEAD)   # batchLength
        (attrs,) = _I16.unpack_from(out, start + 21)
        _I16.pack_into(out, start + 21, (attrs & ~CODEC_MASK) | codec)
        rewrite_crc(out, start)
    return internal_validated(out)


def internal_validated(batch: Buffer) -> ValidatedRecords:
    """ValidatedRecords for batches built by the broker itself (coordinators, markers): the
    client-only checks of validate_produce_records (control bit, base sequence) do not apply."""
    data = bytearray(batch)
    out = []
    total = 0
    for h in iter_batches(data):
        n = h.last_offset_delta + 1
        out.append(BatchInfo(h.position, h.size, n, h.records_count, h.base_timestamp, h.max_timestamp,
                             h.timestamp_type, h.codec, h.producer_id, h.producer_epoch, h.base_sequence,
                             h.last_sequence if h.base_sequence >= 0 else -1, h.is_transactional))
        total += n
    return ValidatedRecords(data, out, total)


def validate_single_batch(buf: memoryview, max_message_bytes: int, api_version: int, now_ms: int,
                          timestamp_after_max_ms: Optional[int]) -> Optional[ValidatedRecords]:
    """The common produce partition, validated with the fewest steps: exactly one whole
    non-transactional, non-control magic-v2 batch that passes every check of
    :func:`validate_produce_records` with a topic that walks no record (not compacted, no
    finite ``message.timestamp.before.max.ms``: the caller checks both).  Returns what
    :func:`validate_produce_records` would return for it (the same buffer, one ``BatchInfo``),
    or None for anything else, valid or not: the caller then takes the general path, which
    answers with Kafka's exact error.  Nothing is changed before returning None, so falling
    back is always safe.  ``buf`` must be a writable view (a request frame's records)."""
    n = len(buf)
    if n < HEADER_SIZE:
        return None
    (base_offset, batch_length, _, magic, crc, attributes, last_offset_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_seq, count) = BATCH_HEADER.unpack_from(buf, 0)
    # one whole batch and nothing after it; the attribute bits the general path treats apart
    # (transactional, control) and the codecs it refuses (unknown; zstd before v7) excluded
    if (batch_length + LOG_OVERHEAD != n or magic != MAGIC_V2 or base_offset != 0 or n > max_message_bytes
            or attributes & (TRANSACTIONAL_MASK | CONTROL_MASK)):
        return None
    codec = attributes & CODEC_MASK
    if codec > CODEC_ZSTD or (codec == CODEC_ZSTD and api_version < 7):
        return None
    if last_offset_delta + 1 != count or count <= 0 or (producer_id >= 0 and base_seq < 0):
        return None
    ts_type = 1 if attributes & TIMESTAMP_TYPE_MASK else 0
    if (ts_type == CREATE_TIME and timestamp_after_max_ms is not None
            and max_ts - now_ms > timestamp_after_max_ms):
        return None   # records to walk (the "after" bound): the general path does it
    if records.crc32c(buf[CRC_START:]) != crc:
        return None
    if base_seq < 0:
        last_seq = -1   # increment_sequence's NO_SEQUENCE
    elif base_seq <= INT32_MAX - last_offset_delta:
        last_seq = base_seq + last_offset_delta
    else:
        last_seq = increment_sequence(base_seq, last_offset_delta)   # wraps past INT32_MAX
    # the two NamedTuples built with tuple.__new__: the same tuples, without the Python-level
    # __new__ each NamedTuple class has (one call fewer each, on every Produce)
    return _new_tuple(ValidatedRecords, (buf, [_new_tuple(BatchInfo, (
        0, n, count, count, base_ts, max_ts, ts_type, codec, producer_id, producer_epoch, base_seq,
        last_seq, False))], count))


_new_tuple = tuple.__new__
