"""DescribeDelegationToken (key 41), versions 1-3 (Kafka 4.4's range).

Behaviour (Apache Kafka 4.4 KafkaApis.handleDescribeTokensRequest and
DelegationTokenManager.filterToken; security/delegation_tokens.py):
- a token-authenticated requester, a PLAINTEXT listener or one-way SSL:
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; no secret key: DELEGATION_TOKEN_AUTH_DISABLED; both
  with no tokens;
- ``owners`` an empty list: no tokens; null: every owner; else the tokens owned, requested
  (KIP-373) or renewable by one of the principals named (Kafka's TokenInformation.ownerOrRenewer);
- of those, the requester sees the tokens it owns, requested or may renew, and the others only with
  DESCRIBE on the DELEGATION_TOKEN resource named by the token id, or DESCRIBE_TOKENS on the
  USER resource of the owner (without an authorizer every check allows: every token);
- each token with its owner, requester (v3), timestamps, id, HMAC and renewers; ordered by
  issue time (Kafka's is its cache's hash order).
"""
from __future__ import annotations

from typing import Any

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..security.delegation_tokens import split_principal
from ..server.dispatch import RequestContext
from .support.token_requests import manager, principal, token_requests_allowed
from .support.versions import VERSIONS

API_KEY = 41
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_OWNER = need(API_KEY, "owner")
_TOKEN = need(API_KEY, "token")


def _principal(p: str) -> dict:
    t, n = split_principal(p)
    return {"principal_type": t, "principal_name": n}


def _answer(code: int, tokens: Any = ()) -> dict:
    return {"error_code": int(code), "tokens": list(tokens), "throttle_time_ms": 0}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not token_requests_allowed(ctx):
        return _answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    tm = manager(ctx)
    if tm is None or not tm.enabled:
        return _answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    owners = request["owners"]
    if owners is not None and not owners:
        return _answer(ErrorCode.NONE)
    wanted = None if owners is None else ["%s:%s" % (o["principal_type"], o["principal_name"]) for o in owners]
    tokens = tm.visible(principal(ctx), wanted,
                        lambda token_id: permits(ctx, _TOKEN, token_id),
                        lambda owner: permits(ctx, _OWNER, owner))
    out = []
    for t in tokens:
        ot, on = split_principal(t.owner)
        rt, rn = split_principal(t.requester)
        out.append({"principal_type": ot, "principal_name": on,
                    "token_requester_principal_type": rt, "token_requester_principal_name": rn,
                    "issue_timestamp": t.issue_timestamp, "expiry_timestamp": t.expiry_timestamp,
                    "max_timestamp": t.max_timestamp, "token_id": t.token_id, "hmac": tm.hmac_of(t.token_id),
                    "renewers": [_principal(r) for r in t.renewers]})
    return _answer(ErrorCode.NONE, out)
