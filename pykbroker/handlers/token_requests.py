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
