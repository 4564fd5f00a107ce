"""IncrementalAlterConfigs (key 44), versions 0-1.

Behaviour follows Apache Kafka on a KRaft broker: the broker's preprocessing step
(ConfigAdminManager.preprocess) and then the controller's (ConfigurationControlManager +
ControllerConfigurationValidator), answered per resource in request order.

Preprocessing, per resource:
- The same (type, name) twice in one request: both get INVALID_REQUEST "Each resource must
  appear at most once.".
- The same config name twice in one resource: INVALID_REQUEST "Error due to duplicate config
  keys"; a null value for SET/APPEND/SUBTRACT: INVALID_REQUEST "Null value not supported for :
  a, b".
- An undefined resource type: INVALID_REQUEST "Unknown resource type N".

TOPIC (2), as the controller does it:
- Operations apply in request order to the topic's current overrides: SET replaces, DELETE
  removes (deleting an override that is not there, even an unknown name, is a no-op), APPEND /
  SUBTRACT only on LIST configs (``cleanup.policy``), else INVALID_CONFIG "Can't APPEND to key X
  because its type is not LIST."; they start from the override or, without one, from Kafka's
  built-in default of the topic config (not the broker's ``log.*`` value: Kafka's quirk), APPEND
  skips values already present, SUBTRACT removes them.
- Then the resulting override set is validated: empty name INVALID_REQUEST "Default topic
  resources are not allowed.", an illegal name INVALID_TOPIC_EXCEPTION, unknown names
  INVALID_CONFIG "Unknown topic config name: X", bad values INVALID_CONFIG with Kafka's
  ConfigException text, min.compaction.lag.ms > max.compaction.lag.ms INVALID_CONFIG "conflict
  topic config setting ...".  Only then existence: UNKNOWN_TOPIC_OR_PARTITION "The topic 'X' does
  not exist." (so an invalid config on a missing topic is INVALID_CONFIG, as in Kafka).
- ``validate_only`` stops there.  Otherwise the overrides are persisted (the Controller) and
  pushed to the topic's open partitions (ReplicaManager.on_config_change) before the answer.

BROKER (4): Kafka allows dynamic broker configs; pykbroker has none (every broker config is
static, from server.properties / --override).  So, as Kafka answers for a config it cannot update
dynamically: INVALID_REQUEST "Cannot update these configs dynamically: Set(a, b)" for every config
SET/APPENDed/SUBTRACTed.  Before that, the name must be empty (cluster default) or this node's id
(INVALID_REQUEST "Node id must be an integer, but it is: X" / "Unexpected broker id, expected N,
but received X"), and APPEND/SUBTRACT on a non-list config is INVALID_CONFIG "Config value append
is not allowed for config key: X".  DELETE-only changes succeed (there is nothing to delete).

BROKER_LOGGER (8): Kafka's RuntimeLoggerManager rules on this process's Python loggers: SET a
level among DEBUG, ERROR, FATAL, INFO, TRACE, WARN on an existing logger ("root" or a
``pykbroker...`` logger), DELETE resets a logger to inherit (not the root); APPEND/SUBTRACT are
INVALID_REQUEST.  Not persisted, as in Kafka.

GROUP (32) / CLIENT_METRICS (16): INVALID_REQUEST "Unsupported resource type: X" (not built).

Version notes: v1 is flexible; no other difference.
"""
from __future__ import annotations

import logging
import re

from ..cluster.metadata import validate_topic_name
from ..config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigError, validate_topic_configs
from ..protocol.errors import ErrorCode, KafkaError

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_TYPE_NAMES = {CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}

# Kafka's LogLevelConfig levels, listed sorted as RuntimeLoggerManager prints them.
_LOG_LEVELS = {"DEBUG": logging.DEBUG, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
               "INFO": logging.INFO, "TRACE": logging.DEBUG, "WARN": logging.WARNING}

log = logging.getLogger("pykbroker.configs")


def _java_int(s: str) -> int:
    """Java's Integer.parseInt: no surrounding spaces, no '_' (unlike Python's int)."""
    if not re.fullmatch(r"[+-]?[0-9]+", s) or not -2**31 <= int(s) < 2**31:
        raise ValueError(s)
    return int(s)


def _invalid_request(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, msg)


def _invalid_config(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, msg)


# ---------------------------------------------------------------------- preprocessing (broker side)
def duplicate_resources(resources) -> set[int]:
    """Indexes of resources whose (type, name) appears more than once."""
    seen: dict[tuple, int] = {}
    dup: set[int] = set()
    for i, r in enumerate(resources):
        key = (r["resource_type"], r["resource_name"])
        if key in seen:
            dup.update((seen[key], i))
        else:
            seen[key] = i
    return dup


def check_config_list(configs, null_allowed) -> None:
    """Duplicate names and null values (``null_allowed(entry)`` says when null is fine)."""
    names = [c["name"] for c in configs]
    if len(set(names)) != len(names):
        raise _invalid_request("Error due to duplicate config keys")
    nulls = [c["name"] for c in configs if c["value"] is None and not null_allowed(c)]
    if nulls:
        raise _invalid_request("Null value not supported for : " + ", ".join(nulls))


def check_broker_name(broker, name: str) -> None:
    """ConfigAdminManager.validateResourceNameIsCurrentNodeId (empty = cluster default)."""
    if not name:
        return
    try:
        node = _java_int(name)
    except ValueError:
        raise _invalid_request("Node id must be an integer, but it is: %s" % name) from None
    if node != broker.node_id:
        raise _invalid_request("Unexpected broker id, expected %d, but received %s" % (broker.node_id, name))


def refuse_static_broker_configs(names: list[str]) -> None:
    """No broker config is dynamic in pykbroker: Kafka's DynamicBrokerConfig.validateConfigs
    text for non-dynamic configs (a ConfigException turned into INVALID_REQUEST, KAFKA-13609)."""
    if names:
        # Scala prints a small immutable Set as Set(...), a larger one as HashSet(...).
        kind = "Set" if len(names) <= 4 else "HashSet"
        raise _invalid_request("Cannot update these configs dynamically: %s(%s)" % (kind, ", ".join(names)))


def unsupported_type(rtype: int) -> KafkaError:
    if rtype in _TYPE_NAMES:
        # Kafka supports group and client-metrics configs; pykbroker does not (SKIPPED.md).
        return _invalid_request("Unsupported resource type: %s" % _TYPE_NAMES[rtype])
    return _invalid_request("Unknown resource type %d" % rtype)


# ---------------------------------------------------------------------- topic (controller side)
def _raw_overrides(info) -> dict[str, str]:
    return {k: TOPIC_CONFIGS[k].render(v) for k, v in info.configs.items()} if info else {}


def _list_parts(value: str | None) -> list[str]:
    return [p for p in value.split(",") if p] if value else []


def apply_incremental(current: dict[str, str], configs) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource on raw string overrides."""
    out = dict(current)
    for c in configs:
        key, op, value = c["name"], c["config_operation"], c["value"]
        if op == SET:
            out[key] = value
        elif op == DELETE:
            out.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            d = TOPIC_CONFIGS.get(key)
            if d is None or d.type != "list":
                raise _invalid_config("Can't %s to key %s because its type is not LIST." % (_OP_NAMES[op], key))
            base = out.get(key)
            parts = _list_parts(base if base is not None else d.render(d.default))
            for v in value.split(","):
                if op == APPEND and v not in parts:
                    parts.append(v)
                elif op == SUBTRACT and v in parts:
                    parts.remove(v)
            out[key] = ",".join(parts)
        else:
            raise _invalid_request("Unknown operations type %d" % op)
    return out


def validate_topic_overrides(broker, name: str, raw: dict[str, str]) -> dict:
    """ControllerConfigurationValidator.validate for a topic, then the existence check.
    Returns the parsed overrides."""
    if not name:
        raise _invalid_request("Default topic resources are not allowed.")
    validate_topic_name(name)
    for key in raw:  # LogConfig.validateNames runs over every name before any value is parsed
        if key not in TOPIC_CONFIGS:
            raise _invalid_config("Unknown topic config name: %s" % key)
    try:
        parsed = validate_topic_configs(raw)
    except ConfigError as e:
        raise _invalid_config(str(e)) from None
    effective = broker.config.effective_topic_config(parsed)
    lo, hi = effective["min.compaction.lag.ms"], effective["max.compaction.lag.ms"]
    if lo is not None and hi is not None and lo > hi:
        raise _invalid_config("conflict topic config setting min.compaction.lag.ms (%d) > "
                              "max.compaction.lag.ms (%d)" % (lo, hi))
    if broker.metadata_cache.get(name) is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic '%s' does not exist." % name)
    return parsed


async def alter_topic(broker, name: str, raw: dict[str, str], validate_only: bool) -> None:
    parsed = validate_topic_overrides(broker, name, raw)
    if validate_only:
        return
    info = broker.metadata_cache.get(name)
    if parsed == info.configs:
        return  # nothing changes (Kafka writes no record either)
    # No await since the overrides were read: alter_topic_configs swaps them in before its
    # first await, so concurrent alterations of one topic never lose an update.
    await broker.controller.alter_topic_configs(name, parsed)


# ---------------------------------------------------------------------- broker logger
def _logger_exists(name: str) -> bool:
    return name == "root" or isinstance(logging.root.manager.loggerDict.get(name), logging.Logger)


def _alter_loggers(broker, res, validate_only: bool) -> None:
    """Kafka's RuntimeLoggerManager.applyChangesForResource."""
    name = res["resource_name"]
    try:
        node = _java_int(name)
    except ValueError:
        raise _invalid_request("Node id must be an integer, but it is: %s" % name) from None
    if node != broker.node_id:
        # Kafka's message prints its own id twice.
        raise _invalid_request("Unexpected node id. Expected %d, but received %d" % (broker.node_id, broker.node_id))
    for c in res["configs"]:
        op, logger = c["config_operation"], c["name"]
        if op == SET:
            if not _logger_exists(logger):
                raise _invalid_config("Logger %s does not exist!" % logger)
            if c["value"] not in _LOG_LEVELS:
                raise _invalid_config("Cannot set the log level of %s to %s as it is not a supported log level. "
                                      "Valid log levels are %s" % (logger, c["value"], ", ".join(_LOG_LEVELS)))
        elif op == DELETE:
            if not _logger_exists(logger):
                raise _invalid_config("Logger %s does not exist!" % logger)
            if logger == "root":
                raise _invalid_request("Removing the log level of the root logger is not allowed")
        elif op in (APPEND, SUBTRACT):
            raise _invalid_request("%s operation is not allowed for the BROKER_LOGGER resource" % _OP_NAMES[op])
        else:
            raise _invalid_request("Unknown operation type %d is not allowed for the BROKER_LOGGER resource" % op)
    if validate_only:
        return
    for c in res["configs"]:
        target = logging.getLogger() if c["name"] == "root" else logging.getLogger(c["name"])
        if c["config_operation"] == SET:
            target.setLevel(_LOG_LEVELS[c["value"]])
            log.warning("Updated the log level of %s to %s", c["name"], c["value"])
        else:
            target.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", c["name"])


# ---------------------------------------------------------------------- handler
def _broker_change(broker, res) -> None:
    check_broker_name(broker, res["resource_name"])
    props: list[str] = []
    for c in res["configs"]:
        op, key = c["config_operation"], c["name"]
        if op not in _OP_NAMES:
            raise _invalid_request("Unknown operations type %d" % op)
        if op in (APPEND, SUBTRACT):
            d = BROKER_CONFIGS.get(key)
            if d is None or d.type != "list":
                raise _invalid_config("Config value %s is not allowed for config key: %s"
                                      % ("append" if op == APPEND else "subtract", key))
        if op == DELETE:
            if key in props:
                props.remove(key)
        elif key not in props:
            props.append(key)
    refuse_static_broker_configs(props)


async def _one(ctx, res, validate_only: bool) -> None:
    check_config_list(res["configs"], lambda c: c["config_operation"] == DELETE)
    rtype, name = res["resource_type"], res["resource_name"]
    if rtype == TOPIC:
        info = ctx.broker.metadata_cache.get(name)
        raw = apply_incremental(_raw_overrides(info), res["configs"])
        await alter_topic(ctx.broker, name, raw, validate_only)
    elif rtype == BROKER:
        _broker_change(ctx.broker, res)
    elif rtype == BROKER_LOGGER:
        _alter_loggers(ctx.broker, res, validate_only)
    else:
        raise unsupported_type(rtype)


async def handle(ctx, request):
    resources = request["resources"]
    dup = duplicate_resources(resources)
    out = []
    for i, res in enumerate(resources):
        code, msg = 0, None
        try:
            if i in dup:
                raise _invalid_request("Each resource must appear at most once.")
            await _one(ctx, res, request["validate_only"])
        except KafkaError as e:
            code, msg = int(e.code), e.message
        out.append({"error_code": code, "error_message": msg,
                    "resource_type": res["resource_type"], "resource_name": res["resource_name"]})
    return {"throttle_time_ms": 0, "responses": out}


def error_response(ctx, request, code):
    return {"throttle_time_ms": 0, "responses": [
        {"error_code": int(code), "error_message": None, "resource_type": r["resource_type"],
         "resource_name": r["resource_name"]} for r in request.get("resources") or []]}
