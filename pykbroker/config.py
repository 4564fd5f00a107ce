"""Every Kafka config pykbroker understands, declared once.

``server.properties``, ``--override``, topic configs (CreateTopics, later AlterConfigs) and
DescribeConfigs all read this table.  Names, types and defaults are Apache Kafka's so a user's
existing files and admin code work unchanged.  A topic config that has a broker-wide default
names it in ``broker_key`` (e.g. topic ``segment.bytes`` defaults to broker ``log.segment.bytes``),
which is how DescribeConfigs reports its source (DEFAULT_CONFIG vs STATIC_BROKER_CONFIG).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

# DescribeConfigs config types (Kafka's ConfigType ids in DescribeConfigs v3+).
TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
            "class": 8, "password": 9}

# DescribeConfigs sources (Kafka's ConfigSource ids).
SOURCE_TOPIC = 1            # TOPIC_CONFIG
SOURCE_DYNAMIC_BROKER = 2   # DYNAMIC_BROKER_CONFIG
SOURCE_DYNAMIC_DEFAULT = 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
SOURCE_STATIC_BROKER = 4    # STATIC_BROKER_CONFIG
SOURCE_DEFAULT = 5          # DEFAULT_CONFIG


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean | string | int | short | long | double | list | password
    default: Any
    doc: str
    scope: str = "broker"  # broker | topic
    broker_key: str | None = None  # for topic configs: the broker config giving the default
    validator: Callable[[Any], bool] | None = None
    read_only: bool = True  # broker configs: not changeable at run time (yet)
    # The type DescribeConfigs reports when it differs from how pykbroker parses the value
    # (listeners and log dirs are Kafka LISTs but kept here as the comma-separated text).
    describe_type: str | None = None
    # Kafka's internal configs: understood here but never listed by DescribeConfigs.
    internal: bool = False

    @property
    def type_id(self) -> int:
        return TYPE_IDS.get(self.describe_type or self.type, 0)

    def parse(self, raw) -> Any:
        """Parse and validate like Kafka's ConfigDef.parseType + validator, raising ConfigError
        with Kafka's ConfigException text ("Invalid value X for configuration N: reason")."""
        if raw is None:
            return None
        if not isinstance(raw, str):
            value = raw
        else:
            s = raw.strip()
            if self.type == "boolean":
                if s.lower() not in ("true", "false"):
                    raise _invalid(raw, self.name, "Expected value to be either true or false")
                value = s.lower() == "true"
            elif self.type in _INT_BITS:
                # Java's Integer/Short/Long.parseLong: optional sign and decimal digits, in range.
                if not _JAVA_INT.match(s) or not -_INT_BITS[self.type] <= int(s) < _INT_BITS[self.type]:
                    raise _invalid(raw, self.name, "Not a number of type %s" % self.type.upper())
                value = int(s)
            elif self.type == "double":
                try:
                    value = float(s)
                except ValueError:
                    raise _invalid(raw, self.name, "Not a number of type DOUBLE") from None
            elif self.type == "list":
                value = [x.strip() for x in s.split(",") if x.strip()]
            else:
                value = s
        if self.validator is not None:
            check = getattr(self.validator, "check", None)
            if check is not None:
                failure = check(value)
                if failure is not None:
                    raise _invalid(failure[0], self.name, failure[1])
            elif not self.validator(value):
                raise ConfigError("Invalid value %s for configuration %s" % (raw, self.name))
        return value

    def render(self, value) -> str | None:
        if value is None:
            return None
        if self.type == "boolean":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        return str(value)


_INT_BITS = {"short": 2**15, "int": 2**31, "long": 2**63}
_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")


def _invalid(value, name, reason) -> ConfigError:
    # Kafka's ConfigException(name, value, message) text.
    return ConfigError("Invalid value %s for configuration %s: %s" % (value, name, reason))


def _java_str(v) -> str:
    # How Kafka's message prints a parsed value (Java's toString of Long/Double).
    if isinstance(v, float):
        return repr(v) if v != int(v) or abs(v) >= 1e7 else "%.1f" % v
    return str(v)


class _Range:
    """Kafka's ConfigDef.Range (atLeast / between)."""

    def __init__(self, lo=None, hi=None):
        self.lo, self.hi = lo, hi

    def check(self, v):
        if self.lo is not None and v < self.lo:
            return _java_str(v), "Value must be at least %s" % self.lo
        if self.hi is not None and v > self.hi:
            return _java_str(v), "Value must be no more than %s" % self.hi
        return None

    def __call__(self, v) -> bool:
        return self.check(v) is None


class _ValidString:
    """Kafka's ConfigDef.ValidString (and ValidList when ``each``: every list element)."""

    def __init__(self, opts, each=False, non_empty=False):
        self.opts, self.each, self.non_empty = list(opts), each, non_empty

    def check(self, v):
        for x in (v if self.each else [v]):
            if x not in self.opts:
                return x, "String must be one of: " + ", ".join(self.opts)
        if self.each and self.non_empty and not v:
            return "", "String must be one of: " + ", ".join(self.opts)
        return None

    def __call__(self, v) -> bool:
        return self.check(v) is None


def _ge(n):
    return _Range(lo=n)


class _GzipLevel:
    """Kafka's GzipCompression level validator: 1-9, or -1 for the codec's default."""

    def check(self, v):
        if v == -1 or 1 <= v <= 9:
            return None
        return _java_str(v), "Value must be between 1 and 9 or equal to -1"

    def __call__(self, v) -> bool:
        return self.check(v) is None


class _ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: '*' or partitionId:brokerId entries."""

    _ENTRY = re.compile(r"^([0-9]+:[0-9]+)?$")

    def __init__(self, name):
        self.name = name

    def check(self, v):
        if all(self._ENTRY.match(x.strip()) for x in v) or "".join(v) == "*":
            return None
        return ("[%s]" % ", ".join(v), "%s must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..." % self.name)

    def __call__(self, v) -> bool:
        return self.check(v) is None


def _in(*opts):
    return _ValidString(opts)


B = "broker"
T = "topic"

_DEFS = [
    # --- broker: identity and listeners
    # node.id has no default in Kafka (pykbroker runs as node 1 when neither id is set, see
    # BrokerConfig.get); broker.id is its ZooKeeper-era alias with Kafka's default -1.
    ConfigDef("node.id", "int", None, "The id of this broker.", validator=_ge(0)),
    ConfigDef("broker.id", "int", -1, "Alias of node.id (ZooKeeper-era name).", validator=_ge(-1)),
    # Kafka lets listeners be reconfigured per broker (read_only false); pykbroker accepts no
    # dynamic broker config, but reports the flag as Kafka does for this key.
    ConfigDef("listeners", "string", "PLAINTEXT://127.0.0.1:9092", "Listeners: comma-separated NAME://HOST:PORT.",
              describe_type="list", read_only=False),
    ConfigDef("advertised.listeners", "string", None, "Listeners advertised to clients (defaults to listeners).",
              describe_type="list"),
    # log.dirs has no default: unset, log.dir applies (BrokerConfig.get).
    ConfigDef("log.dirs", "string", None, "Directories holding partition logs (default: log.dir).",
              describe_type="list"),
    ConfigDef("log.dir", "string", "./pykbroker-data", "Single log directory (used when log.dirs is unset).",
              describe_type="list"),
    ConfigDef("cluster.id", "string", None, "Cluster id (generated and stored in meta.properties when unset).",
              internal=True),
    ConfigDef("broker.rack", "string", None, "Rack of this broker."),
    # --- topics
    ConfigDef("num.partitions", "int", 1, "Default partition count of auto-created topics.", validator=_ge(1)),
    ConfigDef("default.replication.factor", "int", 1, "Default replication factor of new topics.", validator=_ge(1)),
    ConfigDef("auto.create.topics.enable", "boolean", True, "Create topics on Metadata/Produce when missing."),
    ConfigDef("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
    # --- requests
    ConfigDef("message.max.bytes", "int", 1048588, "Largest record batch size allowed.", validator=_ge(0)),
    ConfigDef("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted.", validator=_ge(1)),
    ConfigDef("queued.max.requests", "int", 500, "Requests read ahead per connection before reads pause.", validator=_ge(1)),
    # --- log
    ConfigDef("log.segment.bytes", "int", 1073741824, "Segment file size before a roll.", validator=_ge(14)),
    ConfigDef("log.roll.ms", "long", None, "Time before a roll (ms); falls back to log.roll.hours."),
    ConfigDef("log.roll.hours", "int", 168, "Time before a roll (hours).", validator=_ge(1)),
    ConfigDef("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", validator=_ge(0)),
    ConfigDef("log.index.size.max.bytes", "int", 10485760, "Maximum index file size.", validator=_ge(4)),
    ConfigDef("log.flush.interval.messages", "long", 9223372036854775807, "Messages before an fsync.", validator=_ge(1)),
    ConfigDef("log.flush.interval.ms", "long", None, "Milliseconds before an fsync (unset: log.flush.scheduler.interval.ms).",),
    ConfigDef("log.flush.scheduler.interval.ms", "long", 9223372036854775807, "How often the flusher checks logs."),
    ConfigDef("log.retention.hours", "int", 168, "Retention time (hours)."),
    ConfigDef("log.retention.minutes", "int", None, "Retention time (minutes)."),
    ConfigDef("log.retention.ms", "long", None, "Retention time (ms); -1 keeps forever."),
    ConfigDef("log.retention.bytes", "long", -1, "Retention size per partition; -1 unbounded."),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", validator=_ge(1)),
    ConfigDef("log.cleanup.policy", "list", ["delete"], "delete and/or compact.",
              validator=_ValidString(("compact", "delete"), each=True, non_empty=True)),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, "Tombstone retention on compacted topics."),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age before compaction."),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "long", 9223372036854775807, "Maximum age before compaction."),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio that triggers compaction."),
    ConfigDef("log.cleaner.enable", "boolean", True, "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, "Cleaner sleep when no log needs cleaning.", validator=_ge(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the cleaner's offset map.",
              validator=_ge(1)),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9, "Offset map fill factor."),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
              validator=_in("CreateTime", "LogAppendTime")),
    ConfigDef("log.message.timestamp.before.max.ms", "long", 9223372036854775807, "Max timestamp lag into the past."),
    ConfigDef("log.message.timestamp.after.max.ms", "long", 3600000, "Max timestamp lead into the future."),
    ConfigDef("log.preallocate", "boolean", False, "Preallocate segment files."),
    ConfigDef("log.segment.delete.delay.ms", "long", 60000, "Delay before a deleted segment's files are removed.",
              validator=_ge(0)),
    ConfigDef("log.local.retention.ms", "long", -2, "Local retention time of tiered topics (-2: log.retention.ms).",
              validator=_ge(-2)),
    ConfigDef("log.local.retention.bytes", "long", -2, "Local retention size of tiered topics (-2: log.retention.bytes).",
              validator=_ge(-2)),
    ConfigDef("log.remote.copy.lag.ms", "long", 0, "Age before a segment may be copied to remote storage.",
              validator=_ge(-1)),
    ConfigDef("log.remote.copy.lag.bytes", "long", -1, "Size lag before segments may be copied to remote storage.",
              validator=_ge(-1)),
    # Tiered storage is not implemented: always off, so topics cannot enable remote storage.
    ConfigDef("remote.log.storage.system.enable", "boolean", False, "Tiered storage on this broker (unsupported).",
              validator=lambda v: v is False),
    ConfigDef("max.decompressed.message.bytes", "int", 2147483639, "Largest decompressed record accepted.",
              validator=_ge(1)),
    ConfigDef("compression.type", "string", "producer", "Broker compression codec ('producer' keeps the producer's).",
              validator=_in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "int", -1, "gzip level when the broker compresses (-1: codec default).",
              validator=_GzipLevel()),
    ConfigDef("compression.lz4.level", "int", 9, "lz4 level when the broker compresses.", validator=_Range(1, 17)),
    ConfigDef("compression.zstd.level", "int", 3, "zstd level when the broker compresses.",
              validator=_Range(-131072, 22)),
    ConfigDef("min.insync.replicas", "int", 1, "Minimum ISR size for acks=all.", validator=_ge(1)),
    ConfigDef("unclean.leader.election.enable", "boolean", False, "Elect out-of-sync replicas."),
    # --- groups / offsets
    ConfigDef("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", validator=_ge(1)),
    ConfigDef("offsets.topic.replication.factor", "short", 1, "Replication factor of __consumer_offsets.", validator=_ge(1)),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets."),
    ConfigDef("offsets.retention.minutes", "int", 10080, "Committed offset retention.", validator=_ge(1)),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, "How often offset expiry runs."),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "Delay of the first rebalance of an empty group."),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, "Minimum consumer session timeout."),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000, "Maximum consumer session timeout."),
    ConfigDef("group.max.size", "int", 2147483647, "Maximum members per group."),
    ConfigDef("group.consumer.session.timeout.ms", "int", 45000, "KIP-848 member session timeout.", validator=_ge(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, "KIP-848 member heartbeat interval.", validator=_ge(1)),
    ConfigDef("group.consumer.max.size", "int", 2147483647, "Maximum members of a KIP-848 group.", validator=_ge(1)),
    ConfigDef("group.consumer.assignors", "list", ["uniform", "range"], "Server-side assignors (first is the default)."),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, "Longest commit metadata string accepted.", validator=_ge(0)),
    # --- checkpoints and background tasks
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often the recovery point is checkpointed.", validator=_ge(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often log start offsets are checkpointed.", validator=_ge(0)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "How often high watermarks are checkpointed.", validator=_ge(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, "How often idle producer ids are expired.",
              validator=_ge(1), internal=True),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, "Transactional id expiry."),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, "Idle producer id expiry."),
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, "Fetch session cache size."),
]

# Topic-level configs and the broker config that supplies each one's default.
_TOPIC = [
    ("cleanup.policy", "list", "log.cleanup.policy"),
    ("compression.gzip.level", "int", "compression.gzip.level"),
    ("compression.lz4.level", "int", "compression.lz4.level"),
    ("compression.type", "string", "compression.type"),
    ("compression.zstd.level", "int", "compression.zstd.level"),
    ("delete.retention.ms", "long", "log.cleaner.delete.retention.ms"),
    ("errors.deadletterqueue.group.enable", "boolean", None),
    ("file.delete.delay.ms", "long", "log.segment.delete.delay.ms"),
    ("flush.messages", "long", "log.flush.interval.messages"),
    ("flush.ms", "long", "log.flush.interval.ms"),
    ("follower.replication.throttled.replicas", "list", None),
    ("index.interval.bytes", "int", "log.index.interval.bytes"),
    ("leader.replication.throttled.replicas", "list", None),
    ("local.retention.bytes", "long", "log.local.retention.bytes"),
    ("local.retention.ms", "long", "log.local.retention.ms"),
    ("max.compaction.lag.ms", "long", "log.cleaner.max.compaction.lag.ms"),
    ("max.decompressed.message.bytes", "int", "max.decompressed.message.bytes"),
    ("max.message.bytes", "int", "message.max.bytes"),
    ("message.timestamp.after.max.ms", "long", "log.message.timestamp.after.max.ms"),
    ("message.timestamp.before.max.ms", "long", "log.message.timestamp.before.max.ms"),
    ("message.timestamp.type", "string", "log.message.timestamp.type"),
    ("min.cleanable.dirty.ratio", "double", "log.cleaner.min.cleanable.ratio"),
    ("min.compaction.lag.ms", "long", "log.cleaner.min.compaction.lag.ms"),
    ("min.insync.replicas", "int", "min.insync.replicas"),
    ("preallocate", "boolean", "log.preallocate"),
    ("remote.copy.lag.bytes", "long", "log.remote.copy.lag.bytes"),
    ("remote.copy.lag.ms", "long", "log.remote.copy.lag.ms"),
    ("remote.log.copy.disable", "boolean", None),
    ("remote.log.delete.on.disable", "boolean", None),
    ("remote.storage.enable", "boolean", None),
    ("retention.bytes", "long", "log.retention.bytes"),
    ("retention.ms", "long", "log.retention.ms"),
    ("segment.bytes", "int", "log.segment.bytes"),
    ("segment.index.bytes", "int", "log.index.size.max.bytes"),
    ("segment.jitter.ms", "long", None),
    ("segment.ms", "long", "log.roll.ms"),
    ("unclean.leader.election.enable", "boolean", "unclean.leader.election.enable"),
]

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

# Topic configs without a broker-wide default.  The tiered-storage, DLQ and throttle keys are
# accepted and reported as Kafka 4.4 does; pykbroker has no remote storage, share-group DLQ or
# replication throttling behind them (remote.storage.enable=true is refused, see
# validate_topic_configs).
_TOPIC_FIXED_DEFAULTS = {"segment.jitter.ms": 0, "errors.deadletterqueue.group.enable": False,
                         "follower.replication.throttled.replicas": [],
                         "leader.replication.throttled.replicas": [], "remote.log.copy.disable": False,
                         "remote.log.delete.on.disable": False, "remote.storage.enable": False}
# Kafka's own default for these topic configs, used when the broker value is derived.
# Kafka's LogConfig validators (retention.bytes has none: any value, negative = unbounded).
_TOPIC_VALIDATORS = {
    "segment.bytes": _ge(14),
    "segment.ms": _ge(1),
    "segment.jitter.ms": _ge(0),
    "segment.index.bytes": _ge(4),
    "flush.messages": _ge(1),
    "flush.ms": _ge(0),
    "retention.ms": _ge(-1),
    "max.message.bytes": _ge(0),
    "index.interval.bytes": _ge(0),
    "delete.retention.ms": _ge(0),
    "min.compaction.lag.ms": _ge(0),
    "max.compaction.lag.ms": _ge(1),
    "file.delete.delay.ms": _ge(0),
    "min.cleanable.dirty.ratio": _Range(0, 1),
    "min.insync.replicas": _ge(1),
    "message.timestamp.type": _in("CreateTime", "LogAppendTime"),
    "message.timestamp.before.max.ms": _ge(0),
    "message.timestamp.after.max.ms": _ge(0),
    # pykbroker keeps refusing an empty policy list (Kafka accepts it: neither delete nor compact).
    "cleanup.policy": _ValidString(("compact", "delete"), each=True, non_empty=True),
    "compression.type": _in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "compression.gzip.level": _GzipLevel(),
    "compression.lz4.level": _Range(1, 17),
    "compression.zstd.level": _Range(-131072, 22),
    "follower.replication.throttled.replicas": _ThrottledReplicas("follower.replication.throttled.replicas"),
    "leader.replication.throttled.replicas": _ThrottledReplicas("leader.replication.throttled.replicas"),
    "local.retention.bytes": _ge(-2),
    "local.retention.ms": _ge(-2),
    "max.decompressed.message.bytes": _ge(1),
    "remote.copy.lag.bytes": _ge(-1),
    "remote.copy.lag.ms": _ge(-1),
}

TOPIC_CONFIGS: dict[str, ConfigDef] = {}
for _name, _type, _bkey in _TOPIC:
    _bdef = BROKER_CONFIGS.get(_bkey) if _bkey else None
    TOPIC_CONFIGS[_name] = ConfigDef(
        _name, _type, _bdef.default if _bdef else _TOPIC_FIXED_DEFAULTS.get(_name),
        _bdef.doc if _bdef else "Topic config %s." % _name, scope="topic", broker_key=_bkey,
        validator=_TOPIC_VALIDATORS.get(_name), read_only=False)


class BrokerConfig:
    """Effective broker configuration: defaults overlaid by server.properties and overrides."""

    def __init__(self, values: dict[str, str] | None = None):
        self._explicit: dict[str, Any] = {}
        for k, v in (values or {}).items():
            self.set(k, v)

    def set(self, key: str, raw) -> None:
        d = BROKER_CONFIGS.get(key)
        if d is None:
            # Unknown keys are kept verbatim (Kafka logs and ignores unknown configs).
            self._explicit[key] = raw
            return
        self._explicit[key] = d.parse(raw)

    def is_explicit(self, key: str) -> bool:
        if key in ("node.id", "broker.id"):
            # Kafka copies a set node.id into broker.id (and back): both read as static.
            return "node.id" in self._explicit or "broker.id" in self._explicit
        return key in self._explicit

    def get(self, key: str):
        if key in self._explicit:
            return self._explicit[key]
        if key in ("broker.id", "node.id"):
            other = "node.id" if key == "broker.id" else "broker.id"
            # Neither set: pykbroker runs as node 1 (Kafka requires node.id in KRaft mode).
            return self._explicit.get(other, 1)
        if key == "log.dirs":
            return self.get("log.dir")
        d = BROKER_CONFIGS[key]
        return d.default

    def __getitem__(self, key):
        return self.get(key)

    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def log_dirs(self) -> list[str]:
        return [d.strip() for d in str(self.get("log.dirs")).split(",") if d.strip()]

    def retention_ms(self) -> int:
        """Kafka's precedence: log.retention.ms > .minutes > .hours."""
        if self.get("log.retention.ms") is not None:
            return self.get("log.retention.ms")
        if self.get("log.retention.minutes") is not None:
            return self.get("log.retention.minutes") * 60000
        return self.get("log.retention.hours") * 3600000

    def roll_ms(self) -> int:
        if self.get("log.roll.ms") is not None:
            return self.get("log.roll.ms")
        return self.get("log.roll.hours") * 3600000

    def topic_default(self, name: str):
        """Broker-wide default of a topic config and its DescribeConfigs source."""
        d = TOPIC_CONFIGS[name]
        if d.broker_key is None:
            return d.default, SOURCE_DEFAULT
        if name == "retention.ms":
            explicit = any(self.is_explicit(k) for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
            return self.retention_ms(), SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT
        if name == "segment.ms":
            explicit = self.is_explicit("log.roll.ms") or self.is_explicit("log.roll.hours")
            return self.roll_ms(), SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT
        if name == "flush.ms":
            v = self.get("log.flush.interval.ms")
            if v is None:
                v = self.get("log.flush.scheduler.interval.ms")
            return v, SOURCE_STATIC_BROKER if self.is_explicit("log.flush.interval.ms") else SOURCE_DEFAULT
        return self.get(d.broker_key), SOURCE_STATIC_BROKER if self.is_explicit(d.broker_key) else SOURCE_DEFAULT

    def effective_topic_config(self, topic_overrides: dict[str, Any]) -> dict[str, Any]:
        out = {name: self.topic_default(name)[0] for name in TOPIC_CONFIGS}
        out.update(topic_overrides)
        return out


def validate_topic_configs(raw: dict[str, str | None]) -> dict[str, Any]:
    """Parse topic config overrides; unknown names or bad values raise ConfigError
    (answered as INVALID_CONFIG, like Kafka)."""
    out = {}
    for k, v in raw.items():
        d = TOPIC_CONFIGS.get(k)
        if d is None:
            raise ConfigError("Unknown topic config name: %s" % k)
        if v is None:
            raise ConfigError("Null value not supported for topic configs: %s" % k)
        out[k] = d.parse(v)
    if out.get("remote.storage.enable"):
        # Kafka's answer when remote.log.storage.system.enable is false on the broker, which
        # it always is here: pykbroker has no tiered storage.
        raise ConfigError("Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.")
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, trailing \\ joins lines."""
    out: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        line = pending + line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                out[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            out[line] = ""
    return out
