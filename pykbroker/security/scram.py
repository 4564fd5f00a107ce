"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's ScramSaslServer), sans-IO.

Exchange (each step one token in, one token out):
  client-first  ``n,[a=<authzid>],n=<saslname>,r=<client nonce>[,<extensions>]``
  server-first  ``r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>``
  client-final  ``c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>``
  server-final  ``v=<base64 server signature>``
The broker keeps only ``ScramCredential`` (salt, StoredKey, ServerKey, iterations), never the
password nor the salted password: the proof is checked as RFC 5802 §3 says (ClientKey = proof
XOR HMAC(StoredKey, AuthMessage); H(ClientKey) must equal StoredKey), always, in constant time.
Kafka's rules: only the ``n`` gs2 flag (no channel binding), an authorization id equal to the
user, only the ``tokenauth`` extension, the final nonce equal to the server's, iterations of at
least 4096.  With ``tokenauth=true`` the user name is a delegation token id and the credential
is the token's (security/delegation_tokens.py: derived from its base64 HMAC); the authorization
id is then the token owner's name and the exchange is token-authenticated (Kafka's
ScramServerCallbackHandler with a DelegationTokenCredentialCallback); the session lifetime ends
at the token's expiry timestamp, as Kafka's negotiated credential lifetime.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .errors import AuthenticationFailed

# What Kafka tells the client for any SCRAM failure but an authorization id mismatch: its
# ScramSaslServer throws SaslException, whose own text is not passed on (checked against Apache
# Kafka 4.4, tests/differential); the specific reason is kept for the broker's log only.
_GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism %s"



MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# AlterUserScramCredentials' mechanism ids (Kafka's ScramMechanism enum)
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPES = {v: k for k, v in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096      # Kafka's ScramMechanism.minIterations (RFC 7677 recommends 4096+)
MAX_ITERATIONS = 16384     # Kafka's AlterUserScramCredentials upper bound


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's stored form (ScramCredentialUtils.credentialToString)."""
        b = base64.b64encode
        return "salt=%s,stored_key=%s,server_key=%s,iterations=%d" % (
            b(self.salt).decode(), b(self.stored_key).decode(), b(self.server_key).decode(), self.iterations)

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        kv = dict(item.split("=", 1) for item in text.split(","))
        d = base64.b64decode
        return cls(d(kv["salt"]), d(kv["stored_key"]), d(kv["server_key"]), int(kv["iterations"]))


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.digest(key, msg, hash_name)


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials carries (the client salts the password) -> what is stored."""
    h = MECHANISMS[mechanism]
    client_key = _hmac(h, salted_password, b"Client Key")
    stored_key = hashlib.new(h, client_key).digest()
    server_key = _hmac(h, salted_password, b"Server Key")
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


def new_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """A fresh random salt (Kafka's formatter uses 32 random bytes... any unpredictable salt does)."""
    salt = os.urandom(32)
    return credential_from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                           iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def _decode_saslname(name: str) -> str:
    # RFC 5802 §5.1: "," and "=" travel as "=2C" and "=3D"; any other "=" is malformed
    if re.search(r"=(?!2C|3D)", name):
        raise AuthenticationFailed("Invalid SCRAM client first message: bad username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


_PRINTABLE_NONCE = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")   # RFC 5802 printable, no ","


class ScramServer:
    """One SCRAM exchange.  ``lookup(user, mechanism)`` returns the ScramCredential or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], Optional[ScramCredential]],
                 token_lookup: Optional[Callable[[str, str], Any]] = None) -> None:
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self._lookup = lookup
        # ``token_lookup(token id, mechanism)`` -> (ScramCredential, owner principal, expiry ms)
        # or None (DelegationTokenManager.scram_lookup); None: no delegation tokens
        self._token_lookup = token_lookup
        self._state = "client_first"
        self.complete = False
        self.authorization_id: str | None = None
        self.token_authenticated = False
        # the token id a tokenauth=true exchange authenticated with (for the broker's log line)
        self.token_id: str | None = None
        self.token_expiry_ms: int | None = None

    def _fail(self) -> AuthenticationFailed:
        # Kafka's answer to bad credentials at any step: the same text whether the user is
        # unknown or the proof wrong
        return AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                    "with SASL mechanism %s" % self.mechanism)

    def evaluate(self, token: bytes) -> bytes:
        try:
            return self._evaluate(token)
        except AuthenticationFailed as e:
            if e.passthrough:
                raise
            raise AuthenticationFailed(_GENERIC % self.mechanism, e.internal, detail=str(e)) from None

    def _evaluate(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            self._state = "failed"
            raise self._fail() from None
        if self._state == "client_first":
            return self._client_first(text)
        if self._state == "client_final":
            return self._client_final(text)
        raise AuthenticationFailed("SCRAM exchange in unexpected state %s" % self._state, internal=True)

    def _client_first(self, text: str) -> bytes:
        self._state = "failed"   # until this step succeeds
        m = re.fullmatch(r"(n,(?:a=([^,]*))?,)(n=([^,]*),r=([^,]*)((?:,.*)?))", text, re.S)
        if m is None:
            raise AuthenticationFailed("Invalid SCRAM client first message")
        gs2, authzid, bare, saslname, nonce, ext = m.groups()
        user = _decode_saslname(saslname)
        if not user or not nonce or not _PRINTABLE_NONCE.match(nonce):
            raise AuthenticationFailed("Invalid SCRAM client first message")
        extensions = {}
        for item in filter(None, ext.split(",")):
            k, _, v = item.partition("=")
            extensions[k] = v
        if set(extensions) - {"tokenauth"}:
            raise AuthenticationFailed("Unsupported extensions will not be handled by the server")
        tokenauth = extensions.get("tokenauth", "false").lower() == "true"
        if authzid and _decode_saslname(authzid) != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", passthrough=True)
        if tokenauth:
            found = self._token_lookup(user, self.mechanism) if self._token_lookup is not None else None
            if found is None:   # unknown (or removed) token, or tokens disabled
                raise self._fail()
            cred, owner, self.token_expiry_ms = found
            # Kafka's principal builder makes User:<authorization id> of the owner's name
            self._owner_name = owner.partition(":")[2]
        else:
            cred = self._lookup(user, self.mechanism)
            if cred is None:
                raise self._fail()
        self._tokenauth = tokenauth
        self._user, self._cred, self._gs2 = user, cred, gs2
        self._nonce = nonce + secrets.token_urlsafe(24)   # no "," in the URL-safe alphabet
        server_first = "r=%s,s=%s,i=%d" % (self._nonce, base64.b64encode(cred.salt).decode(), cred.iterations)
        self._auth_prefix = bare + "," + server_first
        self._state = "client_final"
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = "failed"
        m = re.fullmatch(r"(c=([^,]*),r=([^,]*)(?:,[^p][^,]*)*),p=([^,]*)", text, re.S)
        if m is None:
            raise AuthenticationFailed("Invalid SCRAM client final message")
        without_proof, binding, nonce, proof_b64 = m.groups()
        try:
            binding = base64.b64decode(binding, validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client final message") from None
        if not hmac.compare_digest(nonce.encode(), self._nonce.encode()):
            raise AuthenticationFailed("Invalid client nonce in the final client message.")
        if binding != self._gs2.encode():
            raise AuthenticationFailed("Invalid SCRAM channel binding in the final client message")
        auth_message = (self._auth_prefix + "," + without_proof).encode()
        cred = self._cred
        signature = _hmac(self._hash, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail()
        client_key = _xor(proof, signature)
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise self._fail()
        server_signature = _hmac(self._hash, cred.server_key, auth_message)
        if self._tokenauth:
            self.authorization_id = self._owner_name
            self.token_authenticated = True
            self.token_id = self._user
        else:
            self.authorization_id = self._user
        self.complete = True
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)
