"""The sans-IO dispatcher without sockets: bytes in, decisions out.

The real handler modules supply version ranges and error responses; no handler is awaited here
(the dispatcher never runs one: its caller does, and hands the outcome back)."""
import logging
import struct
import subprocess
import sys
import types

import pytest

from pykbroker.config import BrokerConfig
from pykbroker.handlers import load_handlers
from pykbroker.protocol.codec import APIS, Chunks
from pykbroker.protocol.errors import ErrorCode, KafkaError
from pykbroker.server.dispatch import (Close, CloseConnection, Dispatcher, HandleRequest,
                                       SendResponse)

HANDLERS = load_handlers()
MAX_FRAME = 1024 * 1024


def dispatcher(max_frame=MAX_FRAME):
    # the broker as far as ApiVersions reads it: its services' handler table and config
    broker = types.SimpleNamespace(handlers=HANDLERS, services=types.SimpleNamespace(
        handlers=HANDLERS, config=BrokerConfig({})))
    return Dispatcher(HANDLERS, max_frame, broker, connection="conn", peer="1.2.3.4:5")


def frame(api_key, version, corr, msg=None, body=None, client_id="test", flexible=None):
    api = APIS[api_key]
    if flexible is None:
        flexible = version >= api.flexible_from
    hdr = struct.pack(">hhi", api_key, version, corr)
    if client_id is None:
        hdr += struct.pack(">h", -1)
    else:
        hdr += struct.pack(">h", len(client_id)) + client_id.encode()
    if flexible:
        hdr += b"\x00"
    if body is None:
        body = api.encode_bytes("request", version, msg)
    payload = hdr + body
    return struct.pack(">i", len(payload)) + payload


def events(d, data):
    d.receive_data(data)
    out = []
    while (ev := d.next_event()) is not None:
        out.append(ev)
    return out


def response(ev, api_key, version, flexible_header):
    """Decode a SendResponse: (correlation id, body)."""
    assert isinstance(ev, SendResponse)
    data = b"".join(bytes(p) for p in ev.parts)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    (corr,) = struct.unpack_from(">i", data, 4)
    start = 9 if flexible_header else 8
    return corr, APIS[api_key].decode("response", version, data[start:])


API_VERSIONS_V3 = {"client_software_name": "t", "client_software_version": "1"}
METADATA_V1 = {"topics": [{"name": "a"}, {"name": "b"}]}


def test_good_request_then_finish_encodes_the_response():
    d = dispatcher()
    [ev] = events(d, frame(18, 3, 42, API_VERSIONS_V3, client_id="me"))
    assert isinstance(ev, HandleRequest)
    assert ev.handler is HANDLERS[18]
    ctx = ev.ctx
    assert (ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id) == (18, 3, 42, "me")
    assert ctx.connection == "conn" and ctx.broker.handlers is HANDLERS
    assert ev.request["client_software_name"] == "t"
    out = d.finish(ev, {"error_code": 0, "api_keys": [], "throttle_time_ms": 7})
    # ApiVersions answers with header v0 even when the request is flexible (KIP-511)
    corr, body = response(out, 18, 3, flexible_header=False)
    assert corr == 42 and body["throttle_time_ms"] == 7
    # Another API's flexible version gets the flexible response header (v1).
    [ev] = events(d, frame(3, 9, 43, {"topics": [{"name": "x"}]}))
    corr, body = response(d.finish(ev, HANDLERS[3].error_response(ev.ctx, ev.request, 3)), 3, 9, True)
    assert corr == 43 and body["topics"][0]["error_code"] == 3
    assert not d.closed


def test_two_pipelined_frames_in_one_chunk_come_out_in_order():
    d = dispatcher()
    evs = events(d, frame(18, 3, 1, API_VERSIONS_V3) + frame(3, 1, 2, METADATA_V1))
    assert [type(e) for e in evs] == [HandleRequest, HandleRequest]
    assert [e.ctx.correlation_id for e in evs] == [1, 2]
    assert [t["name"] for t in evs[1].request["topics"]] == ["a", "b"]
    assert d.next_event() is None


def test_frame_split_across_chunks():
    d = dispatcher()
    data = frame(3, 1, 9, METADATA_V1) + frame(18, 0, 10, {})
    got = []
    for i in range(len(data)):  # one byte at a time
        got += events(d, data[i:i + 1])
    assert [e.ctx.correlation_id for e in got] == [9, 10]
    assert got[0].request["topics"][1]["name"] == "b"


def test_oversized_frame_closes_on_the_size_prefix_alone():
    d = dispatcher(max_frame=1000)
    ok = frame(18, 0, 1, {})
    # Only the 4-byte prefix of a 2 GiB frame: decided at once, nothing of the body buffered.
    evs = events(d, ok + struct.pack(">i", 2**31 - 1))
    assert isinstance(evs[0], HandleRequest)  # the request before it is still served
    assert isinstance(evs[1], Close) and "socket.request.max.bytes" in evs[1].reason
    assert d.closed and d.next_event() is None
    # A negative size is refused the same way.
    assert isinstance(events(dispatcher(), struct.pack(">i", -5))[0], Close)
    # The limit itself is allowed.
    d = dispatcher(max_frame=len(ok) - 4)
    assert isinstance(events(d, ok)[0], HandleRequest)


def test_unknown_api_key_closes_and_nothing_after_it_is_dispatched():
    d = dispatcher()
    bad = struct.pack(">hhi", 9999, 0, 5) + struct.pack(">h", -1)
    evs = events(d, struct.pack(">i", len(bad)) + bad + frame(18, 0, 6, {}))
    assert len(evs) == 1 and isinstance(evs[0], Close)
    assert evs[0].reason == "unknown or unsupported API key 9999 (v0)"
    assert evs[0].level == logging.WARNING
    assert events(d, frame(18, 0, 7, {})) == []


def test_header_too_short_closes():
    [ev] = events(dispatcher(), struct.pack(">i", 6) + b"\x00\x12\x00\x00\x00\x00")
    assert isinstance(ev, Close) and "too short" in ev.reason
    # a truncated client id in the header is malformed too
    [ev] = events(dispatcher(), struct.pack(">i", 11) + struct.pack(">hhih", 18, 0, 1, 20) + b"x")
    assert isinstance(ev, Close)


def test_unsupported_version_closes_except_api_versions():
    [ev] = events(dispatcher(), frame(3, 50, 1, body=b"", flexible=False))
    assert isinstance(ev, Close) and "metadata v50 is not supported" in ev.reason
    # KIP-511: a too-new ApiVersions gets a v0 body with UNSUPPORTED_VERSION and our ranges,
    # and the connection stays open.
    d = dispatcher()
    [ev] = events(d, frame(18, 99, 7, body=b"\x00\x00", flexible=True))
    corr, body = response(ev, 18, 0, flexible_header=False)
    assert corr == 7 and body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]}
    assert ranges[18] == (HANDLERS[18].MIN_VERSION, HANDLERS[18].MAX_VERSION)
    assert not d.closed
    assert isinstance(events(d, frame(18, 3, 8, API_VERSIONS_V3))[0], HandleRequest)


def test_malformed_body_closes_except_api_versions():
    # Metadata v1 claiming 3 topics but carrying none.
    [ev] = events(dispatcher(), frame(3, 1, 1, body=struct.pack(">i", 3)))
    assert isinstance(ev, Close) and ev.reason.startswith("malformed metadata v1 request")
    # An undecodable ApiVersions is answered with INVALID_REQUEST instead.
    d = dispatcher()
    [ev] = events(d, frame(18, 3, 4, body=b"\x05ab"))
    corr, body = response(ev, 18, 3, flexible_header=False)
    assert corr == 4 and body["error_code"] == ErrorCode.INVALID_REQUEST
    assert not d.closed


def test_trailing_bytes_after_the_body_are_ignored():
    body = APIS[3].encode_bytes("request", 9, {"topics": None}) + b"\x00\x00\x00"
    [ev] = events(dispatcher(), frame(3, 9, 1, body=body))
    assert isinstance(ev, HandleRequest) and ev.request["topics"] is None


def test_handler_raising_kafka_error_is_answered_per_item():
    d = dispatcher()
    [ev] = events(d, frame(3, 1, 11, METADATA_V1))
    out = d.fail(ev, KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    corr, body = response(out, 3, 1, flexible_header=False)
    assert corr == 11
    assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("a", 3), ("b", 3)]
    assert not d.closed


def test_handler_bug_is_answered_with_unknown_server_error(caplog):
    d = dispatcher()
    [ev] = events(d, frame(18, 1, 22, {}))
    with caplog.at_level(logging.ERROR, logger="pykbroker.connection"):
        out = d.fail(ev, ZeroDivisionError("boom"))
    # ApiVersions has no error_response of its own: the fallback sets the top-level code.
    corr, body = response(out, 18, 1, flexible_header=False)
    assert corr == 22 and body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    [rec] = caplog.records
    assert "handler for api_versions v1 failed (client 1.2.3.4:5)" in rec.getMessage()
    assert rec.exc_info[0] is ZeroDivisionError
    # A KafkaError is an answer, not a bug: no traceback logged.
    caplog.clear()
    [ev] = events(d, frame(18, 1, 23, {}))
    with caplog.at_level(logging.ERROR, logger="pykbroker.connection"):
        out = d.fail(ev, KafkaError(ErrorCode.NOT_CONTROLLER))
    assert response(out, 18, 1, False)[1]["error_code"] == ErrorCode.NOT_CONTROLLER
    assert caplog.records == []


def _produce(acks):
    return {"transactional_id": None, "acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]}


def test_acks0_produce_gets_no_response():
    d = dispatcher()
    [ev] = events(d, frame(0, 9, 5, _produce(0)))
    assert isinstance(ev, HandleRequest) and ev.request["acks"] == 0
    assert d.finish(ev, None) is None  # the handler returns None: nothing is sent
    assert not d.closed
    # acks=1 is answered
    [ev] = events(d, frame(0, 9, 6, _produce(1)))
    out = d.finish(ev, HANDLERS[0].error_response(ev.ctx, ev.request, 0))
    assert response(out, 0, 9, True)[0] == 6


def test_close_connection_from_a_handler_closes_without_answer():
    d = dispatcher()
    [ev] = events(d, frame(0, 9, 5, _produce(0)) + frame(18, 0, 6, {}))[:1]
    out = d.fail(ev, CloseConnection("a produce with acks=0 failed"))
    assert isinstance(out, Close) and out.reason == "a produce with acks=0 failed"
    assert out.level == logging.INFO
    assert d.closed and d.next_event() is None


def test_response_that_cannot_be_encoded_closes():
    d = dispatcher()
    [ev] = events(d, frame(18, 3, 1, API_VERSIONS_V3))
    out = d.finish(ev, {"error_code": "not an int", "api_keys": [], "throttle_time_ms": 0})
    assert isinstance(out, Close) and out.level == logging.ERROR and out.exc_info is not None
    assert d.closed


def test_file_regions_pass_through_unframed():
    # Fetch answers carry file regions (sent with sendfile); the dispatcher sizes the frame from
    # their length and hands them on untouched, the response header patched into the first part.
    region = types.SimpleNamespace(fd=3, position=100, length=1000)
    d = dispatcher()
    [ev] = events(d, frame(1, 12, 77, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
                                       "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                                       "session_epoch": -1, "topics": [], "forgotten_topics_data": [],
                                       "rack_id": ""}))
    ev.handler = None   # finish() only encodes
    resp = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 5,
                                       "last_stable_offset": 5, "log_start_offset": 0,
                                       "aborted_transactions": [], "preferred_read_replica": -1,
                                       "records": Chunks([b"abc", region, b"de"])}]}]}
    out = d.finish(ev, resp)
    assert out.parts[1] == b"abc" and out.parts[2] is region and out.parts[3] == b"de"
    head = bytes(out.parts[0])
    size, corr = struct.unpack_from(">ii", head)
    assert corr == 77 and head[8] == 0   # response header v1: the tagged-field byte
    assert size == sum(len(p) for p in out.parts if p is not region) - 4 + 1000
    # the bytes before the region are the codec's own encoding of the response up to it
    whole = APIS[1].encode_bytes("response", 12, dict(resp, responses=[dict(
        resp["responses"][0], partitions=[dict(resp["responses"][0]["partitions"][0],
                                               records=b"abc" + b"R" * 1000 + b"de")])]))
    assert head[9:] == whole[:len(head) - 9]
    assert b"".join(out.parts[3:]) == whole[len(head) - 9 + 1003:]


@pytest.mark.timeout(60)
def test_dispatcher_does_no_io():
    code = "import sys, pykbroker.server.dispatch; sys.exit('trio' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_connection_answers_what_precedes_a_close_then_closes():
    # The trio side carries the decisions out in order: the answer to the request before a
    # bad frame is written before the connection closes.
    import trio

    from pykbroker.config import BrokerConfig
    from pykbroker.server.connection import Connection

    async def main():
        broker = types.SimpleNamespace(config=BrokerConfig({}), handlers=HANDLERS)
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            async def serve_one(stream):
                await Connection(broker, stream, "PLAINTEXT").run()
            nursery.start_soon(lambda: trio.serve_listeners(serve_one, listeners))
            client = await trio.open_tcp_stream("127.0.0.1", port)
            bad = struct.pack(">hhi", 9999, 0, 2) + struct.pack(">h", -1)
            await client.send_all(frame(18, 0, 1, {}) + struct.pack(">i", len(bad)) + bad
                                  + frame(18, 0, 3, {}))
            buf = b""
            with trio.fail_after(10):
                while True:
                    data = await client.receive_some(65536)
                    if not data:
                        break
                    buf += data
            await client.aclose()
            nursery.cancel_scope.cancel()
        return buf

    buf = trio.run(main)
    (n,) = struct.unpack_from(">i", buf)
    assert len(buf) == 4 + n  # one answer, then EOF
    assert struct.unpack_from(">i", buf, 4)[0] == 1
