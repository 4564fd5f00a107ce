"""Send one request over a plain socket, encoded and decoded by kafka-python's protocol classes
(an independent client codec), for behaviour no high-level client API exposes directly."""
import socket
import struct


def call(bootstrap: str, request, version: int, response_cls, timeout: float = 10.0):
    host, port = bootstrap.rsplit(":", 1)
    request.with_header(correlation_id=7, client_id="pykbroker-tests")
    data = request.encode(version=version, header=True, framed=True)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        size = struct.unpack(">i", _recv(s, 4))[0]
        body = _recv(s, size)
    return response_cls.decode(body, version=version, header=True)


def _recv(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf
