"""SaslAuthenticate (key 36), versions 0-2.

Behaviour (Apache Kafka SaslServerAuthenticator, KIP-152):
- After SaslHandshake v1 on a SASL listener, each request carries one client token
  (``auth_bytes``) of the mechanism's exchange and the answer the server's next token.
- Bad credentials: SASL_AUTHENTICATION_FAILED with Kafka's message, which never says whether
  the user exists; the connection closes after ``connection.failed.authentication.delay.ms``.
- ``session_lifetime_ms`` (v1+): ``connections.max.reauth.ms`` capped by an OAUTHBEARER token's
  expiry (0: the session does not expire); the client re-authenticates before it ends (KIP-368).
- Before a handshake, on PLAINTEXT/SSL listeners or once authenticated: ILLEGAL_SASL_STATE.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 36
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py


async def handle(ctx: RequestContext, request: dict) -> dict:
    conn = ctx.connection
    auth = conn.authenticator if conn is not None else None   # None: not a SASL listener
    if auth is None or auth.complete:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate request received after successful authentication"
                if auth is not None else "SaslAuthenticate is not expected on this listener",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    return auth.authenticate(ctx.api_version, bytes(request["auth_bytes"]))


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"error_code": int(code), "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
