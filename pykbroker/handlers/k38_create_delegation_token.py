"""CreateDelegationToken (key 38), versions 1-3 (Kafka 4.4's range; v0 was removed in 4.0).

Behaviour (Apache Kafka 4.4: KafkaApis.handleCreateTokenRequest on the broker, then the
controller's DelegationTokenControlManager.createDelegationToken; security/delegation_tokens.py):
- the owner is the requester unless v3's ``owner_principal_name`` is set (KIP-373);
- checked in Kafka's order: a token-authenticated requester, a PLAINTEXT listener or an SSL one
  without a client certificate: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; another owner than the
  requester without CREATE_TOKENS on ``USER:<owner>`` (only with an authorizer):
  DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer that is not a ``User``:
  INVALID_PRINCIPAL_TYPE; these three answer timestamps -1, an empty id and HMAC (the broker's
  prepareResponse); then, at the controller, no ``delegation.token.secret.key``:
  DELEGATION_TOKEN_AUTH_DISABLED with timestamps 0 (the controller's response defaults);
- success: issue = now (``broker.clock``), max = now + min(request's max lifetime if > 0,
  ``delegation.token.max.lifetime.ms``), expiry = min(max, now + ``delegation.token.expiry.time.ms``),
  a fresh token id and its HmacSHA512, stored durably through the controller before the answer;
- the owner (and, from v3, the requester) principal are answered on every path.
"""
from __future__ import annotations

import logging

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..security.delegation_tokens import split_principal
from ..server.dispatch import RequestContext
from .support.token_requests import manager, principal, token_requests_allowed
from .support.versions import VERSIONS

log = logging.getLogger("pykbroker.security")

API_KEY = 38
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_OWNER = need(API_KEY, "owner")


def _answer(code: int, owner: str, requester: str, ts: int = -1, token_id: str = "", hmac: bytes = b"",
            issue: int | None = None, expiry: int | None = None, max_ts: int | None = None) -> dict:
    ot, on = split_principal(owner)
    rt, rn = split_principal(requester)
    return {"error_code": int(code), "principal_type": ot, "principal_name": on,
            "token_requester_principal_type": rt, "token_requester_principal_name": rn,
            "issue_timestamp_ms": ts if issue is None else issue,
            "expiry_timestamp_ms": ts if expiry is None else expiry,
            "max_timestamp_ms": ts if max_ts is None else max_ts,
            "token_id": token_id, "hmac": hmac, "throttle_time_ms": 0}


async def handle(ctx: RequestContext, request: dict) -> dict:
    requester = principal(ctx)
    name = request.get("owner_principal_name")
    owner = requester if not name else "%s:%s" % (request.get("owner_principal_type") or "", name)
    renewers = ["%s:%s" % (r["principal_type"], r["principal_name"]) for r in request["renewers"]]
    if not token_requests_allowed(ctx):
        return _answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    if owner != requester and not permits(ctx, _OWNER, owner):
        return _answer(_OWNER.denial, owner, requester)
    if any(split_principal(r)[0] != "User" for r in renewers):
        return _answer(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    tm = manager(ctx)
    if tm is None:
        return _answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, owner, requester, ts=0)
    code, info, hmac = tm.create(owner, requester, renewers, request["max_lifetime_ms"])
    if info is None:
        return _answer(code, owner, requester, ts=0)
    await ctx.services.controller.alter_delegation_tokens(upserts=[info])
    # Kafka's line (never the HMAC: with the id it is the token's password)
    log.info("Created a delegation token: %s for owner: %s (requester %s)", info.token_id, owner, requester)
    return _answer(ErrorCode.NONE, owner, requester, token_id=info.token_id, hmac=hmac,
                   issue=info.issue_timestamp, expiry=info.expiry_timestamp, max_ts=info.max_timestamp)
