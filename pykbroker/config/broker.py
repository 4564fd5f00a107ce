"""Every Kafka config pykbroker understands, declared once: name, type, default, unit, validator, doc.

``server.properties`` and ``--override`` (both through ``cli.build_config``), topic configs
(CreateTopics, AlterConfigs, IncrementalAlterConfigs, stored topic metadata) and DescribeConfigs
all read these tables.  Code reads a broker setting as ``config[key]`` and gets its typed value
or Kafka's default, never a default of its own.  Names, types, defaults and validators are Apache
Kafka 4.4's (tests/configs/test_broker_config.py holds them against Kafka's ConfigDef when the
Kafka jars are cached) so a user's files and admin code work unchanged; deliberate differences
are commented where they are declared.  A topic config that has a broker-wide default names it in
``broker_key`` (topic ``segment.bytes`` defaults to broker ``log.segment.bytes``), which is how
DescribeConfigs reports its source (DEFAULT_CONFIG vs STATIC_BROKER_CONFIG).

A key pykbroker does not declare is set aside and logged once at start-up
(``BrokerConfig.warn_unused``), as Kafka logs supplied-but-unused configs; a bad value raises
``ConfigError`` naming key, value and reason, which ``pykbroker serve`` prints before exiting.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

log = logging.getLogger("pykbroker.config")

# DescribeConfigs config types (Kafka's ConfigType ids in DescribeConfigs v3+).
TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
            "class": 8, "password": 9}

# DescribeConfigs sources (Kafka's ConfigSource ids).
SOURCE_TOPIC = 1            # TOPIC_CONFIG
SOURCE_DYNAMIC_BROKER = 2   # DYNAMIC_BROKER_CONFIG
SOURCE_DYNAMIC_DEFAULT = 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
SOURCE_STATIC_BROKER = 4    # STATIC_BROKER_CONFIG
SOURCE_DEFAULT = 5          # DEFAULT_CONFIG

LONG_MAX = 2**63 - 1   # Kafka's Long.MAX_VALUE: "never" / "unbounded"
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A config value (or name) Kafka would refuse.  ``name`` is the config's name when known,
    so a caller can say where the bad value came from."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


# The unit of a value, read from Kafka's naming convention unless a definition says otherwise.
_UNIT_SUFFIXES = ((".ms", "ms"), (".hours", "hours"), (".minutes", "minutes"), (".bytes", "bytes"),
                  (".messages", "messages"))


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean | string | int | short | long | double | list | password
    default: Any
    doc: str
    scope: str = "broker"  # broker | topic
    broker_key: str | None = None  # for topic configs: the broker config giving the default
    validator: "_Validator | None" = None
    read_only: bool = True  # broker configs: not changeable at run time (DYNAMIC_BROKER_CONFIGS)
    # The type DescribeConfigs reports when it differs from how pykbroker parses the value
    # (listeners and log dirs are Kafka LISTs but kept here as the comma-separated text).
    describe_type: str | None = None
    # Kafka's internal configs: understood here but never listed by DescribeConfigs.
    internal: bool = False
    # Unit of the value ("ms", "bytes", ...); None derives it from the name's suffix.
    unit: str | None = None

    def __post_init__(self) -> None:
        if self.unit is None:
            unit = next((u for sfx, u in _UNIT_SUFFIXES if self.name.endswith(sfx)), None)
            object.__setattr__(self, "unit", unit)

    @property
    def type_id(self) -> int:
        return TYPE_IDS.get(self.describe_type or self.type, 0)

    def parse(self, raw: Any) -> Any:
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
            failure = self.validator.check(value)
            if failure is not None:
                raise _invalid(failure[0], self.name, failure[1])
        return value

    def render(self, value: Any) -> str | None:
        if value is None:
            return None
        if self.type == "boolean":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        return str(value)


_INT_BITS = {"short": 2**15, "int": 2**31, "long": 2**63}
_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")


def _invalid(value: Any, name: str, reason: str) -> ConfigError:
    # Kafka's ConfigException(name, value, message) text.
    return ConfigError("Invalid value %s for configuration %s: %s" % (value, name, reason), name)


def _java_str(v: Any) -> str:
    # How Kafka's message prints a parsed value (Java's toString of Long/Double/Boolean).
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if v != int(v) or abs(v) >= 1e7 else "%.1f" % v
    return str(v)


class _Validator:
    """A value check: ``check(value)`` returns None, or (value as printed, reason) when refused."""

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        raise NotImplementedError

    def __call__(self, v: Any) -> bool:
        return self.check(v) is None


_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")   # Kafka's Utils.validHostPattern


def validate_ip_overrides(raw: str) -> dict:
    """``"127.0.0.1:200,host:5"`` -> {host: count}, unresolved, as Kafka's KafkaConfig reads the
    value (Csv.parseCsvMap, then each count as an int, then every host checked against
    validHostPattern); a value it refuses raises ValueError with Kafka's message, and the whole
    value is refused."""
    out: dict = {}
    if not raw:
        return out
    name = "max.connections.per.ip.overrides"
    for item in re.split(r"\s*,\s*", raw):
        i = item.rfind(":")
        if i < 0:
            # Java's substring(0, -1): StringIndexOutOfBoundsException, wrapped by KafkaConfig.getMap
            raise ValueError("Error parsing configuration property '%s': begin 0, end -1, length %d"
                             % (name, len(item)))
        host, count = item[:i].strip(), item[i + 1:].strip()
        if not re.fullmatch(r"[+-]?[0-9]+", count) or not -2 ** 31 <= int(count) < 2 ** 31:
            raise ValueError('For input string: "%s"' % count)   # Integer.parseInt
        out[host] = int(count)
    bad = [h for h in out if not _VALID_HOST.fullmatch(h)]
    if bad:
        raise ValueError("%s contains invalid addresses : %s" % (name, ",".join(bad)))
    return out


class _IpOverrides(_Validator):
    """max.connections.per.ip.overrides as Kafka's KafkaConfig reads it: a value it refuses is
    refused whole, with Kafka's message (an IllegalArgumentException's or NumberFormatException's
    text, not ConfigException's "Invalid value" form)."""

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        try:
            validate_ip_overrides(v)
        except ValueError as e:
            raise ConfigError(str(e), "max.connections.per.ip.overrides") from None
        return None


class _Range(_Validator):
    """Kafka's ConfigDef.Range (atLeast / between)."""

    def __init__(self, lo: Any = None, hi: Any = None) -> None:
        self.lo, self.hi = lo, hi

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        if self.lo is not None and v < self.lo:
            return _java_str(v), "Value must be at least %s" % self.lo
        if self.hi is not None and v > self.hi:
            return _java_str(v), "Value must be no more than %s" % self.hi
        return None


class _ValidString(_Validator):
    """Kafka's ConfigDef.ValidString (and ValidList when ``each``: every list element)."""

    def __init__(self, opts: Iterable[str], each: bool = False, non_empty: bool = False) -> None:
        self.opts, self.each, self.non_empty = list(opts), each, non_empty

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        for x in (v if self.each else [v]):
            if x not in self.opts:
                return x, "String must be one of: " + ", ".join(self.opts)
        if self.each and self.non_empty and not v:
            return "", "String must be one of: " + ", ".join(self.opts)
        return None


def _ge(n: Any) -> _Range:
    return _Range(lo=n)


def _in(*opts: str) -> _ValidString:
    return _ValidString(opts)


class _GzipLevel(_Validator):
    """Kafka's GzipCompression level validator: 1-9, or -1 for the codec's default."""

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        if v == -1 or 1 <= v <= 9:
            return None
        return _java_str(v), "Value must be between 1 and 9 or equal to -1"


class _ThrottledReplicas(_Validator):
    """Kafka's ThrottledReplicaListValidator: '*' or partitionId:brokerId entries."""

    _ENTRY = re.compile(r"^([0-9]+:[0-9]+)?$")

    def __init__(self, name: str) -> None:
        self.name = name

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        if all(self._ENTRY.match(x.strip()) for x in v) or "".join(v) == "*":
            return None
        return ("[%s]" % ", ".join(v), "%s must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..." % self.name)


class _Unsupported(_Validator):
    """Only ``allowed`` is accepted: the feature behind the config is not implemented."""

    def __init__(self, allowed: Any, why: str) -> None:
        self.allowed, self.why = allowed, why

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        return None if v == self.allowed else (_java_str(v), self.why)


# ------------------------------------------------------------------ listeners

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


@dataclass
class Listener:
    name: str
    host: str
    port: int
    # the security protocol of the listener's name (listener.security.protocol.map)
    protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % (self.name, host, self.port)


_ANY_NAME: dict = {}   # parse_listeners' "syntax only" map (the per-key validator below)


def parse_listeners(text: str | None, protocol_map: dict[str, str] | None = None) -> list[Listener]:
    """Kafka's listener list ``NAME://HOST:PORT,...``; ValueError says what is wrong.  Each
    name takes its security protocol from ``protocol_map`` (listener.security.protocol.map;
    None: Kafka's default map, where each protocol's name is its own listener name)."""
    pmap = protocol_map if protocol_map is not None else parse_protocol_map(_PROTOCOL_MAP_DEFAULT)
    out: list[Listener] = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER.match(item)
        if not m:
            raise ValueError("invalid listener %r: expected NAME://HOST:PORT" % item)
        host = m.group("host").strip("[]")
        name = m.group("name").upper()
        proto = pmap.get(name) if pmap is not _ANY_NAME else "PLAINTEXT"
        if proto is None:
            # Kafka's message for a name missing from the map
            raise ValueError("No security protocol defined for listener %s" % name)
        if any(o.name == name for o in out):
            raise ValueError("Each listener must have a different name, %s appears twice" % name)
        out.append(Listener(name, host, int(m.group("port")), proto))
    if not out:
        raise ValueError("no listeners configured")
    return out


class _Listeners(_Validator):
    """Refuses at start-up what the broker could not bind or advertise.  ``optional``: an empty
    value means "derive it" (advertised.listeners falls back to the bound listeners)."""

    def __init__(self, optional: bool = False) -> None:
        self.optional = optional

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        if self.optional and not v.strip():
            return None
        try:
            # syntax only: the names are checked against listener.security.protocol.map
            # once every key is known (BrokerConfig._check_consistency)
            parse_listeners(v, _ANY_NAME)
        except ValueError as e:
            return v, str(e)
        return None


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka 4.4's default map: each protocol's name is a listener name of that protocol.
_PROTOCOL_MAP_DEFAULT = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"


def parse_protocol_map(text: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``: NAME:PROTOCOL,... (names upper-cased as Kafka's
    ListenerName does); ValueError says what is wrong."""
    out = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in SECURITY_PROTOCOLS:
            raise ValueError("invalid listener security protocol mapping %r: expected NAME:%s"
                             % (item, "|".join(SECURITY_PROTOCOLS)))
        out[name] = proto
    return out


class _ProtocolMap(_Validator):
    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        try:
            parse_protocol_map(v)
        except ValueError as e:
            return v, str(e)
        return None


# ------------------------------------------------------------------ broker configs

# ZooKeeper-mode keys of Kafka 3.x that Kafka 4.x removed (see the cluster section below).
ZK_ERA_KEYS = frozenset({"zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
                         "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
                         "leader.imbalance.per.broker.percentage",
                         # the deprecated name of delegation.token.secret.key, removed by 4.0
                         "delegation.token.master.key",
                         # the dynamic password encoder (password_encoder.py): Kafka 4 keeps passwords
                         # in its metadata log unencoded and dropped these
                         "password.encoder.secret", "password.encoder.old.secret",
                         "password.encoder.keyfactory.algorithm", "password.encoder.cipher.algorithm",
                         "password.encoder.key.length", "password.encoder.iterations"})

# The authorizer's own configs: Kafka reads them from the broker's properties in the authorizer
# (StandardAuthorizer.configure), not as KafkaConfig keys, so DescribeConfigs never lists them;
# pykbroker.authorizer.audit.only is pykbroker's own (acl/authorizer.py).
AUTHORIZER_KEYS = frozenset({"super.users", "allow.everyone.if.no.acl.found", "pykbroker.authorizer.audit.only"})


class _AuthorizerClass(_Validator):
    """authorizer.class.name: empty (no authorizer) or one of Kafka's ACL authorizers, which
    pykbroker builds (pykbroker/acl/); any other class cannot be loaded here."""

    def check(self, v: Any) -> Optional[tuple[Any, str]]:
        from ..acl.authorizer import AUTHORIZER_CLASSES
        if not v or v in AUTHORIZER_CLASSES:
            return None
        return (v, "pykbroker builds only Kafka's ACL authorizer (%s)" % ", ".join(AUTHORIZER_CLASSES))


# The internal topics' settings: the prefix of their keys -> the topic.
_INTERNAL_TOPICS = {"offsets.topic": "__consumer_offsets", "share.coordinator.state.topic": "__share_group_state",
                    "transaction.state.log": "__transaction_state"}


def _internal_topic(prefix: str) -> list[ConfigDef]:
    """An internal topic's partitions, replication factor and segment size, with Kafka's names
    and defaults but the replication factor's: Kafka's default is 3 (min ISR 2 for
    __transaction_state), with which a single-node pykbroker could never create the topic, so it
    is 1 here, and Kafka's on a cluster member (CLUSTER_DEFAULTS)."""
    topic = _INTERNAL_TOPICS[prefix]
    return [ConfigDef(prefix + ".num.partitions", "int", 50, "Partitions of %s." % topic, validator=_ge(1)),
            ConfigDef(prefix + ".replication.factor", "short", 1, "Replication factor of %s." % topic,
                      validator=_ge(1)),
            ConfigDef(prefix + ".segment.bytes", "int", 104857600, "Segment size of %s." % topic, validator=_ge(1))]


# Defaults that differ on a cluster member (zookeeper.connect set): Kafka's, where pykbroker's
# single-node default is 1.
CLUSTER_DEFAULTS = {prefix + ".replication.factor": 3 for prefix in _INTERNAL_TOPICS}

_DEFS = [
    # --- broker: identity and listeners
    # node.id has no default in Kafka (pykbroker runs as node 1 when neither id is set, see
    # BrokerConfig.get); broker.id is its ZooKeeper-era alias with Kafka's default -1.
    ConfigDef("node.id", "int", None, "The id of this broker.", validator=_ge(0)),
    ConfigDef("broker.id", "int", -1, "Alias of node.id (ZooKeeper-era name).", validator=_ge(-1)),
    # Kafka lets listeners be reconfigured per broker (read_only false); pykbroker cannot rebind
    # at run time and refuses the change (config/dynamic.py), but reports the flag as Kafka does.
    # Default: Kafka's is PLAINTEXT://:9092 (all interfaces); pykbroker binds loopback unless told
    # otherwise.
    ConfigDef("listeners", "string", "PLAINTEXT://127.0.0.1:9092", "Listeners: comma-separated NAME://HOST:PORT.",
              describe_type="list", validator=_Listeners()),
    ConfigDef("advertised.listeners", "string", None, "Listeners advertised to clients (defaults to listeners).",
              describe_type="list", validator=_Listeners(optional=True)),
    # --- cluster coordination on ZooKeeper (Kafka 3.x's ZooKeeper-mode keys and defaults).  Unset
    # zookeeper.connect: a single node with its local controller (cluster/local_controller.py).  Keys that
    # Kafka 4.x no longer has (ZK_ERA_KEYS) are internal here: used, never listed by DescribeConfigs,
    # as a Kafka 4.4 broker lists none of them.
    ConfigDef("zookeeper.connect", "string", None,
              "ZooKeeper connection string host:port[,host:port...][/chroot]; unset: single node.", internal=True),
    ConfigDef("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout.", unit="ms",
              validator=_ge(1), internal=True),
    ConfigDef("zookeeper.connection.timeout.ms", "int", None,
              "Time to wait for the first ZooKeeper connection (default: the session timeout).", unit="ms", internal=True),
    ConfigDef("controlled.shutdown.enable", "boolean", True,
              "On SIGTERM, move partition leadership away before stopping."),
    ConfigDef("controlled.shutdown.max.retries", "int", 3, "Controlled shutdown attempts.", validator=_ge(0), internal=True),
    ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000, "Wait between controlled shutdown attempts.",
              unit="ms", validator=_ge(0), internal=True),
    ConfigDef("auto.leader.rebalance.enable", "boolean", True,
              "The controller moves leadership back to preferred replicas."),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", 300,
              "How often the controller checks leader imbalance.", validator=_ge(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", "int", 10,
              "Allowed share of non-preferred leaders per broker before a rebalance.", validator=_ge(0), internal=True),
    # log.dirs has no default: unset, log.dir applies (BrokerConfig.get).  log.dir's default is
    # pykbroker's own (Kafka's is /tmp/kafka-logs).
    ConfigDef("log.dirs", "string", None, "Directories holding partition logs (default: log.dir).",
              describe_type="list"),
    ConfigDef("log.dir", "string", "./pykbroker-data", "Single log directory (used when log.dirs is unset).",
              describe_type="list"),
    # Not a Kafka config (Kafka keeps the id in meta.properties only): internal, never listed.
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
    # Kafka's SocketServer sizes the kernel buffers of client connections itself (SO_RCVBUF on
    # the listening socket before accepting, so the window scale follows; SO_SNDBUF on each
    # accepted socket), 100 KiB each by default, -1: the OS's autotuned buffers. The sizes shape
    # what clients see: a producer's batches grow while its writes wait on a small receive window,
    # and a 1 MiB Fetch answer leaves in steps as the client reads (compat/bench/results/
    # consume-100b-socket-buffers.md).
    ConfigDef("socket.send.buffer.bytes", "int", 102400,
              "SO_SNDBUF of client connections (-1: the OS default)."),
    ConfigDef("socket.receive.buffer.bytes", "int", 102400,
              "SO_RCVBUF of client connections (-1: the OS default)."),
    ConfigDef("queued.max.requests", "int", 500, "Accepted for Kafka compatibility; no effect: each connection carries out one request at a time and reads on only after it (server/connection.py), so nothing queues ahead.",
              validator=_ge(1), unit="requests"),
    # --- log
    # Kafka refuses broker segments under 1 MiB; pykbroker keeps accepting 14 bytes (tests roll tiny segments).
    ConfigDef("log.segment.bytes", "int", 1073741824, "Segment file size before a roll.", validator=_ge(14)),
    ConfigDef("log.roll.ms", "long", None, "Time before a roll (ms); falls back to log.roll.hours."),
    ConfigDef("log.roll.hours", "int", 168, "Time before a roll (hours).", validator=_ge(1)),
    ConfigDef("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", validator=_ge(0)),
    ConfigDef("log.index.size.max.bytes", "int", 10485760, "Maximum index file size.", validator=_ge(4)),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX, "Messages before an fsync.", validator=_ge(1)),
    ConfigDef("log.flush.interval.ms", "long", None, "Milliseconds before an fsync (unset: log.flush.scheduler.interval.ms).",),
    ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher checks logs."),
    ConfigDef("log.retention.hours", "int", 168, "Retention time (hours)."),
    ConfigDef("log.retention.minutes", "int", None, "Retention time (minutes)."),
    ConfigDef("log.retention.ms", "long", None, "Retention time (ms); -1 keeps forever."),
    ConfigDef("log.retention.bytes", "long", -1, "Retention size per partition; -1 unbounded."),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", validator=_ge(1)),
    ConfigDef("log.cleanup.policy", "list", ["delete"], "delete and/or compact.",
              validator=_ValidString(("compact", "delete"), each=True, non_empty=True)),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, "Tombstone retention on compacted topics.",
              validator=_ge(0)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age before compaction.", validator=_ge(0)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum age before compaction.",
              validator=_ge(1)),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio that triggers compaction.",
              validator=_Range(0, 1)),
    ConfigDef("log.cleaner.enable", "boolean", True, "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, "Cleaner sleep when no log needs cleaning.", validator=_ge(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the cleaner's offset map.",
              validator=_ge(1), unit="bytes"),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9, "Offset map fill factor."),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
              validator=_in("CreateTime", "LogAppendTime")),
    ConfigDef("log.message.timestamp.before.max.ms", "long", LONG_MAX, "Max timestamp lag into the past.",
              validator=_ge(0)),
    ConfigDef("log.message.timestamp.after.max.ms", "long", 3600000, "Max timestamp lead into the future.",
              validator=_ge(0)),
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
              validator=_Unsupported(False, "pykbroker does not implement tiered storage")),
    ConfigDef("max.decompressed.message.bytes", "int", 2147483639, "Largest decompressed record accepted.",
              validator=_Range(1, 2147483639)),
    ConfigDef("compression.type", "string", "producer", "Broker compression codec ('producer' keeps the producer's).",
              validator=_in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "int", -1, "gzip level when the broker compresses (-1: codec default).",
              validator=_GzipLevel()),
    ConfigDef("compression.lz4.level", "int", 9, "lz4 level when the broker compresses.", validator=_Range(1, 17)),
    ConfigDef("compression.zstd.level", "int", 3, "zstd level when the broker compresses.",
              validator=_Range(-131072, 22)),
    ConfigDef("min.insync.replicas", "int", 1, "Minimum ISR size for acks=all.", validator=_ge(1), unit="replicas"),
    ConfigDef("unclean.leader.election.enable", "boolean", False, "Elect out-of-sync replicas."),
    # --- replication (followers fetch from leaders; cluster/replica_fetcher.py, cluster/partition.py)
    ConfigDef("replica.lag.time.max.ms", "long", 30000,
              "A follower not caught up for this long leaves the ISR."),
    ConfigDef("replica.fetch.backoff.ms", "int", 1000, "Sleep of a fetcher after a fetch error.", validator=_ge(0)),
    ConfigDef("replica.fetch.wait.max.ms", "int", 500, "Long-poll time of a follower's fetch."),
    ConfigDef("replica.fetch.min.bytes", "int", 1, "Bytes a follower's fetch waits for."),
    ConfigDef("replica.fetch.max.bytes", "int", 1048576, "Bytes per partition of a follower's fetch.",
              validator=_ge(0)),
    ConfigDef("replica.fetch.response.max.bytes", "int", 10485760, "Bytes of a follower's fetch response.",
              validator=_ge(0)),
    ConfigDef("replica.socket.timeout.ms", "int", 30000, "Socket timeout of a follower's connection."),
    ConfigDef("replica.socket.receive.buffer.bytes", "int", 65536,
              "SO_RCVBUF of a follower's connection to its leader (-1: the OS default, autotuned)."),
    ConfigDef("num.replica.fetchers", "int", 1, "Fetcher tasks per source broker.", validator=_ge(1),
              unit="threads"),
    ConfigDef("inter.broker.listener.name", "string", None,
              "Listener other brokers connect to (default: the listener of security.inter.broker.protocol)."),
    # --- security (pykbroker/security/): listener names map to protocols; every ssl.* and sasl.*
    # key may be overridden per listener as listener.name.<name>.<key> (security/listeners.py).
    ConfigDef("listener.security.protocol.map", "string", _PROTOCOL_MAP_DEFAULT,
              "Listener name -> security protocol, NAME:PROTOCOL,...", validator=_ProtocolMap()),
    ConfigDef("security.inter.broker.protocol", "string", "PLAINTEXT",
              "Security protocol between brokers (when inter.broker.listener.name is not set).",
              validator=_in(*SECURITY_PROTOCOLS)),
    # Kafka's default mechanism is GSSAPI (Kerberos, security/kerberos.py): a SASL listener left
    # at it needs the Krb5LoginModule JAAS entry and the gssapi package, else refuses to start.
    # --- authorization (pykbroker/acl/): off unless authorizer.class.name names Kafka's authorizer
    ConfigDef("authorizer.class.name", "string", "",
              "The authorizer: empty (none: every principal may do everything) or Kafka's ACL authorizer.",
              validator=_AuthorizerClass()),
    ConfigDef("super.users", "string", None, "Principals allowed everything, User:a;User:b.", internal=True),
    ConfigDef("allow.everyone.if.no.acl.found", "boolean", False,
              "Allow an action on a resource no ACL applies to.", internal=True),
    # pykbroker's own (not a Kafka config, so never listed by DescribeConfigs): the authorizer
    # decides and logs as usual but serves denied requests (pykbroker/acl/authorizer.py)
    ConfigDef("pykbroker.authorizer.audit.only", "boolean", False,
              "Log ACL denials (kafka.authorizer.logger) without enforcing them.", internal=True),
    ConfigDef("sasl.enabled.mechanisms", "list", ["GSSAPI"], "SASL mechanisms enabled on SASL listeners."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism between brokers."),
    ConfigDef("sasl.kerberos.service.name", "string", None, "Kerberos service name of the broker (GSSAPI)."),
    ConfigDef("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"],
              "Rules mapping Kerberos principals to short names (Kafka's auth_to_local syntax)."),
    # OAUTHBEARER: Kafka's OAuthBearerValidatorCallbackHandler (signed JWTs against a JWKS),
    # chosen by sasl.server.callback.handler.class (security/oauthbearer.py); the defaults are Kafka's
    ConfigDef("sasl.server.callback.handler.class", "string", None,
              "SASL server callback handler (OAUTHBEARER: Kafka's OAuthBearerValidatorCallbackHandler).",
              describe_type="class"),   # a Java class name: Kafka's ConfigDef type CLASS (8)
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", "string", None,
              "JWKS of the keys that sign OAUTHBEARER tokens (file:// or http(s)://)."),
    ConfigDef("sasl.oauthbearer.expected.audience", "list", [],
              "Accepted aud values (empty: a token naming an audience is refused, as Kafka's jose4j check)."),
    ConfigDef("sasl.oauthbearer.expected.issuer", "string", None, "Required iss value (unset: not checked)."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", "string", "sub", "Claim naming the principal."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", "string", "scope", "Claim holding the scopes."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", "int", 30,
              "Clock skew allowed on exp, nbf and iat (seconds)."),   # no validator, as Kafka's
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000,
              "How often an http(s) JWKS is fetched again."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100,
              "First wait before a failed JWKS fetch is tried again (doubling after)."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10000,
              "Longest time a JWKS refresh keeps retrying a failed fetch."),
    # the broker's own OAuth login for its inter-broker connections: Kafka's
    # OAuthBearerLoginCallbackHandler (client_credentials against a token endpoint,
    # security/oauth_login.py); the defaults are Kafka's
    ConfigDef("sasl.login.callback.handler.class", "string", None,
              "SASL login callback handler (OAUTHBEARER: Kafka's OAuthBearerLoginCallbackHandler).",
              describe_type="class"),
    ConfigDef("sasl.oauthbearer.token.endpoint.url", "string", None,
              "OAuth token endpoint the broker obtains its own token from (http(s):// or file://)."),
    ConfigDef("sasl.oauthbearer.client.credentials.client.id", "string", None,
              "Client id of the client_credentials grant (else the JAAS option clientId)."),
    ConfigDef("sasl.oauthbearer.client.credentials.client.secret", "password", None,
              "Client secret of the client_credentials grant (else the JAAS option clientSecret)."),
    ConfigDef("sasl.oauthbearer.scope", "string", None, "Scope asked of the token endpoint (else the JAAS option scope)."),
    # Internal: Kafka 4.4 defines this key for clients (SaslConfigs) but not in the broker's
    # config table, so its DescribeConfigs never lists it; a broker's own token login reads it.
    ConfigDef("sasl.oauthbearer.header.urlencode", "boolean", False,
              "URL-encode the client id and secret in the Authorization header (RFC 6749 2.3.1).",
              internal=True),
    ConfigDef("sasl.login.retry.backoff.ms", "long", 100, "First wait before a failed token request is retried."),
    ConfigDef("sasl.login.retry.backoff.max.ms", "long", 10000, "Longest time a token request keeps being retried."),
    ConfigDef("sasl.login.connect.timeout.ms", "int", None, "Token endpoint connect timeout (ms)."),
    ConfigDef("sasl.login.read.timeout.ms", "int", None, "Token endpoint read timeout (ms)."),
    ConfigDef("sasl.login.refresh.window.factor", "double", 0.8,
              "Share of a token's lifetime after which a new one is obtained."),
    ConfigDef("sasl.server.max.receive.size", "int", 524288,
              "Largest SASL token accepted before authentication (bytes)."),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100,
              "Delay of the close after a failed authentication.", validator=_ge(0)),
    ConfigDef("connections.max.reauth.ms", "long", 0,
              "Session lifetime of an authenticated SASL connection (0: sessions never expire)."),
    # --- delegation tokens (security/delegation_tokens.py): enabled only with a secret key, as Kafka
    ConfigDef("delegation.token.secret.key", "password", None,
              "Secret that signs delegation tokens (HmacSHA512); unset: delegation tokens disabled."),
    # Kafka 3.x's deprecated name, dropped by Kafka 4.0 (its DescribeConfigs no longer lists it):
    # still read as the fallback so a server.properties written for 3.x keeps its tokens
    ConfigDef("delegation.token.master.key", "password", None,
              "Deprecated name of delegation.token.secret.key (used when that is not set).", internal=True),
    ConfigDef("delegation.token.max.lifetime.ms", "long", 604800000,
              "Longest lifetime of a delegation token (renewals never pass it).", validator=_ge(1)),
    ConfigDef("delegation.token.expiry.time.ms", "long", 86400000,
              "Renewal period of a delegation token when the request gives none.", validator=_ge(1)),
    ConfigDef("delegation.token.expiry.check.interval.ms", "long", 3600000,
              "How often expired delegation tokens are removed.", validator=_ge(1)),
    # Kafka's PasswordEncoder (pykbroker/password_encoder.py): PASSWORD-type dynamic configs stored
    # encrypted with this secret.  Internal (ZK_ERA_KEYS): Kafka 4 no longer has them.
    ConfigDef("password.encoder.secret", "password", None,
              "Secret encrypting dynamically set passwords where they are stored.", internal=True),
    ConfigDef("password.encoder.old.secret", "password", None,
              "The previous secret: stored passwords it encrypted are still read.", internal=True),
    ConfigDef("password.encoder.keyfactory.algorithm", "string", None,
              "PBKDF2 key factory (default PBKDF2WithHmacSHA512).", internal=True),
    ConfigDef("password.encoder.cipher.algorithm", "string", "AES/CBC/PKCS5Padding",
              "Cipher of the stored passwords.", internal=True),
    ConfigDef("password.encoder.key.length", "int", 128, "Key length in bits.", validator=_ge(8), internal=True),
    ConfigDef("password.encoder.iterations", "int", 4096, "PBKDF2 iterations.", validator=_ge(1024), internal=True),
    ConfigDef("ssl.keystore.type", "string", "JKS", "Keystore format: JKS, PKCS12 or PEM."),
    ConfigDef("ssl.keystore.location", "string", None, "Keystore file (key and certificate chain)."),
    ConfigDef("ssl.keystore.password", "password", None, "Keystore password."),
    ConfigDef("ssl.key.password", "password", None, "Password of the private key."),
    ConfigDef("ssl.keystore.certificate.chain", "password", None, "Inline PEM certificate chain."),
    ConfigDef("ssl.keystore.key", "password", None, "Inline PEM private key."),
    ConfigDef("ssl.truststore.type", "string", "JKS", "Truststore format: JKS, PKCS12 or PEM."),
    ConfigDef("ssl.truststore.location", "string", None, "Truststore file (trusted certificates)."),
    ConfigDef("ssl.truststore.password", "password", None, "Truststore password."),
    ConfigDef("ssl.truststore.certificates", "password", None, "Inline PEM trusted certificates."),
    ConfigDef("ssl.client.auth", "string", "none", "Client certificates: none, requested or required.",
              validator=_in("required", "requested", "none")),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT",
              "Client certificate DN -> principal name (DEFAULT: the whole DN)."),
    ConfigDef("ssl.protocol", "string", "TLSv1.3", "TLS protocol of the SSL context."),
    ConfigDef("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted."),
    ConfigDef("ssl.cipher.suites", "list", [], "Cipher suites (empty: the TLS library's defaults)."),
    # the broker's own TLS connections to other brokers check the host name (Kafka's default "https")
    ConfigDef("ssl.endpoint.identification.algorithm", "string", "https",
              "Host name verification of inter-broker TLS connections (https; empty: off)."),
    # --- groups / offsets
    *_internal_topic("offsets.topic"),
    # how long a group coordinator write (an OffsetCommit, a group's state) waits to be committed
    # on every in-sync replica before it fails (Kafka 4.4's runtime write timeout: the client
    # gets COORDINATOR_NOT_AVAILABLE)
    ConfigDef("offsets.commit.timeout.ms", "int", 5000, "Wait for a coordinator write to be replicated.",
              validator=_ge(1)),
    ConfigDef("offsets.retention.minutes", "int", 10080, "Committed offset retention.", validator=_ge(1)),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, "How often offset expiry runs.", validator=_ge(1)),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "Delay of the first rebalance of an empty group."),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, "Minimum consumer session timeout."),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000, "Maximum consumer session timeout."),
    ConfigDef("group.max.size", "int", INT_MAX, "Maximum members per group.", validator=_ge(1), unit="members"),
    ConfigDef("group.consumer.session.timeout.ms", "int", 45000, "KIP-848 member session timeout.", validator=_ge(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, "KIP-848 member heartbeat interval.", validator=_ge(1)),
    ConfigDef("group.consumer.max.size", "int", INT_MAX, "Maximum members of a KIP-848 group.", validator=_ge(1),
              unit="members"),
    ConfigDef("group.consumer.assignors", "list", ["uniform", "range"], "Server-side assignors (first is the default)."),
    # KIP-932 share groups (Kafka's GroupCoordinatorConfig / ShareGroupConfig defaults)
    ConfigDef("group.share.session.timeout.ms", "int", 45000, "Share group member session timeout.", validator=_ge(1)),
    ConfigDef("group.share.heartbeat.interval.ms", "int", 5000, "Share group member heartbeat interval.",
              validator=_ge(1)),
    ConfigDef("group.share.max.size", "int", 200, "Maximum members of a share group.", validator=_Range(1, 1000),
              unit="members"),
    ConfigDef("group.share.record.lock.duration.ms", "int", 30000, "Acquisition lock of a share group's records.",
              validator=_Range(1000, 3600000)),
    ConfigDef("group.share.delivery.count.limit", "int", 5, "Deliveries of a record before it is archived.",
              validator=_Range(2, 10)),
    ConfigDef("group.share.max.share.sessions", "int", 2000, "Most share sessions a broker keeps.",
              validator=_ge(1)),
    ConfigDef("group.share.partition.max.record.locks", "int", 2000,
              "Most records of one share partition acquired at a time.", validator=_Range(100, 10000)),
    # the share coordinator's __share_group_state (Kafka's ShareCoordinatorConfig defaults)
    *_internal_topic("share.coordinator.state.topic"),
    # how long a share coordinator write waits to be replicated (Kafka's ShareCoordinatorConfig)
    ConfigDef("share.coordinator.write.timeout.ms", "int", 5000,
              "Wait for a share coordinator write to be replicated.", validator=_ge(1)),
    # __share_group_state's min.insync.replicas at creation (Kafka's ShareCoordinatorConfig)
    ConfigDef("share.coordinator.state.topic.min.isr", "short", 2,
              "min.insync.replicas of __share_group_state.", validator=_ge(1)),
    # KIP-1071 streams groups (Kafka 4.4's defaults)
    ConfigDef("group.streams.session.timeout.ms", "int", 45000, "Streams group member session timeout.",
              validator=_ge(1)),
    ConfigDef("group.streams.heartbeat.interval.ms", "int", 5000, "Streams group member heartbeat interval.",
              validator=_ge(1)),
    ConfigDef("group.streams.max.size", "int", INT_MAX, "Maximum members of a streams group.", validator=_ge(1),
              unit="members"),
    ConfigDef("group.streams.num.standby.replicas", "int", 0, "Standby tasks per active task (only 0 is built).",
              validator=_ge(0)),
    ConfigDef("group.streams.initial.rebalance.delay.ms", "int", 3000,
              "Delay of the first task assignment of a new streams group.", validator=_ge(0)),
    ConfigDef("group.streams.assignment.interval.ms", "int", 1000,
              "Least time between two task assignments of a streams group (KIP-1263).", validator=_ge(0)),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, "Longest commit metadata string accepted.", validator=_ge(0)),
    # --- checkpoints and background tasks
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often the recovery point is checkpointed.",
              validator=_ge(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
              "How often log start offsets are checkpointed.", validator=_ge(0)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000,
              "How often high watermarks are checkpointed.", validator=_ge(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, "How often idle producer ids are expired.",
              validator=_ge(1), internal=True),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, "Transactional id expiry.", validator=_ge(1)),
    # --- transactions (Kafka's names and defaults)
    *_internal_topic("transaction.state.log"),
    # __transaction_state's min.insync.replicas at creation (Kafka's TransactionLogConfig); on
    # a single node the effective min ISR is capped by the replica count (cluster/partition.py)
    ConfigDef("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.",
              validator=_ge(1)),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms a producer may ask for.",
              validator=_ge(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
              "How often timed-out transactions are aborted.", validator=_ge(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
              "How often expired transactional ids are removed.", validator=_ge(1)),
    ConfigDef("transaction.partition.verification.enable", "boolean", True,
              "Verify that a partition was added to the transaction before a transactional write (KIP-890)."),
    # Kafka finalizes its ``transaction.version`` feature when the cluster is formatted
    # (``kafka-storage format --feature transaction.version=N``, default 2 on 4.x) and changes it
    # with kafka-features (UpdateFeatures); pykbroker has neither, so the level is a start-up
    # setting of its own (internal: not a Kafka config, never listed).  Set it alike on every
    # broker of a cluster.  2: transaction version 2 (KIP-890 part 2) offered to clients; 1:
    # clients stay on version 1, flexible v1 __transaction_state values; 0: also v0 values.
    ConfigDef("transaction.version", "short", 2,
              "Finalized level of the transaction.version feature (0-2), as Kafka's format/kafka-features set it.",
              validator=_Range(0, 2), internal=True, unit="level"),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, "Idle producer id expiry.", validator=_ge(1)),
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, "Fetch session cache size.",
              validator=_ge(0), unit="sessions"),
    # --- Kafka's thread pools and connection limits: dynamic in Kafka; the thread pools are
    # accepted and reported here (one trio loop, no thread pools) so admin tools that tune them
    # get Kafka's answers; the connection limits are enforced.
    ConfigDef("num.io.threads", "int", 8, "Request handler threads (Kafka; no effect in pykbroker).",
              validator=_ge(1), unit="threads"),
    ConfigDef("num.network.threads", "int", 3, "Network threads (Kafka; no effect in pykbroker).",
              validator=_ge(1), unit="threads"),
    ConfigDef("background.threads", "int", 10, "Background task threads (Kafka; no effect in pykbroker).",
              validator=_ge(1), unit="threads"),
    ConfigDef("num.recovery.threads.per.data.dir", "int", 2,
              "Log recovery threads per data dir (Kafka; no effect in pykbroker).", validator=_ge(1), unit="threads"),
    ConfigDef("log.cleaner.threads", "int", 1, "Log cleaner threads (Kafka; pykbroker runs one cleaner).",
              validator=_ge(0), unit="threads"),
    ConfigDef("log.cleaner.io.buffer.size", "int", 524288, "Cleaner I/O buffer memory (Kafka; no effect in pykbroker).",
              validator=_ge(0)),
    # Enforced at accept time (quota/connections.py): a connection over a limit is closed at once.
    ConfigDef("max.connections", "int", INT_MAX, "The most connections the broker keeps open (all listeners).",
              validator=_ge(0), unit="connections"),
    ConfigDef("max.connections.per.ip", "int", INT_MAX, "The most connections from one IP address.",
              validator=_ge(0), unit="connections"),
    ConfigDef("max.connections.per.ip.overrides", "string", "",
              "Per-IP or host name overrides of max.connections.per.ip: 'hostName:100,127.0.0.1:200'.",
              validator=_IpOverrides()),
    # KIP-612: new connections a second, broker-wide (the inter-broker listener not counted);
    # per listener as listener.name.<l>.max.connection.creation.rate.  Over it, the listener
    # accepts nothing for the throttle time (quota/connections.py).
    ConfigDef("max.connection.creation.rate", "int", INT_MAX,
              "The most new connections the broker accepts a second (all listeners but the inter-broker one).",
              validator=_ge(0), unit="connections/s"),
    # Kafka's Selector idle expiry; per listener as listener.name.<l>.connections.max.idle.ms;
    # negative: never.  Not dynamic in Kafka.
    ConfigDef("connections.max.idle.ms", "long", 600000,
              "Close a connection with nothing read or written for this long."),
    # --- client quotas (quota/): Kafka's ClientQuotaManagerConfig, static as in Kafka
    ConfigDef("quota.window.num", "int", 11, "The number of samples of a client quota's rate.",
              validator=_ge(1), unit="samples"),
    ConfigDef("quota.window.size.seconds", "int", 1, "The time span of each sample of a client quota's rate.",
              validator=_ge(1), unit="seconds"),
]

# The broker configs Kafka 4.4 can change at run time (DynamicBrokerConfig.AllDynamicConfigs; its
# DescribeConfigs reports exactly these read_only=false) among those pykbroker declares.  They can
# be set per broker or as the cluster-wide default (IncrementalAlterConfigs/AlterConfigs on a
# BROKER resource, config/dynamic.py); every other declared key is refused with Kafka's "Cannot
# update these configs dynamically".  Some have no effect here (num.replica.fetchers: one fetcher
# per source broker; the compression levels until topics recompress): accepted and reported.
DYNAMIC_BROKER_CONFIGS = frozenset({
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms", "log.cleanup.policy", "log.flush.interval.messages",
    "log.flush.interval.ms", "log.index.interval.bytes", "log.index.size.max.bytes",
    "log.local.retention.bytes", "log.local.retention.ms", "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.type", "log.preallocate",
    "log.remote.copy.lag.bytes", "log.remote.copy.lag.ms", "log.retention.bytes", "log.retention.ms",
    "log.roll.ms", "log.segment.bytes", "log.segment.delete.delay.ms", "max.decompressed.message.bytes",
    "message.max.bytes", "min.insync.replicas", "num.replica.fetchers", "producer.id.expiration.ms",
    "transaction.partition.verification.enable", "unclean.leader.election.enable",
    "listeners", "num.io.threads", "num.network.threads", "background.threads",
    "num.recovery.threads.per.data.dir", "log.cleaner.threads", "log.cleaner.io.buffer.size", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate",
    "group.streams.assignment.interval.ms",
})
# The listener-prefixed configs Kafka reconfigures per listener at run time
# (SocketServer.ListenerReconfigurableConfigs): listener.name.<l>.max.connections and
# listener.name.<l>.max.connection.creation.rate (quota/connections.py)
LISTENER_DYNAMIC_SUFFIXES = (".max.connections", ".max.connection.creation.rate")
# Dynamic only per broker, never as the cluster default (Kafka's DynamicBrokerConfig.PerBrokerConfigs).
PER_BROKER_CONFIGS = frozenset({"listeners"})
# The listener-prefixed configs (``listener.name.<l>.<base>``) allowed as the cluster default: the
# others (keystores, SASL mechanisms, JAAS, ...) are per broker only, refused at resource "" with
# INVALID_REQUEST (Kafka's DynamicBrokerConfig.ClusterLevelListenerConfigs; checked on 4.4).
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate",
                                            "num.network.threads"})
# Dynamic thread pools: Kafka refuses a new size above double or below half the current one
# (DynamicThreadPool.validateReconfiguration).
THREAD_POOL_CONFIGS = frozenset({"num.replica.fetchers", "num.io.threads", "num.network.threads",
                                 "background.threads", "num.recovery.threads.per.data.dir"})

for _d in _DEFS:   # (frozen: set in place, cheaper at import than a dataclasses.replace of each)
    object.__setattr__(_d, "read_only", _d.name not in DYNAMIC_BROKER_CONFIGS)
del _d
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
assert DYNAMIC_BROKER_CONFIGS <= set(BROKER_CONFIGS), DYNAMIC_BROKER_CONFIGS - set(BROKER_CONFIGS)


# ------------------------------------------------------------------ topic configs

def _topic(name: str, type_: str, broker_key: str | None = None, validator: _Validator | None = None,
           default: Any = None) -> ConfigDef:
    """A topic config: its default is the broker config ``broker_key``'s, or ``default`` when it
    has no broker-wide counterpart.  Kafka's LogConfig validators."""
    b = BROKER_CONFIGS[broker_key] if broker_key else None
    return ConfigDef(name, type_, b.default if b else default, b.doc if b else "Topic config %s." % name,
                     scope="topic", broker_key=broker_key, validator=validator, read_only=False,
                     unit=b.unit if b else None)


# The tiered-storage, DLQ and throttle keys are accepted and reported as Kafka 4.4 does; pykbroker
# has no remote storage, share-group DLQ or replication throttling behind them
# (remote.storage.enable=true is refused, see validate_topic_configs).  retention.bytes has no
# validator in Kafka: any value, negative = unbounded.
_TOPIC_DEFS = [
    # pykbroker keeps refusing an empty policy list (Kafka accepts it: neither delete nor compact).
    _topic("cleanup.policy", "list", "log.cleanup.policy",
           _ValidString(("compact", "delete"), each=True, non_empty=True)),
    _topic("compression.gzip.level", "int", "compression.gzip.level", _GzipLevel()),
    _topic("compression.lz4.level", "int", "compression.lz4.level", _Range(1, 17)),
    _topic("compression.type", "string", "compression.type",
           _in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _topic("compression.zstd.level", "int", "compression.zstd.level", _Range(-131072, 22)),
    _topic("delete.retention.ms", "long", "log.cleaner.delete.retention.ms", _ge(0)),
    _topic("errors.deadletterqueue.group.enable", "boolean", default=False),
    _topic("file.delete.delay.ms", "long", "log.segment.delete.delay.ms", _ge(0)),
    _topic("flush.messages", "long", "log.flush.interval.messages", _ge(1)),
    _topic("flush.ms", "long", "log.flush.interval.ms", _ge(0)),
    _topic("follower.replication.throttled.replicas", "list",
           validator=_ThrottledReplicas("follower.replication.throttled.replicas"), default=[]),
    _topic("index.interval.bytes", "int", "log.index.interval.bytes", _ge(0)),
    _topic("leader.replication.throttled.replicas", "list",
           validator=_ThrottledReplicas("leader.replication.throttled.replicas"), default=[]),
    _topic("local.retention.bytes", "long", "log.local.retention.bytes", _ge(-2)),
    _topic("local.retention.ms", "long", "log.local.retention.ms", _ge(-2)),
    _topic("max.compaction.lag.ms", "long", "log.cleaner.max.compaction.lag.ms", _ge(1)),
    _topic("max.decompressed.message.bytes", "int", "max.decompressed.message.bytes", _Range(1, 2147483639)),
    _topic("max.message.bytes", "int", "message.max.bytes", _ge(0)),
    _topic("message.timestamp.after.max.ms", "long", "log.message.timestamp.after.max.ms", _ge(0)),
    _topic("message.timestamp.before.max.ms", "long", "log.message.timestamp.before.max.ms", _ge(0)),
    _topic("message.timestamp.type", "string", "log.message.timestamp.type", _in("CreateTime", "LogAppendTime")),
    _topic("min.cleanable.dirty.ratio", "double", "log.cleaner.min.cleanable.ratio", _Range(0, 1)),
    _topic("min.compaction.lag.ms", "long", "log.cleaner.min.compaction.lag.ms", _ge(0)),
    _topic("min.insync.replicas", "int", "min.insync.replicas", _ge(1)),
    _topic("preallocate", "boolean", "log.preallocate"),
    _topic("remote.copy.lag.bytes", "long", "log.remote.copy.lag.bytes", _ge(-1)),
    _topic("remote.copy.lag.ms", "long", "log.remote.copy.lag.ms", _ge(-1)),
    _topic("remote.log.copy.disable", "boolean", default=False),
    _topic("remote.log.delete.on.disable", "boolean", default=False),
    _topic("remote.storage.enable", "boolean", default=False),
    _topic("retention.bytes", "long", "log.retention.bytes"),
    _topic("retention.ms", "long", "log.retention.ms", _ge(-1)),
    # Kafka refuses topic segments under 1 MiB too, unless its internal testing config allows
    # them; pykbroker keeps accepting small segments (tests and demos roll them quickly).
    _topic("segment.bytes", "int", "log.segment.bytes", _ge(14)),
    _topic("segment.index.bytes", "int", "log.index.size.max.bytes", _ge(4)),
    _topic("segment.jitter.ms", "long", validator=_ge(0), default=0),
    _topic("segment.ms", "long", "log.roll.ms", _ge(1)),
    _topic("unclean.leader.election.enable", "boolean", "unclean.leader.election.enable"),
]

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _TOPIC_DEFS}


# ------------------------------------------------------------------ the effective broker config

def _suggestion(key: str) -> str:
    """``; did you mean 'x'?`` for a misspelling of a known broker config, else empty."""
    import difflib   # only when a key is unknown (start-up time)

    close = difflib.get_close_matches(key, BROKER_CONFIGS, n=1, cutoff=0.85)
    return "; did you mean '%s'?" % close[0] if close else ""


class BrokerConfig:
    """Effective broker configuration: Kafka's defaults overlaid by server.properties and
    overrides.  ``config[key]`` is the typed value of a declared key (its default when unset);
    an undeclared key is a KeyError, so a caller cannot carry a default of its own."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        self._explicit: dict[str, Any] = {}
        # Dynamic layers (config/dynamic.py is their only writer): the cluster-wide default and
        # this broker's own, parsed; a key set in one overrides the layers below it, as in
        # Kafka: per broker > cluster default > server.properties/--override > built-in default.
        self._dynamic_default: dict[str, Any] = {}
        self._dynamic_broker: dict[str, Any] = {}
        # Supplied keys pykbroker does not declare: kept (raw) only to be reported.
        self.unused: dict[str, Any] = {}
        self.listener_overrides: dict[str, Any] = {}
        for k, v in (values or {}).items():
            self.set(k, v)
        self._check_consistency()

    def set(self, key: str, raw: Any) -> None:
        d = BROKER_CONFIGS.get(key)
        if d is None and key.startswith("listener.name."):
            # Kafka's per-listener overrides (listener.name.<name>.<key>), raw: read, parsed and
            # validated by the listener's security settings (security/listeners.py)
            self.listener_overrides[key] = raw
            return
        if d is None:
            self.unused[key] = raw
            return
        self._explicit[key] = d.parse(raw)

    def _check_consistency(self) -> None:
        """Checks across keys that Kafka makes at start-up too."""
        node, broker = self._explicit.get("node.id"), self._explicit.get("broker.id")
        if node is not None and broker is not None and broker != -1 and node != broker:
            raise ConfigError("Invalid value %s for configuration broker.id: must equal node.id (%s) "
                              "when both are set" % (broker, node), "broker.id")
        pmap = parse_protocol_map(self.get("listener.security.protocol.map"))
        for key in ("listeners", "advertised.listeners"):
            try:
                if key == "listeners" or self.get(key):
                    parse_listeners(self.get(key), pmap)
            except ValueError as e:
                raise ConfigError("Invalid value %s for configuration %s: %s" % (self.get(key), key, e), key)
        if not self.log_dirs:
            key = "log.dirs" if "log.dirs" in self._explicit else "log.dir"
            raise ConfigError("Invalid value %s for configuration %s: at least one log directory is required"
                              % (self.get(key), key), key)

    def warn_unused(self, logger: logging.Logger = log) -> None:
        """One warning line per supplied key pykbroker does not know (values are not logged:
        they may be secrets)."""
        for key in sorted(self.unused):
            logger.warning("ignoring config '%s': not a broker config pykbroker knows or uses%s", key,
                           _suggestion(key))

    def set_dynamic(self, per_broker: bool, values: dict[str, Any]) -> None:
        """Replace one dynamic layer with parsed values (keys declared in DYNAMIC_BROKER_CONFIGS)."""
        if per_broker:
            self._dynamic_broker = dict(values)
        else:
            self._dynamic_default = dict(values)

    def layers_set(self, key: str) -> bool:
        """Set in a dynamic layer or statically."""
        return key in self._dynamic_broker or key in self._dynamic_default or self.is_explicit(key)

    def dynamic_layer(self, per_broker: bool) -> dict[str, Any]:
        return dict(self._dynamic_broker if per_broker else self._dynamic_default)

    def source_of(self, keys: Iterable[str]) -> int:
        """The source of the highest layer setting any of ``keys`` (DEFAULT_CONFIG when none)."""
        for layer, source in ((self._dynamic_broker, SOURCE_DYNAMIC_BROKER),
                              (self._dynamic_default, SOURCE_DYNAMIC_DEFAULT)):
            if any(k in layer for k in keys):
                return source
        return SOURCE_STATIC_BROKER if any(self.is_explicit(k) for k in keys) else SOURCE_DEFAULT

    def static_value(self, key: str) -> Any:
        """The value without the dynamic layers (server.properties / --override / default)."""
        if key in self._explicit:
            return self._explicit[key]
        return self._default(key)

    def is_explicit(self, key: str) -> bool:
        """Set statically (server.properties / --override), whatever the dynamic layers say."""
        if key in ("node.id", "broker.id"):
            # Kafka copies a set node.id into broker.id (and back): both read as static.
            return "node.id" in self._explicit or "broker.id" in self._explicit
        return key in self._explicit

    def get(self, key: str) -> Any:
        if key in self._dynamic_broker:
            return self._dynamic_broker[key]
        if key in self._dynamic_default:
            return self._dynamic_default[key]
        if key in self._explicit:
            return self._explicit[key]
        return self._default(key)

    def _default(self, key: str) -> Any:
        if key in ("broker.id", "node.id"):
            other = "node.id" if key == "broker.id" else "broker.id"
            # Neither set: pykbroker runs as node 1 (Kafka requires node.id in KRaft mode).
            return self._explicit.get(other, 1)
        if key == "log.dirs":
            return self.get("log.dir")
        if key in CLUSTER_DEFAULTS and self._explicit.get("zookeeper.connect"):
            # A cluster member gets Kafka's own defaults for the internal topics' replication
            # (the single node's 1 would lose committed offsets with one broker).
            return CLUSTER_DEFAULTS[key]
        d = BROKER_CONFIGS.get(key)
        if d is None:
            raise KeyError("%r is not a broker config declared in pykbroker/config/broker.py" % key)
        return d.default

    def __getitem__(self, key: str) -> Any:
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

    def topic_default(self, name: str) -> tuple[Any, int]:
        """Broker-wide default of a topic config and its DescribeConfigs source."""
        d = TOPIC_CONFIGS[name]
        if d.broker_key is None:
            return d.default, SOURCE_DEFAULT
        if name == "retention.ms":
            return self.retention_ms(), self.source_of(("log.retention.ms", "log.retention.minutes",
                                                        "log.retention.hours"))
        if name == "segment.ms":
            return self.roll_ms(), self.source_of(("log.roll.ms", "log.roll.hours"))
        if name == "flush.ms":
            v = self.get("log.flush.interval.ms")
            if v is None:
                v = self.get("log.flush.scheduler.interval.ms")
            return v, self.source_of(("log.flush.interval.ms",))
        return self.get(d.broker_key), self.source_of((d.broker_key,))

    def effective_topic_config(self, topic_overrides: dict[str, Any]) -> dict[str, Any]:
        out = {name: self.topic_default(name)[0] for name in TOPIC_CONFIGS}
        out.update(topic_overrides)
        return out


def validate_topic_configs(raw: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse topic config overrides; unknown names or bad values raise ConfigError
    (answered as INVALID_CONFIG, like Kafka)."""
    out = {}
    for k, v in raw.items():
        d = TOPIC_CONFIGS.get(k)
        if d is None:
            raise ConfigError("Unknown topic config name: %s" % k, k)
        if v is None:
            raise ConfigError("Null value not supported for topic configs: %s" % k, k)
        out[k] = d.parse(v)
    if out.get("remote.storage.enable"):
        # Kafka's answer when remote.log.storage.system.enable is false on the broker, which
        # it always is here: pykbroker has no tiered storage.
        raise ConfigError("Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.", "remote.storage.enable")
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


def inter_broker_listener(config: BrokerConfig | Mapping[str, Any]) -> Listener:
    """The listener other brokers reach this one through: ``inter.broker.listener.name``, else
    the listener named by ``security.inter.broker.protocol`` (Kafka's rule), else the first."""
    ls = parse_listeners(config["listeners"], parse_protocol_map(config["listener.security.protocol.map"]))
    name = config["inter.broker.listener.name"]
    want = name.upper() if name else config["security.inter.broker.protocol"]
    for li in ls:
        if li.name == want:
            return li
    return ls[0]


def is_password_key(key: str) -> bool:
    """A PASSWORD-type config (keystore passwords, inline PEM keys, JAAS configs), plain or
    under a ``listener.name.<l>.[<mechanism>.]`` prefix."""
    base = key
    if key.startswith("listener.name."):
        parts = key.split(".")
        base = ".".join(parts[3:])
        if base not in BROKER_CONFIGS and len(parts) > 4:
            base = ".".join(parts[4:])   # listener.name.<l>.<mechanism>.<key>
    d = BROKER_CONFIGS.get(base)
    return (d is not None and d.type == "password") or base.endswith(("password", "sasl.jaas.config"))


def redacted(configs: Mapping[str, Any]) -> dict:
    """``configs`` for a log line: the value of every PASSWORD-type key (keystore passwords, inline
    PEM keys, JAAS configs), plain or under a ``listener.name.<l>.[<mechanism>.]`` prefix, shown
    as ``[hidden]``, as Kafka's log lines show them."""
    return {key: "[hidden]" if value is not None and is_password_key(key) else value
            for key, value in configs.items()}
