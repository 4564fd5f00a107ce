"""Hypothesis properties over the sans-IO fuzz targets (compat/fuzz/targets.py): the
dispatcher, the generated codecs and the record-batch parser take any bytes and answer with
an event, a message, ProtocolError or RecordError, never another exception.  The
coverage-guided run of the same targets is compat/fuzz/coverage.py (atheris)."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykbroker.protocol import records as R
from pykbroker.protocol.codec import APIS
from compat.fuzz import targets as T

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@SETTINGS
@given(st.binary(max_size=300))
def test_codec_any_bytes(data):
    T.codec_target(data)


@SETTINGS
@given(st.integers(0, 255), st.lists(st.tuples(st.sampled_from(sorted(APIS)), st.integers(-1, 20),
                                               st.binary(max_size=60)), max_size=4), st.binary(max_size=20))
def test_dispatch_frames(step, reqs, tail):
    """Well-framed requests of any API and version with arbitrary bodies (which reach the body
    decoders), then stray bytes, fed in reads of any size."""
    stream = b""
    for key, version, body in reqs:
        payload = struct.pack(">hhih", key, version, 1, 4) + b"fuzz" + body
        stream += struct.pack(">i", len(payload)) + payload
    T.dispatch_target(bytes([step]) + stream + tail)


@SETTINGS
@given(st.binary(max_size=300))
def test_dispatch_any_bytes(data):
    T.dispatch_target(data)


@st.composite
def batches(draw):
    recs = draw(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.binary(max_size=30)),
                         min_size=1, max_size=4))
    b = bytearray(R.encode_batch([R.Record(None, None, k, v) for k, v in recs], 0,
                                 draw(st.sampled_from([0, 1, 2, 3, 4]))))
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(b) - 1))
        b[i] = draw(st.integers(0, 255))
    return bytes(b)


@SETTINGS
@given(st.integers(0, 255), st.one_of(batches(), st.binary(max_size=200)))
def test_records_any_bytes(flags, data):
    T.records_target(bytes([flags]) + data)


def test_the_targets_catch_a_broken_promise(monkeypatch):
    """The targets are not vacuous: a decoder that raises something else than ProtocolError
    (an IndexError, as a codec that did not wrap low-level errors would) escapes them, and a
    record parser that raises something else than RecordError too."""
    def broken(self, kind, version, buf, pos=0, exact=True):
        raise IndexError("index out of range")
    monkeypatch.setattr(type(APIS[3]), "decode", broken)
    with pytest.raises(IndexError):
        T.codec_target(bytes([sorted(APIS).index(3), 1]) + b"\x00\x00\x00\x00")


def test_the_records_target_catches_a_broken_promise(monkeypatch):
    def broken(batch):
        raise ValueError("negative count")
    monkeypatch.setattr(R, "decode_records", broken)
    with pytest.raises(ValueError):
        T.records_target(b"\x00" + bytes(70))
