"""Sans-IO fuzz targets: the request dispatcher, the generated codecs and the record-batch parser,
fed arbitrary bytes (principle 7: bad input is an error answer or a close, never a crash).

Each target takes ``bytes`` and returns normally when the input was handled as the project
promises; anything else raises (``AssertionError`` for a broken promise, or whatever escaped).
The promises:

- ``codec``: ``ApiSpec.decode`` of any bytes, as any API, version and direction, returns a
  message or raises ``ProtocolError`` and nothing else; a message it returns encodes again
  and decodes to the same message (so an answer built from a decoded request can be sent).
- ``dispatch``: a ``Dispatcher`` fed any bytes, in any chunks, emits only ``HandleRequest``,
  ``SendResponse`` or ``Close`` events (a ``SendResponse`` a well-formed frame), stops after a
  ``Close``, and never raises.
- ``records``: ``validate_produce_records`` (storage/log_validator.py), ``decode_records``, ``iter_batches`` and
  ``first_batch_corruption`` of any bytes return or raise ``RecordError`` (the records' one
  error: a ``KafkaError`` carrying the code a Produce answer gets) and nothing else.  Half of the
  inputs get a correct CRC-32C and batch length patched in first, so the parser is exercised
  past its CRC check (random bytes almost never carry a valid CRC).

Used by ``compat/fuzz/coverage.py`` (atheris, coverage-guided) and by the hypothesis properties
of ``tests/protocol/test_fuzz_sansio.py``.
"""
from __future__ import annotations

import struct
import types

from pykbroker.handlers import load_handlers
from pykbroker.protocol import records as R
from pykbroker.protocol.codec import APIS
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.protocol.primitives import ProtocolError
from pykbroker.server.dispatch import Close, Dispatcher, HandleRequest, SendResponse

API_KEYS = sorted(APIS)
_HANDLERS = None
# the broker as far as dispatch reaches it: a too-new ApiVersions is answered with the list of
# its services' handler table
_BROKER = types.SimpleNamespace(handlers=None, services=types.SimpleNamespace(handlers=None))


def _handlers():
    global _HANDLERS
    if _HANDLERS is None:
        _HANDLERS = _BROKER.handlers = _BROKER.services.handlers = load_handlers()
    return _HANDLERS


def _normalize(x):
    if isinstance(x, dict):
        return {k: _normalize(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_normalize(v) for v in x]
    if isinstance(x, (memoryview, bytearray)):
        return bytes(x)
    return x


def codec_target(data: bytes) -> None:
    """data[0]: API (index into the known keys), data[1]: version (mod the API's range) and
    direction (high bit), rest: the message body."""
    if len(data) < 2:
        return
    api = APIS[API_KEYS[data[0] % len(API_KEYS)]]
    span = api.max_version - api.min_version + 1
    version = api.min_version + (data[1] & 0x7F) % span
    kind = "response" if data[1] & 0x80 else "request"
    body = data[2:]
    try:
        msg = api.decode(kind, version, body, exact=False)
    except ProtocolError:
        return
    # what decodes must encode, and decode again to the same message
    again = api.encode_bytes(kind, version, msg)
    back = api.decode(kind, version, again)
    assert _normalize(back) == _normalize(msg), (api.name, version, kind)


def dispatch_target(data: bytes, max_frame: int = 1 << 20) -> None:
    """data[0]: how the rest is cut into reads (0: one read; n: reads of n bytes)."""
    if not data:
        return
    step = data[0] or len(data)
    stream = data[1:]
    handlers = _handlers()
    # the broker as far as dispatch reaches it: ApiVersions' answers list its handlers
    d = Dispatcher(handlers, max_frame, _BROKER, None, "fuzz")
    closed = False
    for i in range(0, len(stream), step):
        d.receive_data(stream[i:i + step])
        while True:
            ev = d.next_event()
            if ev is None:
                break
            assert not closed, "event after a Close"
            cls = ev.__class__
            if cls is Close:
                closed = True
                assert d.closed
            elif cls is SendResponse:
                frame = b"".join(bytes(p) for p in ev.parts)
                (size,) = struct.unpack_from(">i", frame)
                assert size == len(frame) - 4, "response frame size prefix is wrong"
            else:
                assert cls is HandleRequest, ev
                assert ev.handler is handlers[ev.ctx.api_key]
        if closed:
            assert d.next_event() is None
            return


def _patch_batch(data: bytes) -> bytearray:
    """Make the first batch of ``data`` pass framing and the CRC: batch length = the bytes
    there are, magic 2, CRC-32C recomputed.  What the fuzzer varies then lies beyond."""
    buf = bytearray(data)
    if len(buf) < R.HEADER_SIZE:
        buf += bytes(R.HEADER_SIZE - len(buf))
    struct.pack_into(">q", buf, 0, 0)                       # baseOffset 0, as a producer sends
    struct.pack_into(">i", buf, 8, len(buf) - R.LOG_OVERHEAD)
    buf[16] = R.MAGIC_V2
    struct.pack_into(">I", buf, 17, R.compute_crc(buf, 0, len(buf)))
    return buf


def records_target(data: bytes) -> None:
    """data[0]: bit 0 patch the batch (length, magic, CRC), bit 1 compacted topic, bit 2 check
    timestamps, bits 3-6 Produce version; rest: the partition's records."""
    if not data:
        return
    flags = data[0]
    raw = data[1:]
    buf = _patch_batch(raw) if flags & 1 else bytearray(raw)
    version = (flags >> 3) & 0x0F
    try:
        R.first_batch_corruption(buf)
    except R.RecordError:
        raise AssertionError("first_batch_corruption must return its message, not raise") from None
    try:
        validate_produce_records(
            memoryview(buf), 1 << 20, api_version=3 + version % 11,
            now_ms=1_700_000_000_000 if flags & 4 else None,
            timestamp_before_max_ms=3_600_000 if flags & 4 else None,
            timestamp_after_max_ms=3_600_000 if flags & 4 else None,
            compacted_partition="t-0" if flags & 2 else None)
    except R.RecordError:
        pass
    try:
        for h in R.iter_batches(buf):
            R.batch_crc_ok(buf, h)
    except R.RecordError:
        pass
    try:
        R.decode_records(bytes(buf))
    except R.RecordError:
        pass


TARGETS = {"codec": codec_target, "dispatch": dispatch_target, "records": records_target}


def all_targets(data: bytes) -> None:
    """One input for one target: data[0] picks it (for a single coverage-guided run over all)."""
    if not data:
        return
    names = sorted(TARGETS)
    TARGETS[names[data[0] % len(names)]](data[1:])
