"""``ClientQuotaManager``: Kafka's byte-rate and controller mutation quota enforcement
(ClientQuotaManager.java, ControllerMutationQuotaManager.java).

The broker holds one; it follows the client quotas the controller stores
(``controller.add_client_quota_listener(manager.apply)``: every stored quota at load, then every
change).  ``active`` is False while no ``producer_byte_rate`` / ``consumer_byte_rate`` /
``controller_mutation_rate`` / ``request_percentage`` is stored anywhere: then a connection's
only cost is reading that flag once per request.  While a ``request_percentage`` is stored every
request is timed (server/connection.py ``_carry_out_request_quota``).

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
from typing import TYPE_CHECKING, Any, Hashable, Optional

from .entities import (CLIENT_ID, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
                       REQUEST_PERCENTAGE, USER)
from .rate import Rate, TokenBucket

if TYPE_CHECKING:   # annotations only: quota/ does not import the server layer
    from ..server.dispatch import RequestContext

log = logging.getLogger("pykbroker.quota")

PRODUCE = "Produce"
FETCH = "Fetch"
MUTATION = "ControllerMutation"
REQUEST = "Request"
# the stored key of each enforced quota type (Kafka's QuotaType -> ClientQuotaType)
_KEYS = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE, MUTATION: CONTROLLER_MUTATION_RATE,
         REQUEST: REQUEST_PERCENTAGE}

# request_percentage (KIP-124): Kafka records the request-handler thread time of a request in
# "percent-seconds" (ClientRequestQuotaManager: nanos x 100 / 1e9), so the rate over the quota
# window is the percentage of one thread the client used.  pykbroker records the time its one
# event loop spent on the request (docs/quotas.md, "request_percentage").
PERCENT_PER_SECOND = 100.0

# The APIs exempt from request_percentage: Kafka's cluster actions (ApiKeys.clusterAction:
# LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6, ControlledShutdown 7, WriteTxnMarkers 27,
# Vote/BeginQuorumEpoch/EndQuorumEpoch/DescribeQuorum 52-55, AlterPartition 56, Envelope 58,
# FetchSnapshot 59, BrokerRegistration/BrokerHeartbeat 62/63, AllocateProducerIds 67, the share
# group state APIs 83-87) are answered with sendResponseExemptThrottle and recorded in the
# ``exempt-request-time`` sensor only; UpdateFeatures (57) is a cluster action Kafka's broker does
# throttle.  SaslHandshake 17 / SaslAuthenticate 36 are served by Kafka's authenticator, outside
# KafkaApis and its quotas.  A follower's Fetch is exempt too (replication).  ApiVersions is not
# exempt: Kafka answers it with sendResponseMaybeThrottle (RequestQuotaTest's client actions).
REQUEST_EXEMPT_APIS = frozenset({4, 5, 6, 7, 17, 27, 36, 52, 53, 54, 55, 56, 58, 59, 62, 63, 67,
                                 83, 84, 85, 86, 87})

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
# The same for every API (each response class's shouldClientThrottle); an API not listed never
# throttles on the client side (AbstractResponse's default): the broker holds its answer.
CLIENT_THROTTLES_FROM_ALL = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2,
    19: 3, 20: 2, 21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1,
    34: 1, 35: 1, 37: 1, 38: 1, 39: 1, 40: 1, 41: 1, 42: 1, 43: 0, 44: 0, 45: 0, 46: 0, 47: 0,
    50: 0, 51: 0, 62: 0, 63: 0, 64: 0, 75: 0}
_NEVER = 1 << 30


def client_throttles(api_key: int, version: int) -> bool:
    """Kafka's AbstractResponse.shouldClientThrottle: True when the client waits out the throttle
    itself (the broker answers at once, then mutes), False when the broker holds the answer."""
    return version >= CLIENT_THROTTLES_FROM_ALL.get(api_key, _NEVER)

_SENSOR_MAX = 100_000   # distinct (user, client-id) rates kept; beyond, idle ones are dropped


class _Sensor:
    """One shared rate (Kafka's quota sensor) and its throttle-time average; for the controller
    mutation quota also its token bucket."""
    __slots__ = ("rate", "throttle_sum", "throttle_count", "last_ms", "bucket")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.rate = Rate(samples, window_ms)
        self.bucket = TokenBucket(samples, window_ms)
        # throttle-time: Kafka's Avg over the same windows; the sums here, per window
        self.throttle_sum = Rate(samples, window_ms)
        self.throttle_count = Rate(samples, window_ms)
        self.last_ms = 0


class ClientQuotaManager:
    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.enabled = False           # a byte-rate quota is stored: Produce/Fetch are accounted
        self.mutation_enabled = False  # a controller_mutation_rate is stored
        self.request_enabled = False   # a request_percentage is stored: every request is timed
        self.active = False            # any: the one flag a connection reads per request
        self.generation = 0
        # quota type -> {(user entity, client entity): bound}; user/client entity: a name,
        # DEFAULT or None (absent)
        self._overrides: dict = {PRODUCE: {}, FETCH: {}, MUTATION: {}, REQUEST: {}}
        self._sensors: dict = {}
        self.throttled_requests = {PRODUCE: 0, FETCH: 0, MUTATION: 0, REQUEST: 0}
        # Kafka's ``exempt-request-time`` (type=Request): the time of exempt requests, all
        # clients together, recorded while a request quota is stored
        self.exempt = Rate(samples, self.window_ms)

    # -- configuration -------------------------------------------------------------------
    def apply(self, stored: dict) -> None:
        """The controller's quotas ({entity tuple: {key: value}}), all of them."""
        tables: dict[str, dict] = {PRODUCE: {}, FETCH: {}, MUTATION: {}, REQUEST: {}}
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
        self.request_enabled = bool(tables[REQUEST])
        self.active = self.enabled or self.mutation_enabled or self.request_enabled
        self.generation += 1
        log.info("client quotas in force: %s", {q: len(t) for q, t in tables.items()})

    def resolve(self, qtype: str, user: str, client_id: str) -> Optional[tuple[float, tuple]]:
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

    def sensor(self, key: Hashable) -> _Sensor:
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

    def record_request_time(self, sensor: _Sensor, bound: float, seconds: float, now_ms: int) -> int:
        """request_percentage: add ``seconds`` of loop time; the throttle time in ms, bounded by
        one quota window as Kafka's ClientRequestQuotaManager (QuotaUtils.boundedThrottleTime)."""
        sensor.last_ms = now_ms
        rate = sensor.rate
        rate.record(seconds * PERCENT_PER_SECOND, now_ms)
        throttle = rate.throttle_ms(bound, now_ms)
        return min(throttle, self.window_ms) if throttle > 0 else 0

    def record_request_time_no_throttle(self, sensor: _Sensor, seconds: float, now_ms: int) -> None:
        """Time spent after the throttle was decided (encoding the answer): counted for the next
        requests, as Kafka records its network thread's time (recordNoThrottle)."""
        sensor.last_ms = now_ms
        sensor.rate.record(seconds * PERCENT_PER_SECOND, now_ms)

    def record_exempt(self, seconds: float, now_ms: int) -> None:
        self.exempt.record(seconds * PERCENT_PER_SECOND, now_ms)

    def unrecord(self, sensor: _Sensor, value: float, now_ms: int) -> None:
        sensor.rate.record(-value, now_ms)

    def throttled(self, qtype: str, sensor: _Sensor, throttle_ms: int, now_ms: int) -> None:
        self.throttled_requests[qtype] += 1
        sensor.throttle_sum.record(throttle_ms, now_ms)
        sensor.throttle_count.record(1, now_ms)

    def metrics(self, now_ms: int) -> list:
        """[(quota type, user, client-id, rate, throttle-time avg ms)] per live sensor, Kafka's
        ``kafka.server:type=Produce|Fetch|Request,user=..,client-id=..`` attributes (the rate:
        ``byte-rate``, or ``request-time`` in percent of one thread for Request)."""
        out = []
        for (qtype, user, client), s in sorted(self._sensors.items(), key=lambda kv: kv[0]):
            if qtype not in (PRODUCE, FETCH, REQUEST):
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

    def __init__(self, manager: ClientQuotaManager, sensor: _Sensor, bound: float, strict: bool) -> None:
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


def mutation_quota(ctx: RequestContext) -> Optional[MutationQuota]:
    """The MutationQuota of a CreateTopics / DeleteTopics / CreatePartitions request, or None
    (no controller_mutation_rate applies to its client: nothing is counted)."""
    manager = ctx.services.client_quotas
    if not manager.mutation_enabled:
        return None
    conn = ctx.connection
    if conn is None:
        return None
    qs = conn.quota_session
    if qs is None:
        qs = conn.quota_session = QuotaSession(manager, conn)
    found = qs.lookup(MUTATION, ctx.client_id)
    if found is None:
        return None
    return MutationQuota(manager, found[1], found[0], ctx.api_version >= MUTATION_STRICT_FROM[ctx.api_key])


def _entity(d: dict, t: str) -> Any:
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

    def __init__(self, manager: ClientQuotaManager, connection: Any) -> None:
        self.manager = manager
        self.connection = connection
        self._gen = -1
        self._principal = None
        self._cache: dict = {}

    def lookup(self, qtype: str, client_id: Optional[str]) -> Optional[tuple[float, _Sensor]]:
        m = self.manager
        c = self.connection
        p = c.principal
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
