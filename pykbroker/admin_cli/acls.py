"""``pykbroker acls add|list|remove``: ACL bindings in the words of Kafka's ``kafka-acls.sh``
(``--add`` / ``--list`` / ``--remove``).

Options as Kafka's tool: ``--allow-principal`` / ``--deny-principal`` (repeatable, ``User:name``),
``--allow-host`` / ``--deny-host`` (default ``*`` for a principal given without a host),
``--operation`` (repeatable, default All as Kafka's; Kafka's names, any case: Read, Write, Create, Delete, Alter, Describe,
ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens,
TwoPhaseCommit, All), the resources ``--topic``, ``--group``, ``--transactional-id`` (repeatable)
and ``--cluster``, ``--resource-pattern-type`` (literal, the default; prefixed; and for list and
remove the filters any and match), the shortcuts ``--producer`` (WRITE, DESCRIBE, CREATE on the
topics; WRITE, DESCRIBE on the transactional ids; IDEMPOTENT_WRITE on the cluster with
``--idempotent``) and ``--consumer`` (READ, DESCRIBE on the topics, READ on the groups), and
``--principal`` to filter ``list``.  As Kafka's tool, ``add`` writes the product of principals,
hosts, operations and resources; ``remove`` with principals removes those exact bindings, without
any principal every binding of the named resources; it asks first unless ``--force``.

Requests: CreateAcls (30), DescribeAcls (29), DeleteAcls (31) through confluent-kafka's
AdminClient (the broker needs an authorizer: without one add and remove fail with
SECURITY_DISABLED; list shows nothing, as librdkafka drops DescribeAcls' top-level error).  A
secured broker takes ``--command-config FILE`` (client properties, as Kafka's tools).
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Iterable

from . import action_parser, action_parsers
from .common import EXIT_USAGE, ToolError, ck, print_json, wait_seconds
from .users import _admin, _wait

if TYPE_CHECKING:
    from . import Subparsers

EXAMPLES = """  pykbroker acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
  pykbroker acls add --allow-principal User:alice --consumer --topic orders --group billing
  pykbroker acls add --allow-principal User:app --producer --topic fin- --resource-pattern-type prefixed
  pykbroker acls add --deny-principal User:mallory --deny-host 10.0.0.9 --operation All --topic orders
  pykbroker acls list --topic orders
  pykbroker acls list --principal User:alice --json
  pykbroker acls remove --allow-principal User:alice --operation Read --topic orders --force"""

OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
              "TWO_PHASE_COMMIT")
PATTERNS = ("LITERAL", "PREFIXED", "ANY", "MATCH")
CLUSTER_NAME = "kafka-cluster"


def _operation(text: str) -> str:
    """Kafka's AclOperation.fromString accepts "Read", "READ", "DescribeConfigs", "describe_configs"."""
    key = text.strip().replace("-", "").replace("_", "").upper()
    for op in OPERATIONS:
        if op.replace("_", "") == key:
            return op
    raise argparse.ArgumentTypeError("unknown operation %r (one of %s)" % (text, ", ".join(OPERATIONS)))


def _pattern(text: str) -> str:
    p = text.strip().upper()
    if p not in PATTERNS:
        raise argparse.ArgumentTypeError("unknown resource pattern type %r (literal, prefixed, any, match)" % text)
    return p


def _principal(text: str) -> str:
    # Kafka's SecurityUtils.parseKafkaPrincipal: "Type:name", both non-empty
    t, sep, n = text.partition(":")
    if not sep or not t or not n:
        raise argparse.ArgumentTypeError("principal %r is not of the form User:name" % text)
    return text


def _resource_args(p: argparse.ArgumentParser, listing: bool) -> None:
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable; * = all)")
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (repeatable; * = all)")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id (repeatable; * = all)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", type=_pattern, default="LITERAL",
                   help="literal (default) or prefixed" + ("; any or match to filter" if listing else ""))


def _binding_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-principal", action="append", default=[], type=_principal, metavar="PRINCIPAL")
    p.add_argument("--deny-principal", action="append", default=[], type=_principal, metavar="PRINCIPAL")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="client address the ALLOW applies to (default *)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                   help="client address the DENY applies to (default *)")
    p.add_argument("--operation", action="append", default=[], type=_operation, metavar="OPERATION")
    p.add_argument("--producer", action="store_true", help="the ACLs of a producer (kafka-acls.sh --producer)")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--consumer", action="store_true", help="the ACLs of a consumer (kafka-acls.sh --consumer)")


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    asub = action_parsers(sub, name, help, "Manage ACL bindings (kafka-acls.sh).", EXAMPLES)
    ap = action_parser(asub, "add", "add ALLOW/DENY bindings (the product of principals, hosts, operations, "
                                    "resources)", EXAMPLES)
    _binding_args(ap)
    _resource_args(ap, listing=False)
    lp = action_parser(asub, "list", "the bindings of the named resources (all without one)", EXAMPLES)
    _resource_args(lp, listing=True)
    lp.add_argument("--principal", action="append", default=[], type=_principal, metavar="PRINCIPAL",
                    help="only this principal's bindings (repeatable)")
    rp = action_parser(asub, "remove", "remove bindings (every binding of the resources without a principal)",
                       EXAMPLES)
    _binding_args(rp)
    _resource_args(rp, listing=True)
    rp.add_argument("--force", action="store_true", help="do not ask for confirmation")


# ---------------------------------------------------------------- what the options name

def _resources(args: argparse.Namespace) -> list:
    """[(type name, resource name)] the options name."""
    out = [("TOPIC", t) for t in args.topic] + [("GROUP", g) for g in args.group]
    out += [("TRANSACTIONAL_ID", x) for x in args.transactional_id]
    if args.cluster:
        out.append(("CLUSTER", CLUSTER_NAME))
    for _, n in out:
        if not n:
            raise ToolError("empty resource name", EXIT_USAGE)
    return out


def _entries(args: argparse.Namespace, resources: list[tuple[str, str]]) -> list:
    """[(type, name, principal, host, operation, permission)] of add/remove (Kafka's AclCommand:
    principals x hosts x operations per resource, the --producer/--consumer sets added)."""
    if args.idempotent and not args.producer:
        raise ToolError("--idempotent goes with --producer", EXIT_USAGE)
    # Kafka's --operation defaults to All (unless --producer / --consumer name the operations)
    ops = args.operation or ([] if args.producer or args.consumer else ["ALL"])
    per_resource = {r: set(ops) for r in resources}
    if args.producer:
        if not any(t == "TOPIC" for t, _ in resources):
            raise ToolError("--producer needs --topic", EXIT_USAGE)
        for r in resources:
            per_resource[r] |= {"TOPIC": {"WRITE", "DESCRIBE", "CREATE"},
                                "TRANSACTIONAL_ID": {"WRITE", "DESCRIBE"}}.get(r[0], set())
        if args.idempotent:
            per_resource.setdefault(("CLUSTER", CLUSTER_NAME), set()).add("IDEMPOTENT_WRITE")
    if args.consumer:
        if not any(t == "TOPIC" for t, _ in resources) or not any(t == "GROUP" for t, _ in resources):
            raise ToolError("--consumer needs --topic and --group", EXIT_USAGE)
        for r in resources:
            per_resource[r] |= {"TOPIC": {"READ", "DESCRIBE"}, "GROUP": {"READ"}}.get(r[0], set())
    out = []
    for perm, principals, hosts in (("ALLOW", args.allow_principal, args.allow_host or ["*"]),
                                    ("DENY", args.deny_principal, args.deny_host or ["*"])):
        for (rtype, name), ops in per_resource.items():
            for principal in principals:
                for host in hosts:
                    for op in sorted(ops):
                        out.append((rtype, name, principal, host, op, perm))
    return out


def _enums() -> tuple[Any, Any, Any, Any]:
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    return AclOperation, AclPermissionType, ResourcePatternType, ResourceType


def _binding(entry: tuple[str, str, str, str, str, str], pattern: str) -> Any:
    from confluent_kafka.admin import AclBinding
    AclOperation, AclPermissionType, ResourcePatternType, ResourceType = _enums()
    rtype, name, principal, host, op, perm = entry
    return AclBinding(ResourceType[rtype], name, ResourcePatternType[pattern], principal, host,
                      AclOperation[op], AclPermissionType[perm])


def _filter(rtype: str | None = None, name: str | None = None, pattern: str = "ANY", principal: str | None = None,
            host: str | None = None, op: str | None = None, perm: str | None = None) -> Any:
    from confluent_kafka.admin import AclBindingFilter
    AclOperation, AclPermissionType, ResourcePatternType, ResourceType = _enums()
    # None matches any name / principal / host (a filter's wildcard), which confluent-kafka's
    # annotations (str) do not say
    return AclBindingFilter(ResourceType[rtype] if rtype else ResourceType.ANY,
                            name,  # type: ignore[arg-type]
                            ResourcePatternType[pattern],
                            principal, host,  # type: ignore[arg-type]
                            AclOperation[op] if op else AclOperation.ANY,
                            AclPermissionType[perm] if perm else AclPermissionType.ANY)


def _as_tuple(b: Any) -> tuple:
    return (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
            b.permission_type.name)


def _describe(args: argparse.Namespace, flt: Any) -> list:
    got = _wait(args, _admin(args).describe_acls(flt, request_timeout=wait_seconds(args)), "list ACLs")
    return sorted(_as_tuple(b) for b in got)


# ---------------------------------------------------------------- output

def _pattern_text(rtype: str, name: str, pattern: str) -> str:
    return "ResourcePattern(resourceType=%s, name=%s, patternType=%s)" % (rtype, name, pattern)


def _print_grouped(title: str, bindings: Iterable[tuple]) -> None:
    """kafka-acls.sh's layout: a header per resource pattern, one entry line per binding."""
    by: dict = {}
    for rtype, name, pattern, principal, host, op, perm in bindings:
        by.setdefault((rtype, name, pattern), []).append((principal, host, op, perm))
    for (rtype, name, pattern), entries in by.items():
        print("%s `%s`: " % (title, _pattern_text(rtype, name, pattern)))
        for principal, host, op, perm in entries:
            print(" \t(principal=%s, host=%s, operation=%s, permissionType=%s)" % (principal, host, op, perm))
        print()


def _json(bindings: Iterable[tuple]) -> list:
    return [{"resource_type": r, "resource_name": n, "pattern_type": p, "principal": pr, "host": h,
             "operation": o, "permission_type": pe} for r, n, p, pr, h, o, pe in bindings]


# ---------------------------------------------------------------- actions

def _add(args: argparse.Namespace) -> int:
    if args.resource_pattern_type not in ("LITERAL", "PREFIXED"):
        raise ToolError("add: --resource-pattern-type must be literal or prefixed", EXIT_USAGE)
    resources = _resources(args)
    if not resources:
        raise ToolError("add: name a resource (--topic, --group, --transactional-id or --cluster)", EXIT_USAGE)
    entries = _entries(args, resources)
    if not entries:
        raise ToolError("add: name --allow-principal or --deny-principal, and --operation "
                        "(or --producer / --consumer)", EXIT_USAGE)
    bindings = [_binding(e, args.resource_pattern_type) for e in entries]
    futs = _admin(args).create_acls(bindings, request_timeout=wait_seconds(args))
    for b, f in futs.items():
        rtype, name, pattern, principal, host, op, perm = _as_tuple(b)
        _wait(args, f, "add %s %s %s from host %s on %s:%s:%s" % (perm, principal, op, host, rtype, pattern, name))
    added = sorted(_as_tuple(b) for b in bindings)
    if getattr(args, "json", False):
        print_json({"added": _json(added)})
        return 0
    _print_grouped("Adding ACLs for resource", added)
    current = []
    for rtype, name, pattern in dict.fromkeys((a[0], a[1], a[2]) for a in added):
        current += _describe(args, _filter(rtype, name, pattern))
    _print_grouped("Current ACLs for resource", current)
    return 0


def _list(args: argparse.Namespace) -> int:
    resources = _resources(args)
    flts = [_filter(t, n, args.resource_pattern_type) for t, n in resources] or [_filter()]
    principals = args.principal or [None]
    got = set()
    for f in flts:
        for b in _describe(args, f):
            if principals == [None] or b[3] in principals:
                got.add(b)
    listed = sorted(got)
    if args.json:
        print_json(_json(listed))
        return 0
    _print_grouped("Current ACLs for resource", listed)
    return 0


def _remove(args: argparse.Namespace) -> int:
    resources = _resources(args)
    if not resources:
        raise ToolError("remove: name a resource (--topic, --group, --transactional-id or --cluster)", EXIT_USAGE)
    pattern = args.resource_pattern_type
    if args.allow_principal or args.deny_principal:
        entries = _entries(args, resources)
        flts = [_filter(t, n, pattern, pr, h, o, pe) for t, n, pr, h, o, pe in entries]
    else:
        flts = [_filter(t, n, pattern) for t, n in resources]   # every binding of these resources
    if not args.force:
        if not sys.stdin.isatty():
            raise ToolError("remove: confirm with --force (no terminal to ask on)", EXIT_USAGE)
        names = ", ".join("%s:%s" % r for r in resources)
        if input("Are you sure you want to remove ACLs of %s? (y/n) " % names).strip().lower() not in ("y", "yes"):
            return 0
    futs = _admin(args).delete_acls(flts, request_timeout=wait_seconds(args))
    removed = set()
    for f in futs.values():
        removed |= {_as_tuple(b) for b in _wait(args, f, "remove ACLs")}
    gone = sorted(removed)
    if getattr(args, "json", False):
        print_json({"removed": _json(gone)})
        return 0
    _print_grouped("Removed ACLs for resource", gone)
    if not gone:
        print("No ACL matched.")
    return 0


def run(args: argparse.Namespace) -> int:
    ck()
    return {"add": _add, "list": _list, "remove": _remove}[args.action](args)
