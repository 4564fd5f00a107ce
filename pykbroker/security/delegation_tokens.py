"""Delegation tokens (KIP-48, KIP-373), sans-IO: Kafka's rules and the broker's token cache.

A delegation token lets a client that cannot use the strong credentials of its owner (a Spark
executor, a job) authenticate as that owner: the owner (or, KIP-373, a principal allowed
CREATE_TOKENS on ``User:<owner>``) asks CreateDelegationToken on a SASL connection; the broker
answers a token id and its HMAC; the client then authenticates with SCRAM (SHA-256 or SHA-512),
user name = token id, password = base64 HMAC, extension ``tokenauth=true``, and its principal is
the token's owner (marked token-authenticated: it may not ask for tokens itself).

``DelegationTokenManager`` owns the broker's view of the tokens (Kafka's DelegationTokenCache):
every token's ``TokenInformation``, the index by HMAC, and the SCRAM credentials derived from
the HMAC for both mechanisms.  It does not store anything: it decides (``create``, ``renew``,
``expire``, ``expired``, ``visible``), the caller makes the change durable through the
controller (``Controller.alter_delegation_tokens``: the metadata file on one node, Kafka's
``/delegation_token`` znodes on a ZooKeeper cluster), and the controller tells the manager what
is stored now (``apply``), as Kafka's token cache follows the metadata.

Rules, as Apache Kafka 4.4 (KRaft ``DelegationTokenControlManager`` and ``ControllerApis``;
KafkaApis for Describe):
- enabled only when ``delegation.token.secret.key`` (or the deprecated
  ``delegation.token.master.key``) is set: else DELEGATION_TOKEN_AUTH_DISABLED;
- the HMAC is HmacSHA512 of the token id's UTF-8 bytes keyed by the secret's UTF-8 bytes; the
  token id is Kafka's ``Uuid.randomUuid().toString()`` (16 random bytes, URL-safe base64, no
  padding, never starting with ``-``);
- create: max lifetime = the request's if > 0, capped by ``delegation.token.max.lifetime.ms``
  (7 days), expiry = min(max timestamp, now + ``delegation.token.expiry.time.ms`` (1 day));
  renewers must be ``User`` principals (INVALID_PRINCIPAL_TYPE);
- renew by HMAC: DELEGATION_TOKEN_NOT_FOUND, then _EXPIRED (max or expiry timestamp before
  now), then _OWNER_MISMATCH (neither owner nor renewer), in that order; new expiry =
  min(max timestamp, now + (period if > 0 capped by the default renew time, else the default));
- expire by HMAC: NOT_FOUND, OWNER_MISMATCH, then a negative period removes the token at once
  (answer: now), an expired token answers EXPIRED, else expiry = min(max, now + period);
- every ``delegation.token.expiry.check.interval.ms`` (1 hour) tokens whose expiry or max
  timestamp is before now are removed (``expired``); until then an expired token still
  authenticates, as in Kafka;
- timestamps follow the broker's clock (``broker.clock``), so tests move a token past its expiry.
"""
from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Optional

from ..protocol.errors import ErrorCode
from .scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, new_credential

USER_TYPE = "User"
# Kafka's DelegationTokenManager.ErrorTimestamp: the expiry answered with a refused request
ERROR_TIMESTAMP = -1


@dataclass(frozen=True)
class TokenInformation:
    """Kafka's TokenInformation.  Principals as ``Type:name`` strings (``User:alice``)."""
    token_id: str
    owner: str
    requester: str
    renewers: tuple
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: str) -> bool:
        """May renew or expire it (the controller's allowedToRenew: not the requester)."""
        return principal == self.owner or principal in self.renewers

    def involves(self, principal: str) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer, which Describe uses: the owner, the
        requester (KIP-373) or a renewer."""
        return principal == self.owner or principal == self.requester or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        # Kafka compares with "<": a token is still valid at exactly its expiry timestamp
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    # The stored form: Kafka's ZooKeeper token znode (DelegationTokenManagerZk.toJsonCompatibleMap,
    # version 3: principals sanitized as Kafka's Sanitizer); the metadata file keeps the same map.
    def to_json(self) -> dict:
        from urllib.parse import quote

        def s(p: str) -> str:   # Kafka's Sanitizer: URL-encoded (':' -> %3A, '*' -> %2A, ' ' -> %20)
            return quote(p, safe="").replace("~", "%7E")
        return {"version": 3, "owner": s(self.owner), "tokenRequester": s(self.requester),
                "renewers": [s(r) for r in self.renewers], "issueTimestamp": self.issue_timestamp,
                "maxTimestamp": self.max_timestamp, "expiryTimestamp": self.expiry_timestamp,
                "tokenId": self.token_id}

    @classmethod
    def from_json(cls, obj: dict) -> "TokenInformation":
        from urllib.parse import unquote
        version = int(obj["version"])
        if not 0 < version <= 3:
            raise ValueError("token info version %d not understood" % version)
        owner = unquote(str(obj["owner"]))
        requester = unquote(str(obj["tokenRequester"])) if version >= 3 else owner
        return cls(token_id=str(obj["tokenId"]), owner=owner, requester=requester,
                   renewers=tuple(unquote(str(r)) for r in obj.get("renewers") or ()),
                   issue_timestamp=int(obj["issueTimestamp"]), max_timestamp=int(obj["maxTimestamp"]),
                   expiry_timestamp=int(obj["expiryTimestamp"]))


def split_principal(principal: str) -> tuple[str, str]:
    """``User:alice`` -> ("User", "alice") (Kafka's SecurityUtils.parseKafkaPrincipal)."""
    t, _, n = principal.partition(":")
    return t, n


def create_hmac(secret: str, token_id: str) -> bytes:
    """Kafka's createHmac: HmacSHA512 keyed by the secret's UTF-8 bytes over the id's."""
    return _hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def new_token_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: URL-safe base64 of 16 random bytes without
    padding (22 characters); Kafka draws again when it starts with ``-`` (it would read as a
    command-line option) or is one of its two reserved ids (all zeros, METADATA_TOPIC_ID)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and raw not in (bytes(16), bytes(15) + b"\x01"):
            return text


def secret_key(config: Any) -> Optional[str]:
    """``delegation.token.secret.key``, else the deprecated ``delegation.token.master.key``;
    None (tokens disabled) when neither is set or it is empty (Kafka's tokenAuthEnabled)."""
    for key in ("delegation.token.secret.key", "delegation.token.master.key"):
        v = config[key]
        if v:
            return str(v)
    return None


class DelegationTokenManager:
    """The broker's token cache and Kafka's decisions over it (module docstring).

    ``now_ms``: the broker's clock.  Decisions return what to change; ``apply`` is called by
    the controller with what is stored."""

    def __init__(self, secret: Optional[str], max_lifetime_ms: int, renew_time_ms: int,
                 check_interval_ms: int, now_ms: Callable[[], int]) -> None:
        self.secret = secret
        self.max_lifetime_ms = max_lifetime_ms
        self.renew_time_ms = renew_time_ms
        self.check_interval_ms = check_interval_ms
        self._now = now_ms
        self._tokens: dict[str, TokenInformation] = {}
        self._by_hmac: dict[str, str] = {}            # base64 HMAC -> token id
        self._scram: dict[str, dict[str, ScramCredential]] = {}   # token id -> mechanism -> credential

    @classmethod
    def from_config(cls, config: Any, now_ms: Callable[[], int]) -> "DelegationTokenManager":
        return cls(secret_key(config), config["delegation.token.max.lifetime.ms"],
                   config["delegation.token.expiry.time.ms"], config["delegation.token.expiry.check.interval.ms"],
                   now_ms)

    @property
    def enabled(self) -> bool:
        return self.secret is not None

    def now_ms(self) -> int:
        return self._now()

    # ------------------------------------------------------------------ the cache
    def apply(self, upserts: Iterable[TokenInformation] = (), removals: Iterable[str] = ()) -> None:
        """What the controller stores now (at load, after a write, on a ZooKeeper notice)."""
        for token_id in removals:
            self._tokens.pop(token_id, None)
            self._scram.pop(token_id, None)
            for k in [k for k, v in self._by_hmac.items() if v == token_id]:
                del self._by_hmac[k]
        for info in upserts:
            known = info.token_id in self._tokens
            self._tokens[info.token_id] = info
            if known or self.secret is None:
                continue   # the HMAC and credentials depend only on the id and the secret
            b64 = base64.b64encode(create_hmac(self.secret, info.token_id)).decode()
            self._by_hmac[b64] = info.token_id
            # Kafka's DelegationTokenManager.prepareScramCredentials: a credential per SCRAM
            # mechanism from the base64 HMAC as the password, a fresh salt, the minimum iterations
            self._scram[info.token_id] = {m: new_credential(m, b64, MIN_ITERATIONS) for m in MECHANISMS}

    def tokens(self) -> list[TokenInformation]:
        return sorted(self._tokens.values(), key=lambda t: (t.issue_timestamp, t.token_id))

    def token(self, token_id: str) -> Optional[TokenInformation]:
        return self._tokens.get(token_id)

    def hmac_of(self, token_id: str) -> bytes:
        return create_hmac(self.secret, token_id) if self.secret is not None else b""

    def _by(self, hmac: bytes) -> Optional[TokenInformation]:
        token_id = self._by_hmac.get(base64.b64encode(bytes(hmac)).decode())
        return self._tokens.get(token_id) if token_id is not None else None

    def scram_lookup(self, token_id: str, mechanism: str) -> Optional[tuple[ScramCredential, str, int]]:
        """For SCRAM ``tokenauth=true``: (credential, owner principal, expiry timestamp) or None
        (Kafka's ScramServerCallbackHandler with a DelegationTokenCredentialCallback)."""
        creds = self._scram.get(token_id)
        info = self._tokens.get(token_id)
        if creds is None or info is None or mechanism not in creds:
            return None
        return creds[mechanism], info.owner, info.expiry_timestamp

    # ------------------------------------------------------------------ decisions
    def create(self, owner: str, requester: str, renewers: list,
               max_lifetime_ms: int) -> tuple[ErrorCode, Optional[TokenInformation], bytes]:
        """(error code, TokenInformation to store or None, hmac)."""
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None, b""
        if any(split_principal(r)[0] != USER_TYPE for r in renewers):
            return ErrorCode.INVALID_PRINCIPAL_TYPE, None, b""
        now = self._now()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(self.max_lifetime_ms, max_lifetime_ms)
        max_ts = _sum(now, lifetime)
        expiry = min(max_ts, _sum(now, self.renew_time_ms))
        token_id = new_token_id()
        info = TokenInformation(token_id, owner, requester, tuple(renewers), now, max_ts, expiry)
        return ErrorCode.NONE, info, create_hmac(self.secret, token_id)

    def renew(self, principal: str, hmac: bytes,
              period_ms: int) -> tuple[ErrorCode, Optional[int], Optional[TokenInformation]]:
        """(error code, new expiry or None, TokenInformation to store or None)."""
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None, None
        info = self._by(hmac)
        if info is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None, None
        now = self._now()
        if info.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, None, None
        if not info.owner_or_renewer(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, None, None
        life = self.renew_time_ms if period_ms <= 0 else min(self.renew_time_ms, period_ms)
        expiry = min(info.max_timestamp, now + life)
        return ErrorCode.NONE, expiry, replace(info, expiry_timestamp=expiry)

    def expire(self, principal: str, hmac: bytes, period_ms: int
               ) -> tuple[ErrorCode, Optional[int], Optional[TokenInformation], Optional[str]]:
        """(error code, expiry answered or None, TokenInformation to store or None, token id to
        remove or None)."""
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None, None, None
        info = self._by(hmac)
        if info is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None, None, None
        if not info.owner_or_renewer(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, None, None, None
        now = self._now()
        if period_ms < 0:
            return ErrorCode.NONE, now, None, info.token_id   # expire at once: removed
        if info.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, None, None, None
        expiry = min(info.max_timestamp, _sum(now, period_ms))
        return ErrorCode.NONE, expiry, replace(info, expiry_timestamp=expiry), None

    def expired(self) -> list[str]:
        """The ids of the tokens the expiry check removes now."""
        now = self._now()
        return [t.token_id for t in self.tokens() if t.expired(now)]

    def visible(self, requester: str, owners: Optional[list], may_describe_token: Callable[[str], bool],
                may_describe_owner_tokens: Callable[[str], bool]) -> list[TokenInformation]:
        """Kafka's DelegationTokenManager.filterToken over every token: those of the owners
        named (each token owned, requested or renewable by one of them; None = every owner),
        and of those, the ones the requester owns, requested or may renew, plus those it may
        DESCRIBE
        (DELEGATION_TOKEN resource = the token id) or whose owner it may DESCRIBE_TOKENS
        (USER resource = the owner principal)."""
        out = []
        for t in self.tokens():
            if owners is not None and not any(t.involves(o) for o in owners):
                continue
            if t.involves(requester) or may_describe_token(t.token_id) \
                    or may_describe_owner_tokens(t.owner):
                out.append(t)
        return out


def _sum(now: int, duration: int) -> int:
    # Kafka's overflow guard: a timestamp saturates at Long.MAX_VALUE
    return min(now + duration, (1 << 63) - 1)
