"""Listeners: accept connections on the configured listeners (trio)."""
from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

import trio

# Listener parsing is configuration (validated at start-up with the other configs); kept
# importable from here for the broker.
from ..config import BrokerConfig, Listener, parse_listeners  # noqa: F401
from .connection import Connection
from .poller import Poller

if TYPE_CHECKING:
    from ..broker import BrokerServer

log = logging.getLogger("pykbroker.server")


def _size_buffers(listeners: list[trio.SocketListener], config: BrokerConfig) -> None:
    """Kafka's socket.receive.buffer.bytes / socket.send.buffer.bytes on the listening sockets.

    Set once here, before any connection is accepted: an accepted socket inherits both sizes (and
    the lock that keeps the kernel from autotuning them), and the receive size also sets the
    window scale offered in the handshake, as Kafka's acceptor does by sizing its server socket
    before bind (observed on Kafka 4.4: 204,800-byte buffers, the kernel's double of 100 KiB, and
    receive window scale 1). A value of -1 (or 0) leaves the OS's autotuned buffers.
    """
    for opt, key in ((socket.SO_RCVBUF, "socket.receive.buffer.bytes"), (socket.SO_SNDBUF, "socket.send.buffer.bytes")):
        size = config[key]
        if size is None or size <= 0:
            continue
        for lst in listeners:
            try:
                lst.socket.setsockopt(socket.SOL_SOCKET, opt, size)
            except OSError as e:   # an OS refusing the size keeps its own: the broker still serves
                log.warning("cannot set %s=%d on %s: %s", key, size, lst.socket.getsockname(), e)


async def serve_listener(broker: BrokerServer, listener: Listener,
                         task_status: trio.TaskStatus[Listener] = trio.TASK_STATUS_IGNORED) -> None:
    """Bind one listener; ``task_status.started`` gets the actual (host, port)."""
    # the listener's TLS/SASL settings, built at start-up (None: PLAINTEXT, the plain path)
    sec = getattr(broker, "listener_security", {}).get(listener.name)
    if sec is not None:
        # imported only for a secured listener: PLAINTEXT-only brokers never load the SASL code
        from .secure import SecureConnection
    host = listener.host or "0.0.0.0"
    try:
        listeners = await trio.open_tcp_listeners(listener.port, host=host, backlog=128)
    except OSError as e:
        # e.g. "Address already in use" alone does not say which of the listeners
        raise OSError(e.errno, "cannot listen on %s:%d (listener %s): %s"
                      % (host, listener.port, listener.name, e.strerror or e)) from None
    _size_buffers(listeners, broker.config)
    sock = listeners[0].socket
    bound = sock.getsockname()
    actual = Listener(listener.name, listener.host, bound[1], listener.protocol)

    quotas = getattr(broker, "connection_quotas", None)
    # the plain connections' poller (server/poller.py); secured ones read through TLS/SASL
    poller = Poller() if sec is None else None

    async def on_conn(stream: trio.SocketStream) -> None:
        if quotas is not None:
            # the connection limits (quota/connections.py), as Kafka's acceptor
            try:
                ip = stream.socket.getpeername()[0]
            except OSError:
                ip = "?"
            await quotas.wait_for_slot(listener.name)
            ok, close_after_ms = quotas.opened(listener.name, ip, int(trio.current_time() * 1000))
            if not ok:
                if close_after_ms:
                    await trio.sleep(close_after_ms / 1000.0)   # connection_creation_rate: a delayed close
                await stream.aclose()
                return
            conn = None
            try:
                # the broker closes it by cancelling this scope: idle expiry, or room made for
                # the inter-broker listener
                with trio.CancelScope() as scope:
                    conn = _connection(stream)
                    quotas.register(listener.name, conn, scope)
                    await _serve_connection(conn)
            finally:
                if conn is not None:
                    quotas.unregister(listener.name, conn)
                quotas.closed(listener.name, ip)
            return
        await _serve_connection(_connection(stream))

    def _connection(stream: trio.SocketStream) -> Connection:
        if sec is None:
            return Connection(broker, stream, listener.name, poller)
        return SecureConnection(broker, stream, listener.name, sec)

    async def _serve_connection(conn: Connection) -> None:
        try:
            await conn.run()
        except Exception:
            # Connection.run handles its own errors; this is the last line of defence that keeps
            # one connection's failure from cancelling the listener (and the broker) around it.
            log.exception("connection handler failed")

    async with trio.open_nursery() as nursery:
        if quotas is not None:
            nursery.start_soon(quotas.reap_idle, listener.name)   # connections.max.idle.ms
        if poller is not None:
            nursery.start_soon(poller.run)
        task_status.started(actual)
        await trio.serve_listeners(on_conn, listeners, handler_nursery=nursery)
