"""Kafka's StandardAuthorizer decision rule over an index of the ACL bindings (sans-IO).

The rule (AK ``metadata/.../authorizer/StandardAuthorizerData.java``):
- a principal in ``super.users`` (``;``-separated ``User:name``) is always allowed;
- the bindings that apply to a resource are its LITERAL bindings, the LITERAL ``*`` bindings of
  its type and the PREFIXED bindings whose name is a prefix of its name;
- of those, a binding counts for the request when its principal is the request's or ``User:*``,
  its host ``*`` or the client's address, and its operation the requested one, ``ALL``, or (ALLOW
  only) one that implies it: READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
  DESCRIBE_CONFIGS;
- any DENY that counts wins; otherwise any ALLOW that counts allows; otherwise denied, except that
  when no binding at all applies to the resource (for any principal) the answer is
  ``allow.everyone.if.no.acl.found``.

Index: LITERAL bindings by (type, name), PREFIXED bindings by type then prefix, with the set of
prefix lengths in use, so a decision looks up the literal name, ``*`` and one dict entry per
prefix length in use: O(matching bindings + distinct prefix lengths), never O(all bindings).

The bindings are owned by the controller (stored in the metadata file); this index follows its
changes (``apply``).  ``generation`` changes with every change so per-connection decision caches
(``acl/check.py``) know when to drop what they remember.
"""
from __future__ import annotations

import logging
from typing import Iterable

from .bindings import (ALL, ALLOW, ALTER, ALTER_CONFIGS, CLUSTER, DELETE, DENY, DESCRIBE, DESCRIBE_CONFIGS,
                       LITERAL, PREFIXED, READ, SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_PRINCIPAL,
                       WILDCARD_RESOURCE, WRITE, AclBinding, AclBindingFilter)

log = logging.getLogger("pykbroker.authorizer")

# The class names Kafka 4.4 accepts in authorizer.class.name for its ACL authorizer (the KRaft
# one and the ZooKeeper-era name people still have in their server.properties).
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")

_IMPLIES_DESCRIBE = frozenset((DESCRIBE, READ, WRITE, DELETE, ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((DESCRIBE_CONFIGS, ALTER_CONFIGS))


def parse_super_users(text) -> frozenset:
    """``super.users``: ``User:a;User:b`` (Kafka splits on ';' and trims)."""
    if not text:
        return frozenset()
    if isinstance(text, (list, tuple)):
        text = ",".join(text)   # a list-typed config joined by ","; Kafka's separator is ';'
    return frozenset(p.strip() for p in str(text).split(";") if p.strip())


class Authorizer:
    def __init__(self, super_users=(), allow_everyone_if_no_acl_found: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_everyone = bool(allow_everyone_if_no_acl_found)
        self._literal: dict[tuple[int, str], list] = {}        # (type, name) -> [(principal, host, op, perm)]
        self._prefixed: dict[int, dict[str, list]] = {}        # type -> prefix -> [...]
        self._prefix_lens: dict[int, list[int]] = {}           # type -> sorted lengths in use
        self._all: set[AclBinding] = set()
        self.generation = 0

    # ------------------------------------------------------------------ the bindings
    def bindings(self) -> set:
        return set(self._all)

    def load(self, bindings: Iterable[AclBinding]) -> None:
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lens.clear()
        self._all = set()
        self.apply(added=bindings)

    def apply(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        """Follow the controller's change: bindings added and removed."""
        for b in removed:
            if b not in self._all:
                continue
            self._all.discard(b)
            entry = (b.principal, b.host, b.operation, b.permission)
            if b.pattern_type == LITERAL:
                lst = self._literal.get((b.resource_type, b.name))
                if lst is not None:
                    lst.remove(entry)
                    if not lst:
                        del self._literal[(b.resource_type, b.name)]
            else:
                by = self._prefixed.get(b.resource_type, {})
                lst = by.get(b.name)
                if lst is not None:
                    lst.remove(entry)
                    if not lst:
                        del by[b.name]
                        self._reindex_lengths(b.resource_type)
        for b in added:
            if b in self._all:
                continue
            self._all.add(b)
            entry = (b.principal, b.host, b.operation, b.permission)
            if b.pattern_type == LITERAL:
                self._literal.setdefault((b.resource_type, b.name), []).append(entry)
            else:
                by = self._prefixed.setdefault(b.resource_type, {})
                new = b.name not in by
                by.setdefault(b.name, []).append(entry)
                if new:
                    self._reindex_lengths(b.resource_type)
        self.generation += 1

    def _reindex_lengths(self, rtype: int) -> None:
        self._prefix_lens[rtype] = sorted({len(p) for p in self._prefixed.get(rtype, ())})

    def matching(self, rtype: int, name: str):
        """Every (principal, host, op, perm) that applies to the resource (any principal)."""
        lit = self._literal
        got = lit.get((rtype, name))
        if got:
            yield from got
        if name != WILDCARD_RESOURCE:
            got = lit.get((rtype, WILDCARD_RESOURCE))
            if got:
                yield from got
        lens = self._prefix_lens.get(rtype)
        if lens:
            by = self._prefixed[rtype]
            n = len(name)
            for ln in lens:
                if ln > n:
                    break
                got = by.get(name[:ln])
                if got:
                    yield from got

    # ------------------------------------------------------------------ decisions
    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, host: str, operation: int, rtype: int, name: str) -> bool:
        """StandardAuthorizerData.authorize for one action (module docstring)."""
        if principal in self.super_users:
            return True
        any_acl = False
        allowed = False
        for p, h, op, perm in self.matching(rtype, name):
            any_acl = True
            if p != principal and p != WILDCARD_PRINCIPAL:
                continue
            if h != WILDCARD_HOST and h != host:
                continue
            if op != ALL and op != operation:
                # implication holds for ALLOW only: a DENY of READ does not deny DESCRIBE
                if perm != ALLOW:
                    continue
                if operation == DESCRIBE:
                    if op not in _IMPLIES_DESCRIBE:
                        continue
                elif operation == DESCRIBE_CONFIGS:
                    if op not in _IMPLIES_DESCRIBE_CONFIGS:
                        continue
                else:
                    continue
            if perm == DENY:
                return False
            allowed = True
        if allowed:
            return True
        return self.allow_everyone if not any_acl else False

    def authorized_operations(self, principal: str, host: str, rtype: int, name: str) -> int:
        """The ``authorized_operations`` bit field: the supported operations of the type that
        ``authorize`` allows (AK AuthHelper.authorizedOperations)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(rtype, ()):
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << op
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, operation: int, rtype: int) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do ``operation`` on
        some resource of the type (e.g. WRITE on any topic lets an idempotent producer get a
        producer id, KIP-679).  Exact operation or ALL; a LITERAL ``*`` DENY refuses; otherwise an
        ALLOW not covered by a DENY of the same literal name or of a prefix of it allows."""
        # Kafka first authorizes a made-up name: super users, and allow.everyone when the type
        # has no binding for such a name.
        if self.authorize(principal, host, operation, rtype, "hardcode"):
            return True
        deny_lit, deny_pre, allow = set(), set(), []
        wildcard_allow = False
        for b in self._all:
            if b.resource_type != rtype:
                continue
            if b.host != host and b.host != WILDCARD_HOST:
                continue
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.operation != operation and b.operation != ALL:
                continue
            if b.permission == DENY:
                if b.pattern_type == LITERAL:
                    if b.name == WILDCARD_RESOURCE:
                        return False
                    deny_lit.add(b.name)
                else:
                    deny_pre.add(b.name)
            elif b.pattern_type == LITERAL and b.name == WILDCARD_RESOURCE:
                wildcard_allow = True
            else:
                allow.append(b)
        if wildcard_allow:
            return True
        for b in allow:
            if b.pattern_type == LITERAL and b.name in deny_lit:
                continue
            if any(b.name[:i] in deny_pre for i in range(1, len(b.name) + 1)):
                continue
            return True
        return False

    # ------------------------------------------------------------------ the ACL APIs
    def describe(self, flt: AclBindingFilter) -> list:
        return sorted(b for b in self._all if flt.matches(b))


def from_config(config):
    """The authorizer ``authorizer.class.name`` asks for, or None (Kafka's default: none)."""
    cls = config["authorizer.class.name"]
    if not cls:
        return None
    return Authorizer(parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"])


__all__ = ["Authorizer", "AUTHORIZER_CLASSES", "from_config", "parse_super_users", "CLUSTER"]
