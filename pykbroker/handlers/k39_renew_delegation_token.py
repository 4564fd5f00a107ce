"""RenewDelegationToken (key 39), versions 1-2 (Kafka 4.4's range).

Behaviour (Apache Kafka 4.4: KafkaApis/ControllerApis.handleRenewDelegationTokenRequest, then
DelegationTokenControlManager.renewDelegationToken; security/delegation_tokens.py):
- a token-authenticated requester, a PLAINTEXT listener or one-way SSL:
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry -1;
- then, at the controller (expiry 0 on error, the response's default): no secret key
  DELEGATION_TOKEN_AUTH_DISABLED; no token with this HMAC DELEGATION_TOKEN_NOT_FOUND; its
  expiry or max timestamp before now DELEGATION_TOKEN_EXPIRED; the requester neither owner nor
  renewer DELEGATION_TOKEN_OWNER_MISMATCH;
- success: expiry = min(max timestamp, now + (``renew_period_ms`` if > 0, capped by
  ``delegation.token.expiry.time.ms``, else that default)), stored before the answer.
"""
from __future__ import annotations

from typing import Any

from ..server.dispatch import RequestContext
from .support.token_requests import renew_or_expire
from .support.versions import VERSIONS

API_KEY = 39
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py


def _renew(tm: Any, who: str, request: dict) -> tuple:
    code, expiry, info = tm.renew(who, bytes(request["hmac"]), request["renew_period_ms"])
    if info is None:
        return code, expiry, [], [], None
    return code, expiry, [info], [], "Delegation token %s of %s renewed by %s until %d" % (
        info.token_id, info.owner, who, expiry)


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await renew_or_expire(ctx, lambda tm, who: _renew(tm, who, request))
