"""DescribeUserScramCredentials (key 50), version 0.

Behaviour (Apache Kafka ControllerApis / ScramControlManager.describeScramCredentials):
- ``users`` null or empty: every user with a credential, each with its mechanisms (1 =
  SCRAM-SHA-256, 2 = SCRAM-SHA-512) and iterations (never the salt or the keys).
- A named user without any credential: RESOURCE_NOT_FOUND for that user; a user named twice:
  DUPLICATE_RESOURCE for it (Kafka 4.4's messages end with the user's name); a described user's
  message is empty, not null.  The top-level error stays NONE.
- With an authorizer, DESCRIBE on the CLUSTER is required (Kafka's KafkaApis): without it the
  top-level error is CLUSTER_AUTHORIZATION_FAILED with a null message, and each named user gets
  a result with that code, an empty user name and a null message (Kafka 4.4's error response,
  compared in tests/differential/test_acl_enforcement.py).
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..security.scram import MECHANISM_TYPES, ScramCredential
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 50
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


def _infos(mechs: dict) -> list:
    return [{"mechanism": MECHANISM_TYPES[m], "iterations": ScramCredential.from_text(t).iterations}
            for m, t in sorted(mechs.items(), key=lambda kv: MECHANISM_TYPES.get(kv[0], 0)) if m in MECHANISM_TYPES]


async def handle(ctx: RequestContext, request: dict) -> dict:
    names = [u["name"] for u in (request["users"] or [])]
    if not permits(ctx, _CLUSTER):
        code = int(_CLUSTER.denial)
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None,
                "results": [{"user": "", "error_code": code, "error_message": None, "credential_infos": []}
                            for _ in names]}
    stored = ctx.services.controller.scram_users()
    results = []
    if not names:
        for user in sorted(stored):
            results.append({"user": user, "error_code": 0, "error_message": "", "credential_infos": _infos(stored[user])})
    else:
        counts: dict = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        for n in dict.fromkeys(names):
            if counts[n] > 1:
                results.append({"user": n, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                                "error_message": "Cannot describe SCRAM credentials for the same user twice in a "
                                                 "single request: %s" % n, "credential_infos": []})
            elif n not in stored:
                results.append({"user": n, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                                "error_message": "Attempt to describe a user credential that does not exist: %s" % n,
                                "credential_infos": []})
            else:
                results.append({"user": n, "error_code": 0, "error_message": "", "credential_infos": _infos(stored[n])})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "results": []}
