"""ExpireDelegationToken (key 40), versions 1-2 (Kafka 4.4's range).

Behaviour (Apache Kafka 4.4: KafkaApis/ControllerApis.handleExpireDelegationTokenRequest, then
DelegationTokenControlManager.expireDelegationToken; security/delegation_tokens.py):
- a token-authenticated requester, a PLAINTEXT listener or one-way SSL:
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry -1;
- then, at the controller (expiry 0 on error): no secret key DELEGATION_TOKEN_AUTH_DISABLED; no
  token with this HMAC DELEGATION_TOKEN_NOT_FOUND; the requester neither owner nor renewer
  DELEGATION_TOKEN_OWNER_MISMATCH;
- a negative ``expiry_time_period_ms`` removes the token at once (answer: now); else an
  already expired token answers DELEGATION_TOKEN_EXPIRED, and a live one gets expiry =
  min(max timestamp, now + period) (0: now; the expiry check then removes it), stored before
  the answer.
"""
from __future__ import annotations

from typing import Any

from ..server.dispatch import RequestContext
from .support.token_requests import renew_or_expire
from .support.versions import VERSIONS

API_KEY = 40
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py


def _expire(tm: Any, who: str, request: dict) -> tuple:
    code, expiry, info, removed = tm.expire(who, bytes(request["hmac"]), request["expiry_time_period_ms"])
    if info is None and removed is None:
        return code, expiry, [], [], None
    return code, expiry, [info] if info is not None else [], [removed] if removed is not None else [], (
        "Delegation token %s expired by %s (%s)" % (removed or info.token_id, who,
                                                   "removed" if removed else "expiry %d" % expiry))


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await renew_or_expire(ctx, lambda tm, who: _expire(tm, who, request))
