"""``ConnectionQuotas``: the broker's connection limits at accept time (Kafka's
SocketServer.ConnectionQuotas, KIP-402).

- ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``, ``host:count`` pairs,
  comma-separated, a host name resolved when the setting is read): a connection from an address
  that already has that many is closed at once, before anything is read from it (Kafka's
  TooManyConnectionsException: "Rejected connection from X, address already has the configured
  maximum of N connections.").
- ``max.connections`` (every listener together): at the limit, a new connection waits, unread,
  until another one closes (Kafka's acceptor stops accepting; a client sees the same: its TCP
  connection is established by the kernel and its first request is answered only once a slot
  frees).  As in Kafka the inter-broker listener is exempt when the broker has other listeners,
  so replication keeps working at the limit.

Both are dynamic broker configs: read from the broker's config at each accept.  The count is
this broker's open connections (``opened`` / ``closed``, called by the listener around each
connection).  Sans-IO but for ``wait_for_slot``.
"""
from __future__ import annotations

import ipaddress
import logging
import socket

import trio

log = logging.getLogger("pykbroker.server")


def parse_overrides(raw: str) -> dict:
    """``"127.0.0.1:200,host:5"`` -> {address: count}; a host name is resolved (Kafka's
    InetAddress.getByName); an entry that does not parse or resolve is ignored with a warning."""
    out = {}
    for item in (raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            n = int(count)
            if not sep or not host:
                raise ValueError(item)
            try:
                addr = str(ipaddress.ip_address(host.strip("[]")))
            except ValueError:
                addr = socket.gethostbyname(host)
            out[addr] = n
        except (ValueError, OSError) as e:
            log.warning("ignoring max.connections.per.ip.overrides entry %r: %s", item, e)
    return out


class ConnectionQuotas:
    def __init__(self, config, listeners: int = 1):
        self.config = config
        self.listeners = listeners
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.per_listener: dict[str, int] = {}
        self.rejected = 0
        self._overrides_raw = None
        self._overrides: dict = {}
        self._freed = None   # trio.Event set when a connection closes (created in trio)

    def max_for(self, ip: str) -> int:
        raw = self.config["max.connections.per.ip.overrides"]
        if raw != self._overrides_raw:
            self._overrides = parse_overrides(raw)
            self._overrides_raw = raw
        return self._overrides.get(ip, self.config["max.connections.per.ip"])

    def _protected(self, listener: str) -> bool:
        return self.listeners > 1 and listener == (self.config["inter.broker.listener.name"] or "PLAINTEXT")

    def slot_available(self, listener: str) -> bool:
        return self._protected(listener) or self.total < self.config["max.connections"]

    async def wait_for_slot(self, listener: str) -> None:
        while not self.slot_available(listener):
            if self._freed is None:
                self._freed = trio.Event()
            await self._freed.wait()

    def opened(self, listener: str, ip: str) -> bool:
        """Count a new connection; False when its address is over ``max.connections.per.ip``
        (then it is not counted and must be closed)."""
        n = self.per_ip.get(ip, 0)
        limit = self.max_for(ip)
        if n >= limit:
            self.rejected += 1
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     ip, limit)
            return False
        self.per_ip[ip] = n + 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.total += 1
        return True

    def closed(self, listener: str, ip: str) -> None:
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
        m = self.per_listener.get(listener, 0) - 1
        if m > 0:
            self.per_listener[listener] = m
        else:
            self.per_listener.pop(listener, None)
        self.total -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None
