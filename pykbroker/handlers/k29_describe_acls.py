"""DescribeAcls (key 29), versions 1-3 (Kafka 4.4's range).

Behaviour (AK AclApis.handleDescribeAcls, AclBindingFilter.matches):
- no authorizer: top-level SECURITY_DISABLED, "No Authorizer is configured.";
- DESCRIBE on the CLUSTER is required, else CLUSTER_AUTHORIZATION_FAILED;
- the filter: resource type ANY or one type; pattern type ANY (every pattern, the name compared
  exactly), MATCH (the bindings that apply to the named resource: its literal name, the literal
  ``*`` and the prefixes of the name) or LITERAL/PREFIXED (that pattern only); a null name,
  principal or host matches any; operation and permission ANY or one.  The matching bindings
  are answered grouped by resource pattern (Kafka's order is a hash order; pykbroker's is sorted);
- a 0 (UNKNOWN) code in the filter closes the connection (Kafka's request validation fails the
  parse); any other code outside Kafka's enums is UNKNOWN and matches nothing;
- ``error_message`` is "" on success, as Kafka's.
"""
from __future__ import annotations

from itertools import groupby
from typing import Any

from ..acl.bindings import filter_from_wire, raw_unknown
from ..acl.check import permits, session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..server.dispatch import CloseConnection, RequestContext
from .support.versions import VERSIONS

API_KEY = 29
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


def _answer(code: int = 0, message: str | None = "", resources: Any = ()) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "resources": list(resources)}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if raw_unknown(request["resource_type_filter"], request["pattern_type_filter"], request["operation"],
                   request["permission_type"]):
        raise CloseConnection("DescribeAcls filter with an UNKNOWN (0) element")
    az = session(ctx)
    if az is None:
        return _answer(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not permits(ctx, _CLUSTER):
        # Kafka's text names its request object (connection, session...): pykbroker names the API
        return _answer(_CLUSTER.denial, "Request DescribeAcls needs DESCRIBE permission.")
    flt = filter_from_wire(request["resource_type_filter"], request["resource_name_filter"],
                           request["pattern_type_filter"], request["principal_filter"], request["host_filter"],
                           request["operation"], request["permission_type"])
    resources = []
    for (rtype, name, ptype), group in groupby(az.authorizer.describe(flt), key=lambda b: b[:3]):
        resources.append({"resource_type": rtype, "resource_name": name, "pattern_type": ptype,
                          "acls": [{"principal": b.principal, "host": b.host, "operation": b.operation,
                                    "permission_type": b.permission} for b in group]})
    return _answer(resources=resources)


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _answer(code, None)
