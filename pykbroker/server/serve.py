"""Listeners: parse Kafka listener strings and accept connections (trio)."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import trio

from .connection import Connection

log = logging.getLogger("pykbroker.server")

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


@dataclass
class Listener:
    name: str
    host: str
    port: int

    def __str__(self):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % (self.name, host, self.port)


def parse_listeners(text: str | None) -> list[Listener]:
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER.match(item)
        if not m:
            raise ValueError("invalid listener %r: expected NAME://HOST:PORT" % item)
        host = m.group("host").strip("[]")
        name = m.group("name").upper()
        if name not in ("PLAINTEXT",):
            # Only plaintext is implemented (see SKIPPED.md); refuse rather than pretend.
            raise ValueError("listener security protocol %s is not supported (PLAINTEXT only)" % name)
        out.append(Listener(name, host, int(m.group("port"))))
    if not out:
        raise ValueError("no listeners configured")
    return out


async def serve_listener(broker, listener: Listener, task_status=trio.TASK_STATUS_IGNORED):
    """Bind one listener; ``task_status.started`` gets the actual (host, port)."""
    host = listener.host or "0.0.0.0"
    listeners = await trio.open_tcp_listeners(listener.port, host=host, backlog=128)
    sock = listeners[0].socket
    bound = sock.getsockname()
    actual = Listener(listener.name, listener.host, bound[1])

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
