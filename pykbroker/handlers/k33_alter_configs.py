"""AlterConfigs (key 33), versions 0-2: the legacy, full-replacement form.

Behaviour follows Apache Kafka on a KRaft broker (ConfigAdminManager.preprocess for the legacy
request, then ConfigurationControlManager.legacyAlterConfigResource):
- The same (type, name) twice: both get INVALID_REQUEST "Each resource must appear at most
  once."; a config named twice: INVALID_REQUEST "Error due to duplicate config keys"; any null
  value: INVALID_REQUEST "Null value not supported for : a, b".
- TOPIC (2): the request's configs become the topic's whole override set: overrides not listed
  are removed (their values fall back to the broker defaults).  Validation and error texts are
  IncrementalAlterConfigs' (unknown name / bad value → INVALID_CONFIG, checked before the topic's
  existence; missing topic → UNKNOWN_TOPIC_OR_PARTITION "The topic 'X' does not exist.").
  ``validate_only`` checks without changing anything; otherwise the overrides are persisted and
  applied to the open partitions before the answer.
- BROKER (4): dynamic broker configs (pykbroker/config/dynamic.py): the request's configs become
  the resource's whole dynamic set (the cluster default for an empty name, else this node's id),
  validated and applied as IncrementalAlterConfigs does; an empty list removes every stored one
  (as Kafka 4.4).  Then Kafka 4.4's ELR rule (eligible leader replicas are on in a freshly
  formatted Kafka 4.4, whose cluster default always holds ``min.insync.replicas``): a cluster
  default replacement without ``min.insync.replicas`` (an empty list too) is INVALID_CONFIG
  "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.", one naming it on
  this node's id (or dropping a stored one) INVALID_CONFIG "Broker-level min.insync.replicas
  cannot be altered while ELR is enabled."; a bad value or a read-only name is reported first
  (INVALID_REQUEST, the broker's check before the controller's), ``validate_only`` included.
- BROKER_LOGGER (8) is not accepted by the legacy API (INVALID_REQUEST "Unknown resource type 8",
  as Kafka); GROUP (32): the request's configs become the group's whole config set, validated and
  stored as IncrementalAlterConfigs does; CLIENT_METRICS is not built (INVALID_REQUEST
  "Unsupported resource type").
Version notes: v2 is flexible; v1 only changed throttling semantics.
"""
from __future__ import annotations

from ..acl.requirements import needs
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .support import config_resources
from .support.config_resources import (BROKER, BROKER_LOGGER, GROUP, MIN_ISR, TOPIC, alter_broker, alter_each, alter_group,
                               alter_topic, broker_entity, check_broker_name, check_config_list, unsupported_type)
from .support.config_resources import ACL_ROLES as _config_acl
from .support.versions import VERSIONS

API_KEY = 33
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the rows config_resources.alter_each checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_config_acl)

# the dispatcher's answer when handle fails: every resource with the code (k44's too)
error_response = config_resources.error_response


async def _one(ctx: RequestContext, res: dict, validate_only: bool) -> None:
    configs = res["configs"]
    check_config_list(configs, lambda c: False)
    rtype, name = res["resource_type"], res["resource_name"]
    if rtype == TOPIC:
        await alter_topic(ctx.services, name, {c["name"]: c["value"] for c in configs}, validate_only)
    elif rtype == BROKER:
        check_broker_name(ctx.services, name)
        new = {c["name"]: c["value"] for c in configs}
        # the replacement writes the names it lists and drops the stored ones it does not list
        dropped = ctx.services.controller.broker_configs(broker_entity(ctx.services, name)).keys() - new.keys()
        await alter_broker(ctx.services, name, new, new, validate_only,
                           altered=new.keys() | dropped, removes_cluster_min_isr=MIN_ISR not in new)
    elif rtype == BROKER_LOGGER:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Unknown resource type %d" % rtype)
    elif rtype == GROUP:
        await alter_group(ctx.services, name, {c["name"]: c["value"] for c in configs}, validate_only)
    else:
        raise unsupported_type(rtype)


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await alter_each(ctx, request, _one)
