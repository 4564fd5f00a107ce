"""Config resources: the resource types (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)
and what AlterConfigs (k33, full replacement) and IncrementalAlterConfigs (k44) share: the
operations, the broker's preprocessing (Kafka's ConfigAdminManager.preprocess), the topic path of
the controller (ConfigurationControlManager + ControllerConfigurationValidator) and the
per-resource answer.  The behaviour is described in the two handlers' docstrings."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...cluster.metadata import validate_topic_name
from ...config import TOPIC_CONFIGS, ConfigError, is_password_key, validate_topic_configs
from ...config.dynamic import DynamicConfigError, validate_change
from ...config.group import GroupConfigError, validate as validate_group_configs
from ...protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError
from ...server.dispatch import RequestContext
from .common import error_per_item

if TYPE_CHECKING:
    from .services import BrokerServices

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
TYPE_NAMES = {CLIENT_METRICS: "CLIENT_METRICS"}  # the types pykbroker does not serve


def java_int(s: str) -> int:
    """Java's Integer.parseInt: no surrounding spaces, no '_' (unlike Python's int)."""
    if not re.fullmatch(r"[+-]?[0-9]+", s) or not -2**31 <= int(s) < 2**31:
        raise ValueError(s)
    return int(s)


def invalid_request(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, msg)


def invalid_config(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, msg)


# ---------------------------------------------------------------------- preprocessing (broker side)
def duplicate_resources(resources: Any) -> set[int]:
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


def check_config_list(configs: Any, null_allowed: Any) -> None:
    """Duplicate names and null values (``null_allowed(entry)`` says when null is fine)."""
    names = [c["name"] for c in configs]
    if len(set(names)) != len(names):
        raise invalid_request("Error due to duplicate config keys")
    nulls = [c["name"] for c in configs if c["value"] is None and not null_allowed(c)]
    if nulls:
        raise invalid_request("Null value not supported for : " + ", ".join(nulls))


def check_broker_name(services: BrokerServices, name: str) -> None:
    """ConfigAdminManager.validateResourceNameIsCurrentNodeId (empty = cluster default)."""
    if not name:
        return
    try:
        node = java_int(name)
    except ValueError:
        raise invalid_request("Node id must be an integer, but it is: %s" % name) from None
    if node != services.node_id:
        raise invalid_request("Unexpected broker id, expected %d, but received %s" % (services.node_id, name))


def broker_entity(services: BrokerServices, name: str) -> str:
    """The controller's entity of a checked BROKER resource name: "" or this node's id."""
    return str(java_int(name)) if name else ""


MIN_ISR = "min.insync.replicas"
# the rows of acl/requirements.py config_authorization_error reads (by resource type), for the
# three config handlers to ask for at import
ACL_ROLES = ("topic", "group", "cluster")


def check_elr_min_isr(name: str, altered: Any, removes_cluster_min_isr: bool) -> None:
    """Kafka 4.4's controller rules for ``min.insync.replicas`` on BROKER resources while
    eligible leader replicas (KIP-966) are enabled, as on every freshly formatted Kafka 4.1+
    cluster (ConfigurationControlManager.isDisallowedBrokerMinIsrTransition /
    isDisallowedClusterMinIsrTransition).  ELR needs one cluster-wide value: the format step
    writes the cluster default's ``min.insync.replicas`` (the static value) and the controller
    then refuses to remove it, or to set or delete it on a single broker.  pykbroker does not
    build ELR (SKIPPED.md) but answers these changes as the oracle does, so an admin script
    written against Kafka 4.4 meets the same refusals here.

    ``altered``: the config names the change writes on the resource (set, deleted, or dropped
    by a full replacement); ``removes_cluster_min_isr``: the change leaves the cluster default
    without ``min.insync.replicas`` (an explicit DELETE, or a full replacement omitting it:
    Kafka's is always stored, pykbroker's is implied)."""
    if name and MIN_ISR in altered:
        raise invalid_config("Broker-level %s cannot be altered while ELR is enabled." % MIN_ISR)
    if not name and removes_cluster_min_isr:
        raise invalid_config("Cluster-level %s cannot be removed while ELR is enabled." % MIN_ISR)


async def alter_broker(services: BrokerServices, name: str, new: dict[str, str], changed: dict[str, str],
                       validate_only: bool, altered: Any, removes_cluster_min_isr: bool) -> None:
    """Dynamic broker configs (config/dynamic.py): ``changed`` (the configs the request sets)
    validated as Kafka's DynamicBrokerConfig does (INVALID_REQUEST with its texts), then the
    controller's ELR rule on ``min.insync.replicas`` (:func:`check_elr_min_isr`; Kafka's broker
    validates before it forwards to the controller), then ``new``, the resource's whole dynamic
    set, stored by the controller and applied."""
    try:
        validate_change(services.config, bool(name), changed)
        if services.listener_security:
            # listener.name.<l>.ssl.keystore.* / ssl.truststore.*: the new stores must load (security/reload.py)
            from ...security.reload import validate as validate_keystores
            validate_keystores(services.listener_security, bool(name), changed)
    except DynamicConfigError as e:   # KeystoreUpdateError too
        raise invalid_request(str(e)) from None
    check_elr_min_isr(name, altered, removes_cluster_min_isr)
    if validate_only:
        return   # Kafka encodes passwords only when it stores them (toPersistentProps)
    if any(is_password_key(k) for k in changed):
        # password configs stored encoded with password.encoder.secret (password_encoder.py)
        from ...password_encoder import encode_changed
        try:
            new.update(encode_changed(services.password_encoder, bool(name),
                                      bool(services.config["zookeeper.connect"]), changed))
        except ConfigError as e:
            # Kafka's ZooKeeper-mode AlterConfigs wraps the ConfigException so
            raise invalid_request("Invalid config value for resource ConfigResource(type=BROKER, name='%s'): %s"
                                  % (name, e)) from None
    await services.controller.alter_broker_configs(broker_entity(services, name), new)


async def alter_group(services: BrokerServices, name: str, new: dict[str, str], validate_only: bool) -> None:
    """Group configs (pykbroker/config/group.py): ``new``, the group's whole resulting set, is
    validated as Kafka's GroupConfig.validate (INVALID_CONFIG), then stored by the controller,
    where the coordinators read it (the next heartbeat / share partition initialization)."""
    if not name:
        raise invalid_request("Default group resources are not allowed.")
    try:
        validate_group_configs(new)
    except GroupConfigError as e:
        raise invalid_config(str(e)) from None
    if validate_only:
        return
    await services.controller.alter_group_configs(name, new)


def unsupported_type(rtype: int) -> KafkaError:
    if rtype in TYPE_NAMES:
        # Kafka supports client-metrics configs; pykbroker does not (SKIPPED.md).
        return invalid_request("Unsupported resource type: %s" % TYPE_NAMES[rtype])
    return invalid_request("Unknown resource type %d" % rtype)


# ---------------------------------------------------------------------- topic (controller side)
def validate_topic_overrides(services: BrokerServices, name: str, raw: dict[str, str]) -> dict:
    """ControllerConfigurationValidator.validate for a topic, then the existence check.
    Returns the parsed overrides."""
    if not name:
        raise invalid_request("Default topic resources are not allowed.")
    validate_topic_name(name)
    for key in raw:  # LogConfig.validateNames runs over every name before any value is parsed
        if key not in TOPIC_CONFIGS:
            raise invalid_config("Unknown topic config name: %s" % key)
    try:
        parsed = validate_topic_configs(raw)
    except ConfigError as e:
        raise invalid_config(str(e)) from None
    effective = services.config.effective_topic_config(parsed)
    lo, hi = effective["min.compaction.lag.ms"], effective["max.compaction.lag.ms"]
    if lo is not None and hi is not None and lo > hi:
        raise invalid_config("conflict topic config setting min.compaction.lag.ms (%d) > "
                             "max.compaction.lag.ms (%d)" % (lo, hi))
    if services.metadata_cache.get(name) is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic '%s' does not exist." % name)
    return parsed


async def alter_topic(services: BrokerServices, name: str, raw: dict[str, str], validate_only: bool) -> None:
    parsed = validate_topic_overrides(services, name, raw)
    if validate_only:
        return
    info = services.metadata_cache.get(name)
    assert info is not None   # its existence checked above, with no await since
    if parsed == info.configs:
        return  # nothing changes (Kafka writes no record either)
    # No await since the overrides were read: alter_topic_configs swaps them in before its
    # first await, so concurrent alterations of one topic never lose an update.
    await services.controller.alter_topic_configs(name, parsed)


# ---------------------------------------------------------------------- answer
def config_authorization_error(ctx: RequestContext, rtype: int, name: str) -> KafkaError | None:
    """With an authorizer: the KafkaError Kafka answers a resource with when the client lacks
    what the API's row for it says (acl/requirements.py: DESCRIBE_CONFIGS for DescribeConfigs,
    ALTER_CONFIGS for the alters; ConfigHelper.configsAuthorizationApiError: broker,
    broker-logger and client-metrics configs are the cluster's), else None."""
    from ...acl import bindings as B
    from ...acl.check import session
    from ...acl.requirements import row
    az = session(ctx)
    if az is None:
        return None
    role = "topic" if rtype == TOPIC else "group" if rtype == GROUP else "cluster"
    needed = row(ctx.api_key, role)
    if az.permits(needed, name if needed.resource_type != B.CLUSTER else B.CLUSTER_NAME):
        return None
    if needed.resource_type == B.CLUSTER and ctx.api_key != 32:
        # Kafka 4.4 answers a denied broker resource of Alter/IncrementalAlterConfigs without a
        # message (topics and groups get the error's default text; compared with Kafka:
        # tests/differential/test_acl_enforcement.py, alter_broker_configs*)
        return KafkaError(needed.denial, None)
    return KafkaError(needed.denial, DEFAULT_MESSAGES[needed.denial])


async def alter_each(ctx: RequestContext, request: dict, alter_one: Any) -> dict:
    """Both APIs' answer, per resource in request order: ``await alter_one(ctx, resource,
    validate_only)`` applies one resource; the KafkaError it raises is that resource's answer."""
    resources = request["resources"]
    dup = duplicate_resources(resources)
    out = []
    for i, res in enumerate(resources):
        code, msg = 0, None
        try:
            if i in dup:
                raise invalid_request("Each resource must appear at most once.")
            denied = config_authorization_error(ctx, res["resource_type"], res["resource_name"])
            if denied is not None:
                raise denied
            await alter_one(ctx, res, request["validate_only"])
        except KafkaError as e:
            code, msg = e.code, e.message
        out.append(_result(res, code, msg))
    return {"throttle_time_ms": 0, "responses": out}


def _result(res: dict, code: int, message: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": message, "resource_type": res["resource_type"],
            "resource_name": res["resource_name"]}


error_response = error_per_item("resources", "responses", _result)
