"""``pykbroker.Broker(...).acls``: ACL bindings for tests, in Kafka's vocabulary, written through
the controller as CreateAcls/DeleteAcls write them (stored, and followed by the authorizer).

    broker.acls.allow("User:alice", "READ", topic="orders")
    broker.acls.deny("User:*", "WRITE", topic="fin-", pattern="PREFIXED", host="10.0.0.9")
    broker.acls.allow("User:app", "IDEMPOTENT_WRITE", cluster=True)
    broker.acls.remove(...same arguments...);  broker.acls.list()
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from .bindings import (ALLOW, CLUSTER, CLUSTER_NAME, DENY, GROUP, OPERATIONS, PATTERN_TYPES, PERMISSIONS,
                       RESOURCE_TYPES, TOPIC, TRANSACTIONAL_ID, AclBinding, validate_new_binding)


def _code(table: dict, name: str) -> int:
    for c, n in table.items():
        if n == name.upper():
            return c
    raise ValueError("unknown %s; one of %s" % (name, ", ".join(table.values())))


class Acls:
    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def binding(self, principal: str, operation: str, permission: str = "ALLOW", *, topic: Optional[str] = None,
                group: Optional[str] = None, transactional_id: Optional[str] = None, cluster: bool = False,
                resource_type: Optional[str] = None, name: Optional[str] = None,
                pattern: str = "LITERAL", host: str = "*") -> AclBinding:
        given = [(TOPIC, topic), (GROUP, group), (TRANSACTIONAL_ID, transactional_id),
                 (CLUSTER, CLUSTER_NAME if cluster else None)]
        if resource_type is not None:
            given.append((_code(RESOURCE_TYPES, resource_type), name))
        given = [(t, n) for t, n in given if n is not None]
        if len(given) != 1:
            raise ValueError("name exactly one resource (topic=, group=, transactional_id=, cluster=True "
                             "or resource_type= with name=)")
        (rtype, rname), = given
        b = AclBinding(rtype, rname, _code(PATTERN_TYPES, pattern), principal, host,  # type: ignore[arg-type]  # Nones filtered
                       _code(OPERATIONS, operation), _code(PERMISSIONS, permission))
        why = validate_new_binding(b)
        if why is not None:
            raise ValueError(why)
        return b

    def _alter(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        async def run(b: Any) -> None:
            await b.controller.alter_acls(added=added, removed=removed)
        self._owner._async(run)

    def allow(self, principal: str, operation: str, **resource: Any) -> AclBinding:
        b = self.binding(principal, operation, PERMISSIONS[ALLOW], **resource)
        self._alter(added=[b])
        return b

    def deny(self, principal: str, operation: str, **resource: Any) -> AclBinding:
        b = self.binding(principal, operation, PERMISSIONS[DENY], **resource)
        self._alter(added=[b])
        return b

    def remove(self, *bindings: AclBinding) -> None:
        self._alter(removed=list(bindings))

    def list(self) -> list:
        async def run(b: Any) -> list:
            return sorted(b.controller.acls())
        return self._owner._async(run)
