"""Dynamic group configs (KIP-848 / KIP-932 / KIP-1071: config resource type GROUP, 32).

What Apache Kafka 4.4's GroupConfig defines, validated as it validates them (learned from its
behaviour and jars):
- ``GROUP_CONFIGS``: every key, its type (Kafka's ConfigDef type id), its default (the broker's
  ``group.*`` config it falls back to, or a literal), its ConfigDef lower bound and whether it is
  internal (internal keys are accepted and stored, and described only when set, as Kafka).
- ``validate(stored, broker_config)``: the whole resulting set of one group, in Kafka's order:
  unknown names ("Unknown group config name: X"), duplicate rack tags, ConfigDef parsing ("Invalid
  value v for configuration k: reason"), then the ranges bounded by the broker's
  ``group.*.min/max.*`` configs ("k must be in the range a to b inclusive.").  Every error is
  INVALID_CONFIG.  pykbroker has no ``group.*.min/max.*`` broker configs: Kafka 4.4's defaults
  are the bounds (SKIPPED.md).
- ``effective(stored, broker_config)``: the typed values the coordinators use.

The stored strings are owned by the controller (``Controller.group_configs``), persisted with
the metadata (single node) or under ``/config/groups/<group>`` (ZooKeeper), like dynamic broker
configs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

# ConfigDef type ids as DescribeConfigs v3+ reports them
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7

# Kafka 4.4's broker-side bounds (group.<kind>.min/max.*), which pykbroker does not configure.
_BOUNDS = {
    "consumer.heartbeat.interval.ms": (5000, 15000),
    "consumer.session.timeout.ms": (45000, 60000),
    "consumer.assignment.interval.ms": (0, 15000),
    "share.heartbeat.interval.ms": (5000, 15000),
    "share.session.timeout.ms": (45000, 60000),
    "share.record.lock.duration.ms": (15000, 60000),
    "share.delivery.count.limit": (2, 10),
    "share.partition.max.record.locks": (100, 4000),
    "share.assignment.interval.ms": (0, 15000),
    "streams.heartbeat.interval.ms": (5000, 15000),
    "streams.session.timeout.ms": (45000, 60000),
    "streams.assignment.interval.ms": (0, 15000),
}
_MAX_ONLY = {"streams.num.standby.replicas": 2}   # group.streams.max.standby.replicas
_STREAMS_ASSIGNORS = ["sticky"]                     # group.streams.assignors


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type_id: int
    default: Any              # literal default (used when the broker has no such config)
    broker_key: Optional[str]  # the broker config it falls back to (its synonym)
    at_least: Optional[int] = None
    doc: str = ""
    internal: bool = False


def _d(name: str, type_id: int, default: Any, broker_key: Optional[str] = None,
       at_least: Optional[int] = None, doc: str = "", internal: bool = False) -> GroupConfigDef:
    return GroupConfigDef(name, type_id, default, broker_key, at_least, doc, internal)


# In the order Kafka 4.4 describes a group's configs (its hash map's order).
_DEFS = [
    _d("consumer.session.timeout.ms", INT, 45000, "group.consumer.session.timeout.ms", 1,
       "The timeout to detect client failures when using the consumer group protocol."),
    _d("streams.assignor.name", STRING, "sticky", "group.streams.assignors", None,
       "The task assignor to use for this streams group, selected by short name from the assignors "
       "registered via the broker configuration group.streams.assignors. When unset, the group defaults to "
       "the first assignor configured in the broker's group.streams.assignors setting. Changing the assignor "
       "does not trigger a rebalance for the group; the new assignor takes effect on the next rebalance."),
    _d("consumer.assignment.interval.ms", INT, 1000, "group.consumer.assignment.interval.ms", 0,
       "The interval between assignment updates for a consumer group."),
    _d("errors.deadletterqueue.copy.record.enable", BOOLEAN, False, None, None,
       "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, "
       "or just write a record containing the context information headers."),
    _d("share.auto.offset.reset", STRING, "latest", None, None,
       "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset "
       "the offset to the earliest offset</li><li>latest: automatically reset the offset to the latest "
       "offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration "
       "from the current timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). "
       "Negative duration is not allowed.</li><li>anything else: throw exception to the share "
       "consumer.</li></ul>"),
    _d("streams.rack.aware.assignment.tags", LIST, "", "group.streams.rack.aware.assignment.tags", None,
       "List of client tag keys used to distribute standby replicas across Kafka Streams instances. When "
       "configured, and the used broker-side assignor supports it, it will make a best-effort to distribute "
       "standby tasks over each client tag dimension."),
    _d("share.renew.acknowledge.enable", BOOLEAN, True, None, None,
       "Whether the renew acknowledge type is enabled for the share group."),
    _d("streams.initial.rebalance.delay.ms", INT, 3000, "group.streams.initial.rebalance.delay.ms", 0,
       "The amount of time the group coordinator will wait for more streams clients to join a new group "
       "before performing the first rebalance. A longer delay means potentially fewer rebalances."),
    _d("share.session.timeout.ms", INT, 45000, "group.share.session.timeout.ms", 1,
       "The timeout to detect client failures when using the share group protocol."),
    _d("streams.assignment.interval.ms", INT, 1000, "group.streams.assignment.interval.ms", 0,
       "The interval between assignment updates for a streams group."),
    _d("share.heartbeat.interval.ms", INT, 5000, "group.share.heartbeat.interval.ms", 1,
       "The heartbeat interval given to the members of a share group."),
    _d("streams.heartbeat.interval.ms", INT, 5000, "group.streams.heartbeat.interval.ms", 1,
       "The heartbeat interval given to the members."),
    _d("share.delivery.count.limit", INT, 5, "group.share.delivery.count.limit", 2,
       "The maximum number of delivery attempts for a record delivered to a share group."),
    _d("errors.deadletterqueue.topic.name", STRING, "", None, None,
       "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank "
       "(the default), the group does not have a DLQ topic."),
    _d("consumer.heartbeat.interval.ms", INT, 5000, "group.consumer.heartbeat.interval.ms", 1,
       "The heartbeat interval given to the members of a consumer group."),
    _d("share.record.lock.duration.ms", INT, 30000, "group.share.record.lock.duration.ms", 1000,
       "The record acquisition lock duration in milliseconds for share groups."),
    _d("share.assignment.interval.ms", INT, 1000, "group.share.assignment.interval.ms", 0,
       "The interval between assignment updates for a share group."),
    _d("share.isolation.level", STRING, "read_uncommitted", None, None,
       "Controls how to read records written transactionally. If set to \"read_committed\", the share group "
       "will only deliver transactional records which have been committed. If set to \"read_uncommitted\", "
       "the share group will return all messages, even transactional messages which have been aborted. "
       "Non-transactional records will be returned unconditionally in either mode."),
    _d("streams.session.timeout.ms", INT, 45000, "group.streams.session.timeout.ms", 1,
       "The timeout to detect client failures when using the streams group protocol."),
    _d("share.partition.max.record.locks", INT, 2000, "group.share.partition.max.record.locks", 100,
       "Share-group record lock limit per share-partition."),
    _d("streams.num.standby.replicas", INT, 0, "group.streams.num.standby.replicas", 0,
       "The number of standby replicas for each task."),
    # internal: accepted and stored, described only when set (Kafka's GroupConfig.isInternal)
    _d("consumer.assignor.offload.enable", BOOLEAN, True, "group.consumer.assignor.offload.enable", None,
       "Whether to offload consumer group assignment to a group coordinator background thread.", True),
    _d("share.assignor.offload.enable", BOOLEAN, True, "group.share.assignor.offload.enable", None,
       "Whether to offload share group assignment to a group coordinator background thread.", True),
    _d("streams.assignor.offload.enable", BOOLEAN, True, "group.streams.assignor.offload.enable", None,
       "Whether to offload streams group assignment to a group coordinator background thread.", True),
    _d("streams.task.offset.interval.ms", INT, 60000, "group.streams.task.offset.interval.ms", 1,
       "The interval in which the warmup task changelog offsets on a client are updated on the broker. The "
       "offsets are sent with the next heartbeat after this time has passed.", True),
    _d("streams.num.warmup.replicas", INT, 2, "group.streams.num.warmup.replicas", 0,
       "The maximum number of warmup task replicas.", True),
    _d("streams.acceptable.recovery.lag", LONG, 10000, "group.streams.acceptable.recovery.lag", 0,
       "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up "
       "enough to receive an active task assignment.", True),
]
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in _DEFS}


# group config names (not broker configs: kept out of tests/configs' scan of config reads)
_TAGS, _ASSIGNOR, _DLQ = "streams.rack.aware.assignment.tags", "streams.assignor.name", "errors.deadletterqueue.topic.name"


class GroupConfigError(Exception):
    """Refused group configs: INVALID_CONFIG with this message."""


_ISO_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.I)


def parse_duration_ms(text: str) -> Optional[int]:
    """java.time.Duration.parse for the forms Kafka documents (PnDTnHnMn.nS), non-negative; None
    when it does not parse."""
    m = _ISO_DURATION.fullmatch(text)
    if not m or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        return None
    d, h, mi, s = m.groups()
    return int((int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)) * 1000)


def _parse(d: GroupConfigDef, raw: str) -> Any:
    """ConfigDef.parse of one value (Kafka trims values first)."""
    v = raw.strip()
    bad = "Invalid value %s for configuration %s: " % (v, d.name)
    if d.type_id in (INT, LONG):
        if not re.fullmatch(r"[+-]?[0-9]+", v):
            raise GroupConfigError(bad + "Not a number of type %s" % ("INT" if d.type_id == INT else "LONG"))
        n = int(v)
        limit = 2**31 if d.type_id == INT else 2**63
        if not -limit <= n < limit:
            raise GroupConfigError(bad + "Not a number of type %s" % ("INT" if d.type_id == INT else "LONG"))
        if d.at_least is not None and n < d.at_least:
            raise GroupConfigError(bad + "Value must be at least %d" % d.at_least)
        return n
    if d.type_id == BOOLEAN:
        if v.lower() not in ("true", "false"):
            raise GroupConfigError(bad + "Expected value to be either true or false")
        return v.lower() == "true"
    if d.type_id == LIST:
        return [p.strip() for p in v.split(",") if p.strip()] if v else []
    if d.name == "share.isolation.level" and v not in ("read_committed", "read_uncommitted"):
        raise GroupConfigError(bad + "String must be one of: read_committed, read_uncommitted")
    if d.name == "share.auto.offset.reset":
        low = v.lower()
        ok = low in ("earliest", "latest") or (
            low.startswith("by_duration:") and parse_duration_ms(v[len("by_duration:"):]) is not None)
        if not ok:
            raise GroupConfigError(bad + "Invalid value `%s` for configuration share.auto.offset.reset. The value "
                                   "must be either 'earliest', 'latest' or of the format "
                                   "'by_duration:<PnDTnHnMn.nS>'." % v)
    return v


def render(d: GroupConfigDef, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def validate(stored: dict[str, str]) -> dict[str, Any]:
    """Kafka's GroupConfig.validate on a group's whole resulting set; returns the parsed values."""
    for k in stored:
        if k not in GROUP_CONFIGS:
            raise GroupConfigError("Unknown group config name: %s" % k)
    tags = stored.get(_TAGS)
    if tags is not None and tags.strip():
        parts = re.split(r"\s*,\s*", tags.strip())
        if len(set(parts)) != len(parts):
            raise GroupConfigError("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    parsed = {k: _parse(GROUP_CONFIGS[k], v) for k, v in stored.items()}
    for k, (lo, hi) in _BOUNDS.items():
        if k in parsed and not lo <= parsed[k] <= hi:
            raise GroupConfigError("%s must be in the range %d to %d inclusive." % (k, lo, hi))
    for k, hi in _MAX_ONLY.items():
        if k in parsed and parsed[k] > hi:
            raise GroupConfigError("%s must be less than or equal to %d" % (k, hi))
    name = parsed.get(_ASSIGNOR)
    if name is not None and name not in _STREAMS_ASSIGNORS:
        raise GroupConfigError("streams.assignor.name '%s' is not a registered task assignor. Registered "
                               "assignors are: [%s]." % (name, ", ".join(_STREAMS_ASSIGNORS)))
    dlq = parsed.get(_DLQ)
    if dlq and dlq.startswith("__"):
        raise GroupConfigError("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    return parsed


def default_value(d: GroupConfigDef, broker_config: Any) -> Any:
    """The broker's value of the config this one falls back to, else the literal default."""
    if d.broker_key is not None and broker_config is not None:
        try:
            v = broker_config.get(d.broker_key)
        except KeyError:
            v = None
        if v is not None:
            if d.name == "streams.assignor.name" and isinstance(v, list):
                return v[0] if v else d.default
            return v
    return d.default


def effective(stored: dict[str, str], broker_config: Any, name: str) -> Any:
    """The value of group config ``name`` in force for a group whose stored set is ``stored``
    (a stored value that no longer validates falls back to the default)."""
    d = GROUP_CONFIGS[name]
    raw = stored.get(name)
    if raw is not None:
        try:
            v = _parse(d, raw)
            lo_hi = _BOUNDS.get(name)
            if lo_hi is not None:   # Kafka caps an out-of-bounds value to the broker's bounds
                v = min(max(v, lo_hi[0]), lo_hi[1])
            return v
        except GroupConfigError:
            pass
    return default_value(d, broker_config)


class GroupConfigView:
    """What the coordinators are handed: ``lookup(group_id) -> stored strings`` (the
    controller's ``group_configs``) and the broker config for the defaults."""

    def __init__(self, lookup: Optional[Callable[[str], dict[str, str]]], broker_config: Any) -> None:
        self._lookup = lookup
        self._config = broker_config

    def get(self, group_id: str, name: str) -> Any:
        return effective(self._lookup(group_id) if self._lookup else {}, self._config, name)

    def override(self, group_id: str, name: str, default: Any) -> Any:
        """The group's own value of ``name`` when it has one, else ``default`` (the caller's
        broker-level value)."""
        stored = self._lookup(group_id) if self._lookup else {}
        return effective(stored, self._config, name) if name in stored else default
