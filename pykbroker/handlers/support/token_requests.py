"""What the delegation-token APIs (38-41) share: who may ask (Kafka's ``allowTokenRequests``)
and the requester's principal; Renew and Expire share their answer (renew_or_expire).

Kafka 4.4 (ControllerApis / KafkaApis ``allowTokenRequests``) refuses token requests with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED from a principal authenticated with a delegation token (a
token must not beget tokens), on a PLAINTEXT listener, and on an SSL listener without a client
certificate (one-way TLS: ``User:ANONYMOUS``): a token is issued only to a principal the broker
authenticated.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from ...server.dispatch import RequestContext

if TYPE_CHECKING:
    from ...security.delegation_tokens import DelegationTokenManager

log = logging.getLogger("pykbroker.security")

ANONYMOUS = "User:ANONYMOUS"


def principal(ctx: RequestContext) -> str:
    conn = ctx.connection
    return (conn.principal if conn is not None else None) or ANONYMOUS


def token_requests_allowed(ctx: RequestContext) -> bool:
    conn = ctx.connection
    if conn is None or conn.token_authenticated:
        return False
    sec = conn.sec
    if sec is None or not (sec.tls or sec.sasl):
        return False   # PLAINTEXT
    if not sec.sasl and principal(ctx) == ANONYMOUS:
        return False   # SSL without a client certificate
    return True


def manager(ctx: RequestContext) -> Optional[DelegationTokenManager]:
    """The broker's DelegationTokenManager (security/delegation_tokens.py), or None (a broker
    built without one: every request answers DELEGATION_TOKEN_AUTH_DISABLED)."""
    return ctx.services.token_manager


async def renew_or_expire(ctx: RequestContext, change: Any) -> dict:
    """RenewDelegationToken's and ExpireDelegationToken's answer.  First their two refusals, in
    Kafka's order (not allowed here: expiry -1; no secret key: expiry 0); then
    ``change(manager, principal)`` asks the token manager and returns ``(code, expiry, upserts,
    removals, note)``: a change is stored through the controller before the answer (and ``note``
    logged once it is), and an error answers expiry 0 (the response's default)."""
    from ...protocol.errors import ErrorCode
    from ...security.delegation_tokens import ERROR_TIMESTAMP
    if not token_requests_allowed(ctx):
        return _expiry_answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
    tm = manager(ctx)
    if tm is None:
        return _expiry_answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0)
    code, expiry, upserts, removals, note = change(tm, principal(ctx))
    if upserts or removals:
        await ctx.services.controller.alter_delegation_tokens(upserts=upserts, removals=removals)
        log.info("%s", note)
    return _expiry_answer(code, expiry if expiry is not None else 0)


def _expiry_answer(code: int, expiry_ms: int) -> dict:
    return {"error_code": int(code), "expiry_timestamp_ms": expiry_ms, "throttle_time_ms": 0}
