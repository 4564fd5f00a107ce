"""Property tests: every message of every API at every version round-trips through the codec,
and arbitrary bytes either decode or raise ProtocolError (never anything else)."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat.fuzz.fuzzer import message_strategy
from pykbroker.protocol.codec import APIS
from pykbroker.protocol.primitives import ProtocolError

INTS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
}


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def scalar(f, t, v, item=False):
    if t in INTS:
        return INTS[t]
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    nullable = not item and _in(f.get("nullable"), v)   # an array's nullability is not its items'
    if t == "string":
        s = st.text(max_size=12)
    elif t in ("bytes", "records"):
        s = st.binary(max_size=24)
    else:
        raise AssertionError(t)
    return st.one_of(st.none(), s) if nullable else s


def message(fields, v):
    return message_strategy(fields, v, scalar)


def normalize(x):
    if isinstance(x, dict):
        return {k: normalize(v) for k, v in x.items()}
    if isinstance(x, list):
        return [normalize(v) for v in x]
    if isinstance(x, memoryview):
        return bytes(x)
    return x


def project(msg, fields, v):
    """Decoded messages carry every field of the spec; keep those the version has."""
    out = {}
    for f in fields:
        if not _in(f["versions"], v):
            continue
        val = msg[f["name"]]
        if "fields" in f and val is not None:
            if f["type"] == "array":
                val = [project(x, f["fields"], v) for x in val]
            else:
                val = project(val, f["fields"], v)
        out[f["name"]] = val
    return out


CASES = [(k, kind, v) for k, a in sorted(APIS.items()) for kind in ("request", "response")
         for v in range(a.min_version, a.max_version + 1)]


@pytest.mark.parametrize("api_key,kind,version", CASES)
def test_roundtrip(api_key, kind, version):
    api = APIS[api_key]
    fields = api.request if kind == "request" else api.response

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(message(fields, version))
    def check(msg):
        data = api.encode_bytes(kind, version, msg)
        back = normalize(api.decode(kind, version, data))
        assert project(back, fields, version) == normalize(msg)
        # Re-encoding the decoded message gives identical bytes.
        assert api.encode_bytes(kind, version, back) == data

    check()


@pytest.mark.parametrize("api_key", sorted(APIS))
def test_garbage_decodes_or_raises_protocol_error(api_key):
    api = APIS[api_key]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(api.min_version, api.max_version), st.sampled_from(["request", "response"]),
           st.binary(max_size=200))
    def check(version, kind, data):
        try:
            api.decode(kind, version, data)
        except ProtocolError:
            pass

    check()


def test_truncated_messages_raise_protocol_error():
    api = APIS[0]
    msg = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x" * 40}]}]}
    for v in range(api.min_version, api.max_version + 1):
        data = api.encode_bytes("request", v, msg)
        for cut in range(len(data)):
            with pytest.raises(ProtocolError):
                api.decode("request", v, data[:cut])


def test_huge_array_count_is_rejected_before_allocation():
    api = APIS[3]  # Metadata v1: topics array count first
    data = struct.pack(">i", 2**31 - 1)
    with pytest.raises(ProtocolError, match="exceeds"):
        api.decode("request", 1, data)
