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

- ``connection_creation_rate`` of an ``ip`` client quota entity (the address's, else the default
  ip entity's; AlterClientQuotas): each new connection from the address is counted in a rate
  (Kafka's sampled windows); one that takes the rate over the quota is not served and is closed
  after the throttle time (Kafka's delayed close), capped at one quota window.

The two limits are dynamic broker configs: read from the broker's config at each accept; the ip
quotas follow the controller's stored quotas (``apply``).  The count is this broker's open
connections (``opened`` / ``closed``, called by the listener around each connection).  Sans-IO
but for ``wait_for_slot``.
"""
from __future__ import annotations

import ipaddress
import logging
import socket

import trio

from .rate import Rate

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
        # connection_creation_rate per address (None: the default ip entity), from the stored
        # client quotas; the rates of the addresses that have one
        self.ip_rates: dict = {}
        self._ip_sensors: dict = {}
        self.throttled = 0
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.per_listener: dict[str, int] = {}
        self.rejected = 0
        self._overrides_raw = None
        self._overrides: dict = {}
        self._freed: trio.Event | None = None   # set when a connection closes (created in trio)

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
            freed = self._freed
            if freed is None:
                freed = self._freed = trio.Event()
            await freed.wait()

    def apply(self, stored: dict) -> None:
        """The controller's client quotas: the ip entities' ``connection_creation_rate``."""
        rates = {}
        for entity, values in stored.items():
            d = dict(entity)
            if set(d) != {"ip"} or "connection_creation_rate" not in values:
                continue
            name = d["ip"]
            if name is not None:
                try:
                    name = str(ipaddress.ip_address(name))
                except ValueError:
                    try:
                        name = socket.gethostbyname(name)   # Kafka's InetAddress.getByName
                    except OSError:
                        continue
            rates[name] = float(values["connection_creation_rate"])
        self.ip_rates = rates
        self._ip_sensors = {ip: r for ip, r in self._ip_sensors.items() if ip in rates or None in rates}

    def _creation_throttle_ms(self, ip: str, now_ms: int) -> int:
        """Record a new connection from ``ip`` in its rate; the delay before closing it when that
        takes the rate over the address's quota (the connection is then not counted)."""
        rates = self.ip_rates
        bound = rates.get(ip, rates.get(None))
        if bound is None:
            return 0
        rate = self._ip_sensors.get(ip)
        if rate is None:
            samples = self.config["quota.window.num"]
            window_ms = self.config["quota.window.size.seconds"] * 1000
            rate = self._ip_sensors[ip] = Rate(samples, window_ms)
        rate.record(1.0, now_ms)
        throttle = rate.throttle_ms(bound, now_ms)
        if throttle > 0:
            rate.record(-1.0, now_ms)
            # Kafka's QuotaUtils.boundedThrottleTime: at most one quota window
            throttle = min(throttle, rate.window_ms)
        return throttle

    def opened(self, listener: str, ip: str, now_ms: int = 0) -> tuple:
        """Count a new connection: (True, 0) when it is served; (False, 0) when its address is
        over ``max.connections.per.ip`` (close it at once); (False, ms) when it is over its
        ``connection_creation_rate`` (close it after ms).  A refused connection is not counted."""
        throttle = self._creation_throttle_ms(ip, now_ms) if self.ip_rates else 0
        if throttle > 0:
            self.throttled += 1
            log.info("Delaying closing of connection from %s for %d ms (connection_creation_rate)", ip, throttle)
            return False, throttle
        n = self.per_ip.get(ip, 0)
        limit = self.max_for(ip)
        if n >= limit:
            self.rejected += 1
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     ip, limit)
            return False, 0
        self.per_ip[ip] = n + 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.total += 1
        return True, 0

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
