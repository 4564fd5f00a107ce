"""Bad input on the wire: the offending connection is answered or closed as Kafka does, and the
broker keeps serving a real client afterwards."""
import socket
import struct

import pytest
from kafka import KafkaAdminClient

from pykbroker.protocol.codec import APIS
from pykbroker.protocol import primitives as P
from pykbroker.protocol.wire import WireClient, request_frame

pytestmark = pytest.mark.timeout(60)


def connect(broker):
    return WireClient(broker, timeout=10, client_id="raw-test")


def assert_closed(c):
    assert c.wait_closed(10), "expected the broker to close the connection"


def assert_broker_serves_real_client(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        assert admin.describe_cluster()["cluster_id"]
    finally:
        admin.close()


def test_api_versions_too_new_gets_v0_unsupported_version(broker):
    s = connect(broker)
    # Version 99 with a flexible (v2) header and an arbitrary body, as KIP-511 clients send.
    s.send_bytes(request_frame(18, 99, 7, b"\x00\x00", flexible=True))
    frame = s.recv_frame()
    (corr,) = struct.unpack_from(">i", frame, 0)
    assert corr == 7
    body = APIS[18].decode("response", 0, frame[4:])  # header v0: no tagged fields
    assert body["error_code"] == 35  # UNSUPPORTED_VERSION
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]}
    assert ranges[18] == (0, 5)
    assert 71 not in ranges and 72 not in ranges  # telemetry never advertised
    # The connection stays usable: a supported version now works.
    s.send_bytes(request_frame(18, 3, 8, APIS[18].encode_bytes("request", 3, {
        "client_software_name": "raw-test", "client_software_version": "1.0"})))
    frame = s.recv_frame()
    assert struct.unpack_from(">i", frame, 0)[0] == 8
    body = APIS[18].decode("response", 3, frame[4:])
    assert body["error_code"] == 0 and ranges == {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]}
    s.close()


def test_api_versions_invalid_software_name(broker):
    s = connect(broker)
    s.send_bytes(request_frame(18, 3, 1, APIS[18].encode_bytes("request", 3, {
        "client_software_name": "bad name!", "client_software_version": "1"})))
    frame = s.recv_frame()
    body = APIS[18].decode("response", 3, frame[4:])
    assert body["error_code"] == 42  # INVALID_REQUEST
    s.close()


def test_frame_over_limit_closes_connection(broker):
    s = connect(broker)
    s.send_bytes(struct.pack(">i", 2**31 - 1) + b"\x00" * 16)
    assert_closed(s)
    assert_broker_serves_real_client(broker)


def test_negative_frame_size_closes_connection(broker):
    s = connect(broker)
    s.send_bytes(struct.pack(">i", -5))
    assert_closed(s)
    assert_broker_serves_real_client(broker)


def test_truncated_body_closes_connection(broker):
    s = connect(broker)
    # Metadata v1 claiming 3 topics but carrying none.
    s.send_bytes(request_frame(3, 1, 1, struct.pack(">i", 3)))
    assert_closed(s)
    assert_broker_serves_real_client(broker)


def test_garbage_bytes_close_connection(broker):
    s = connect(broker)
    s.send_bytes(struct.pack(">i", 11) + b"\xde\xad\xbe\xef" * 3)
    assert_closed(s)
    assert_broker_serves_real_client(broker)


def test_unknown_api_key_closes_connection(broker):
    s = connect(broker)
    s.send_bytes(request_frame(9999, 0, 5, b"", client_id=None))
    assert_closed(s)
    assert_broker_serves_real_client(broker)


def test_unsupported_version_of_other_api_closes_connection(broker):
    s = connect(broker)
    s.send_bytes(request_frame(3, 50, 1, b"", flexible=False))
    assert_closed(s)
    assert_broker_serves_real_client(broker)


def test_pipelined_requests_answered_in_order(broker):
    s = connect(broker)
    reqs = b""
    corrs = list(range(100, 110))
    for i, c in enumerate(corrs):
        v = i % 5  # mix ApiVersions v0..v4
        body = APIS[18].encode_bytes("request", v, {"client_software_name": "p", "client_software_version": "1"})
        reqs += request_frame(18, v, c, body)
    s.send_bytes(reqs)
    got = [struct.unpack_from(">i", s.recv_frame(), 0)[0] for _ in corrs]
    assert got == corrs
    s.close()


def test_client_vanishing_mid_response_does_not_stop_the_broker(broker):
    # Many pipelined requests, then an abortive close (RST) before reading any answer: the
    # broker's writes fail with EPIPE/ECONNRESET, which must end only this connection.
    for _ in range(5):
        s = connect(broker)
        body = APIS[18].encode_bytes("request", 3, {"client_software_name": "gone", "client_software_version": "1"})
        s.send_bytes(b"".join(request_frame(18, 3, c, body) for c in range(200)))
        s.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    assert_broker_serves_real_client(broker)
    assert broker.proc is not None and broker.proc.poll() is None
