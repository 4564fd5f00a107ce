"""Version profiles: ``--as-kafka 2.8|3.9|4.0|4.4`` (``Broker(as_kafka=...)``) makes the broker
speak only what that Apache Kafka release's broker offered, so a client is tested against the
broker version it meets in production.  Default (None): everything pykbroker builds.

A profile limits the handler table (:func:`apply`): an API the release did not have is not
served (a request for it closes the connection, as an unknown API key does on that release, and
ApiVersions does not list it); an API it had is served and advertised only in the versions both
that release and pykbroker speak.  Behaviour then follows: each handler implements each version's
semantics, and a client negotiates down to what the profile offers (e.g. no KIP-848
ConsumerGroupHeartbeat before 4.0, no Fetch topic ids before 3.x, no flexible versions the
release lacked).  The profile does not change configuration defaults.  What a broker sends other
brokers is limited the same way (cluster/interbroker.py: its own handler table caps the versions
of follower Fetch, WriteTxnMarkers and AddPartitionsToTxn, as a Kafka broker of that release
knows no newer one).

The tables are what each release's broker advertises in ApiVersions with its default settings:
``tools/kafka_api_versions/ApiVersionsDump.java`` prints them from that release's kafka-clients
jar (the APIs in scope for a KRaft broker, ``BROKER``, from their oldest to their newest stable
version; ``ZK_BROKER`` for 2.8, whose production clusters ran on ZooKeeper).  Two adjustments,
from Kafka's broker code rather than the jar:

- 3.9: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) are left out.  KIP-848 was a
  preview in 3.9, off unless ``group.coordinator.rebalance.protocols`` includes ``consumer``
  (Kafka's default there is ``classic``): a default 3.9 broker does not serve it.
- 4.x: Produce is advertised from v0 although v0-2 are refused (KAFKA-18659, for librdkafka);
  the Produce handler's ``ADVERTISED_MIN_VERSION`` already does the same.
"""
from __future__ import annotations

from typing import Any

# api key -> (min, max) advertised by the release's broker (module docstring)
KAFKA_2_8 = {
    0: (0, 9), 1: (0, 12), 2: (0, 6), 3: (0, 11), 4: (0, 5), 5: (0, 3), 6: (0, 7), 7: (0, 3),
    8: (0, 8), 9: (0, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5), 15: (0, 5),
    16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 4), 23: (0, 4),
    24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 29: (0, 2), 30: (0, 2), 31: (0, 2),
    32: (0, 4), 33: (0, 2), 34: (0, 2), 35: (0, 2), 36: (0, 2), 37: (0, 3), 38: (0, 2), 39: (0, 2),
    40: (0, 2), 41: (0, 2), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 47: (0, 0),
    48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 56: (0, 0), 57: (0, 0), 60: (0, 0), 61: (0, 0),
}


def _after(previous: dict, changed: dict, dropped: tuple = ()) -> dict:
    """A release's table as the one before it with the APIs it changed or added (``changed``)
    and without those it removed (``dropped``), by api key."""
    table = {k: v for k, v in previous.items() if k not in dropped}
    table.update(changed)
    return dict(sorted(table.items()))


# 3.9's table is a KRaft broker's (module docstring): without 2.8's ZooKeeper-mode inter-broker
# APIs (4-7: LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown; 56: AlterPartition,
# which a KRaft controller serves)
KAFKA_3_9 = _after(KAFKA_2_8, {
    0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9), 13: (0, 5),
    16: (0, 5), 18: (0, 4), 22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 4), 28: (0, 4), 29: (0, 3),
    30: (0, 3), 31: (0, 3), 35: (0, 4), 38: (0, 3), 41: (0, 3), 55: (0, 2), 57: (0, 1), 60: (0, 1),
    64: (0, 0), 65: (0, 0), 66: (0, 1), 71: (0, 0), 72: (0, 0), 74: (0, 0), 75: (0, 0), 80: (0, 0),
    81: (0, 0)}, dropped=(4, 5, 6, 7, 56))
# 4.0 removed the oldest versions of many APIs (KIP-896) and serves KIP-848 (68, 69)
KAFKA_4_0 = _after(KAFKA_3_9, {
    0: (0, 12), 1: (4, 17), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 11: (2, 9), 15: (0, 6), 19: (2, 7),
    20: (1, 6), 23: (2, 4), 26: (0, 5), 27: (1, 1), 28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3),
    32: (1, 4), 34: (1, 2), 35: (1, 4), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 57: (0, 2),
    60: (0, 2), 68: (0, 1), 69: (0, 1)})
# 4.4 added share groups (76-79, 83-87, 90-92) and streams groups (88, 89, 93), among others
KAFKA_4_4 = _after(KAFKA_4_0, {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 8: (2, 10), 9: (1, 10), 11: (0, 9), 18: (0, 5), 27: (1, 2),
    28: (0, 6), 35: (1, 5), 42: (0, 3), 45: (0, 1), 66: (0, 2), 74: (0, 1), 76: (1, 1), 77: (1, 1),
    78: (1, 2), 79: (1, 2), 80: (0, 1), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1),
    88: (0, 1), 89: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0), 93: (0, 0), 94: (0, 0)})

PROFILES = {"2.8": KAFKA_2_8, "3.9": KAFKA_3_9, "4.0": KAFKA_4_0, "4.4": KAFKA_4_4}
# accepted spellings: a release's later patch versions and "4.x" (the newest 4.x built)
ALIASES = {"2": "2.8", "3": "3.9", "4": "4.4", "4.x": "4.4", "3.x": "3.9", "2.x": "2.8"}


def profile_name(as_kafka: object) -> str:
    """The profile of ``as_kafka`` ("2.8", "2.8.2", "4.x", ...); ValueError for an unknown one."""
    v = str(as_kafka).strip().lower()
    if v in ALIASES:
        return ALIASES[v]
    major_minor = ".".join(v.split(".")[:2])
    if major_minor in PROFILES:
        return major_minor
    raise ValueError("unknown Kafka version %r for --as-kafka: one of %s (or 4.x)"
                     % (as_kafka, ", ".join(PROFILES)))


class ProfiledHandler:
    """A handler served within a profile's version range: the version constants are the
    profile's, everything else is the handler's (resolved once, then cached here, so a request
    costs what it costs without a profile)."""

    def __init__(self, handler: Any, min_version: int, max_version: int, advertised_min: int) -> None:
        self._handler = handler
        self.API_KEY = handler.API_KEY
        self.MIN_VERSION = min_version
        self.MAX_VERSION = max_version
        self.ADVERTISED_MIN_VERSION = advertised_min

    def __getattr__(self, attr: str) -> Any:   # only for what __init__ did not set
        if attr.startswith("__"):
            raise AttributeError(attr)
        h = self._handler
        load = getattr(type(h), "load", None)   # a LazyHandler: import the module now
        if load is not None:
            h = self._handler = h.load()
        value = getattr(h, attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return "<%r within v%d-%d>" % (self._handler, self.MIN_VERSION, self.MAX_VERSION)


def apply(handlers: dict, as_kafka: object) -> dict:
    """The handler table limited to the profile of ``as_kafka`` (None: ``handlers`` as is)."""
    if as_kafka is None:
        return handlers
    table = PROFILES[profile_name(as_kafka)]
    out: dict = {}
    for key, h in handlers.items():
        rng = table.get(key)
        if rng is None:
            continue   # the release did not have this API
        lo, hi = max(h.MIN_VERSION, rng[0]), min(h.MAX_VERSION, rng[1])
        if lo > hi:
            continue   # no version both speak
        adv = max(getattr(h, "ADVERTISED_MIN_VERSION", h.MIN_VERSION), rng[0])
        if (lo, hi, adv) == (h.MIN_VERSION, h.MAX_VERSION, getattr(h, "ADVERTISED_MIN_VERSION", h.MIN_VERSION)):
            out[key] = h   # unchanged: the handler itself (a LazyHandler keeps replacing itself)
        else:
            out[key] = ProfiledHandler(h, lo, hi, min(adv, lo))
    return out
