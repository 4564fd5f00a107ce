"""``ClientQuotaManager``: Kafka's byte-rate and controller mutation quota enforcement
(ClientQuotaManager.java, ControllerMutationQuotaManager.java).

The broker holds one; it follows the client quotas the controller stores
(``controller.add_client_quota_listener(manager.apply)``: every stored quota at load, then every
change).  ``active`` is False while no ``producer_byte_rate`` / ``consumer_byte_rate`` /
``controller_mutation_rate`` is stored anywhere: then a connection's only cost is reading that
flag once per request.

Which quota applies to a request (Kafka's precedence, most specific first; ``<default>`` is the
default entity, stored with a null name)::

    user=<u>, client-id=<c>         user=<u>, client-id=<default>      user=<u>
    user=<default>, client-id=<c>   user=<default>, client-id=<default> user=<default>
    client-id=<c>                   client-id=<default>

``<u>`` is the connection's principal name (``User:alice`` -> ``alice``; ``ANONYMOUS`` on
PLAINTEXT listeners), ``<c>`` the request header's client id.  The level found also decides which
clients share one rate (Kafka's metric tags): a user-level quota is shared by every client id of
that user, a client-id-level quota by every user of that client id, a (user, client-id) quota is
per pair.  No quota at any level: the request is not accounted at all.

Accounting per request is one lookup (a per-connection cache of the resolution, dropped when the
quotas or the principal change: ``QuotaSession``) and one add to a ``Rate`` (rate.py); the
throttle time is Kafka's.  Produce records the request's size, Fetch the answer's (Kafka's
KafkaApis.handleProduceRequest / handleFetchRequest); a throttled Fetch is answered empty and
its bytes taken back out of the rate (Kafka's ``unrecordQuotaSensor``).

Throttle statistics per sensor (Kafka's ``throttle-time`` average and ``byte-rate``) are read by
the metrics collector (observability/metrics.py) through :meth:`ClientQuotaManager.metrics`.
"""
from __future__ import annotations

import logging

from .entities import CLIENT_ID, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, USER
from .rate import Rate, TokenBucket

log = logging.getLogger("pykbroker.quota")

PRODUCE = "Produce"
FETCH = "Fetch"
MUTATION = "ControllerMutation"
# the stored key of each enforced quota type (Kafka's QuotaType -> ClientQuotaType)
_KEYS = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE, MUTATION: CONTROLLER_MUTATION_RATE}

# The APIs a controller mutation quota applies to, and the version from which it is strict (a
# mutation over the quota is refused with THROTTLING_QUOTA_EXCEEDED; before, it is done and only
# throttled): Kafka's ControllerApis (KIP-599).  CreateTopics 19, DeleteTopics 20,
# CreatePartitions 37.
MUTATION_STRICT_FROM = {19: 6, 20: 5, 37: 3}

DEFAULT = object()   # the <default> entity in the lookup tables (a stored null name)
_ABSENT = None

# Kafka's first response version at which the client throttles itself (AbstractResponse
# .shouldClientThrottle, KIP-219): the broker answers at once and mutes the connection.  Older
# versions: the broker holds the answer for the throttle time.
CLIENT_THROTTLES_FROM = {0: 6, 1: 8, 19: 3, 20: 2, 37: 1}

_SENSOR_MAX = 100_000   # distinct (user, client-id) rates kept; beyond, idle ones are dropped


class _Sensor:
    """One shared rate (Kafka's quota sensor) and its throttle-time average; for the controller
    mutation quota also its token bucket."""
    __slots__ = ("rate", "throttle_sum", "throttle_count", "last_ms", "bucket")

    def __init__(self, samples: int, window_ms: int):
        self.rate = Rate(samples, window_ms)
        self.bucket = TokenBucket(samples, window_ms)
        # throttle-time: Kafka's Avg over the same windows; the sums here, per window
        self.throttle_sum = Rate(samples, window_ms)
        self.throttle_count = Rate(samples, window_ms)
        self.last_ms = 0


class ClientQuotaManager:
    def __init__(self, samples: int = 11, window_seconds: int = 1):
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.enabled = False           # a byte-rate quota is stored: Produce/Fetch are accounted
        self.mutation_enabled = False  # a controller_mutation_rate is stored
        self.active = False            # either: the one flag a connection reads per request
        self.generation = 0
        # quota type -> {(user entity, client entity): bound}; user/client entity: a name,
        # DEFAULT or None (absent)
        self._overrides: dict = {PRODUCE: {}, FETCH: {}, MUTATION: {}}
        self._sensors: dict = {}
        self.throttled_requests = {PRODUCE: 0, FETCH: 0, MUTATION: 0}

    # -- configuration -------------------------------------------------------------------
    def apply(self, stored: dict) -> None:
        """The controller's quotas ({entity tuple: {key: value}}), all of them."""
        tables: dict[str, dict] = {PRODUCE: {}, FETCH: {}, MUTATION: {}}
        for entity, values in stored.items():
            d = dict(entity)
            if set(d) - {USER, CLIENT_ID}:
                continue   # ip entities: connection_creation_rate, quota/connections.py's
            user = _entity(d, USER)
            client = _entity(d, CLIENT_ID)
            for qtype, key in _KEYS.items():
                if key in values:
                    tables[qtype][(user, client)] = float(values[key])
        self._overrides = tables
        self.enabled = bool(tables[PRODUCE] or tables[FETCH])
        self.mutation_enabled = bool(tables[MUTATION])
        self.active = self.enabled or self.mutation_enabled
        self.generation += 1
        log.info("client quotas in force: %s", {q: len(t) for q, t in tables.items()})

    def resolve(self, qtype: str, user: str, client_id: str):
        """(bound, sensor key) of the quota applying to (user, client id), or None."""
        table = self._overrides[qtype]
        if not table:
            return None
        for (u, c), tags in (((user, client_id), (user, client_id)),
                             ((user, DEFAULT), (user, client_id)),
                             ((user, _ABSENT), (user, "")),
                             ((DEFAULT, client_id), (user, client_id)),
                             ((DEFAULT, DEFAULT), (user, client_id)),
                             ((DEFAULT, _ABSENT), (user, "")),
                             ((_ABSENT, client_id), ("", client_id)),
                             ((_ABSENT, DEFAULT), ("", client_id))):
            bound = table.get((u, c))
            if bound is not None:
                return bound, (qtype,) + tags
        return None

    def sensor(self, key) -> _Sensor:
        s = self._sensors.get(key)
        if s is None:
            if len(self._sensors) >= _SENSOR_MAX:
                self._drop_idle()
            s = self._sensors[key] = _Sensor(self.samples, self.window_ms)
        return s

    def _drop_idle(self) -> None:
        # Kafka expires a quota sensor after an hour without use; here when the table is full
        newest = max(s.last_ms for s in self._sensors.values())
        for k in [k for k, s in self._sensors.items() if newest - s.last_ms >= 3_600_000]:
            del self._sensors[k]

    # -- accounting ------------------------------------------------------------------------
    def record(self, sensor: _Sensor, bound: float, value: float, now_ms: int) -> int:
        """Add ``value`` and return the throttle time in ms (0: within the quota)."""
        sensor.last_ms = now_ms
        sensor.rate.record(value, now_ms)
        return sensor.rate.throttle_ms(bound, now_ms)

    def unrecord(self, sensor: _Sensor, value: float, now_ms: int) -> None:
        sensor.rate.record(-value, now_ms)

    def throttled(self, qtype: str, sensor: _Sensor, throttle_ms: int, now_ms: int) -> None:
        self.throttled_requests[qtype] += 1
        sensor.throttle_sum.record(throttle_ms, now_ms)
        sensor.throttle_count.record(1, now_ms)

    def metrics(self, now_ms: int) -> list:
        """[(quota type, user, client-id, byte-rate, throttle-time avg ms)] per live sensor,
        Kafka's ``kafka.server:type=Produce|Fetch,user=..,client-id=..`` attributes."""
        out = []
        for (qtype, user, client), s in sorted(self._sensors.items(), key=lambda kv: kv[0]):
            if qtype not in (PRODUCE, FETCH):
                continue
            n = s.throttle_count.measure(now_ms)
            avg = s.throttle_sum.measure(now_ms) / n if n > 0 else 0.0
            out.append((qtype, user, client, s.rate.measure(now_ms), avg))
        return out


def fetch_quota_cap(bound: float, manager: "ClientQuotaManager") -> int:
    """The most bytes one Fetch may ask for under a quota of ``bound`` bytes/s (Kafka's
    maxValueInQuotaWindow: what the quota lets through in its window), so that one answer
    cannot earn a throttle of minutes."""
    return int(bound * (manager.samples - 1) * manager.window_ms / 1000)


def throttled_fetch_response(version: int, request: dict, response: dict, throttle_ms: int) -> dict:
    """Kafka's answer to a throttled Fetch (FetchContext.getThrottledResponse): no partitions,
    the throttle time, the request's error if any, and the session id of an incremental fetch
    (0 for a full or sessionless one)."""
    incremental = version >= 7 and request.get("session_epoch", -1) > 0
    code = response.get("error_code", 0)
    return {"throttle_time_ms": throttle_ms, "error_code": code,
            "session_id": response.get("session_id", 0) if incremental and not code else 0,
            "responses": []}


class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict/PermissiveControllerMutationQuota):
    ``record(permits)`` before each topic's change (its partitions: created, deleted or added).
    Strict: refused (False) while the bucket is below zero, and the answer's throttle time is the
    time to refill it; permissive (older versions): always done, throttled once below zero."""
    __slots__ = ("manager", "sensor", "bound", "strict", "throttle_ms")

    def __init__(self, manager, sensor, bound: float, strict: bool):
        self.manager = manager
        self.sensor = sensor
        self.bound = bound
        self.strict = strict
        self.throttle_ms = 0

    def record(self, permits: float, now_ms: int) -> bool:
        bucket = self.sensor.bucket
        self.sensor.last_ms = now_ms
        if self.strict:
            tokens = bucket.measure(self.bound, now_ms)
            if tokens < 0:
                self.throttle_ms = TokenBucket.throttle_ms(tokens, self.bound)
                return False
            bucket.record(permits, self.bound, now_ms)
            self.sensor.rate.record(permits, now_ms)
            return True
        tokens = bucket.record(permits, self.bound, now_ms)
        self.sensor.rate.record(permits, now_ms)
        self.throttle_ms = TokenBucket.throttle_ms(tokens, self.bound)
        return True


def mutation_quota(ctx):
    """The MutationQuota of a CreateTopics / DeleteTopics / CreatePartitions request, or None
    (no controller_mutation_rate applies to its client: nothing is counted)."""
    manager = getattr(ctx.broker, "client_quotas", None)
    if manager is None or not manager.mutation_enabled:
        return None
    conn = ctx.connection
    if conn is None:
        return None
    qs = getattr(conn, "quota_session", None)
    if qs is None:
        qs = conn.quota_session = QuotaSession(manager, conn)
    found = qs.lookup(MUTATION, ctx.client_id)
    if found is None:
        return None
    return MutationQuota(manager, found[1], found[0], ctx.api_version >= MUTATION_STRICT_FROM[ctx.api_key])


def _entity(d: dict, t: str):
    if t not in d:
        return _ABSENT
    return DEFAULT if d[t] is None else d[t]


def principal_user(principal: str) -> str:
    """Kafka's quota user: the principal's name (``User:alice`` -> ``alice``)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class QuotaSession:
    """One connection's cached quota resolution: {(quota type, client id): (bound, sensor) or
    None}, valid while the manager's quotas and the connection's principal are unchanged."""
    __slots__ = ("manager", "connection", "_gen", "_principal", "_cache")

    def __init__(self, manager: ClientQuotaManager, connection):
        self.manager = manager
        self.connection = connection
        self._gen = -1
        self._principal = None
        self._cache: dict = {}

    def lookup(self, qtype: str, client_id):
        m = self.manager
        c = self.connection
        p = getattr(c, "authenticated_principal", None) or c.principal
        if self._gen != m.generation or p != self._principal:
            self._cache = {}
            self._gen = m.generation
            self._principal = p
        key = (qtype, client_id)
        try:
            return self._cache[key]
        except KeyError:
            pass
        if len(self._cache) >= 64:
            self._cache = {}   # a connection cycling through client ids: recompute, never grow
        r = m.resolve(qtype, principal_user(p), client_id or "")
        got = self._cache[key] = None if r is None else (r[0], m.sensor(r[1]))
        return got
