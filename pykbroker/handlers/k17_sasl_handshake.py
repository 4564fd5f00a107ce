"""SaslHandshake (key 17), versions 0-1.

Behaviour (Apache Kafka SaslServerAuthenticator before authentication, KafkaApis after):
- On a SASL listener before authentication (security/authenticator.py): the mechanism is
  looked up among the listener's ``sasl.enabled.mechanisms``; enabled -> NONE and the list, and
  the connection waits for tokens (v0: raw frames, v1: SaslAuthenticate requests); not enabled
  -> UNSUPPORTED_SASL_MECHANISM with the list, then the connection closes.
- On an authenticated SASL connection: a re-authentication (KIP-368) when Kafka would begin one
  (v1, a client that authenticated with SaslAuthenticate v1+, at most once a second), else
  ILLEGAL_SASL_STATE as KafkaApis answers.
- PLAINTEXT or SSL listeners: ILLEGAL_SASL_STATE with no mechanisms.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 17
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py


async def handle(ctx: RequestContext, request: dict) -> dict:
    conn = ctx.connection
    auth = conn.authenticator if conn is not None else None   # None: not a SASL listener
    if auth is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    if auth.complete:
        return auth.reauthenticate(ctx.api_version, request["mechanism"])
    return auth.handshake(ctx.api_version, request["mechanism"])


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"error_code": int(code), "mechanisms": []}
