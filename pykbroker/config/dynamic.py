"""Dynamic broker configs: Kafka's DynamicBrokerConfig, as far as pykbroker has the features.

A config in ``config.DYNAMIC_BROKER_CONFIGS`` can be changed at run time through
IncrementalAlterConfigs / AlterConfigs on a BROKER resource, for this broker (resource name = its
id) or for every broker (the cluster-wide default, resource name "").  The controller stores
them (single node: ``broker_configs`` in ``__pykbroker_metadata.json`` in the first log dir;
ZooKeeper: ``/config/brokers/<id>`` and ``/config/brokers/<default>`` plus Kafka's
``/config/changes/config_change_`` notification) and publishes every loaded or changed set to
``DynamicBrokerConfig.on_change``, the only writer of ``BrokerConfig``'s dynamic layers.  The
precedence is Kafka's: this broker's dynamic value > the dynamic cluster default > the static
value (server.properties / --override) > the built-in default; DescribeConfigs reports the
layers as DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG / STATIC_BROKER_CONFIG /
DEFAULT_CONFIG.

Taking effect without a restart (what Kafka's reconfigurables do, where pykbroker has the
feature): the ``log.*`` / ``message.max.bytes`` / ``min.insync.replicas`` /
``unclean.leader.election.enable`` / ``compression.*`` family are the defaults of the topic
configs, so every topic's effective config is recomputed and pushed to its logs and partitions
(``ReplicaManager.on_config_change``, as Kafka's DynamicLogConfig updates every log without an
override); the log cleaner's ``log.cleaner.backoff.ms`` / ``dedupe.buffer.size`` /
``io.buffer.load.factor`` apply from its next pass; ``transaction.partition.verification.enable``
from the next transactional produce; ``producer.id.expiration.ms`` is read at each expiry pass.
``num.replica.fetchers`` is accepted and reported (one fetcher per source broker whatever it
says, SKIPPED.md).  ``listeners`` is dynamic in Kafka (read_only false) but pykbroker cannot
rebind its sockets at run time: refused with INVALID_REQUEST.

Validation (``validate_change``) follows Kafka's DynamicBrokerConfig.validateConfigs, in its
order, with its texts (all INVALID_REQUEST): declared configs that are not dynamic "Cannot update
these configs dynamically: [a, b]", per-broker-only configs at the cluster default "Cannot update
these configs at default cluster level, broker id must be specified: [listeners]" (``listeners``
and every ``listener.name.<l>.<config>`` but the cluster-level max.connections,
max.connection.creation.rate and num.network.threads; the names in
Java HashSet order, as Kafka prints its set), then every value parsed with the config's type and
validator ("Invalid value x for configuration k: reason"), then the thread-pool bounds (a new
size within half and double the current one).  A name pykbroker does not declare is stored and
ignored, as Kafka stores and ignores a name it does not know.
"""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .broker import (BROKER_CONFIGS, CLUSTER_LEVEL_LISTENER_CONFIGS, DYNAMIC_BROKER_CONFIGS,
                     LISTENER_DYNAMIC_SUFFIXES, PER_BROKER_CONFIGS, THREAD_POOL_CONFIGS, ConfigError)

if TYPE_CHECKING:
    from ..cluster.metadata_cache import MetadataCache
    from ..cluster.replica_manager import ReplicaManager
    from .broker import BrokerConfig

log = logging.getLogger("pykbroker.configs")


# Values only a broker's KafkaConfig checks (KafkaConfig.validateValues, not the ConfigDef): refused
# for one broker (its ConfigAdminManager validates), accepted as the cluster default, checked
# against Apache Kafka 4.4.
BROKER_VALIDATED_ONLY = frozenset({"max.connections.per.ip.overrides"})


class DynamicConfigError(ValueError):
    """A dynamic broker config change Kafka refuses (answered INVALID_REQUEST)."""


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")   # Java hashes UTF-16 code units
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_set_str(names: Iterable[str]) -> str:
    """How Kafka prints a java.util.HashSet of these names: "[a, b]" in bucket order (the
    spread hash ``h ^ h >>> 16`` masked by the table size: 16, doubled past 3/4 full), names
    of one bucket in insertion order."""
    names = list(dict.fromkeys(names))
    cap = 16
    while len(names) > cap * 3 // 4:
        cap *= 2

    def bucket(n: str) -> int:
        h = _java_string_hash(n)
        return (h ^ (h >> 16)) & (cap - 1)
    return "[%s]" % ", ".join(sorted(names, key=bucket))


def _per_broker_listener_config(name: str) -> bool:
    """``listener.name.<l>.<base>`` whose base is not one of the cluster-level listener configs
    (Kafka's ListenerConfigRegex: the listener name has no dot, the base is the rest)."""
    m = _LISTENER_CONFIG.fullmatch(name)
    return m is not None and m.group(1) not in CLUSTER_LEVEL_LISTENER_CONFIGS


_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")


def validate_change(config: BrokerConfig, per_broker: bool, values: dict[str, str]) -> None:
    """Kafka's checks on the configs a request sets (``values``: name -> new string value)."""
    non_dynamic = [k for k in values if k in BROKER_CONFIGS and k not in DYNAMIC_BROKER_CONFIGS]
    if non_dynamic:
        raise DynamicConfigError("Cannot update these configs dynamically: %s" % java_set_str(non_dynamic))
    if not per_broker:
        only_per_broker = [k for k in values if k in PER_BROKER_CONFIGS or _per_broker_listener_config(k)]
        if only_per_broker:
            raise DynamicConfigError("Cannot update these configs at default cluster level, broker id must be "
                                     "specified: %s" % java_set_str(only_per_broker))
    parsed = {}
    for k, v in values.items():
        d = BROKER_CONFIGS.get(k)
        if d is None:
            continue
        if not per_broker and k in BROKER_VALIDATED_ONLY:
            # Kafka's controller stores a cluster default without KafkaConfig's cross checks;
            # each broker then fails to apply a bad one and keeps what it had (parse_layer)
            continue
        try:
            parsed[k] = d.parse(v)
        except ConfigError as e:
            raise DynamicConfigError(str(e)) from None
    for k, v in values.items():
        # listener.name.<l>.max.connections / .max.connection.creation.rate: Kafka reconfigures
        # them per listener (quota/connections.py), so a bad value is refused as the plain key's
        if k.startswith("listener.name.") and v is not None:
            base = next((x[1:] for x in LISTENER_DYNAMIC_SUFFIXES if k.endswith(x)), None)
            if base is not None:
                try:
                    BROKER_CONFIGS[base].parse(v)
                except ConfigError as e:
                    raise DynamicConfigError(str(e)) from None   # Kafka names the plain key
    for k in THREAD_POOL_CONFIGS & set(parsed):
        new, old = parsed[k], config[k]
        why = None
        if new <= 0:
            why = "value should be at least 1"
        elif new < old / 2:
            why = "value should be at least half the current value %d" % old
        elif new > old * 2:
            why = "value should not be greater than double the current value %d" % old
        if why:
            # Kafka wraps the pool's ConfigException in another one: its text reads this way.
            raise DynamicConfigError("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread "
                                     "count update validation failed for %s=%d, %s for configuration Invalid "
                                     "dynamic configuration" % (k, new, why))
    if "listeners" in parsed and parsed["listeners"] != config["listeners"]:
        # Kafka rebinds its listeners; pykbroker's sockets are bound once (SKIPPED.md).
        raise DynamicConfigError("pykbroker cannot change listeners at run time: set them in server.properties")


def parse_layer(entity: str, raw: dict[str, str]) -> dict[str, Any]:
    """The typed values of a stored layer: undeclared names are ignored, and a value this
    version refuses (written by another version or a tool) is logged and skipped."""
    out = {}
    for k, v in raw.items():
        if k not in DYNAMIC_BROKER_CONFIGS:
            continue
        try:
            out[k] = BROKER_CONFIGS[k].parse(v)
        except ConfigError as e:
            log.warning("ignoring dynamic config of %s: %s", entity or "the cluster default", e)
    return out


class DynamicBrokerConfig:
    """Applies the controller's published dynamic configs to this broker (module docstring).
    ``reconfigurables``: objects with ``reconfigure(config)`` (the log manager, the transaction
    coordinator once built), added with ``add_reconfigurable``."""

    def __init__(self, config: BrokerConfig, node_id: int, metadata_cache: MetadataCache,
                 replica_manager: ReplicaManager) -> None:
        self.config = config
        self.node_id = node_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self._reconfigurables: list = []
        # called with this broker's own stored dynamic set after each change (the broker hands in
        # security/reload.py's keystore update for its secured listeners); a hook, so this module
        # does not import the security package, which imports it
        self._per_broker_hooks: list = []
        self._decode: Callable[[str, dict[str, str]], dict[str, str]] | None = None

    def add_reconfigurable(self, component: Any) -> None:
        self._reconfigurables.append(component)

    def set_password_decoder(self, decode: Callable[[str, dict[str, str]], dict[str, str]]) -> None:
        """``decode(entity, raw) -> raw`` applied to each stored set before it is read: the
        broker's password.encoder.secret decoding (password_encoder.py, handed in so this
        module does not depend on it)."""
        self._decode = decode

    def add_per_broker_hook(self, hook: Callable[[dict[str, str]], Any]) -> None:
        """``hook(raw)`` after this broker's own dynamic set changed (not the cluster default)."""
        self._per_broker_hooks.append(hook)

    def on_change(self, entity: str, raw: dict[str, str]) -> None:
        if entity == "":
            per_broker = False
        elif entity == str(self.node_id):
            per_broker = True
        else:
            return   # another broker's
        if self._decode is not None:
            raw = self._decode(entity, raw)
        self.config.set_dynamic(per_broker, parse_layer(entity, raw))
        if per_broker:
            # e.g. listener.name.<l>.ssl.keystore.*: Kafka's dynamic keystore update (security/reload.py)
            for hook in self._per_broker_hooks:
                hook(raw)
        # Every topic's effective config follows the broker defaults (a topic override wins).
        for info in list(self.metadata_cache.topics.values()):
            self.replica_manager.on_config_change(info)
        for component in self._reconfigurables:
            try:
                component.reconfigure(self.config)
            except Exception:
                log.exception("reconfiguration of %r failed", component)
