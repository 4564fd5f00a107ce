"""ListConfigResources (key 74, KIP-1142; ListClientMetricsResources before Kafka 4.1), versions 0-1.

Lists the resources an admin can describe or alter configs of (``kafka-configs --list``,
``Admin.listConfigResources``).  Behaviour (as Apache Kafka 4.4's KafkaApis):
- ``resource_types`` (v1+) empty means every type the version supports: v0 supports only
  CLIENT_METRICS (16), v1 TOPIC (2), BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS and GROUP (32).
  Any other type in the list answers UNSUPPORTED_VERSION with no resources at all (Kafka checks
  the whole list before listing anything).
- Listed, in Kafka's order of types: GROUP: the groups holding dynamic group configs (KIP-848
  group configs), CLIENT_METRICS: the client-metrics subscriptions, BROKER_LOGGER and BROKER: one
  entry per live broker reachable on the listener the request came in on (its id as the name),
  TOPIC: every topic in the metadata cache, internal ones included.  GROUP lists the groups
  holding at least one stored config (by name order).  pykbroker serves no CLIENT_METRICS config
  resources (SKIPPED.md), so that part is empty, as on a Kafka where none were ever configured.
  Topics are listed by name order (Kafka's order is its hash set's).
- With an authorizer DESCRIBE_CONFIGS on the CLUSTER is required, checked first: without it
  CLUSTER_AUTHORIZATION_FAILED and no resources.
Version notes: v0 has no request fields and no ``resource_type`` per entry; all versions are
flexible.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.config_resources import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from .support.versions import VERSIONS

API_KEY = 74
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")

# ListConfigResourcesRequest.supportedResourceTypes(): v0 was ListClientMetricsResources.
SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        return error_response(ctx, request, _CLUSTER.denial)
    supported = SUPPORTED[min(ctx.api_version, 1)]
    types = (request.get("resource_types") or []) if ctx.api_version >= 1 else []
    if not types:
        types = supported
    if any(t not in supported for t in types):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.UNSUPPORTED_VERSION), "config_resources": []}
    md = ctx.services.metadata_cache
    out = []
    if GROUP in types:
        out += [{"resource_name": g, "resource_type": GROUP} for g in ctx.services.controller.groups_with_configs()]
    # CLIENT_METRICS: no such config resources exist on pykbroker (see the docstring).
    for rtype in (BROKER_LOGGER, BROKER):
        if rtype in types:
            out += [{"resource_name": str(b.broker_id), "resource_type": rtype}
                    for b, _ in md.live_endpoints(ctx.listener_name)]
    if TOPIC in types:
        out += [{"resource_name": name, "resource_type": TOPIC} for name in sorted(md.topics)]
    return {"throttle_time_ms": 0, "error_code": 0, "config_resources": out}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "config_resources": []}
