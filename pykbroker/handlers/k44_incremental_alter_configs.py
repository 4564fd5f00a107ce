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

BROKER (4): dynamic broker configs (pykbroker/config/dynamic.py).  The name must be empty (the
cluster-wide default) or this node's id (INVALID_REQUEST "Node id must be an integer, but it is:
X" / "Unexpected broker id, expected N, but received X").  The operations apply in request order
to the resource's stored dynamic configs: SET, DELETE (a no-op when not set, even for a static
config), APPEND/SUBTRACT on LIST configs only (else INVALID_CONFIG "Config value append is not
allowed for config key: X"), starting from the stored value or the config's built-in default.
The configs set are then validated as Kafka does (INVALID_REQUEST "Cannot update these configs
dynamically: [a, b]", "Cannot update these configs at default cluster level, broker id must be
specified: [...]", "Invalid value x for configuration k: reason").  Then Kafka 4.4's ELR rule
(eligible leader replicas are on in a freshly formatted Kafka 4.4): DELETE of
``min.insync.replicas`` at the cluster default is INVALID_CONFIG "Cluster-level
min.insync.replicas cannot be removed while ELR is enabled.", any operation on it at this node's
id INVALID_CONFIG "Broker-level min.insync.replicas cannot be altered while ELR is enabled.";
``validate_only`` stops there.
Otherwise the controller stores the new set (the metadata file, or ``/config/brokers/...`` in
ZooKeeper) and the broker applies it before the answer: DescribeConfigs shows it at once and the
topics without an override follow it.

BROKER_LOGGER (8): Kafka's RuntimeLoggerManager rules on this process's Python loggers: SET a
level among DEBUG, ERROR, FATAL, INFO, TRACE, WARN on an existing logger ("root" or a
``pykbroker...`` logger), DELETE resets a logger to inherit (not the root); APPEND/SUBTRACT are
INVALID_REQUEST.  Not persisted, as in Kafka.

GROUP (32): dynamic group configs (pykbroker/config/group.py).  An empty name is INVALID_REQUEST
"Default group resources are not allowed."; SET / DELETE apply to the group's stored configs,
APPEND / SUBTRACT are INVALID_CONFIG "Can't APPEND to key X because its type is not LIST." (Kafka's
controller knows no group config as a LIST, not even streams.rack.aware.assignment.tags).  The
resulting set is validated as Kafka's GroupConfig.validate (INVALID_CONFIG "Unknown group config
name: X", "Invalid value v for configuration k: reason", "k must be in the range a to b
inclusive.", ...); ``validate_only`` stops there; otherwise the controller stores it (the
metadata file, or ``/config/groups/<group>`` in ZooKeeper) before the answer.  A group needs not
exist.

CLIENT_METRICS (16): INVALID_REQUEST "Unsupported resource type: X" (not built).

Version notes: v1 is flexible; no other difference.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..acl.requirements import needs
from ..config import BROKER_CONFIGS, TOPIC_CONFIGS
from ..server.dispatch import RequestContext
from .support import config_resources
from .support.config_resources import (APPEND, BROKER, BROKER_LOGGER, DELETE, GROUP, MIN_ISR, OP_NAMES as _OP_NAMES, SET, SUBTRACT,
                               TOPIC, alter_broker, alter_each, alter_group, alter_topic, broker_entity, check_broker_name,
                               check_config_list, invalid_config as _invalid_config,
                               invalid_request as _invalid_request, java_int as _java_int, unsupported_type)
from .support.config_resources import ACL_ROLES as _config_acl
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from .support.services import BrokerServices

API_KEY = 44
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the rows config_resources.alter_each checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_config_acl)

# the dispatcher's answer when handle fails: every resource with the code (k33's too)
error_response = config_resources.error_response

# Kafka's LogLevelConfig levels, listed sorted as RuntimeLoggerManager prints them.
_LOG_LEVELS = {"DEBUG": logging.DEBUG, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
               "INFO": logging.INFO, "TRACE": logging.DEBUG, "WARN": logging.WARNING}

log = logging.getLogger("pykbroker.configs")


# ---------------------------------------------------------------------- topic (controller side)
def _raw_overrides(info: Any) -> dict[str, str]:
    # a stored override is never None (a deleted one leaves the dict); the filter states it for the types
    if not info:
        return {}
    return {k: raw for k, v in info.configs.items() if (raw := TOPIC_CONFIGS[k].render(v)) is not None}


def _list_parts(value: str | None) -> list[str]:
    return [p for p in value.split(",") if p] if value else []


def apply_incremental(current: dict[str, str], configs: Any) -> dict[str, str]:
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


# ---------------------------------------------------------------------- broker logger
def _logger_exists(name: str) -> bool:
    return name == "root" or isinstance(logging.root.manager.loggerDict.get(name), logging.Logger)


def _alter_loggers(services: BrokerServices, res: dict, validate_only: bool) -> None:
    """Kafka's RuntimeLoggerManager.applyChangesForResource."""
    name = res["resource_name"]
    try:
        node = _java_int(name)
    except ValueError:
        raise _invalid_request("Node id must be an integer, but it is: %s" % name) from None
    if node != services.node_id:
        # Kafka's message prints its own id twice.
        raise _invalid_request("Unexpected node id. Expected %d, but received %d" % (services.node_id, services.node_id))
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
async def _alter_broker(services: BrokerServices, res: dict, validate_only: bool) -> None:
    name = res["resource_name"]
    check_broker_name(services, name)
    new = services.controller.broker_configs(broker_entity(services, name))
    changed: list[str] = []   # configs set, in request order (a later DELETE drops one)
    for c in res["configs"]:
        op, key = c["config_operation"], c["name"]
        if op not in _OP_NAMES:
            raise _invalid_request("Unknown operations type %d" % op)
        if op in (APPEND, SUBTRACT):
            d = BROKER_CONFIGS.get(key)
            if d is None or d.type != "list":
                raise _invalid_config("Config value %s is not allowed for config key: %s"
                                      % ("append" if op == APPEND else "subtract", key))
            # Kafka starts from the stored value or the config's built-in default.
            parts = _list_parts(new[key] if key in new else d.render(d.default))
            for v in c["value"].split(","):
                if op == APPEND and v not in parts:
                    parts.append(v)
                elif op == SUBTRACT and v in parts:
                    parts.remove(v)
            new[key] = ",".join(parts)
        elif op == SET:
            new[key] = c["value"]
        else:
            new.pop(key, None)
        if op == DELETE:
            if key in changed:
                changed.remove(key)
        elif key not in changed:
            changed.append(key)
    # Kafka's controller writes a record for every name the request lists (KAFKA-14136), so
    # any operation on min.insync.replicas counts for its ELR rule, a DELETE of it as removal.
    await alter_broker(services, name, new, {k: new[k] for k in changed}, validate_only,
                       altered={c["name"] for c in res["configs"]},
                       removes_cluster_min_isr=any(c["name"] == MIN_ISR and c["config_operation"] == DELETE
                                                   for c in res["configs"]))


async def _one(ctx: RequestContext, res: dict, validate_only: bool) -> None:
    check_config_list(res["configs"], lambda c: c["config_operation"] == DELETE)
    rtype, name = res["resource_type"], res["resource_name"]
    if rtype == TOPIC:
        info = ctx.services.metadata_cache.get(name)
        raw = apply_incremental(_raw_overrides(info), res["configs"])
        await alter_topic(ctx.services, name, raw, validate_only)
    elif rtype == BROKER:
        await _alter_broker(ctx.services, res, validate_only)
    elif rtype == BROKER_LOGGER:
        _alter_loggers(ctx.services, res, validate_only)
    elif rtype == GROUP:
        new = ctx.services.controller.group_configs(name) if name else {}
        for c in res["configs"]:
            op, key = c["config_operation"], c["name"]
            if op == SET:
                new[key] = c["value"]
            elif op == DELETE:
                new.pop(key, None)
            elif op in (APPEND, SUBTRACT):
                raise _invalid_config("Can't %s to key %s because its type is not LIST." % (_OP_NAMES[op], key))
            else:
                raise _invalid_request("Unknown operations type %d" % op)
        await alter_group(ctx.services, name, new, validate_only)
    else:
        raise unsupported_type(rtype)


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await alter_each(ctx, request, _one)
