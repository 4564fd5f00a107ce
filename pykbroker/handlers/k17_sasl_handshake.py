"""SaslHandshake (key 17), versions 0-1.

Behaviour (Apache Kafka SaslServerAuthenticator before authentication, KafkaApis after):
- On a SASL listener before authentication (security/authenticator.py): the mechanism is
  looked up among the listener's ``sasl.enabled.mechanisms``; enabled -> NONE and the list, and
  the connection waits for tokens (v0: raw frames, v1: SaslAuthenticate requests); not enabled
  -> UNSUPPORTED_SASL_MECHANISM with the list, then the connection closes.
- Anywhere else (PLAINTEXT or SSL listeners, an authenticated connection): ILLEGAL_SASL_STATE
  with no mechanisms, as KafkaApis answers (re-authentication, KIP-368, is not built).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx, request):
    auth = getattr(ctx.connection, "authenticator", None)
    if auth is None or auth.complete:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    return auth.handshake(ctx.api_version, request["mechanism"])


def error_response(ctx, request, code):
    return {"error_code": int(code), "mechanisms": []}
