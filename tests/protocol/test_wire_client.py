"""The tests' wire client (pykbroker.protocol.wire) without a broker: request framing against
hand-made bytes, response decoding, and frame/close handling over a socket pair."""
import socket
import struct

import pytest

from pykbroker.protocol.codec import APIS
from pykbroker.protocol.wire import WireClient, address_of, decode_response, request_frame


def test_request_frame_headers():
    # Metadata v1: header v1 (no tagged fields), null topic array
    f = request_frame(3, 1, 7, {"topics": None}, client_id="ab")
    assert f == struct.pack(">ihhih", 2 + 2 + 4 + 2 + 2 + 4, 3, 1, 7, 2) + b"ab" + b"\xff\xff\xff\xff"
    # ApiVersions v3 is flexible: header v2 ends with an empty tagged-field section
    body = APIS[18].encode_bytes("request", 3, {"client_software_name": "x", "client_software_version": "1"})
    f = request_frame(18, 3, 1, {"client_software_name": "x", "client_software_version": "1"}, client_id=None)
    assert f[4:] == struct.pack(">hhih", 18, 3, 1, -1) + b"\x00" + body
    # raw body bytes and an API the codec does not know (non-flexible header)
    assert request_frame(9999, 0, 5, b"", client_id=None) == struct.pack(">ihhih", 10, 9999, 0, 5, -1)


def test_decode_response_header_versions():
    body = {"throttle_time_ms": 0, "error_code": 0, "api_keys": [], "supported_features": [],
            "finalized_features_epoch": -1, "finalized_features": [], "zk_migration_ready": False}
    enc = APIS[18].encode_bytes("response", 3, body)
    # ApiVersions keeps response header v0 even when flexible
    assert decode_response(struct.pack(">i", 4) + enc, 18, 3, 4)["error_code"] == 0
    with pytest.raises(AssertionError):
        decode_response(struct.pack(">i", 5) + enc, 18, 3, 4)


def test_address_forms():
    class B:
        port = 9
    assert address_of("h:1") == ("h", 1)
    assert address_of(("h", 2)) == ("h", 2)
    assert address_of(B()) == ("127.0.0.1", 9)


def test_frames_and_close_over_a_socket():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    with WireClient(srv.getsockname(), timeout=5) as c:
        peer, _ = srv.accept()
        c.send_bytes(b"abc")
        assert peer.recv(3) == b"abc"
        peer.sendall(struct.pack(">i", 6) + b"\x00\x00\x00\x01hi")
        assert c.recv_frame() == b"\x00\x00\x00\x01hi"
        peer.sendall(struct.pack(">i", 10) + b"short")
        peer.close()
        with pytest.raises(ConnectionError):
            c.recv_frame()
    with WireClient(srv.getsockname(), timeout=5) as c:
        peer, _ = srv.accept()
        peer.close()
        assert c.wait_closed(5)
    srv.close()
