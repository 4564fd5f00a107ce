"""CreateAcls (key 30), versions 1-3 (Kafka 4.4's range; v0, without pattern types, is gone).

Behaviour (AK AclApis.handleCreateAcls, AclControlManager.createAcls):
- no authorizer (``authorizer.class.name`` unset): every creation SECURITY_DISABLED, "No
  Authorizer is configured.";
- a creation with a 0 (UNKNOWN) code closes the connection (Kafka's request validation fails
  the parse);
- ALTER on the CLUSTER is required, else every creation CLUSTER_AUTHORIZATION_FAILED;
- a creation naming ANY (type, operation, permission) or MATCH/ANY (pattern) cannot be built by
  Kafka: every creation UNKNOWN_SERVER_ERROR, nothing stored;
- each creation is validated on its own (acl/bindings.validate_new_binding: the CLUSTER resource
  is named ``kafka-cluster``, no empty name, a known type, LITERAL or PREFIXED, a concrete
  operation and permission, a host, a ``Type:name`` principal): a refused one gets INVALID_REQUEST with Kafka's message,
  the others are stored together in one write of the metadata file, so a failed write stores
  none of them (each then answers the storage error) - never half a request;
- creating a binding that exists is a success that changes nothing; a success's message is "".
"""
from __future__ import annotations

from ..acl.bindings import binding_from_wire, creation_fails_request, raw_unknown, validate_new_binding
from ..acl.check import permits, session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import CloseConnection, RequestContext
from .support.versions import VERSIONS

API_KEY = 30
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")

NO_AUTHORIZER = "No Authorizer is configured."


def _all(request: dict, code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0,
            "results": [{"error_code": int(code), "error_message": message} for _ in request["creations"]]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    creations = request["creations"]
    for c in creations:
        if raw_unknown(c["resource_type"], c["resource_pattern_type"], c["operation"], c["permission_type"]):
            raise CloseConnection("CreateAcls with an UNKNOWN (0) element: %r" % (c,))
    if session(ctx) is None:
        return _all(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not permits(ctx, _CLUSTER):
        # Kafka's text names its request object (connection, session...): pykbroker names the API
        return _all(request, _CLUSTER.denial, "Request CreateAcls needs ALTER permission.")
    bindings = [binding_from_wire(c["resource_type"], c["resource_name"], c["resource_pattern_type"], c["principal"],
                                  c["host"], c["operation"], c["permission_type"]) for c in creations]
    if any(creation_fails_request(b) for b in bindings):
        return _all(request, ErrorCode.UNKNOWN_SERVER_ERROR)
    results, valid = [], []
    for b in bindings:
        why = validate_new_binding(b)
        if why is not None:
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": why})
        else:
            results.append({"error_code": 0, "error_message": ""})   # Kafka: empty, not null
            valid.append(b)
    if valid:
        try:
            await ctx.services.controller.alter_acls(added=valid)
        except KafkaError as e:
            for r in results:
                if r["error_code"] == 0:
                    r["error_code"], r["error_message"] = int(e.code), e.message
    return {"throttle_time_ms": 0, "results": results}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _all(request, code)
