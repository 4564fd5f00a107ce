"""What the delegation-token APIs (38-41) share: who may ask (Kafka's ``allowTokenRequests``)
and the requester's principal.

Kafka 4.4 (ControllerApis / KafkaApis ``allowTokenRequests``) refuses token requests with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED from a principal authenticated with a delegation token (a
token must not beget tokens), on a PLAINTEXT listener, and on an SSL listener without a client
certificate (one-way TLS: ``User:ANONYMOUS``): a token is issued only to a principal the broker
authenticated.
"""
from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"


def principal(ctx) -> str:
    return getattr(ctx.connection, "principal", None) or ANONYMOUS


def token_requests_allowed(ctx) -> bool:
    conn = ctx.connection
    if getattr(conn, "token_authenticated", False):
        return False
    sec = getattr(conn, "sec", None)
    if sec is None or not (sec.tls or sec.sasl):
        return False   # PLAINTEXT
    if not sec.sasl and principal(ctx) == ANONYMOUS:
        return False   # SSL without a client certificate
    return True


def manager(ctx):
    """The broker's DelegationTokenManager (security/delegation_tokens.py), or None (a broker
    built without one: every request answers DELEGATION_TOKEN_AUTH_DISABLED)."""
    return getattr(ctx.broker, "token_manager", None)


def renew_or_expire_precheck(ctx):
    """RenewDelegationToken's and ExpireDelegationToken's first two answers, in Kafka's order:
    ``(answer, None)`` when refused (not allowed here: expiry -1; no secret key: expiry 0), else
    ``(None, manager)``."""
    from ..protocol.errors import ErrorCode
    from ..security.delegation_tokens import ERROR_TIMESTAMP
    if not token_requests_allowed(ctx):
        return {"error_code": int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
                "expiry_timestamp_ms": ERROR_TIMESTAMP, "throttle_time_ms": 0}, None
    tm = manager(ctx)
    if tm is None:
        return {"error_code": int(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED), "expiry_timestamp_ms": 0,
                "throttle_time_ms": 0}, None
    return None, tm
