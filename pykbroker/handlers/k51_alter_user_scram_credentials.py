"""AlterUserScramCredentials (key 51), version 0.

Behaviour (Apache Kafka ControllerApis / ScramControlManager.alterScramCredentials): one result
per user named in ``deletions`` or ``upsertions`` (in order of first appearance); a user's
changes are applied together or not at all, checked in Kafka's order:
- empty user name: UNACCEPTABLE_CREDENTIAL;
- a mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512): UNSUPPORTED_SASL_MECHANISM;
- deleting a credential that does not exist: RESOURCE_NOT_FOUND;
- the same (user, mechanism) twice in the request: DUPLICATE_RESOURCE;
- upsertion iterations below 4096 or above 16384: UNACCEPTABLE_CREDENTIAL.
The client sends the salt and the salted password (never the password); the broker keeps only
the derived StoredKey and ServerKey (security/scram.py), durably through the controller.
With an authorizer, ALTER on the CLUSTER is required (Kafka's ControllerApis): without it every
user named gets CLUSTER_AUTHORIZATION_FAILED with the message "ALTER" (the denied operation, as
Kafka 4.4 answers; tests/differential/test_acl_enforcement.py) and nothing changes.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..security.scram import (MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS,
                              credential_from_salted_password)

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0
# what this API needs from the authorizer (acl/requirements.py)
_CLUSTER = need(API_KEY, "cluster")


def _check(op, is_upsert, seen, stored):
    name, mech_id = op["name"], op["mechanism"]
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mech = MECHANISM_IDS.get(mech_id)
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if not is_upsert and stored.get(name, {}).get(mech) is None:
        # before the duplicate check, as Kafka 4.4 answers (tests/differential/test_security.py)
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    if seen.get((name, mech_id), 0) > 1:
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    if is_upsert:
        if op["iterations"] < MIN_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if op["iterations"] > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if not op["salt"] or not op["salted_password"]:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Empty salt or salted password"
    return None


async def handle(ctx, request):
    if not permits(ctx, _CLUSTER):
        users = dict.fromkeys(op["name"] for op in list(request["deletions"]) + list(request["upsertions"]))
        return {"throttle_time_ms": 0, "results": [
            {"user": u, "error_code": int(_CLUSTER.denial),
             "error_message": "ALTER"} for u in sorted(users)]}
    controller = ctx.services.controller
    stored = controller.scram_users()
    ops = [(op, False) for op in request["deletions"]] + [(op, True) for op in request["upsertions"]]
    seen: dict = {}
    for op, _ in ops:
        key = (op["name"], op["mechanism"])
        seen[key] = seen.get(key, 0) + 1
    errors: dict = {}
    for op, is_upsert in ops:
        if op["name"] not in errors:
            err = _check(op, is_upsert, seen, stored)
            if err is not None:
                errors[op["name"]] = err
    changes = []
    for op, is_upsert in ops:
        if op["name"] in errors:
            continue
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


def error_response(ctx, request, code):
    names = dict.fromkeys(op["name"] for op in list(request["deletions"]) + list(request["upsertions"]))
    return {"throttle_time_ms": 0, "results": [{"user": n, "error_code": int(code), "error_message": None}
                                               for n in names]}
