"""DeleteAcls (key 31), versions 1-3 (Kafka 4.4's range).

Behaviour (AK AclApis.handleDeleteAcls, AclControlManager.deleteAcls):
- no authorizer: every filter SECURITY_DISABLED, "No Authorizer is configured.";
- ALTER on the CLUSTER is required, else every filter CLUSTER_AUTHORIZATION_FAILED;
- each filter (DescribeAcls' semantics, ANY and MATCH included) answers the bindings it matched,
  each with error 0; a binding two filters match is listed under both; a 0 (UNKNOWN) code closes
  the connection (Kafka's request validation); a filter with another code outside Kafka's enums
  gets INVALID_REQUEST ("Unknown patternFilter." / "Unknown entryFilter.") and deletes
  nothing;
- every matched binding is removed in one write of the metadata file: a failed write removes
  none and every filter answers the storage error.
"""
from __future__ import annotations

from ..acl.bindings import UNKNOWN, filter_from_wire, raw_unknown
from ..acl.check import permits, session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import CloseConnection, RequestContext
from .support.versions import VERSIONS

API_KEY = 31
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


def _all(request: dict, code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": int(code), "error_message": message, "matching_acls": []} for _ in request["filters"]]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    for f in request["filters"]:
        if raw_unknown(f["resource_type_filter"], f["pattern_type_filter"], f["operation"], f["permission_type"]):
            raise CloseConnection("DeleteAcls filter with an UNKNOWN (0) element")
    az = session(ctx)
    if az is None:
        return _all(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not permits(ctx, _CLUSTER):
        # Kafka's text names its request object (connection, session...): pykbroker names the API
        return _all(request, _CLUSTER.denial, "Request DeleteAcls needs ALTER permission.")
    results, removed = [], {}
    for f in request["filters"]:
        flt = filter_from_wire(f["resource_type_filter"], f["resource_name_filter"], f["pattern_type_filter"],
                               f["principal_filter"], f["host_filter"], f["operation"], f["permission_type"])
        if UNKNOWN in (flt.resource_type, flt.pattern_type):
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": "Unknown patternFilter.",
                            "matching_acls": []})
            continue
        if UNKNOWN in (flt.operation, flt.permission):
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": "Unknown entryFilter.",
                            "matching_acls": []})
            continue
        matched = az.authorizer.describe(flt)
        removed.update(dict.fromkeys(matched))
        results.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": b.resource_type, "resource_name": b.name,
             "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host, "operation": b.operation,
             "permission_type": b.permission} for b in matched]})
    if removed:
        try:
            await ctx.services.controller.alter_acls(removed=list(removed))
        except KafkaError as e:
            return _all(request, e.code, e.message)
    return {"throttle_time_ms": 0, "filter_results": results}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _all(request, code)
