"""``pykbroker healthcheck``: exit 0 when a broker answers an ApiVersions request, 1 otherwise.

Made for the container image's ``HEALTHCHECK`` (and any orchestrator probe): an open TCP port is
not enough (the listener is bound before the broker may serve, and a wedged broker still accepts
connections), so it sends a real ApiVersions request (v0: the one every broker since Kafka
0.10 answers, with no body) and wants error code 0 and ApiVersions itself in the answer.

The address is ``--bootstrap-server HOST:PORT``; without it, the first listener of the
``KAFKA_LISTENERS`` or else ``PYKBROKER_LISTENERS`` environment variable (what the image's
entrypoint binds, pykbroker/container.py), with a wildcard host (``0.0.0.0``, ``::``, empty)
probed on loopback; else ``127.0.0.1:9092``.

Standard library only and no pykbroker import beyond this module, so a probe costs one Python
start-up and one round trip (Docker runs it every few seconds).
"""
from __future__ import annotations

import os
import socket
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

API_VERSIONS = 18
ENV_LISTENERS = "PYKBROKER_LISTENERS"
DEFAULT_ADDRESS = ("127.0.0.1", 9092)
_WILDCARD = ("", "0.0.0.0", "::")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="broker to probe (default: the first listener of $%s on loopback, else "
                        "127.0.0.1:9092)" % ENV_LISTENERS)
    p.add_argument("--timeout", type=float, default=5.0, help="seconds for connect and answer (default 5)")


def default_address(environ: Mapping[str, str] = os.environ) -> tuple[str, int]:
    """Where the entrypoint's broker listens, as seen from inside its container."""
    # the entrypoint's order: KAFKA_LISTENERS wins over the image's PYKBROKER_LISTENERS
    listeners = (environ.get("KAFKA_LISTENERS", "").strip() or environ.get(ENV_LISTENERS, "").strip())
    if not listeners:
        return DEFAULT_ADDRESS
    first = listeners.split(",")[0].strip()
    addr = first.split("://", 1)[1] if "://" in first else first
    host, port = _split(addr)
    return ("127.0.0.1" if host in _WILDCARD else host), port


def _split(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep:
        raise ValueError("expected HOST:PORT, got %r" % addr)
    return host.strip("[]"), int(port)


def probe(host: str, port: int, timeout: float = 5.0) -> int:
    """Send ApiVersions v0; return how many APIs the broker listed.  Raises OSError when the
    broker cannot be reached or closes the connection, ValueError on a wrong or failed answer."""
    corr = 0x6B68  # any id: the answer must carry it back
    client_id = b"pykbroker-healthcheck"
    # request header v1: api_key, api_version, correlation_id, client_id (int16 length + bytes)
    payload = struct.pack(">hhih", API_VERSIONS, 0, corr, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 10 <= size <= 1 << 20:
            raise ValueError("implausible response size %d" % size)
        frame = _recv_exact(sock, size)
    # response v0 (header v0): correlation_id, error_code, [api_key, min_version, max_version]
    got_corr, error_code, n = struct.unpack_from(">ihi", frame, 0)
    if got_corr != corr:
        raise ValueError("correlation id %d, sent %d" % (got_corr, corr))
    if error_code != 0:
        raise ValueError("ApiVersions error code %d" % error_code)
    if n < 0 or 10 + 6 * n > len(frame):
        raise ValueError("malformed ApiVersions answer (%d APIs in %d bytes)" % (n, len(frame)))
    keys = {struct.unpack_from(">h", frame, 10 + 6 * i)[0] for i in range(n)}
    if API_VERSIONS not in keys:
        raise ValueError("ApiVersions answer does not list ApiVersions")
    return n


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def run(args: argparse.Namespace) -> int:
    try:
        host, port = _split(args.bootstrap_server) if args.bootstrap_server else default_address()
    except ValueError as e:
        print("pykbroker healthcheck: %s" % e, file=sys.stderr)
        return 1
    try:
        n = probe(host, port, args.timeout)
    except (OSError, ValueError, struct.error) as e:
        print("pykbroker healthcheck: %s:%d unhealthy: %s" % (host, port, e), file=sys.stderr)
        return 1   # Docker: 1 is "unhealthy" (2 is reserved)
    print("pykbroker healthcheck: %s:%d healthy (%d APIs)" % (host, port, n))
    return 0
