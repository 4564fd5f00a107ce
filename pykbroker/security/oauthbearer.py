"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured validator (its development default,
OAuthBearerUnsecuredValidatorCallbackHandler), sans-IO.

The client's first token: ``n,[a=<authzid>],\\x01auth=Bearer <jwt>\\x01[key=value\\x01]*\\x01``.
The JWT is unsecured (``"alg":"none"``, an empty signature) and is checked as Kafka checks it:
``exp`` present and numeric and not past (``now - allowable skew``), ``iat`` (if present)
numeric, not in the future and not after ``exp``, the principal claim (``sub`` by default)
a non-empty string, every required scope present in the scope claim (a string is one scope,
a list several).
A refusal is answered, as RFC 7628 §3.2.2 and Kafka do, with a JSON challenge
(``{"status":"invalid_token"}`` or ``{"status":"insufficient_scope", "scope":"[a, b]"}``); the
client acknowledges with ``\\x01`` and only then does authentication fail, with that JSON as the
message.  Extensions are accepted (the unsecured validator validates none).  Options (JAAS of
``listener.name.<l>.oauthbearer.sasl.jaas.config``): ``unsecuredValidatorPrincipalClaimName``,
``unsecuredValidatorScopeClaimName``, ``unsecuredValidatorRequiredScope`` (space-separated),
``unsecuredValidatorAllowableClockSkewMs``.  Signed tokens (JWKS) are not validated (SKIPPED.md).
"""
from __future__ import annotations

import base64
import json

from .errors import AuthenticationFailed

# Kafka's answer to a malformed exchange (a SaslException, not a SaslAuthenticationException, so
# its own text is not passed on; checked against Apache Kafka 4.4, tests/differential)
_GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, options: dict, now_ms):
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName") or "sub"
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName") or "scope"
        self._required = (options.get("unsecuredValidatorRequiredScope") or "").split()
        try:
            self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs") or 0)
        except ValueError:
            self._skew_ms = 0
        self._now_ms = now_ms
        self._error: str | None = None   # the JSON challenge sent, awaiting the client's \x01
        self.complete = False
        self.authorization_id: str | None = None
        self.lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed(_GENERIC)
        if self.complete:
            raise AuthenticationFailed(_GENERIC, internal=True)
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(_GENERIC) from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not rest.endswith("\x01\x01") or not (gs2 == "n,," or gs2.startswith("n,a=")) \
                or not gs2.endswith(","):
            raise AuthenticationFailed(_GENERIC)
        authzid = gs2[4:-1] if gs2.startswith("n,a=") else ""
        kv = {}
        for item in rest[:-2].split("\x01"):
            k, eq, v = item.partition("=")
            if not eq:
                raise AuthenticationFailed(_GENERIC)
            kv[k] = v
        auth = kv.get("auth", "")
        if not auth.startswith("Bearer "):
            raise AuthenticationFailed(_GENERIC)
        jwt = auth[len("Bearer "):].strip()
        failure = self._validate(jwt)
        if failure is not None:
            self._error = failure
            return self._error.encode()
        if authzid and authzid != self.authorization_id:
            principal, self.authorization_id = self.authorization_id, None
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id (%s) that is "
                                       "different from the token's principal name (%s)" % (authzid, principal))
        self.complete = True
        return b""

    def _validate(self, jwt: str):
        """None, or the JSON challenge in Kafka's exact text (OAuthBearerSaslServer.jsonErrorResponse:
        a space after the comma, the required scopes as a Java list)."""
        invalid = '{"status":"invalid_token"}'
        parts = jwt.split(".")
        if len(parts) != 3 or parts[2] != "":
            return invalid   # only unsecured (unsigned) tokens: a signed one is not validated here
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
        except (ValueError, UnicodeDecodeError):
            return invalid
        if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
            return invalid
        now = self._now_ms()
        exp = claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            return invalid
        exp_ms = int(exp * 1000)
        if now - self._skew_ms >= exp_ms:
            return invalid   # expired
        iat = claims.get("iat")
        if iat is not None:
            if isinstance(iat, bool) or not isinstance(iat, (int, float)):
                return invalid
            if int(iat * 1000) > now + self._skew_ms or int(iat * 1000) > exp_ms:
                return invalid
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            return invalid
        scope = claims.get(self._scope_claim)
        # a string claim is one scope (Kafka does not split it); a list holds several
        scopes = [scope] if isinstance(scope, str) else [s for s in scope if isinstance(s, str)] \
            if isinstance(scope, list) else []
        missing = [s for s in self._required if s not in scopes]
        if missing:
            return '{"status":"insufficient_scope", "scope":"[%s]"}' % ", ".join(self._required)
        self.authorization_id = principal
        self.lifetime_ms = exp_ms - now
        return None
