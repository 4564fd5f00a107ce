"""``ConnectionQuotas``: the broker's connection limits at accept time and its idle connection
expiry (Kafka's SocketServer.ConnectionQuotas, KIP-402, KIP-612, and the Selector's idle expiry).

- ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``, ``host:count`` pairs,
  comma-separated, a host name resolved when the setting is read): a connection from an address
  that already has that many is closed at once, before anything is read from it (Kafka's
  TooManyConnectionsException: "Rejected connection from X, address already has the configured
  maximum of N connections.").  A value Kafka's KafkaConfig refuses (an entry without ``:``, a
  count that is not an int, a host with other characters than ``[0-9a-zA-Z-%._:]``) is refused
  whole with Kafka's message: at start-up, and as an AlterConfigs answer (``validate_overrides``,
  the config's validator).
- ``max.connections`` (every listener together) and ``listener.name.<l>.max.connections``: at
  the limit, a new connection waits, unread, until another one closes (Kafka's acceptor stops
  accepting; a client sees the same: its TCP connection is established by the kernel and its
  first request is answered only once a slot frees).  As in Kafka the inter-broker listener is
  exempt from the broker-wide limit when the broker has other listeners, so replication keeps
  working at the limit; and when it takes the broker over ``max.connections``, the least
  recently used connection of another listener is closed to make room (Kafka's processors close
  their lowest-priority channel while ``maxConnectionsExceeded``).
- ``max.connection.creation.rate`` (broker-wide, not counting the inter-broker listener) and
  ``listener.name.<l>.max.connection.creation.rate`` (KIP-612): each new connection is recorded in
  the broker's and its listener's rates (Kafka's sampled windows); over either, the listener
  accepts nothing more for the throttle time (the larger of the two, at most one quota window),
  as Kafka's acceptor waits, so connections arriving meanwhile wait in turn.  The connection
  itself is then served.
- ``connection_creation_rate`` of an ``ip`` client quota entity (the address's, else the default
  ip entity's; AlterClientQuotas): each new connection from the address is counted in a rate
  (Kafka's sampled windows); one that takes the rate over the quota is not served and is closed
  after the throttle time (Kafka's delayed close), capped at one quota window.
- ``connections.max.idle.ms`` (default 10 minutes; per listener
  ``listener.name.<l>.connections.max.idle.ms``; negative: never): a connection with nothing read
  from or written to it for that long is closed by the broker (Kafka's Selector idle expiry).
  Each connection stamps ``last_active`` on its reads and writes; one reaper per listener
  (``reap_idle``) looks every quarter of the idle time (at most every 5 s).

The limits are dynamic broker configs: read from the broker's config at each accept (the
listener-prefixed ones from server.properties or this broker's dynamic configs,
``set_listener_dynamic``); the ip quotas follow the controller's stored quotas (``apply``).  The
count is this broker's open connections (``opened`` / ``closed``, called by the listener around
each connection; ``register`` / ``unregister`` for the idle and LRU closes).  Sans-IO but for
``wait_for_slot`` and ``reap_idle``.
"""
from __future__ import annotations

import ipaddress
import logging
import socket
import time
from typing import TYPE_CHECKING, Any, Sequence, Union

import trio

from ..config import LISTENER_DYNAMIC_SUFFIXES
from ..config import validate_ip_overrides as validate_overrides  # Kafka's reading of the value
from .rate import Rate

if TYPE_CHECKING:   # annotations only (the server layer imports quota/, not the reverse)
    from ..config import BrokerConfig
    from ..server.serve import Listener

log = logging.getLogger("pykbroker.server")


def parse_overrides(raw: str) -> dict:
    """{address: count}: ``validate_overrides`` with each host resolved (Kafka's
    InetAddress.getByName, an address as it is); raises ValueError when an entry is refused or a
    host does not resolve (Kafka then fails to start, or keeps its previous overrides)."""
    out = {}
    for host, n in validate_overrides(raw).items():
        try:
            addr = str(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            try:
                addr = socket.gethostbyname(host)
            except OSError as e:
                raise ValueError("max.connections.per.ip.overrides: unknown host %s (%s)" % (host, e)) from None
        out[addr] = n
    return out


INT_MAX = 2 ** 31 - 1
_IDLE_LOOK_MAX_S = 5.0   # the reaper looks at least this often (a quarter of the idle time when shorter)


class ConnectionQuotas:
    def __init__(self, config: BrokerConfig, listeners: Union[int, Sequence[Listener]] = 1) -> None:
        self.config = config
        # the listener names (an int: that many unnamed listeners, for tests of the counts)
        self.listener_names = [li.name for li in listeners] if not isinstance(listeners, int) else []
        self.listeners = listeners if isinstance(listeners, int) else len(listeners)
        # connection_creation_rate per address (None: the default ip entity), from the stored
        # client quotas; the rates of the addresses that have one
        self.ip_rates: dict = {}
        self._ip_sensors: dict = {}
        self.throttled = 0
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.per_listener: dict[str, int] = {}
        self.rejected = 0
        # max.connection.creation.rate: the broker's and each listener's rate of accepted
        # connections, the time each listener accepts again, and how often it waited
        self._broker_rate: Rate | None = None
        self._listener_rates: dict = {}
        self._accept_at: dict = {}
        self.creation_throttled = 0
        # listener.name.<l>.<key> set as this broker's dynamic configs (raw), over server.properties
        self._listener_dynamic: dict = {}
        # live connections per listener: {connection: cancel scope} (idle expiry, LRU close)
        self.live: dict[str, dict] = {}
        self.idle_closed = 0
        self.lru_closed = 0
        self._overrides_raw = config["max.connections.per.ip.overrides"]
        try:
            # start-up: a value Kafka refuses, or a host that does not resolve, stops the broker
            self._overrides: dict = parse_overrides(self._overrides_raw)
        except ValueError as e:
            from ..config import ConfigError
            raise ConfigError(str(e), "max.connections.per.ip.overrides") from None
        self._freed: trio.Event | None = None   # set when a connection closes (created in trio)

    # -- settings ------------------------------------------------------------------------
    def listener_setting(self, listener: str, key: str) -> Any:
        """``listener.name.<l>.<key>`` (this broker's dynamic value, else server.properties),
        parsed as ``key``; else the broker-wide ``key`` (``max.connections`` and
        ``max.connection.creation.rate`` have no broker-wide fallback per listener: INT_MAX)."""
        from ..config import BROKER_CONFIGS
        prefixed = "listener.name.%s.%s" % (listener.lower(), key)
        raw = self._listener_dynamic.get(prefixed)
        if raw is None:
            raw = self.config.listener_overrides.get(prefixed)
        if raw is not None:
            return BROKER_CONFIGS[key].parse(raw)
        if key in ("max.connections", "max.connection.creation.rate"):
            return INT_MAX
        return self.config[key]

    def set_listener_dynamic(self, raw: dict) -> None:
        """This broker's dynamic configs (raw): the listener-prefixed connection limits."""
        self._listener_dynamic = {k: v for k, v in raw.items() if k.startswith("listener.name.")
                                  and k.endswith(LISTENER_DYNAMIC_SUFFIXES)}
        if self._freed is not None:   # a raised listener limit frees waiting connections
            self._freed.set()
            self._freed = None

    def max_for(self, ip: str) -> int:
        raw = self.config["max.connections.per.ip.overrides"]
        if raw != self._overrides_raw:
            self._overrides_raw = raw
            try:
                self._overrides = parse_overrides(raw)
            except ValueError as e:
                # validated when set (AlterConfigs); a host that stopped resolving: Kafka's
                # reconfiguration fails and keeps the previous overrides
                log.error("keeping the previous max.connections.per.ip.overrides: %s", e)
        return self._overrides.get(ip, self.config["max.connections.per.ip"])

    def _protected(self, listener: str) -> bool:
        if self.listeners <= 1:
            return False
        from ..config import inter_broker_listener
        try:
            return listener == inter_broker_listener(self.config).name
        except Exception:
            return listener == (self.config["inter.broker.listener.name"] or "PLAINTEXT")

    def slot_available(self, listener: str) -> bool:
        # Kafka's connectionSlotAvailable: the listener's own limit first, then the broker's
        if self.per_listener.get(listener, 0) >= self.listener_setting(listener, "max.connections"):
            return False
        return self._protected(listener) or self.total < self.config["max.connections"]

    async def wait_for_slot(self, listener: str) -> None:
        """Kafka's Acceptor before it accepts: wait out the connection creation rate's throttle
        (the listener accepts nothing meanwhile), then for a free slot."""
        if self.config["max.connection.creation.rate"] < INT_MAX or self._listener_rate_set(listener):
            while True:
                now = trio.current_time()
                at = self._accept_at.get(listener, 0.0)
                if now >= at:
                    break
                await trio.sleep(at - now)   # another connection's throttle: accepted after it
            throttle = self._creation_rate_throttle_ms(listener, int(now * 1000))
            if throttle > 0:
                self.creation_throttled += 1
                self._accept_at[listener] = now + throttle / 1000.0
                log.debug("Throttling acceptor of listener %s for %d ms (max.connection.creation.rate)",
                          listener, throttle)
                await trio.sleep(throttle / 1000.0)
        while not self.slot_available(listener):
            freed = self._freed
            if freed is None:
                freed = self._freed = trio.Event()
            await freed.wait()

    def _listener_rate_set(self, listener: str) -> bool:
        return self.listener_setting(listener, "max.connection.creation.rate") < INT_MAX

    def _rate(self) -> Rate:
        return Rate(self.config["quota.window.num"], self.config["quota.window.size.seconds"] * 1000)

    def _creation_rate_throttle_ms(self, listener: str, now_ms: int) -> int:
        """Kafka's recordConnectionAndGetThrottleTimeMs: the connection recorded in the broker's
        rate (not for the inter-broker listener) and the listener's; the larger throttle, each
        bounded by one quota window."""
        throttle = 0
        if not self._protected(listener):
            bound = self.config["max.connection.creation.rate"]
            if self._broker_rate is None:
                self._broker_rate = self._rate()
            self._broker_rate.record(1.0, now_ms)
            if bound < INT_MAX:
                throttle = min(self._broker_rate.throttle_ms(bound, now_ms), self._broker_rate.window_ms)
        bound = self.listener_setting(listener, "max.connection.creation.rate")
        rate = self._listener_rates.get(listener)
        if rate is None:
            rate = self._listener_rates[listener] = self._rate()
        rate.record(1.0, now_ms)
        if bound < INT_MAX:
            throttle = max(throttle, min(rate.throttle_ms(bound, now_ms), rate.window_ms))
        return throttle

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
            rate = self._ip_sensors[ip] = self._rate()
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
            # the connection is taken back out of the broker's and listener's rates too
            # (Kafka's updateListenerMetrics)
            if self._broker_rate is not None and not self._protected(listener):
                self._broker_rate.record(-1.0, now_ms)
            if listener in self._listener_rates:
                self._listener_rates[listener].record(-1.0, now_ms)
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

    # -- live connections: idle expiry and the LRU close ---------------------------------
    def register(self, listener: str, connection: Any, scope: trio.CancelScope) -> None:
        """A served connection (with ``last_active``) and the cancel scope that closes it."""
        self.live.setdefault(listener, {})[connection] = scope
        if self._protected(listener):
            self._make_room()

    def unregister(self, listener: str, connection: Any) -> None:
        conns = self.live.get(listener)
        if conns is not None:
            conns.pop(connection, None)

    def _make_room(self) -> None:
        """The inter-broker listener took the broker over ``max.connections``: close the least
        recently used connections of the other listeners until it is back at the limit (Kafka's
        processors close their lowest-priority channel while maxConnectionsExceeded)."""
        over = self.total - self.config["max.connections"]
        if over <= 0:
            return
        others = [(c.last_active, id(c), c, scope, l) for l, conns in self.live.items()
                  if not self._protected(l) for c, scope in conns.items() if not scope.cancel_called]
        others.sort(key=lambda x: (x[0], x[1]))
        for last, _, c, scope, l in others[:over]:
            self.lru_closed += 1
            log.info("Closing connection from %s on listener %s (least recently used) to make room for the "
                     "inter-broker listener: max.connections %d reached", c.peer, l, self.config["max.connections"])
            scope.cancel()

    async def reap_idle(self, listener: str) -> None:
        """Close this listener's connections idle for ``connections.max.idle.ms`` (Kafka's
        Selector: nothing read or written for that long); runs for the listener's life."""
        idle_ms = self.listener_setting(listener, "connections.max.idle.ms")
        if idle_ms < 0:
            return   # Kafka: a negative value disables idle expiry
        idle = idle_ms / 1000.0
        period = max(0.01, min(idle / 4, _IDLE_LOOK_MAX_S))
        while True:
            await trio.sleep(period)
            now = time.monotonic()
            for c, scope in list(self.live.get(listener, {}).items()):
                if now - c.last_active >= idle and not scope.cancel_called:
                    self.idle_closed += 1
                    log.debug("About to close the idle connection from %s due to being idle for %d millis",
                              c.peer, int((now - c.last_active) * 1000))
                    scope.cancel()
