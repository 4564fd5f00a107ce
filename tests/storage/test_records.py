import struct

import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from kafka.record.default_records import DefaultRecordBatchBuilder, DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from pykbroker.protocol import records as R
from pykbroker.protocol.records import (
    Record, RecordError, decode_records, encode_batch, iter_batches, parse_header,
    set_base_offset, set_log_append_time, set_partition_leader_epoch,
)
from pykbroker.storage.log_validator import validate_produce_records

CODECS = [R.CODEC_NONE, R.CODEC_GZIP, R.CODEC_SNAPPY, R.CODEC_LZ4, R.CODEC_ZSTD]


def sample_records(n=10, base_ts=1_700_000_000_000):
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 4 == 1 else (b"value-%d-" % i) * 20
        headers = [] if i % 2 else [("h1", b"x"), ("h-null", None), ("ü", b"\x00\xff")]
        out.append(Record(None, base_ts + i * 7 - (3 if i == 5 else 0), key, value, headers))
    return out


def kp_records(buf):
    """Decode with kafka-python's MemoryRecords (a real client's decoder)."""
    mr = MemoryRecords(bytes(buf))
    out = []
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]))
    return out


def ours(buf):
    out = []
    for h in iter_batches(buf):
        for r in decode_records(bytes(buf[h.position:h.position + h.size])):
            out.append((r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers]))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_encode_decode_matches_kafka_python(codec):
    recs = sample_records()
    b = encode_batch(recs, codec=codec, producer_id=7, producer_epoch=2, base_sequence=11)
    expected = [(i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(recs)]
    assert kp_records(b) == expected
    assert ours(b) == expected
    # and the other way round: kafka-python's encoder, our decoder
    bb = DefaultRecordBatchBuilder(2, codec, False, 7, 2, 11, 1 << 20)
    for i, r in enumerate(recs):
        bb.append(i, r.timestamp, r.key, r.value, r.headers)
    kb = bytes(bb.build())
    assert ours(kb) == expected
    v = validate_produce_records(kb, 1 << 20)
    assert v.batches[0].codec == codec and v.offset_count == len(recs)
    if codec == R.CODEC_NONE:
        # uncompressed bytes are identical except kafka-python's leader epoch 0 (Java: -1)
        kb2 = bytearray(kb)
        set_partition_leader_epoch(kb2, 0, -1)
        assert bytes(kb2) == b


def test_header_fields_and_validated_info():
    b = encode_batch(sample_records(4), producer_id=99, producer_epoch=3, base_sequence=2**31 - 2,
                     is_transactional=True)
    h = parse_header(b)
    assert h.size == len(b) and h.magic == 2 and h.records_count == 4 and h.last_offset_delta == 3
    assert h.is_transactional and not h.is_control and h.producer_id == 99
    assert h.last_sequence == 1  # wraps at int32 max
    v = validate_produce_records(memoryview(b), 1 << 20)
    bi = v.batches[0]
    assert (bi.offset_count, bi.producer_id, bi.producer_epoch, bi.base_sequence) == (4, 99, 3, 2**31 - 2)
    assert bi.is_transactional and bi.max_timestamp == h.max_timestamp and bi.timestamp_type == 0
    assert isinstance(v.buffer, bytearray) and bytes(v.buffer) == b


def _corrupt(b, pos, val):
    b = bytearray(b)
    b[pos] = val
    return bytes(b)


def _with_header(b, **fields):
    """Rewrite header fields and fix the CRC (to test semantic checks)."""
    h = parse_header(b)._asdict()
    h.update(fields)
    buf = bytearray(b)
    struct.pack_into(">qiibIhiqqqhii", buf, 0, h["base_offset"], h["batch_length"], h["partition_leader_epoch"],
                     h["magic"], 0, h["attributes"], h["last_offset_delta"], h["base_timestamp"],
                     h["max_timestamp"], h["producer_id"], h["producer_epoch"], h["base_sequence"],
                     h["records_count"])
    R.rewrite_crc(buf, 0)
    return bytes(buf)


def code_of(buf, **kw):
    with pytest.raises(RecordError) as ei:
        validate_produce_records(buf, kw.pop("max_bytes", 1 << 20), **kw)
    return ei.value.code


def test_validation_error_codes():
    b = encode_batch(sample_records(3))
    assert code_of(b"") == R.INVALID_RECORD
    # As Kafka's batch iterator (probed on Kafka 4.4): a batch running past the end or fewer
    # bytes than a header is no batch at all -> INVALID_RECORD; after a whole batch such
    # trailing bytes are dropped, not appended.
    assert code_of(b[:-1]) == R.INVALID_RECORD            # partial batch
    assert code_of(b[:5]) == R.INVALID_RECORD
    assert code_of(b[:15]) == R.INVALID_RECORD
    v = validate_produce_records(b + b[:20], 1 << 20)     # trailing partial batch
    assert bytes(v.buffer) == b and len(v.batches) == 1
    assert bytes(validate_produce_records(b + bytes(5), 1 << 20).buffer) == b
    assert code_of(b + bytes(20)) == R.CORRUPT_MESSAGE     # trailing header with length 0 < 14
    assert code_of(_corrupt(b, 16, 3)) == R.CORRUPT_MESSAGE  # magic outside 0-2
    assert R.first_batch_corruption(_corrupt(b, 16, 3)) == "Invalid magic found in record: 3"
    assert R.first_batch_corruption(b) is None and R.first_batch_corruption(b[:5]) is None
    assert code_of(_corrupt(b, len(b) - 1, b[-1] ^ 1)) == R.CORRUPT_MESSAGE  # CRC
    assert code_of(b, max_bytes=len(b) - 1) == R.MESSAGE_TOO_LARGE
    assert code_of(b + b) == R.INVALID_RECORD             # one batch per partition
    assert len(validate_produce_records(b + b, 1 << 20, allow_multiple_batches=True).batches) == 2
    assert code_of(_with_header(b, magic=1)) == R.INVALID_RECORD
    assert code_of(_with_header(b, magic=0)) == R.INVALID_RECORD
    assert code_of(_with_header(b, base_offset=5)) == R.INVALID_RECORD
    assert code_of(_with_header(b, last_offset_delta=5)) == R.INVALID_RECORD
    assert code_of(_with_header(b, records_count=0, last_offset_delta=-1)) == R.INVALID_RECORD
    assert code_of(_with_header(b, attributes=R.CONTROL_MASK)) == R.INVALID_RECORD
    assert code_of(_with_header(b, producer_id=4, base_sequence=-1)) == R.INVALID_RECORD
    assert code_of(_with_header(b, attributes=6)) == R.CORRUPT_MESSAGE
    bz = encode_batch(sample_records(3), codec=R.CODEC_ZSTD)
    assert code_of(bz, api_version=6) == R.UNSUPPORTED_COMPRESSION_TYPE
    validate_produce_records(bz, 1 << 20, api_version=7)
    short = _with_header(b, batch_length=3)
    assert code_of(short) == R.CORRUPT_MESSAGE
    assert R.first_batch_corruption(short) == "Record size 3 is less than the minimum record overhead (14)"
    assert code_of(_with_header(b, batch_length=20)[:32]) == R.CORRUPT_MESSAGE   # whole, shorter than 61
    now = 1_700_000_000_000
    future = encode_batch([Record(None, now + 10_000_000, None, b"x")])
    assert code_of(future, now_ms=now, timestamp_after_max_ms=3_600_000) == R.INVALID_TIMESTAMP
    past = encode_batch([Record(None, now - 10_000_000, None, b"x")])
    assert code_of(past, now_ms=now, timestamp_before_max_ms=1000) == R.INVALID_TIMESTAMP


def test_patchers_keep_crc_valid_and_log_append_time():
    b = bytearray(encode_batch(sample_records(5), codec=R.CODEC_LZ4))
    crc0 = parse_header(b).crc
    set_base_offset(b, 0, 1000)
    set_partition_leader_epoch(b, 0, 7)
    h = parse_header(b)
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (1000, 7, crc0)
    assert R.batch_crc_ok(b, h)
    base_ts = h.base_timestamp
    set_log_append_time(b, 0, 1_800_000_000_000)
    h = parse_header(b)
    assert h.timestamp_type == R.LOG_APPEND_TIME and h.max_timestamp == 1_800_000_000_000
    assert h.base_timestamp == base_ts  # like Kafka: only type bit + maxTimestamp change
    assert R.batch_crc_ok(b, h)
    kp = kp_records(b)
    assert [r[0] for r in kp] == list(range(1000, 1005))
    assert {r[1] for r in kp} == {1_800_000_000_000}   # consumers see the append time
    assert {r.timestamp for r in decode_records(bytes(b))} == {1_800_000_000_000}


def test_encode_with_offset_gaps_and_control():
    recs = [Record(10, 5, b"a", b"1"), Record(13, 6, b"b", None), Record(20, 7, None, b"3")]
    b = encode_batch(recs, base_offset=10)
    h = parse_header(b)
    assert h.last_offset == 20 and h.records_count == 3
    assert [(r.offset, r.key) for r in decode_records(b)] == [(10, b"a"), (13, b"b"), (20, None)]
    assert [r[0] for r in kp_records(b)] == [10, 13, 20]


@pytest.mark.parametrize("codec", [R.CODEC_SNAPPY])
def test_snappy_raw_and_xerial(codec):
    import cramjam
    recs = sample_records(50)
    b = encode_batch(recs, codec=codec)
    assert bytes(b[61:69]) == b"\x82SNAPPY\x00"   # xerial framing like the Java client
    # raw (unframed) snappy body, as some non-Java clients send
    body = R.decompress(codec, b[61:])
    raw = bytes(cramjam.snappy.compress_raw(body))
    rb = bytearray(b[:61] + raw)
    struct.pack_into(">i", rb, 8, len(rb) - 12)
    R.rewrite_crc(rb, 0)
    assert ours(rb) == ours(b)


def test_garbage_compressed_body_raises_record_error():
    for codec in CODECS[1:]:
        b = encode_batch(sample_records(3), codec=codec)
        bad = bytearray(b[:61] + b"\x00garbage-garbage" * 3)
        struct.pack_into(">i", bad, 8, len(bad) - 12)
        R.rewrite_crc(bad, 0)
        validate_produce_records(bad, 1 << 20)   # hot path does not decompress
        with pytest.raises(RecordError):
            decode_records(bytes(bad))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_validate_and_decode_only_raise_record_error(data):
    for fn in (lambda: validate_produce_records(data, 1 << 20, allow_multiple_batches=True),
               lambda: list(iter_batches(data)), lambda: decode_records(data)):
        try:
            fn()
        except RecordError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_mutated_valid_batch(data):
    codec = data.draw(st.sampled_from(CODECS))
    b = bytearray(encode_batch(sample_records(4), codec=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] = data.draw(st.integers(0, 255))
    R.rewrite_crc(b, 0) if data.draw(st.booleans()) and len(b) >= 61 else None
    try:
        validate_produce_records(b, 1 << 20)
    except RecordError:
        pass
    try:
        decode_records(bytes(b))
    except RecordError:
        pass


@pytest.mark.parametrize("codec", CODECS[1:])
def test_decompression_is_bounded(codec):
    data = b"\x00" * 100_000
    comp = R.compress(codec, data)
    assert R.decompress(codec, comp, limit=100_000) == data
    with pytest.raises(RecordError):
        R.decompress(codec, comp, limit=99_999)
    with pytest.raises(RecordError):
        R.decompress(codec, comp[:-3])   # truncated stream
