"""AlterUserScramCredentials (key 51), version 0.

Behaviour (Apache Kafka ControllerApis / ScramControlManager.alterScramCredentials): one result
per user named in ``deletions`` or ``upsertions`` (in order of first appearance); at most one
change per user and request.  The deletions, then the upsertions, are checked in Kafka's order:
- a user named again in the request (another deletion or upsertion, *whatever its mechanism*:
  Kafka 4.4's ScramControlManager keys its checks by user name):
  DUPLICATE_RESOURCE, and neither change is made; a user whose first change already failed
  keeps that error;
- empty user name: UNACCEPTABLE_CREDENTIAL;
- a mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512): UNSUPPORTED_SASL_MECHANISM;
- deleting a credential that does not exist: RESOURCE_NOT_FOUND;
- upsertion iterations below 4096 or above 16384: UNACCEPTABLE_CREDENTIAL.
So a user's two mechanisms take two requests (tests/differential/test_security.py).
The client sends the salt and the salted password (never the password); the broker keeps only
the derived StoredKey and ServerKey (security/scram.py), durably through the controller.
With an authorizer, ALTER on the CLUSTER is required (Kafka's ControllerApis): without it every
user named gets CLUSTER_AUTHORIZATION_FAILED with the message "ALTER" (the denied operation, as
Kafka 4.4 answers; tests/differential/test_acl_enforcement.py) and nothing changes.
"""
from __future__ import annotations

from typing import Any

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..security.scram import (MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS,
                              credential_from_salted_password)
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 51
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


def _check(op: Any, is_upsert: Any, stored: Any) -> tuple | None:
    name, mech_id = op["name"], op["mechanism"]
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mech = MECHANISM_IDS.get(mech_id)
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if not is_upsert and stored.get(name, {}).get(mech) is None:
        # Kafka 4.4's answer and text (tests/differential/test_security.py)
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    if is_upsert:
        if op["iterations"] < MIN_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if op["iterations"] > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if not op["salt"] or not op["salted_password"]:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Empty salt or salted password"
    return None


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        users = dict.fromkeys(op["name"] for op in list(request["deletions"]) + list(request["upsertions"]))
        return {"throttle_time_ms": 0, "results": [
            {"user": u, "error_code": int(_CLUSTER.denial),
             "error_message": "ALTER"} for u in sorted(users)]}
    controller = ctx.services.controller
    stored = controller.scram_users()
    ops = [(op, False) for op in request["deletions"]] + [(op, True) for op in request["upsertions"]]
    errors: dict = {}
    accepted: dict = {}   # user -> (op, is_upsert): its one change
    for op, is_upsert in ops:
        name = op["name"]
        if name in errors:
            continue
        if name in accepted:
            del accepted[name]
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            continue
        err = _check(op, is_upsert, stored)
        if err is not None:
            errors[name] = err
        else:
            accepted[name] = (op, is_upsert)
    changes: list[tuple[str, str, str | None]] = []
    for op, is_upsert in accepted.values():
        mech = MECHANISM_IDS[op["mechanism"]]
        if is_upsert:
            cred = credential_from_salted_password(mech, bytes(op["salt"]), bytes(op["salted_password"]),
                                                   op["iterations"])
            changes.append((op["name"], mech, cred.to_text()))
        else:
            changes.append((op["name"], mech, None))
    if changes:
        await controller.alter_scram_credentials(changes)
    results = []
    for name in dict.fromkeys(op["name"] for op, _ in ops):
        code, msg = errors.get(name, (0, None))
        results.append({"user": name, "error_code": int(code), "error_message": msg})
    return {"throttle_time_ms": 0, "results": results}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    names = dict.fromkeys(op["name"] for op in list(request["deletions"]) + list(request["upsertions"]))
    return {"throttle_time_ms": 0, "results": [{"user": n, "error_code": int(code), "error_message": None}
                                               for n in names]}
