"""Listeners: accept connections on the configured listeners (trio)."""
from __future__ import annotations

import logging

import trio

# Listener parsing is configuration (validated at start-up with the other configs); kept
# importable from here for the broker.
from ..config import Listener, parse_listeners  # noqa: F401
from .connection import Connection

log = logging.getLogger("pykbroker.server")


async def serve_listener(broker, listener: Listener, task_status=trio.TASK_STATUS_IGNORED):
    """Bind one listener; ``task_status.started`` gets the actual (host, port)."""
    if listener.protocol != "PLAINTEXT":
        # refused rather than served in plaintext (see SKIPPED.md)
        raise RuntimeError("listener %s: security protocol %s is not supported yet" % (listener.name, listener.protocol))
    host = listener.host or "0.0.0.0"
    listeners = await trio.open_tcp_listeners(listener.port, host=host, backlog=128)
    sock = listeners[0].socket
    bound = sock.getsockname()
    actual = Listener(listener.name, listener.host, bound[1], listener.protocol)

    async def on_conn(stream):
        try:
            await Connection(broker, stream, listener.name).run()
        except Exception:
            # Connection.run handles its own errors; this is the last line of defence that keeps
            # one connection's failure from cancelling the listener (and the broker) around it.
            log.exception("connection handler failed")

    async with trio.open_nursery() as nursery:
        task_status.started(actual)
        await trio.serve_listeners(on_conn, listeners, handler_nursery=nursery)
