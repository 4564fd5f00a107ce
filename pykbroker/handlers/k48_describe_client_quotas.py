"""DescribeClientQuotas (key 48), versions 0-1 (Kafka 4.4's range; v1 is flexible, same fields).

Behaviour (AK KafkaApis.handleDescribeClientQuotas, ClientQuotasImage.describe; checked against
Apache Kafka by tests/differential/test_client_quotas.py):
- DESCRIBE_CONFIGS on the CLUSTER is required when an authorizer is on, else the top-level
  CLUSTER_AUTHORIZATION_FAILED, no message, entries null;
- each component names an entity type (``user``, ``client-id``, ``ip``) and a match type: EXACT (0,
  ``match`` the name), DEFAULT (1, the default entity, ``match`` null) or SPECIFIED (2, any
  name, ``match`` null).  An entity matches when every EXACT/DEFAULT component is in it with
  that name and every SPECIFIED type is in it; ``strict`` also excludes entities with a type the
  filter does not name.  No component: every entity (strict: none);
- a bad filter is a top-level error with Kafka's message, entries null: INVALID_REQUEST for an
  empty type, a type named twice, EXACT with a null match, DEFAULT/SPECIFIED with one, an
  unknown match type, ``ip`` with ``user``/``client-id``; UNSUPPORTED_VERSION for an unknown type;
- each entry is an entity (client-id, user, ip order, as Kafka lists them) and its values
  (keys sorted); success's message is "" (Kafka's), not null.  Entities are listed in a stable
  order (Kafka's is a hash order).
Quotas are read from the controller's view (the metadata file on one node; on a ZooKeeper cluster
Kafka's /config znodes, which every broker follows, so every broker answers the same).
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..quota.entities import QuotaError, describe, entity_to_wire
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 48
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


def _error(code: int, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "entries": None}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        # no message: Kafka's ApiError leaves out an exception's default text (checked against
        # Kafka 4.4, tests/differential/test_acl_enforcement.py)
        return _error(_CLUSTER.denial, None)
    stored = ctx.services.controller.client_quotas()
    try:
        entities = describe(stored, request["components"], request["strict"])
    except QuotaError as e:
        return _error(e.code, e.message)
    entries = [{"entity": entity_to_wire(e),
                "values": [{"key": k, "value": v} for k, v in sorted(stored[e].items())]} for e in entities]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "entries": entries}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _error(code, None)
