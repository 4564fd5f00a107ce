"""Client quota entities, AlterClientQuotas validation and DescribeClientQuotas filters (sans-IO).

An entity is a set of (type, name) pairs; types ``user``, ``client-id`` (together or alone) or
``ip`` (alone); a ``None`` name is the type's default entity (Kafka's ``<default>``).  Here an
entity is the canonical tuple of its pairs, ordered as Apache Kafka 4.4 lists them in its answers
(client-id, user, ip, then anything else in request order), e.g. ``(("client-id", "c1"),
("user", "alice"))``; the stored quotas are ``{entity: {key: float}}``.

Validation follows Kafka 4.4 (ClientQuotaControlManager plus the broker's checks), in the order
its answers show (compared with Apache Kafka by tests/differential/test_client_quotas.py):
1. an entity named twice in one request, or a key named twice for one entity: "Ignoring duplicate
   entity ClientQuotaEntity(entries={...})" (the first alteration of the entity still applies);
2. no component: "Invalid empty client quota entity"; an unknown type: "Unhandled client quota
   entity type: X"; an empty (not null) name: "Empty X not supported";
3. ``ip`` with ``user`` or ``client-id``: "Invalid quota entity combination, IP entity shouldnot be
   combined with User or ClientId" (Kafka's text, typo included); an ip entity that is neither
   an address nor a resolvable host: "X is not a valid IP or resolvable host.";
4. every key set (removals are not checked) must be one of the entity type's keys, else
   "Invalid configuration key X";
5. each value: finite ("Quota X must be a finite number"), > 0 ("Quota X must be greater than 0"),
   and for the integer keys whole ("X cannot be a fractional value.", within 1e-6 as Kafka) and
   in range ("Proposed value for X is too large for a LONG.").
All errors are INVALID_REQUEST (42).  A request's entities are independent: the valid ones are
stored even when others fail.  Kafka answers a quota for a duplicated type (two ``user``
components) with the last one, as its entity map keeps only that.
"""
from __future__ import annotations

import ipaddress
import math
from typing import Any, Callable, Iterable, Optional

from ..protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfigs: the keys of user / client-id entities and their types (LONG keys must be
# whole numbers), and the one key of ip entities (an INT in Kafka).
_LONG, _DOUBLE, _INT = "LONG", "DOUBLE", "INT"
CLIENT_KEYS = {PRODUCER_BYTE_RATE: _LONG, CONSUMER_BYTE_RATE: _LONG, REQUEST_PERCENTAGE: _DOUBLE,
               CONTROLLER_MUTATION_RATE: _DOUBLE}
IP_KEYS = {CONNECTION_CREATION_RATE: _INT}
_LIMITS = {_LONG: (2 ** 63 - 1, "LONG"), _INT: (2 ** 31 - 1, "INT")}

# DescribeClientQuotas match types (DescribeClientQuotasRequest.MATCH_TYPE_*)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

_RANK = {CLIENT_ID: 0, USER: 1, IP: 2}


class QuotaError(Exception):
    """A request-level DescribeClientQuotas failure: ``code`` and Kafka's message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


def entity_from_wire(components: Iterable[dict[str, Any]]) -> tuple:
    """The canonical entity of a request's ``[{"entity_type", "entity_name"}]`` (a type named
    twice keeps its last name, as Kafka's entity map does)."""
    m: dict = {}
    for c in components:
        m[c["entity_type"]] = c["entity_name"]
    return canonical(m.items())


def canonical(pairs: Iterable[tuple[str, Optional[str]]]) -> tuple:
    pairs = list(pairs)
    order = {t: i for i, (t, _) in enumerate(pairs)}
    return tuple(sorted(pairs, key=lambda p: (_RANK.get(p[0], 3), order[p[0]])))


def entity_to_wire(entity: tuple) -> list:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


def entity_text(entity: tuple) -> str:
    """Kafka's ClientQuotaEntity.toString()."""
    return "ClientQuotaEntity(entries={%s})" % ", ".join(
        "%s=%s" % (t, "null" if n is None else n) for t, n in entity)


def _valid_ip_name(name: Optional[str], resolvable: Callable[[str], Any]) -> bool:
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return bool(resolvable(name))


def validate_alteration(entity: tuple, ops: list,
                        resolvable: Callable[[str], Any] = lambda host: False) -> str | None:
    """Kafka's message for an invalid alteration of ``entity`` (steps 2-5 of the module
    docstring), or None.  ``ops``: [(key, value, remove)].  ``resolvable(host)`` says whether a
    host name resolves (the handler resolves them beforehand; Kafka's InetAddress.getByName)."""
    if not entity:
        return "Invalid empty client quota entity"
    for t, n in entity:
        if t not in _RANK:
            return "Unhandled client quota entity type: %s" % t
        if n is not None and n == "":
            return "Empty %s not supported" % t
    types = {t for t, _ in entity}
    if IP in types:
        if types != {IP}:
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        name = dict(entity)[IP]
        if not _valid_ip_name(name, resolvable):
            return "%s is not a valid IP or resolvable host." % name
        keys = IP_KEYS
    else:
        keys = CLIENT_KEYS
    for key, _value, remove in ops:
        if not remove and key not in keys:
            return "Invalid configuration key %s" % key
    for key, value, remove in ops:
        if remove:
            continue
        if not math.isfinite(value):
            return "Quota %s must be a finite number" % key
        if value <= 0:
            return "Quota %s must be greater than 0" % key
        kind = keys[key]
        if kind in _LIMITS:
            limit, name = _LIMITS[kind]
            if abs(math.floor(value + 1e-6) - value) > 1e-6:
                return "%s cannot be a fractional value." % key
            if value > limit:
                return "Proposed value for %s is too large for a %s." % (key, name)
    return None


def ip_host_names(entries: Iterable[dict[str, Any]]) -> list:
    """The host names (not addresses) ip entities of an AlterClientQuotas request name: the
    handler resolves them before validating."""
    out = []
    for e in entries:
        for c in e["entity"]:
            n = c["entity_name"]
            if c["entity_type"] == IP and n:
                try:
                    ipaddress.ip_address(n)
                except ValueError:
                    out.append(n)
    return out


def plan_alterations(entries: Iterable[dict[str, Any]], stored: dict,
                     resolvable: Callable[[str], Any] = lambda host: False) -> tuple[list, dict]:
    """AlterClientQuotas: ([(entity, code, message)] one per distinct entity in request order,
    {entity: {key: value or None (removal)}} of the valid ones).  ``stored``: the current quotas
    (an unchanged value is not a change)."""
    results: dict = {}
    changes: dict = {}
    for e in entries:
        entity = entity_from_wire(e["entity"])
        ops = [(o["key"], float(o["value"]), bool(o["remove"])) for o in e["ops"]]
        dup_key = len({k for k, _, _ in ops}) != len(ops)
        if entity in results or dup_key:
            # Kafka: a duplicate key marks the entity failed, and a failed or seen entity is
            # then answered "Ignoring duplicate entity" (its first alteration stands)
            results[entity] = (int(ErrorCode.INVALID_REQUEST), "Ignoring duplicate entity %s" % entity_text(entity))
            continue
        why = validate_alteration(entity, ops, resolvable)
        if why is not None:
            results[entity] = (int(ErrorCode.INVALID_REQUEST), why)
            continue
        results[entity] = (0, None)
        current = stored.get(entity, {})
        delta: dict[str, float | None] = {}
        for key, value, remove in ops:
            if remove:
                if key in current:
                    delta[key] = None
            elif current.get(key) != value:
                delta[key] = value
        if delta:
            changes[entity] = delta
    return [(ent, code, msg) for ent, (code, msg) in results.items()], changes


def apply_changes(stored: dict, changes: dict) -> dict:
    """A copy of ``stored`` with ``changes`` applied (an entity left without keys disappears)."""
    out = {e: dict(v) for e, v in stored.items()}
    for entity, delta in changes.items():
        cur = out.setdefault(entity, {})
        for k, v in delta.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v
        if not cur:
            del out[entity]
    return out


def parse_filter(components: Iterable[dict[str, Any]]) -> tuple[dict, set]:
    """DescribeClientQuotas components -> ({type: exact name or None for the default},
    {types that must be specified}); raises QuotaError with Kafka's answer (ClientQuotasImage)."""
    exact: dict = {}
    typed: set = set()
    for c in components:
        t, mt, match = c["entity_type"], c["match_type"], c["match"]
        if t == "":
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if t in exact or t in typed:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Entity type %s cannot appear more than once in the filter." % t)
        if t not in _RANK:
            # Kafka throws UnsupportedVersionException here: UNSUPPORTED_VERSION as the answer
            raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type %s" % t)
        if mt == MATCH_EXACT:
            if match is None:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[t] = match
        elif mt == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[t] = None
        elif mt == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(t)
        else:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Unknown match type %d" % mt)
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise QuotaError(ErrorCode.INVALID_REQUEST,
                         "Invalid entity filter component combination. IP filter component should not be "
                         "used with user or clientId filter component.")
    return exact, typed


def describe(stored: dict, components: Iterable[dict[str, Any]], strict: bool) -> list:
    """The entities of ``stored`` the filter matches, as Kafka's ClientQuotasImage.describe:
    every exact component must be in the entity with that name (None: the default), every
    specified type present with any name; ``strict`` also excludes entities with other types.
    No component: every entity (strict: none)."""
    exact, typed = parse_filter(components)
    if not exact and not typed:
        return [] if strict else sorted(stored, key=_sort_key)
    out = []
    for entity in sorted(stored, key=_sort_key):
        d = dict(entity)
        if any(t not in d or d[t] != n for t, n in exact.items()):
            continue
        if any(t not in d for t in typed):
            continue
        if strict and len(d) != len(exact) + len(typed):
            continue
        out.append(entity)
    return out


def _sort_key(entity: tuple) -> tuple:
    # a stable answer order (Kafka's is a hash order): by types, then names, defaults first
    return tuple((t, n is not None, n or "") for t, n in entity)


# -- stored form (the metadata file) --------------------------------------------------------

def to_json(stored: dict) -> list:
    """``[{"entity": {"user": "alice"}, "values": {"producer_byte_rate": 1024.0}}]``, sorted; a
    default entity's name is JSON null."""
    return [{"entity": dict(e), "values": dict(sorted(v.items()))} for e, v in sorted(stored.items(), key=lambda kv: _sort_key(kv[0]))]


def from_json(data: Optional[Iterable[dict[str, Any]]]) -> dict:
    out = {}
    for item in data or ():
        entity = canonical((str(t), None if n is None else str(n)) for t, n in item["entity"].items())
        values = {str(k): float(v) for k, v in item["values"].items()}
        if entity and values:
            out[entity] = values
    return out
