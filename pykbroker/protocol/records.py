"""Sans-IO view of Kafka record batches (magic v2, "DefaultRecordBatch").

Batch header (61 bytes, big endian)::

    baseOffset            int64   @0
    batchLength           int32   @8    bytes after this field
    partitionLeaderEpoch  int32   @12
    magic                 int8    @16   must be 2
    crc                   uint32  @17   CRC-32C of bytes @21 .. end of batch
    attributes            int16   @21   bits 0-2 codec, 3 timestampType,
                                        4 transactional, 5 control,
                                        6 hasDeleteHorizonMs
    lastOffsetDelta       int32   @23
    baseTimestamp         int64   @27
    maxTimestamp          int64   @35
    producerId            int64   @43
    producerEpoch         int16   @51
    baseSequence          int32   @53
    recordsCount          int32   @57
    records                       @61

baseOffset, batchLength and partitionLeaderEpoch are *outside* the CRC, so
the broker can assign offsets and the leader epoch in place without
recomputing it.

The checks a leader makes on a produce request's records before appending them, and the
topic's recompression, are the log's business: storage/log_validator.py (Kafka's
LogValidator).  Here: the batch header view, in-place patchers, compression codecs, record
decoding/encoding, control batches, and the framing check Kafka's batch iterator makes on the
first batch of a Produce request (:func:`first_batch_corruption`).

Record decoding (:func:`decode_records`) and encoding (:func:`encode_batch`)
are for the non-hot paths: timestamp lookups, compaction and tests.
"""
from __future__ import annotations

import struct
import time
import zlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple, Optional, Sequence, Union

from .errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    # Record bytes as callers hold them: a frame slice, a segment read, a batch being built.
    Buf = Union[bytes, bytearray, memoryview]

__all__ = [
    "RecordError", "BatchHeader", "Record",
    "iter_batches", "parse_header", "first_batch_corruption",
    "batch_crc_ok", "compute_crc", "rewrite_crc",
    "set_base_offset", "set_partition_leader_epoch", "set_log_append_time",
    "set_max_timestamp", "decode_records", "encode_batch", "compress", "decompress",
    "HEADER_SIZE", "LOG_OVERHEAD", "MAGIC_V2",
    "CODEC_NONE", "CODEC_GZIP", "CODEC_SNAPPY", "CODEC_LZ4", "CODEC_ZSTD",
    "CREATE_TIME", "LOG_APPEND_TIME", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE", "NO_TIMESTAMP", "NO_PARTITION_LEADER_EPOCH",
    "CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_TIMESTAMP",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT", "UNSUPPORTED_COMPRESSION_TYPE",
    "INVALID_RECORD",
]


def crc32c(data: Buf) -> int:
    """CRC-32C, the checksum of record batches and of pykbroker's snapshot files.  The crc32c
    package's __init__ imports importlib.metadata (~15 ms), so it is imported by the first
    checksum, not at start-up; this module attribute then is the C function itself, so callers
    that look it up as ``records.crc32c`` pay nothing per call after the first."""
    global crc32c
    from crc32c import crc32c
    return crc32c(data)


# ---------------------------------------------------------------------------
# Kafka error codes used here (org.apache.kafka.common.protocol.Errors)
CORRUPT_MESSAGE = ErrorCode.CORRUPT_MESSAGE
MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE
RECORD_LIST_TOO_LARGE = ErrorCode.RECORD_LIST_TOO_LARGE
INVALID_TIMESTAMP = ErrorCode.INVALID_TIMESTAMP
UNSUPPORTED_FOR_MESSAGE_FORMAT = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
UNSUPPORTED_COMPRESSION_TYPE = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
INVALID_RECORD = ErrorCode.INVALID_RECORD

# ---------------------------------------------------------------------------
# Format constants
HEADER_SIZE = 61        # RECORD_BATCH_OVERHEAD: fixed v2 batch header
LOG_OVERHEAD = 12       # baseOffset + batchLength: bytes before the length-counted part
HEADER_UP_TO_MAGIC = 17  # enough bytes to read the magic byte
MAGIC_V2 = 2
CRC_START = 21          # CRC covers attributes .. end of batch
_BATCH_LENGTH_MIN = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch without records
# LegacyRecord.RECORD_OVERHEAD_V0: the smallest length Kafka's batch iterator accepts (any magic).
RECORD_OVERHEAD_V0 = 14

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
CREATE_TIME, LOG_APPEND_TIME = 0, 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte v2 header, field by field
assert BATCH_HEADER.size == HEADER_SIZE
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class RecordError(KafkaError):
    """Malformed or unacceptable record data (KafkaError family).  ``code`` is the Kafka
    error code a produce response should carry for it; ``str(e)`` the text for logs."""

    _DEFAULT = object()

    def __init__(self, code: int, message: str = "", *, client_message: Any = _DEFAULT, request_check: bool = False,
                 record_errors: Iterable[tuple[int, str]] = ()) -> None:
        Exception.__init__(self, message or f"record error {code}")
        self.code = ErrorCode(code)
        # Produce v8+ ``record_errors``: [(batch_index, message)] of the records that failed Kafka's
        # per-record validation (storage/log_validator.py, per_record_errors); clients fail exactly those.
        self.record_errors = list(record_errors)
        # True for the checks Kafka makes on the request before the log is involved
        # (ProduceRequest.validateRecords: framing, magic, batch count, zstd version): their
        # responses carry log_start_offset -1, not the partition's.
        self.request_check = request_check
        # ``message`` is the error_message a Produce response (v8+) carries: Kafka fills it only
        # for record validation failures (RecordValidationException: INVALID_RECORD /
        # INVALID_TIMESTAMP found while validating records), so by default the message for
        # those codes, else None; raisers pass client_message=None where Kafka's answer has no
        # message.
        if client_message is RecordError._DEFAULT:
            client_message = (message or None) if code in (INVALID_RECORD, INVALID_TIMESTAMP) else None
        self.message = client_message

    @property
    def client_message(self) -> str | None:
        return self.message


# ---------------------------------------------------------------------------
# Header view


class BatchHeader(NamedTuple):
    """Header fields of one v2 batch found at ``position`` of a buffer.
    ``size`` is the whole batch size (``batch_length + 12``)."""
    position: int
    size: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(seq: int, inc: int) -> int:
    """Kafka sequences are int32 and wrap from INT32_MAX to 0."""
    if seq < 0:
        return NO_SEQUENCE
    if seq > INT32_MAX - inc:
        return inc - (INT32_MAX - seq) - 1
    return seq + inc


def parse_header(buf: Buf, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``.  Does not check that the batch
    body is present or the CRC; raises RecordError(CORRUPT_MESSAGE) if fewer
    than 61 bytes are available, the length is insane or magic is not 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise RecordError(CORRUPT_MESSAGE, "truncated batch header")
    f = BATCH_HEADER.unpack_from(buf, pos)
    if f[1] < _BATCH_LENGTH_MIN:
        raise RecordError(CORRUPT_MESSAGE, f"batch length {f[1]} below minimum")
    if f[3] != MAGIC_V2:
        raise RecordError(CORRUPT_MESSAGE, f"unsupported magic {f[3]}")
    return BatchHeader(pos, f[1] + LOG_OVERHEAD, *f)


def iter_batches(buf: Buf, start: int = 0) -> Iterator[BatchHeader]:
    """Yield the header of every batch in ``buf``.  Raises
    RecordError(CORRUPT_MESSAGE) on a partial or malformed batch (headers
    are checked, CRCs are not: use :func:`batch_crc_ok`)."""
    n = len(buf)
    pos = start
    while pos < n:
        h = parse_header(buf, pos)
        if pos + h.size > n:
            raise RecordError(CORRUPT_MESSAGE, "partial batch at end of buffer")
        yield h
        pos += h.size


def compute_crc(buf: Buf, pos: int, size: int) -> int:
    mv = memoryview(buf)
    return crc32c(mv[pos + CRC_START: pos + size])


def batch_crc_ok(buf: Buf, h: BatchHeader) -> bool:
    return compute_crc(buf, h.position, h.size) == h.crc


# ---------------------------------------------------------------------------
# Framing check of a Produce request


def first_batch_corruption(buf: Buf | None) -> Optional[str]:
    """Kafka's message if the first batch header of a partition's records makes Kafka's batch
    iterator throw (ByteBufferLogInputStream: a batch length below LegacyRecord's 14-byte
    overhead, or a magic byte outside 0-2), else None.

    Apache Kafka looks at the first batch of every partition before anything else (to see
    whether the request is transactional/idempotent), so such a header fails the *whole*
    request: every partition gets CORRUPT_MESSAGE with this message and nothing is appended.
    Fewer bytes than a header are not an error here (the iterator just finds no batch)."""
    if buf is None:
        return None
    n = len(buf)
    if n < LOG_OVERHEAD:
        return None
    (length,) = _I32.unpack_from(buf, 8)
    if length < RECORD_OVERHEAD_V0:
        return f"Record size {length} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
    if n < HEADER_UP_TO_MAGIC:
        return None
    magic = struct.unpack_from(">b", buf, 16)[0]
    if magic < 0 or magic > MAGIC_V2:
        return f"Invalid magic found in record: {magic}"
    return None


# ---------------------------------------------------------------------------
# In-place patchers (bytearray)


def set_base_offset(buf: bytearray, batch_pos: int, offset: int) -> None:
    """baseOffset is outside the CRC: no recompute needed."""
    _I64.pack_into(buf, batch_pos, offset)


def set_partition_leader_epoch(buf: bytearray, batch_pos: int, epoch: int) -> None:
    """partitionLeaderEpoch is outside the CRC: no recompute needed."""
    _I32.pack_into(buf, batch_pos + 12, epoch)


def rewrite_crc(buf: bytearray, batch_pos: int) -> None:
    size = _I32.unpack_from(buf, batch_pos + 8)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, batch_pos + 17, compute_crc(buf, batch_pos, size))


def set_max_timestamp(buf: bytearray, batch_pos: int, timestamp_type: int, ts: int) -> None:
    """Set the timestamp-type bit and maxTimestamp, then recompute the CRC
    (both fields are covered by it).  Like Kafka's
    DefaultRecordBatch.setMaxTimestamp this leaves baseTimestamp and the
    record deltas untouched and skips the CRC work when nothing changes."""
    attrs = _I16.unpack_from(buf, batch_pos + 21)[0]
    new_attrs = (attrs | TIMESTAMP_TYPE_MASK) if timestamp_type == LOG_APPEND_TIME else (attrs & ~TIMESTAMP_TYPE_MASK)
    if new_attrs == attrs and _I64.unpack_from(buf, batch_pos + 35)[0] == ts:
        return
    _I16.pack_into(buf, batch_pos + 21, new_attrs)
    _I64.pack_into(buf, batch_pos + 35, ts)
    rewrite_crc(buf, batch_pos)


def set_log_append_time(buf: bytearray, batch_pos: int, ts: int) -> None:
    """LogAppendTime: consumers read every record's timestamp as the batch's
    maxTimestamp, so only the type bit and maxTimestamp are rewritten
    (baseTimestamp stays what the producer wrote, as in Kafka)."""
    set_max_timestamp(buf, batch_pos, LOG_APPEND_TIME, ts)


# ---------------------------------------------------------------------------
# Compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _snappy() -> Any:
    import cramjam
    return cramjam.snappy


def compress(codec: int, data: bytes | bytearray | memoryview, level: Optional[int] = None) -> bytes:
    """``level``: the topic's compression.<codec>.level when the broker itself compresses
    (Kafka's KIP-390 levels), None for the codec's default."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        import gzip   # compression modules are imported by their first use
        # -1 is Kafka's "codec default", zlib's 6 (Python's gzip module would use 9)
        return gzip.compress(bytes(data), compresslevel=6 if level is None or level < 0 else level)
    if codec == CODEC_SNAPPY:
        # The Java client writes snappy through snappy-java's
        # SnappyOutputStream, i.e. xerial framing; we write the same.
        s = _snappy()
        out = bytearray(_XERIAL_HEADER)
        mv = memoryview(data)
        for i in range(0, len(mv), _XERIAL_BLOCK):
            block = bytes(s.compress_raw(bytes(mv[i:i + _XERIAL_BLOCK])))
            out += _I32.pack(len(block)) + block
        return bytes(out)
    if codec == CODEC_LZ4:
        import lz4.frame
        # Kafka's KafkaLZ4BlockInputStream only supports independent blocks.
        return lz4.frame.compress(bytes(data), block_linked=False,
                                  block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                  store_size=False, compression_level=0 if level is None else level)
    if codec == CODEC_ZSTD:
        import zstandard
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(bytes(data))
    raise RecordError(CORRUPT_MESSAGE, f"unknown compression codec {codec}")


# Decoding happens off the hot path on data a client wrote (ListOffsets by
# timestamp, compaction).  A tiny "zip bomb" batch must not be able to make
# the broker allocate gigabytes, so decompressed output is capped.  256 MiB
# is far above what a producer can create within max.message.bytes limits
# with real data (Kafka's default is 1 MiB compressed).
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


def _too_big() -> RecordError:
    return RecordError(CORRUPT_MESSAGE, "decompressed batch exceeds the size limit")


def _whole_stream(d: Any, out: bytes, limit: int, what: str) -> bytes:
    """out, what the streaming decompressor d gave when capped at limit + 1 bytes, if it is
    the whole stream: more than limit bytes is too big, a stream without its end truncated."""
    if len(out) > limit:
        raise _too_big()
    if not d.eof:
        raise RecordError(CORRUPT_MESSAGE, "truncated " + what)
    return out


def decompress(codec: int, data: Buf, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    data = bytes(data)
    try:
        if codec == CODEC_NONE:
            return data
        if codec == CODEC_GZIP:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return _whole_stream(d, d.decompress(data, limit + 1), limit, "gzip stream")
        if codec == CODEC_SNAPPY:
            s = _snappy()
            if data.startswith(_XERIAL_MAGIC):
                out = bytearray()
                pos = 16  # magic(8) + version(4) + compatible version(4)
                while pos < len(data):
                    if pos + 4 > len(data):
                        raise RecordError(CORRUPT_MESSAGE, "truncated xerial snappy block")
                    (blen,) = _I32.unpack_from(data, pos)
                    pos += 4
                    if blen < 0 or pos + blen > len(data):
                        raise RecordError(CORRUPT_MESSAGE, "bad xerial snappy block length")
                    block = data[pos:pos + blen]
                    if _snappy_raw_length(block) + len(out) > limit:
                        raise _too_big()
                    out += bytes(s.decompress_raw(block))
                    pos += blen
                return bytes(out)
            if _snappy_raw_length(data) > limit:
                raise _too_big()
            return bytes(s.decompress_raw(data))
        if codec == CODEC_LZ4:
            import lz4.frame
            d = lz4.frame.LZ4FrameDecompressor()
            return _whole_stream(d, d.decompress(data, max_length=limit + 1), limit, "lz4 frame")
        if codec == CODEC_ZSTD:
            import zstandard
            dctx = zstandard.ZstdDecompressor()
            # 1. bounded streaming read to enforce the limit (frames need not
            #    carry a content size: zstd-jni's streaming output may not)
            with dctx.stream_reader(data, read_across_frames=True) as r:
                if len(r.read(limit + 1)) > limit:
                    raise _too_big()
            # 2. frame-by-frame decode, which detects truncated frames
            out = bytearray()
            rest = data
            while rest:
                dobj = dctx.decompressobj()
                out += dobj.decompress(rest)
                if not dobj.eof:
                    raise RecordError(CORRUPT_MESSAGE, "truncated zstd frame")
                rest = dobj.unused_data
            return bytes(out)
    except RecordError:
        raise
    except Exception as e:  # codec libraries raise assorted exception types
        raise RecordError(CORRUPT_MESSAGE, f"cannot decompress batch: {e}") from None
    raise RecordError(CORRUPT_MESSAGE, f"unknown compression codec {codec}")


def _snappy_raw_length(block: bytes) -> int:
    """Uncompressed length announced by a raw snappy block (its varint
    preamble), read before decompressing."""
    result = shift = 0
    for i, b in enumerate(block[:5]):
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise RecordError(CORRUPT_MESSAGE, "bad snappy length preamble")


# ---------------------------------------------------------------------------
# Records (DefaultRecord)


class Record(NamedTuple):
    offset: Optional[int]
    timestamp: Optional[int]
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence = ()   # sequence of (str key, bytes|None value)


def _read_varint(buf: Buf, pos: int) -> tuple[int, int]:
    """Zig-zag varint (max 10 bytes as for a varlong)."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise RecordError(CORRUPT_MESSAGE, "truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise RecordError(CORRUPT_MESSAGE, "varint too long")
    return (result >> 1) ^ -(result & 1), pos


def _write_varint(out: bytearray, v: int) -> None:
    v = (v << 1) ^ (v >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    ln, pos = _read_varint(buf, pos)
    if ln < 0:
        if ln != -1:  # -1 is the only encoding of null
            raise RecordError(CORRUPT_MESSAGE, f"invalid field length {ln}")
        return None, pos
    end = pos + ln
    if end > len(buf):
        raise RecordError(CORRUPT_MESSAGE, "truncated record field")
    return bytes(buf[pos:end]), end


def decode_records(batch: Buf) -> list[Record]:
    """Decode every record of one batch (``batch`` = the whole batch bytes,
    header included).  Offsets are absolute; for LogAppendTime batches every
    record's timestamp is the batch maxTimestamp (as Kafka reports it)."""
    h = parse_header(batch, 0)
    if h.size > len(batch):
        raise RecordError(CORRUPT_MESSAGE, "partial batch")
    mv = memoryview(batch)[HEADER_SIZE:h.size]
    body = decompress(h.codec, mv) if h.codec != CODEC_NONE else mv
    log_append = h.timestamp_type == LOG_APPEND_TIME
    out = []
    pos = 0
    n = len(body)
    if h.records_count < 0:
        raise RecordError(CORRUPT_MESSAGE, "negative record count")
    for _ in range(h.records_count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        if length < 0 or end > n:
            raise RecordError(CORRUPT_MESSAGE, "bad record length")
        p = pos + 1  # attributes: unused in v2
        ts_delta, p = _read_varint(body, p)
        off_delta, p = _read_varint(body, p)
        key, p = _read_bytes(body, p)
        value, p = _read_bytes(body, p)
        nh, p = _read_varint(body, p)
        if nh < 0:
            raise RecordError(CORRUPT_MESSAGE, "negative header count")
        headers = []
        for _ in range(nh):
            hk, p = _read_bytes(body, p)
            if hk is None:
                raise RecordError(CORRUPT_MESSAGE, "null header key")
            hv, p = _read_bytes(body, p)
            try:
                headers.append((hk.decode("utf-8"), hv))
            except UnicodeDecodeError:
                raise RecordError(CORRUPT_MESSAGE, "header key is not UTF-8") from None
        if p != end:
            raise RecordError(CORRUPT_MESSAGE, "record length mismatch")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, headers))
        pos = end
    return out


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key: Buf | None, value: Buf | None,
                   headers: Sequence[tuple[str | bytes, Buf | None]]) -> None:
    body = bytearray(b"\x00")
    _write_varint(body, ts_delta)
    _write_varint(body, offset_delta)
    for field in (key, value):
        if field is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(field))
            body += field
    _write_varint(body, len(headers))
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        _write_varint(body, len(hkb))
        body += hkb
        if hv is None:   # a null value is its length -1 alone
            _write_varint(body, -1)
            continue
        _write_varint(body, len(hv))
        body += hv
    _write_varint(out, len(body))
    out += body


def encode_batch(
    records: Iterable,
    base_offset: int = 0,
    codec: int = CODEC_NONE,
    *,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: Optional[int] = None,
    max_timestamp: Optional[int] = None,
    delete_horizon_ms: Optional[int] = None,
    level: Optional[int] = None,
) -> bytes:
    """Build one v2 batch.  ``records`` are :class:`Record` (or tuples
    ``(offset, timestamp, key, value[, headers])``); ``offset`` None means
    "next one", ``timestamp`` None means now.  Absolute offsets allow gaps
    (as compaction produces)."""
    recs = [r if isinstance(r, Record) else Record(*r) for r in records]
    now = int(time.time() * 1000)
    offsets: list[int] = []
    stamps: list[int] = []
    nxt = base_offset
    for r in recs:
        off = nxt if r.offset is None else r.offset
        if off < base_offset or (offsets and off <= offsets[-1]):
            raise ValueError("record offsets must increase from base_offset")
        offsets.append(off)
        stamps.append(now if r.timestamp is None else r.timestamp)
        nxt = off + 1
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = stamps[0] if stamps else NO_TIMESTAMP
    body = bytearray()
    for r, off, ts in zip(recs, offsets, stamps):
        _encode_record(body, off - base_offset, ts - base_ts, r.key, r.value, list(r.headers or ()))
    payload = compress(codec, body, level) if codec != CODEC_NONE else bytes(body)
    if last_offset_delta is None:
        last_offset_delta = (offsets[-1] - base_offset) if offsets else -1
    if max_timestamp is None:
        max_timestamp = max(stamps) if stamps else NO_TIMESTAMP
    attrs = codec & CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_MASK
    if is_control:
        attrs |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_MASK
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    BATCH_HEADER.pack_into(buf, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch,
                      MAGIC_V2, 0, attrs, last_offset_delta, base_ts, max_timestamp,
                      producer_id, producer_epoch, base_sequence, len(recs))
    buf[HEADER_SIZE:] = payload
    rewrite_crc(buf, 0)
    return bytes(buf)


# ---------------------------------------------------------------------------
# Control batches (transaction markers)

# Kafka's ControlRecordType: the key of a control record is (version int16 = 0, type int16).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
# EndTransactionMarker value: (version int16 = 0, coordinator epoch int32).
_MARKER_VALUE = struct.Struct(">hi")


def encode_end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                          timestamp_ms: int) -> bytes:
    """A control batch holding one COMMIT or ABORT marker (offset 0, patched by the log), as
    Kafka's MemoryRecords.withEndTransactionMarker builds it: transactional + control attributes,
    base sequence -1, the record's key the control type and its value the coordinator epoch."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return encode_batch([Record(0, timestamp_ms, key, value)], producer_id=producer_id,
                        producer_epoch=producer_epoch, is_transactional=True, is_control=True)


def control_type(batch: Buf) -> Optional[int]:
    """The control record type (CONTROL_ABORT / CONTROL_COMMIT) of a whole control batch, or None
    if it cannot be read.  Control batches are never compressed: the record follows the header."""
    try:
        pos = HEADER_SIZE
        _, pos = _read_varint(batch, pos)       # record length
        pos += 1                                 # attributes
        _, pos = _read_varint(batch, pos)       # timestamp delta
        _, pos = _read_varint(batch, pos)       # offset delta
        klen, pos = _read_varint(batch, pos)
        if klen < 4:
            return None
        return _CONTROL_KEY.unpack_from(batch, pos)[1]
    except (struct.error, IndexError, ValueError, RecordError):
        return None


# Topic ``compression.type`` values other than ``producer`` and their codec ids.
COMPRESSION_TYPES = {"uncompressed": CODEC_NONE, "gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY,
                     "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}
