"""AlterClientQuotas (key 49), versions 0-1 (Kafka 4.4's range; v1 is flexible, same fields).

Behaviour (AK ControllerApis.handleAlterClientQuotas, ClientQuotaControlManager; the messages
and their order checked against Apache Kafka by tests/differential/test_client_quotas.py):
- ALTER_CONFIGS on the CLUSTER is required when an authorizer is on, else every entry
  CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.";
- entities: ``user`` and/or ``client-id``, or ``ip`` alone; a null name is the default entity.
  Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (whole numbers), ``request_percentage``,
  ``controller_mutation_rate`` for user/client-id entities, ``connection_creation_rate`` (whole)
  for ip entities.  An op with ``remove`` deletes the key (a key not set is no error);
- each entity is validated on its own (quota/entities.py: duplicates, empty entity, unknown
  type, empty name, the ip combination and address, unknown keys, values not finite, <= 0,
  fractional or too large): INVALID_REQUEST with Kafka's message for that entity, the others
  applied.  The answer has one entry per distinct entity, in request order (Kafka's is a hash
  order), its components ordered client-id, user, ip as Kafka lists them; success's message is
  null;
- ``validate_only``: validated and answered, nothing stored;
- the valid alterations of a request are stored in one write of the metadata file (a failed
  write answers its error for each of them and stores none) and reach the quota enforcement
  (quota/manager.py) at once; on a ZooKeeper cluster one compare-and-set per entity znode with
  its ``/config/changes`` notice (cluster/zookeeper/security_store.py), every broker applying it.
"""
from __future__ import annotations

from typing import Any

import trio

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import KafkaError
from ..quota.entities import entity_from_wire, entity_to_wire, ip_host_names, plan_alterations
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 49
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")

# A host name in an ip entity is resolved, as Kafka's InetAddress.getByName; never for long.
_RESOLVE_TIMEOUT = 5.0


def _all(request: dict, code: int, message: str | None) -> dict:
    seen: dict = {}   # entity -> None: the entities in request order, each once
    for e in request["entries"]:
        seen.setdefault(entity_from_wire(e["entity"]), None)
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": int(code), "error_message": message, "entity": entity_to_wire(ent)} for ent in seen]}


async def _resolvable(names: Any) -> set:
    ok = set()
    for n in dict.fromkeys(names):
        with trio.move_on_after(_RESOLVE_TIMEOUT):
            try:
                await trio.socket.getaddrinfo(n, None)
                ok.add(n)
            except OSError:
                pass
    return ok


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        return _all(request, _CLUSTER.denial, "Cluster authorization failed.")
    controller = ctx.services.controller
    hosts = ip_host_names(request["entries"])
    resolved = await _resolvable(hosts) if hosts else set()
    results, changes = plan_alterations(request["entries"], controller.client_quotas(), resolved.__contains__)
    if changes and not request["validate_only"]:
        try:
            await controller.alter_client_quotas(changes)
        except KafkaError as e:
            results = [(ent, int(e.code), e.message) if code == 0 and ent in changes else (ent, code, msg)
                       for ent, code, msg in results]
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": msg, "entity": entity_to_wire(ent)} for ent, code, msg in results]}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _all(request, code, None)
