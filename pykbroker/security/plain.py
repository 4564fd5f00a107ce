"""SASL/PLAIN server (RFC 4616; Kafka's PlainSaslServer), sans-IO.

The client's one token is ``authzid NUL username NUL password``; the answer is an empty token.
Kafka's rules: exactly three fields, username and password not empty, an authorization id
empty or equal to the username.  The password is compared in constant time, and an unknown
user fails exactly like a wrong password (the client cannot tell whether a user exists)."""
from __future__ import annotations

import hmac

from .errors import AuthenticationFailed


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users      # name -> password (the listener's JAAS users)
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN authentication already complete", internal=True)
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got %d" % len(parts))
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compared even for an unknown user, so the time taken does not tell it apart
        ok = hmac.compare_digest((expected if expected is not None else "\x00" + password).encode(),
                                 password.encode())
        if not ok or expected is None:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""
