"""socket.send.buffer.bytes / socket.receive.buffer.bytes on the listening sockets (server/serve.py):
Kafka's 100 KiB by default (the kernel reports double what is asked), -1 leaves the OS's sizes.
Compared with Kafka over real connections in tests/differential/test_socket_buffers.py."""
import socket

import trio

from pykbroker.config import BrokerConfig
from pykbroker.server.serve import _size_buffers


def _sizes(overrides: dict) -> tuple[int, int]:
    async def main():
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        try:
            _size_buffers(listeners, BrokerConfig(overrides))
            s = listeners[0].socket
            return s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        finally:
            for lst in listeners:
                await lst.aclose()
    return trio.run(main)


def test_kafka_default_sizes():
    assert _sizes({}) == (2 * 102400, 2 * 102400)


def test_minus_one_keeps_the_os_sizes():
    plain = socket.socket()
    os_sizes = (plain.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
    plain.close()
    assert _sizes({"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"}) == os_sizes
    assert _sizes({"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "-1"}) == (2 * 65536, os_sizes[1])
