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
prefix lengths in use, and under each resource pattern by principal.  A decision looks up the
literal name, ``*`` and one dict entry per prefix length in use, and under each only the
bindings of the request's principal and of ``User:*`` (the only ones Kafka's matchingPrincipals
can match): O(bindings that match the resource and the principal + distinct prefix lengths),
neither O(all bindings) nor O(every other principal's bindings on the same resource) -- a shared
``app-`` prefix with a thousand other users' bindings on it costs the same as one with none.
Whether any binding at all applies to the resource (``allow.everyone.if.no.acl.found``) is
whether one of those patterns has any principal.

Decision log: every decision a request's check makes goes to the logger ``kafka.authorizer.logger``
(Kafka's audit logger name, so a log4j-minded operator finds it), in Kafka's words: denials at
INFO, allows at DEBUG, e.g. ``Principal = User:alice is Denied operation = READ from host =
127.0.0.1 on resource = Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1
based on rule DefaultDeny`` (the rule: ``SuperUser``, ``DefaultAllow`` / ``DefaultDeny``, or the
``MatchingAcl(acl=StandardAcl(...))`` that decided).  ``authorized_operations`` probes are not
logged, nor are the denials of checks Kafka makes with ``logIfDenied = false`` (a filter or a
probe, not an access: Metadata's CREATE on the cluster and all-topics DESCRIBE, ListGroups,
CreateTopics' CLUSTER CREATE and DESCRIBE_CONFIGS, InitProducerId's IDEMPOTENT_WRITE,
OffsetForLeaderEpoch's CLUSTER_ACTION; Kafka logs those at TRACE).

Audit-only mode (``pykbroker.authorizer.audit.only=true``, pykbroker's own config, for teams
introducing ACLs): decisions are made and logged exactly as above, a denial's line ending with
``(audit only: allowed)``, but no check refuses: a denied request is served as if allowed (the
quiet checks' denials are logged at DEBUG then); ``authorized_operations`` still reports the real
decisions.

The bindings are owned by the controller (stored in the metadata file); this index follows its
changes (``apply``).  ``generation`` changes with every change so per-connection decision caches
(``acl/check.py``) know when to drop what they remember.
"""
from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator, Optional, Union

from .bindings import (ALL, ALLOW, ALTER, ALTER_CONFIGS, CLUSTER, DELETE, DENY, DESCRIBE, DESCRIBE_CONFIGS,
                       LITERAL, OPERATIONS, PATTERN_TYPES, PERMISSIONS, PREFIXED, READ, RESOURCE_TYPES,
                       SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, WRITE,
                       AclBinding, AclBindingFilter)

# SecurityUtils.resourceTypeName: the camel-case type names of Kafka's log lines
_TYPE_NAMES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User"}

log = logging.getLogger("pykbroker.authorizer")
# Kafka's audit logger (StandardAuthorizerData): one line per decision, see the module docstring
audit_log = logging.getLogger("kafka.authorizer.logger")

# The class names Kafka 4.4 accepts in authorizer.class.name for its ACL authorizer (the KRaft
# one and the ZooKeeper-era name people still have in their server.properties).
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")

_IMPLIES_DESCRIBE = frozenset((DESCRIBE, READ, WRITE, DELETE, ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((DESCRIBE_CONFIGS, ALTER_CONFIGS))


def parse_super_users(text: Union[str, list, tuple, None]) -> frozenset:
    """``super.users``: ``User:a;User:b`` (Kafka splits on ';' and trims)."""
    if not text:
        return frozenset()
    if isinstance(text, (list, tuple)):
        text = ",".join(text)   # a list-typed config joined by ","; Kafka's separator is ';'
    return frozenset(p.strip() for p in str(text).split(";") if p.strip())


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 audit_only: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone = bool(allow_everyone_if_no_acl_found)
        self.audit_only = bool(audit_only)
        # (type, name) -> principal -> [(principal, host, op, perm)]; a pattern's dict is never
        # left empty (removed with its last binding), so "present" means "some binding applies"
        self._literal: dict[tuple[int, str], dict[str, list]] = {}
        self._prefixed: dict[int, dict[str, dict[str, list]]] = {}   # type -> prefix -> principal -> [...]
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
        """Follow the controller's change: bindings added and removed (on one node from the
        metadata file's writer, on a cluster from the ZooKeeper watches too).  ``generation``
        moves, so every connection's cached decisions (acl/check.py) are dropped before its next
        check."""
        for b in removed:
            if b not in self._all:
                continue
            self._all.discard(b)
            by: dict[Any, dict[str, list]]
            key: Any
            if b.pattern_type == LITERAL:
                by, key = self._literal, (b.resource_type, b.name)
            else:
                by, key = self._prefixed.get(b.resource_type, {}), b.name
            principals = by.get(key)
            if principals is None:
                continue
            lst = principals.get(b.principal)
            if lst is not None:
                lst.remove((b.principal, b.host, b.operation, b.permission))
                if not lst:
                    del principals[b.principal]
            if not principals:
                del by[key]
                if b.pattern_type != LITERAL:
                    self._reindex_lengths(b.resource_type)
        for b in added:
            if b in self._all:
                continue
            self._all.add(b)
            entry = (b.principal, b.host, b.operation, b.permission)
            if b.pattern_type == LITERAL:
                self._literal.setdefault((b.resource_type, b.name), {}).setdefault(b.principal, []).append(entry)
            else:
                prefixes = self._prefixed.setdefault(b.resource_type, {})
                new = b.name not in prefixes
                prefixes.setdefault(b.name, {}).setdefault(b.principal, []).append(entry)
                if new:
                    self._reindex_lengths(b.resource_type)
        self.generation += 1

    def _reindex_lengths(self, rtype: int) -> None:
        self._prefix_lens[rtype] = sorted({len(p) for p in self._prefixed.get(rtype, ())})

    def _patterns(self, rtype: int, name: str) -> Iterator[dict[str, list]]:
        """The principal -> entries dicts of every pattern that applies to the resource: its
        literal name, the literal ``*``, then the prefixes, shortest first."""
        lit = self._literal
        got = lit.get((rtype, name))
        if got:
            yield got
        if name != WILDCARD_RESOURCE:
            got = lit.get((rtype, WILDCARD_RESOURCE))
            if got:
                yield got
        lens = self._prefix_lens.get(rtype)
        if lens:
            by = self._prefixed[rtype]
            n = len(name)
            for ln in lens:
                if ln > n:
                    break
                got = by.get(name[:ln])
                if got:
                    yield got

    def matching(self, rtype: int, name: str, principal: Optional[str] = None) -> Iterator[tuple]:
        """Every (principal, host, op, perm) that applies to the resource: of any principal, or
        (``principal`` given) of that principal and ``User:*``, the ones its decision reads."""
        for principals in self._patterns(rtype, name):
            if principal is None:
                for lst in principals.values():
                    yield from lst
                continue
            got = principals.get(principal)
            if got:
                yield from got
            if principal != WILDCARD_PRINCIPAL:
                got = principals.get(WILDCARD_PRINCIPAL)
                if got:
                    yield from got

    # ------------------------------------------------------------------ decisions
    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, host: str, operation: int, rtype: int, name: str) -> bool:
        """StandardAuthorizerData.authorize for one action (module docstring)."""
        return self.decide(principal, host, operation, rtype, name)[0]

    def decide(self, principal: str, host: str, operation: int, rtype: int, name: str) -> tuple[bool, Any]:
        """``(allowed, rule)``: the decision and what made it (Kafka's MatchingRule: None for
        the default rules and super users, else the deciding binding's entry)."""
        if principal in self.super_users:
            return True, _SUPER_USER
        any_acl = False
        allowed = None
        wildcard = principal == WILDCARD_PRINCIPAL
        for principals in self._patterns(rtype, name):
            any_acl = True   # a pattern is only indexed while it has a binding
            own = principals.get(principal)
            other = None if wildcard else principals.get(WILDCARD_PRINCIPAL)
            for entries in (own, other):
                if not entries:
                    continue
                for entry in entries:
                    _p, h, op, perm = entry
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
                        return False, entry
                    if allowed is None:
                        allowed = entry
        if allowed is not None:
            return True, allowed
        if not any_acl and self.allow_everyone:
            return True, _DEFAULT_ALLOW
        return False, _DEFAULT_DENY

    def log_decision(self, principal: str, host: str, operation: int, rtype: int, name: str, allowed: bool,
                     rule: Any, request: str, level: int = logging.INFO, refcount: int = 1) -> None:
        """One line of Kafka's audit log for a request's decision (module docstring) at ``level``
        for a denial (allows: DEBUG); the caller checked the level is enabled."""
        if rule is _SUPER_USER or rule is _DEFAULT_ALLOW or rule is _DEFAULT_DENY:
            why = rule
        else:
            why = self._rule_text(rtype, name, rule)
        text = ("Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s for request = %s "
                "with resourceRefCount = %d based on rule %s"
                % (principal, "Allowed" if allowed else "Denied", OPERATIONS.get(operation, operation), host,
                   _TYPE_NAMES.get(rtype, rtype), PATTERN_TYPES[LITERAL], name, request,
                   refcount, why))
        if allowed:
            audit_log.debug(text)
        else:
            audit_log.log(level, text + " (audit only: allowed)" if self.audit_only else text)

    def _rule_text(self, rtype: int, name: str, entry: tuple) -> str:
        """``MatchingAcl(acl=StandardAcl(...))`` for the binding whose entry decided: the literal
        binding of the name, of ``*``, or the longest prefixed one holding that entry."""
        p, h, op, perm = entry
        pattern, rname = LITERAL, name
        if entry not in self._literal.get((rtype, name), {}).get(p, ()):
            if entry in self._literal.get((rtype, WILDCARD_RESOURCE), {}).get(p, ()):
                rname = WILDCARD_RESOURCE
            else:
                by = self._prefixed.get(rtype, {})
                for ln in reversed(self._prefix_lens.get(rtype, ())):
                    if entry in by.get(name[:ln], {}).get(p, ()):
                        pattern, rname = PREFIXED, name[:ln]
                        break
        return ("MatchingAcl(acl=StandardAcl(resourceType=%s, resourceName=%s, patternType=%s, principal=%s, "
                "host=%s, operation=%s, permissionType=%s))"
                % (RESOURCE_TYPES.get(rtype, rtype), rname, PATTERN_TYPES[pattern], p, h,
                   OPERATIONS.get(op, op), PERMISSIONS.get(perm, perm)))

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


# Kafka's MatchingRule names of the rules that are not a binding
_SUPER_USER, _DEFAULT_ALLOW, _DEFAULT_DENY = "SuperUser", "DefaultAllow", "DefaultDeny"


def from_config(config: Any) -> Optional[Authorizer]:
    """The authorizer ``authorizer.class.name`` asks for, or None (Kafka's default: none)."""
    cls = config["authorizer.class.name"]
    if not cls:
        return None
    audit_only = config["pykbroker.authorizer.audit.only"]
    if audit_only:
        log.warning("pykbroker.authorizer.audit.only=true: ACL denials are logged (kafka.authorizer.logger) "
                    "but NOT enforced")
    return Authorizer(parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"],
                      audit_only=audit_only)


__all__ = ["Authorizer", "AUTHORIZER_CLASSES", "from_config", "parse_super_users", "CLUSTER"]
