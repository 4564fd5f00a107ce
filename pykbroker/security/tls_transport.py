"""TLS on a connection's non-blocking socket through OpenSSL's memory BIOs.

Why not ``trio.SSLStream``: each of its ``receive_some`` calls returns at most one TLS record
(16 KiB of plaintext) and goes through trio's retry loop, conflict detector and checkpoints, so
a 1 MiB Produce arrives in 64 such calls, and every decrypted record is copied once more into
the frame buffer.  Over TLS the 1 KiB-record produce cell ran at 0.46x Kafka with 4.25 CPU s/GB
against 1.1 on PLAINTEXT (compat/bench/results/bench-security.md).  Here one socket read (up to
256 KiB) feeds the incoming BIO, and the records it holds are decrypted in a plain loop straight
into the request's frame buffer where the dispatcher offers one (the PLAINTEXT path's
``readv``), with one scheduler checkpoint per socket read.

Both sides: a client listener's connections (server/secure.py, ``server_side``) and this broker's
own connections to the others' TLS inter-broker listener (cluster/interbroker.py: a follower's
Fetch answers of up to ``replica.fetch.response.max.bytes`` are read the same way).

Only the connection's one task uses a transport (reads, writes and the close), so the
``SSLObject`` never sees two operations at once; nothing here holds a lock.

Also: the handshake's last flight (and a TLS 1.3 server's session tickets) is written the moment
the handshake completes.  trio holds that flight back until the server's first write, which
cost every new connection of a client with Nagle's algorithm on a 40 ms delayed ACK.
"""
from __future__ import annotations

import os
import ssl
from typing import Any, Awaitable, Callable, Optional, TypeVar

import trio

# One socket read: a few TLS records of 16 KiB.  Large enough that a big Produce needs few
# reads, small enough that a connection streaming data cannot hold the loop for long.
_READ_BYTES = 256 * 1024

_A = TypeVar("_A")
_R = TypeVar("_R")

# TLS alert record framing (RFC 5246 6.2.1, 7.2): content type 21, then version, length 2,
# level 2 (fatal) and the description.  bad_certificate is 42.
_ALERT_RECORD, _FATAL, _BAD_CERTIFICATE = 21, 2, 42


def kafka_alert(alert: bytes, certificate_refused: bool) -> bytes:
    """The alert Kafka sends where OpenSSL's differs: a client certificate the truststore does not
    validate is answered by Kafka (its JSSE trust manager) with bad_certificate (42), by OpenSSL
    with the verification error's own alert (unknown_ca, 48, for an unknown issuer).  Measured
    against Apache Kafka 4.4 on JDK 17 with librdkafka's test 0097.  Only a TLS 1.2 alert can be
    rewritten: it leaves before the server's ChangeCipherSpec, in the clear, a single 7-byte
    record; a TLS 1.3 alert is encrypted and goes as OpenSSL wrote it."""
    if certificate_refused and len(alert) == 7 and alert[0] == _ALERT_RECORD and alert[3:5] == b"\x00\x02" \
            and alert[5] == _FATAL:
        return alert[:6] + bytes([_BAD_CERTIFICATE])
    return alert


class TlsTransport(trio.abc.AsyncResource):
    """One side of one TLS connection over ``tcp`` (a ``trio.SocketStream``): the server's
    (default), or a client's checking the server's name ``server_hostname`` (None: not checked)."""

    def __init__(self, tcp: trio.SocketStream, context: ssl.SSLContext, server_side: bool = True,
                 server_hostname: Optional[str] = None) -> None:
        self.transport_stream = tcp
        self.socket = tcp.socket
        self._fd = tcp.socket.fileno()
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.ssl_object = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side,
                                           server_hostname=None if server_side else server_hostname)

    async def do_handshake(self) -> None:
        """The TLS handshake; ``ssl.SSLError`` for a refused one (plaintext on a TLS port, an
        untrusted certificate), ``trio.BrokenResourceError`` when the peer goes away.  A client's
        first call writes its hello and asks for the answer, like a server's first read."""
        obj = self.ssl_object
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self.flush()
                if not await self.fill():
                    raise trio.BrokenResourceError("connection closed during the TLS handshake")
        await self.flush()

    def getpeercert(self, binary_form: bool = True) -> Any:
        return self.ssl_object.getpeercert(binary_form)

    async def fill(self) -> bool:
        """One read from the socket into the incoming BIO, waiting until there is something;
        False at the end of the stream."""
        data = await self._socket_call(os.read, _READ_BYTES, trio.lowlevel.wait_readable)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    @property
    def pending_output(self) -> int:
        """Bytes OpenSSL produced while reading (a TLS 1.3 KeyUpdate answer) not yet sent."""
        return self._outgoing.pending

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypts all of ``data`` and writes it (and anything pending before it)."""
        if data:
            self.ssl_object.write(data)
        await self.flush()

    async def flush(self) -> None:
        """Writes what OpenSSL has produced: straight to the socket, waiting only while its
        buffer is full."""
        out = self._outgoing.read()
        if not out:
            return
        view = memoryview(out)
        while view:
            view = view[await self._socket_call(os.write, view, trio.lowlevel.wait_writable):]

    async def _socket_call(self, call: Callable[[int, _A], _R], arg: _A,
                           wait: Callable[[trio.socket.SocketType], Awaitable[None]]) -> _R:
        """``call(fd, arg)`` (os.read or os.write) on the non-blocking socket, after ``wait``
        (readable or writable) while it would block; any other socket error is the peer gone."""
        while True:
            try:
                return call(self._fd, arg)
            except BlockingIOError:
                await wait(self.socket)
            except OSError as e:
                raise trio.BrokenResourceError(str(e)) from e

    async def flush_alert(self, timeout: float, certificate_refused: bool) -> None:
        """After a failed handshake: the fatal alert OpenSSL wrote (bad_certificate,
        certificate_required, unknown_ca, ...), made Kafka's
        (``kafka_alert``), sent before the close, as Kafka's SslTransportLayer does and RFC 8446
        section 6.2 asks, so a client is told why (Go's crypto/tls: "remote error: tls:
        certificate required") instead of seeing the connection just close.  Best effort: a
        peer that does not read, or is gone, is fine."""
        alert = kafka_alert(self._outgoing.read(), certificate_refused)
        if not alert:
            return
        self._outgoing.write(alert)
        with trio.move_on_after(timeout):
            try:
                await self.flush()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass

    async def aclose(self) -> None:
        """close_notify when the peer is still there (not waiting for its answer), then the
        socket."""
        try:
            with trio.move_on_after(1):
                try:
                    self.ssl_object.unwrap()
                except ssl.SSLWantReadError:
                    pass   # our close_notify is written; the peer's is not waited for
                await self.flush()
        except (ssl.SSLError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await self.transport_stream.aclose()

