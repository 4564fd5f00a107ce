"""DescribeConfigs (key 32), versions 1-4.

Behaviour (Apache Kafka ConfigHelper.describeConfigs on a KRaft broker):
- TOPIC (2): the name is validated (INVALID_TOPIC_EXCEPTION with Kafka's message); an unknown topic
  is UNKNOWN_TOPIC_OR_PARTITION; otherwise every topic config with its effective value, read_only
  false.  Source: TOPIC_CONFIG (1) for the topic's overrides, else the first broker synonym found
  (STATIC_BROKER_CONFIG (4) when set in server.properties/--override, DEFAULT_CONFIG (5) when it is
  the built-in default), DEFAULT_CONFIG when none.
- BROKER (4): resource name = this node's id: every broker config pykbroker knows except Kafka's
  internal ones (cluster.id, producer.id.expiration.check.interval.ms), with the static value
  (null when unset and without a default, as Kafka: log.dirs, node.id), source
  DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG
  (the highest layer setting it, pykbroker/config/dynamic.py), the type Kafka reports (listeners
  and log dirs are LISTs), read_only false exactly for the configs Kafka 4.4 can change at run
  time (config.DYNAMIC_BROKER_CONFIGS).  With node.id set, broker.id reads as static too
  (Kafka copies one into the other), with Kafka's default -1 as its default synonym.  Empty name =
  the cluster-wide dynamic defaults that are set (value, source DYNAMIC_DEFAULT_BROKER_CONFIG,
  synonyms of that source only).  Another id: INVALID_REQUEST "Unexpected
  broker id, expected N or empty string, but received X"; a non-number: INVALID_REQUEST "Broker
  id must be an integer, but it is: X".
- BROKER_LOGGER (8): the root logger's level (source DYNAMIC_BROKER_LOGGER_CONFIG).
- GROUP (32): every public group config (pykbroker/config/group.py, Kafka's GroupConfig) and the
  internal ones that are set, read_only false: a stored value has source GROUP_CONFIG (8) and
  the value as parsed (trimmed), else the broker config it falls back to (synonym
  ``group.consumer.session.timeout.ms`` ..., with that config's source) or the literal default
  (synonym of the same name, DEFAULT_CONFIG).  The group needs not exist.  An empty name:
  INVALID_REQUEST "Group name must not be empty".  Kafka lists them in its hash map's order;
  pykbroker lists the set internal ones first, then Kafka's order of the public ones.
- CLIENT_METRICS: INVALID_REQUEST "Unsupported resource type".
  An undefined type id fails the whole request with INVALID_REQUEST, as Kafka does.
- ``configuration_keys`` (non-null) filters the configs returned; unknown keys are ignored.
- Synonyms (v1+, when ``include_synonyms``) follow Kafka's order: topic override, dynamic broker,
  dynamic default, static broker, default — restricted to the broker config the topic config
  maps to and its synonyms (e.g. retention.ms → log.retention.ms/.minutes/.hours).
Version notes: v3 adds config_type and (when ``include_documentation``) documentation; v4 is
flexible.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..acl.requirements import needs
from ..config import (BROKER_CONFIGS, SOURCE_DEFAULT, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT,
                      SOURCE_STATIC_BROKER, SOURCE_TOPIC, TOPIC_CONFIGS)
from ..protocol.errors import ErrorCode, KafkaError
from ..cluster.metadata import validate_topic_name
from ..server.dispatch import RequestContext
from .support.common import error_per_item
from .support.config_resources import (BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC, TYPE_NAMES,
                               config_authorization_error)
from .support.config_resources import ACL_ROLES as _config_acl
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from .support.services import BrokerServices
from ..config import group as GC

API_KEY = 32
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the rows config_authorization_error checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_config_acl)

_KNOWN_TYPES = {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}
SOURCE_DYNAMIC_BROKER_LOGGER = 6
SOURCE_GROUP_CONFIG = 8

# DynamicBrokerConfig.brokerConfigSynonyms: broker configs that stand for one another.
_BROKER_SYNONYMS = [
    ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    ["log.roll.ms", "log.roll.hours"],
    ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
]


def broker_synonyms(name: str) -> list[str]:
    for group in _BROKER_SYNONYMS:
        if name in group:
            return group
    return [name]


def _config_synonyms(config: Any, name: str, names: list[str]) -> list[dict]:
    """Kafka's configSynonyms: this broker's dynamic values first, then the dynamic cluster
    defaults, the static values, the built-in defaults; then drop entries before ``name``."""
    out = []
    for per_broker, source in ((True, SOURCE_DYNAMIC_BROKER), (False, SOURCE_DYNAMIC_DEFAULT)):
        layer = config.dynamic_layer(per_broker)
        for n in names:
            if n in layer:
                out.append({"name": n, "value": BROKER_CONFIGS[n].render(layer[n]), "source": source})
    for n in names:  # static broker config (server.properties / --override)
        if n in BROKER_CONFIGS and config.is_explicit(n):
            out.append({"name": n, "value": BROKER_CONFIGS[n].render(config.static_value(n)),
                        "source": SOURCE_STATIC_BROKER})
    for n in names:  # built-in defaults (only those with a value)
        d = BROKER_CONFIGS.get(n)
        if d is not None and d.default is not None:
            out.append({"name": n, "value": d.render(d.default), "source": SOURCE_DEFAULT})
    while out and out[0]["name"] != name:
        out.pop(0)
    return out


def _topic_entry(services: BrokerServices, d: Any, overrides: Any, effective: Any, synonyms_on: bool, docs_on: bool) -> dict:
    name = d.name
    syn = []
    if name in overrides:
        syn.append({"name": name, "value": d.render(overrides[name]), "source": SOURCE_TOPIC})
    if d.broker_key is not None:
        syn += _config_synonyms(services.config, d.broker_key, broker_synonyms(d.broker_key))
    source = syn[0]["source"] if syn else SOURCE_DEFAULT
    return {"name": name, "value": d.render(effective[name]), "read_only": False,
            "config_source": source, "is_sensitive": d.type == "password",
            "synonyms": syn if synonyms_on else [], "config_type": d.type_id,
            "documentation": d.doc if docs_on else None}


def _broker_entry(services: BrokerServices, d: Any, synonyms_on: bool, docs_on: bool, cluster_default: bool = False) -> dict:
    syn = _config_synonyms(services.config, d.name, broker_synonyms(d.name))
    if cluster_default:   # the "" resource: only the dynamic default layer (Kafka's perBrokerConfig=false)
        syn = [s for s in syn if s["source"] == SOURCE_DYNAMIC_DEFAULT]
    sensitive = d.type == "password"
    # A config without a default that is not set is null (log.dirs falls back to log.dir
    # inside the broker, but Kafka reports it unset).
    if cluster_default:
        value = services.config.dynamic_layer(False).get(d.name)
    elif services.config.layers_set(d.name) or d.default is not None:
        value = services.config.get(d.name)
    else:
        value = None
    return {"name": d.name, "value": None if sensitive else d.render(value), "read_only": d.read_only,
            "config_source": syn[0]["source"] if syn else SOURCE_DEFAULT, "is_sensitive": sensitive,
            "synonyms": syn if synonyms_on else [], "config_type": d.type_id,
            "documentation": d.doc if docs_on else None}


def _group_entry(services: BrokerServices, d: Any, stored: Any, synonyms_on: bool, docs_on: bool) -> dict:
    syn = []
    if d.name in stored:
        try:
            value = GC.render(d, GC._parse(d, stored[d.name]))
        except GC.GroupConfigError:
            value = stored[d.name]
        syn.append({"name": d.name, "value": value, "source": SOURCE_GROUP_CONFIG})
    if d.broker_key is not None and d.broker_key in BROKER_CONFIGS:
        syn += _config_synonyms(services.config, d.broker_key, [d.broker_key])
    else:   # no such broker config: Kafka's default under the group config's own name (or its broker key)
        syn.append({"name": d.broker_key or d.name, "value": GC.render(d, d.default), "source": SOURCE_DEFAULT})
    if d.name == "streams.assignor.name":   # the first of group.streams.assignors
        for s in syn[1:]:
            s["value"] = s["value"].split(",")[0]
    return {"name": d.name, "value": syn[0]["value"], "read_only": False, "config_source": syn[0]["source"],
            "is_sensitive": False, "synonyms": syn if synonyms_on else [], "config_type": d.type_id,
            "documentation": d.doc if docs_on else None}


def _describe(ctx: RequestContext, res: dict, synonyms_on: bool, docs_on: bool) -> dict:
    services = ctx.services
    rtype, rname, keys = res["resource_type"], res["resource_name"], res["configuration_keys"]
    keyset = None if keys is None else set(keys)   # None: every config

    def wanted(n: str) -> bool:
        return keyset is None or n in keyset
    result = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": rname,
              "configs": []}
    if rtype == TOPIC:
        validate_topic_name(rname)
        info = services.metadata_cache.get(rname)
        if info is None:
            result["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return result
        effective = services.metadata_cache.effective_config(rname)
        result["configs"] = [_topic_entry(services, TOPIC_CONFIGS[n], info.configs, effective, synonyms_on, docs_on)
                             for n in sorted(TOPIC_CONFIGS) if wanted(n)]
    elif rtype == BROKER:
        if not rname:
            # the cluster-wide dynamic defaults that are set
            layer = services.config.dynamic_layer(False)
            result["configs"] = [_broker_entry(services, BROKER_CONFIGS[n], synonyms_on, docs_on, cluster_default=True)
                                 for n in sorted(layer) if wanted(n)]
            return result
        if _broker_id(rname) != services.node_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected %d or empty string, "
                             "but received %s" % (services.node_id, rname))
        result["configs"] = [_broker_entry(services, BROKER_CONFIGS[n], synonyms_on, docs_on)
                             for n in sorted(BROKER_CONFIGS) if wanted(n) and not BROKER_CONFIGS[n].internal]
    elif rtype == BROKER_LOGGER:
        if not rname:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _broker_id(rname) != services.node_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected %d but received %s"
                             % (services.node_id, rname))
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        if wanted("root"):
            result["configs"] = [{"name": "root", "value": level, "read_only": False,
                                  "config_source": SOURCE_DYNAMIC_BROKER_LOGGER, "is_sensitive": False,
                                  "synonyms": [], "config_type": 0, "documentation": None}]
    elif rtype == GROUP:
        if not rname:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        stored = services.controller.group_configs(rname)
        defs = [d for d in GC.GROUP_CONFIGS.values() if d.internal and d.name in stored]
        defs += [d for d in GC.GROUP_CONFIGS.values() if not d.internal]
        result["configs"] = [_group_entry(services, d, stored, synonyms_on, docs_on) for d in defs if wanted(d.name)]
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Unsupported resource type: %s" % _type_name(rtype))
    return result


def _type_name(t: int) -> str:
    return TYPE_NAMES.get(t, str(t))


def _broker_id(name: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: %s" % name) from None


async def handle(ctx: RequestContext, request: dict) -> dict:
    for res in request["resources"]:
        if res["resource_type"] not in _KNOWN_TYPES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected resource type %d for resource %s"
                             % (res["resource_type"], res["resource_name"]))
    synonyms_on = request["include_synonyms"]
    docs_on = ctx.api_version >= 3 and request["include_documentation"]
    results, denied = [], []
    for res in request["resources"]:
        err = config_authorization_error(ctx, res["resource_type"], res["resource_name"])
        if err is not None:
            # Kafka answers the authorized resources first, then the others
            denied.append({"error_code": int(err.code), "error_message": err.message,
                           "resource_type": res["resource_type"], "resource_name": res["resource_name"],
                           "configs": []})
            continue
        try:
            results.append(_describe(ctx, res, synonyms_on, docs_on))
        except KafkaError as e:
            results.append({"error_code": int(e.code), "error_message": e.message,
                            "resource_type": res["resource_type"], "resource_name": res["resource_name"],
                            "configs": []})
    return {"throttle_time_ms": 0, "results": results + denied}


error_response = error_per_item("resources", "results", lambda r, code: {
    "error_code": int(code), "error_message": None, "resource_type": r["resource_type"],
    "resource_name": r["resource_name"], "configs": []})
