"""The kernel buffers of a client connection, against Apache Kafka: Kafka's SocketServer sets
``socket.receive.buffer.bytes`` (SO_RCVBUF, on the listening socket before it accepts, so the
handshake's window scale follows) and ``socket.send.buffer.bytes`` (SO_SNDBUF, on the accepted
socket), 100 KiB each by default; pykbroker sets the same on its listening sockets.  What a client
sees: the receive window the broker offers (its window scale, read from the client's TCP_INFO)
and how much of an answer the broker can push before the client reads (the send buffer).  Both
shape librdkafka's catch-up consume of small records (compat/bench/results/
consume-100b-socket-buffers.md).  The buffer sizes are read from ``ss`` (iproute2) for the
broker's end of the connection."""
import re
import shutil
import socket
import struct
import subprocess

import pytest

from pykbroker.protocol import wire


def _tcp_info_peer_wscale(sock: socket.socket) -> int:
    # struct tcp_info: state, ca_state, retransmits, probes, backoff, options (u8 each), then one
    # byte of two 4-bit fields: tcpi_snd_wscale (low bits: the peer's receive window scale) and
    # tcpi_rcv_wscale
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("B", info, 6)[0] & 0x0F


def _broker_end(port: int, client_port: int) -> dict:
    out = subprocess.run(["ss", "-tmnH", "state", "established",
                          "( sport = :%d and dport = :%d )" % (port, client_port)],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)", out)
    assert m, "no socket of port %d to %d in: %r" % (port, client_port, out)
    return {"rcvbuf": int(m.group(1)), "sndbuf": int(m.group(2))}


def _observe(t) -> dict:
    with wire.WireClient(t, client_id="diff-socket-buffers") as c:
        assert c.request(18, 3, {"client_software_name": "diff", "client_software_version": "1"})["error_code"] == 0
        seen = {"peer_window_scale": _tcp_info_peer_wscale(c.sock)}
        seen.update(_broker_end(t.port, c.sock.getsockname()[1]))
    return seen


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to read the broker's socket buffers")
def test_client_connection_buffers_match_kafka(both):
    pyk, kafka = both(_observe)
    assert kafka["sndbuf"] == kafka["rcvbuf"] == 2 * 102400   # the kernel doubles what is asked
    assert pyk == kafka
