"""The one authorization check every handler calls: :func:`permits` with a row of the
requirement table (acl/requirements.py), which says the operation and resource type, so that no
handler names an operation itself.

A connection of a broker with an authorizer holds an ``AuthSession`` (``connection.authz``):
the authorizer handed in at the connection's start, the client's address, and the principal
read from the connection at each check (SASL sets it once authenticated).  Handlers call the
functions below with their ``ctx``; with no authorizer (the default) ``ctx.connection.authz`` is
None and every check allows, as Kafka without an authorizer.

Decisions are cached per connection: a decision depends only on the principal, the address and
the bindings, so a connection asking again (every Produce names its topics) gets the answer
from a dict until the bindings change (the authorizer's ``generation``) or the cache fills.

Each check is written to the decision log (``kafka.authorizer.logger``: denials at INFO, allows
at DEBUG, only when that level is on) naming the request being served (``request``, set by the
dispatcher), cached or not; in audit-only mode a denial is logged and then allowed
(acl/authorizer.py).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from .authorizer import audit_log
from .bindings import CLUSTER, CLUSTER_NAME, DESCRIBE, SUPPORTED_OPERATIONS

if TYPE_CHECKING:   # annotations only: acl/ does not import the server layer
    from ..protocol.errors import ErrorCode
    from ..server.dispatch import RequestContext
    from .authorizer import Authorizer
    from .requirements import Need

_CACHE_MAX = 4096   # per connection: a client touching more resources just recomputes


class AuthSession:
    __slots__ = ("authorizer", "connection", "host", "_gen", "_cache", "_principal", "request", "_debug")

    def __init__(self, authorizer: Authorizer, connection: Any) -> None:
        self.authorizer = authorizer
        self.connection = connection
        peer = getattr(connection, "peer", "") or ""
        # Kafka compares binding hosts with the client's IP address (InetAddress.getHostAddress)
        self.host = peer.rsplit(":", 1)[0].strip("[]") if ":" in peer else peer
        self._gen = -1
        self._cache: dict = {}
        self._principal: Any = None   # a str once _fresh() ran, which every decision does first
        self.begin("Unknown")

    def begin(self, request: str) -> None:
        """A request starts (the dispatcher calls this): its name for the decision log, and
        whether allows are logged (DEBUG), read once per request rather than per check."""
        self.request = request   # Kafka's ApiKeys name
        self._debug = audit_log.isEnabledFor(logging.DEBUG)

    def _info(self) -> bool:
        """Whether denials are logged at INFO (read at the denial: most requests have none)."""
        return self._debug or audit_log.isEnabledFor(logging.INFO)

    @property
    def principal(self) -> str:
        return self.connection.principal   # Kafka's principal on every listener (server/secure.py)

    def _fresh(self) -> dict:
        p = self.connection.principal
        if self._gen != self.authorizer.generation or p != self._principal or len(self._cache) > _CACHE_MAX:
            self._cache = {}
            self._gen = self.authorizer.generation
            self._principal = p
        return self._cache

    def allowed(self, operation: int, rtype: int, name: str, log_denied: bool = True) -> bool:
        """The decision for the request being served; ``log_denied=False`` for Kafka's
        ``logIfDenied = false`` checks (a filter or a probe: a denial is not logged at INFO)."""
        # the cache's checks inlined (every Produce and Fetch comes here once per topic); the
        # size bound is checked only when a decision is added
        p = self.connection.principal
        if self._gen != self.authorizer.generation or p != self._principal:
            self._fresh()
        cache = self._cache
        key = (operation, rtype, name)
        got = cache.get(key)
        if got is None:
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            got = cache[key] = self.authorizer.decide(p, self.host, operation, rtype, name)
        if got[0]:
            if self._debug:
                self.authorizer.log_decision(self._principal, self.host, operation, rtype, name, True, got[1],
                                             self.request)
            return True
        rule = got[1]
        level = logging.INFO if log_denied else logging.DEBUG if self.authorizer.audit_only else None
        if level is not None and (self._debug if level == logging.DEBUG else self._info()):
            self.authorizer.log_decision(self._principal, self.host, operation, rtype, name, False, rule,
                                         self.request, level)
        return self.authorizer.audit_only

    def once_per_name(self, need: Need) -> Callable[[str], bool]:
        """:meth:`permits` of ``need`` as a check ``name -> bool`` for one request that decides
        (and logs) each distinct name once, however many of the request's partitions name it:
        Kafka's handlers authorize a request's distinct resources, not its partitions
        (AuthHelper.filterByAuthorized), and a Fetch parked for ``max_wait_ms`` is not decided
        again when it wakes (Kafka's DelayedFetch reads without authorizing)."""
        decided: dict = {}
        op, rtype = need.operation, need.resource_type

        def check(name: str) -> bool:
            ok = decided.get(name)
            if ok is None:
                ok = decided[name] = self.allowed(op, rtype, name)
            return ok
        return check

    def permits(self, need: Need, name: str = CLUSTER_NAME, log_denied: bool = True) -> bool:
        """:meth:`allowed` for a row of acl/requirements.py (``name``: the cluster's by default)."""
        return self.allowed(need.operation, need.resource_type, name, log_denied)

    def permits_any(self, need: Need) -> bool:
        """Whether some resource of ``need``'s type allows its operation (Kafka's
        authorizeByResourceType: InitProducerId's idempotent fallback)."""
        return self.by_resource_type(need.operation, need.resource_type)

    def operations(self, rtype: int, name: str) -> int:
        self._fresh()
        return self.authorizer.authorized_operations(self._principal, self.host, rtype, name)

    def by_resource_type(self, operation: int, rtype: int) -> bool:
        self._fresh()
        if self.authorizer.authorize_by_resource_type(self._principal, self.host, operation, rtype):
            return True
        if self._info():
            # Kafka logs the made-up resource its authorizeByResourceType starts with
            self.authorizer.log_decision(self._principal, self.host, operation, rtype, "hardcode", False,
                                         "DefaultDeny", self.request)
        return self.authorizer.audit_only


def session(ctx: RequestContext) -> Optional[AuthSession]:
    """The connection's AuthSession, or None when the broker has no authorizer."""
    return getattr(ctx.connection, "authz", None)


def permits(ctx: RequestContext, need: Need, name: str = CLUSTER_NAME, log_denied: bool = True) -> bool:
    """Whether the client may do what ``need`` (a row of acl/requirements.py) says on ``name``
    (the cluster's by default); always without an authorizer."""
    a = getattr(ctx.connection, "authz", None)
    return a is None or a.allowed(need.operation, need.resource_type, name, log_denied)


def permits_role(ctx: RequestContext, role: str, name: str = CLUSTER_NAME, log_denied: bool = True) -> bool:
    """:func:`permits` with the row ``role`` of the API being served (``ctx.api_key``): for the
    helpers several APIs share (modern groups, share-group offsets, share state)."""
    a = getattr(ctx.connection, "authz", None)
    if a is None:
        return True
    from .requirements import row
    return a.permits(row(ctx.api_key, role), name, log_denied)


def denial(ctx: RequestContext, role: str) -> ErrorCode:
    """The error the row ``role`` of the API being served answers a denial with (after a
    :func:`permits_role` refusal)."""
    from .requirements import row
    return row(ctx.api_key, role).denial


def topic_describe_check(ctx: RequestContext, need: Need) -> Optional[Callable[[str], bool]]:
    """A check ``name -> bool`` of ``need`` (DESCRIBE on a topic) for this connection's principal
    and address, usable after the request (None without an authorizer): a KIP-848 group keeps it to
    filter the topics its regex subscription matches, as Kafka's TopicRegexResolver authorizes
    them with the context of the heartbeat that resolved the regex.  Decided afresh at each use
    (bindings may change meanwhile); a denial is not logged (Kafka: logIfDenied false)."""
    a = getattr(ctx.connection, "authz", None)
    if a is None:
        return None
    authorizer, principal, host = a.authorizer, a.principal, a.host

    def describable(name: str) -> bool:
        return (authorizer.decide(principal, host, need.operation, need.resource_type, name)[0]
                or authorizer.audit_only)
    return describable


def cluster_operations(ctx: RequestContext) -> int:
    """The cluster's ``authorized_operations`` (Metadata v8-10, DescribeCluster): Kafka tells them
    only to a client allowed DESCRIBE on the cluster, others get 0."""
    a = getattr(ctx.connection, "authz", None)
    if a is not None and not a.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME, log_denied=False):
        return 0
    return authorized_operations(ctx, CLUSTER, CLUSTER_NAME)


def authorized_operations(ctx: RequestContext, rtype: int, name: str) -> int:
    """The ``authorized_operations`` bit field (every supported operation without an authorizer,
    as Kafka reports then)."""
    a = getattr(ctx.connection, "authz", None)
    if a is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype])
    return a.operations(rtype, name)
