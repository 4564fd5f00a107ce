"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, the binding
and the binding filter, with Kafka's matching and validation rules.

Codes are Kafka's wire codes (AK clients ``resource/ResourceType.java``,
``resource/PatternType.java``, ``acl/AclOperation.java``, ``acl/AclPermissionType.java``).
A binding is a plain tuple ``AclBinding(resource_type, name, pattern_type, principal, host,
operation, permission)`` so the authorizer's index and the metadata file hold the same value.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

# ResourceType
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {TOPIC: "TOPIC", GROUP: "GROUP", CLUSTER: "CLUSTER", TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
                  DELEGATION_TOKEN: "DELEGATION_TOKEN", USER: "USER"}
# PatternType
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_TYPES = {LITERAL: "LITERAL", PREFIXED: "PREFIXED"}
# AclOperation
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT = 13, 14, 15
OPERATIONS = {ALL: "ALL", READ: "READ", WRITE: "WRITE", CREATE: "CREATE", DELETE: "DELETE", ALTER: "ALTER",
              DESCRIBE: "DESCRIBE", CLUSTER_ACTION: "CLUSTER_ACTION", DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
              ALTER_CONFIGS: "ALTER_CONFIGS", IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
              CREATE_TOKENS: "CREATE_TOKENS", DESCRIBE_TOKENS: "DESCRIBE_TOKENS",
              TWO_PHASE_COMMIT: "TWO_PHASE_COMMIT"}
# AclPermissionType
DENY, ALLOW = 2, 3
PERMISSIONS = {DENY: "DENY", ALLOW: "ALLOW"}

WILDCARD_RESOURCE = "*"          # LITERAL "*": every resource of the type
WILDCARD_PRINCIPAL = "User:*"    # every user principal
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"   # the only name of the CLUSTER resource

# The operations each resource type supports (AK AclEntry.supportedOperations): the bits of
# ``authorized_operations``.
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE, TWO_PHASE_COMMIT),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


def _code(table: dict, code: int, unknown_ok: tuple = ()) -> int:
    """Kafka's fromCode: a code outside the enum is UNKNOWN (0)."""
    return code if code in table or code in unknown_ok else UNKNOWN


class AclBinding(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def to_json(self) -> list:
        return [RESOURCE_TYPES[self.resource_type], self.name, PATTERN_TYPES[self.pattern_type],
                self.principal, self.host, OPERATIONS[self.operation], PERMISSIONS[self.permission]]

    @classmethod
    def from_json(cls, v: list) -> "AclBinding":
        def code(table: dict[int, str], name: str) -> int:
            return next(c for c, n in table.items() if n == name)
        return cls(code(RESOURCE_TYPES, v[0]), v[1], code(PATTERN_TYPES, v[2]), v[3], v[4],
                   code(OPERATIONS, v[5]), code(PERMISSIONS, v[6]))


class AclBindingFilter(NamedTuple):
    resource_type: int            # ANY or a type
    name: Optional[str]           # None: any name
    pattern_type: int             # ANY, MATCH, LITERAL or PREFIXED
    principal: Optional[str]
    host: Optional[str]
    operation: int                # ANY or an operation
    permission: int               # ANY or a permission

    def is_unknown(self) -> bool:
        """AK AclBindingFilter.isUnknown: some element is UNKNOWN (a code Kafka does not know)."""
        return UNKNOWN in (self.resource_type, self.pattern_type, self.operation, self.permission)

    def matches(self, b: AclBinding) -> bool:
        """AK ResourcePatternFilter.matches + AccessControlEntryFilter.matches."""
        if self.resource_type != ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (ANY, MATCH) and pt != b.pattern_type:
            return False
        if self.name is not None:
            if pt == ANY or pt == b.pattern_type:
                if self.name != b.name:
                    return False
            elif b.pattern_type == LITERAL:   # MATCH: the bindings that apply to this name
                if self.name != b.name and b.name != WILDCARD_RESOURCE:
                    return False
            elif not self.name.startswith(b.name):
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != ANY and self.operation != b.operation:
            return False
        return self.permission == ANY or self.permission == b.permission


def binding_from_wire(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
                      permission: int) -> AclBinding:
    """A CreateAcls creation, codes outside Kafka's enums turned into UNKNOWN as fromCode does."""
    return AclBinding(_code(RESOURCE_TYPES, resource_type, (ANY,)), name, _code(PATTERN_TYPES, pattern_type, (ANY, MATCH)),
                      principal, host, _code(OPERATIONS, operation, (ANY,)), _code(PERMISSIONS, permission, (ANY,)))


def filter_from_wire(resource_type: int, name: Optional[str], pattern_type: int, principal: Optional[str],
                     host: Optional[str], operation: int, permission: int) -> AclBindingFilter:
    return AclBindingFilter(_code(RESOURCE_TYPES, resource_type, (ANY,)), name,
                            _code(PATTERN_TYPES, pattern_type, (ANY, MATCH)), principal, host,
                            _code(OPERATIONS, operation, (ANY,)), _code(PERMISSIONS, permission, (ANY,)))


def raw_unknown(*codes: int) -> bool:
    """A code sent as 0 (UNKNOWN) in an ACL request: Kafka's request validation refuses it while
    parsing, so the broker closes the connection (CreateAcls/DescribeAcls/DeleteAclsRequest
    .validate).  Other codes outside the enums parse as UNKNOWN and are answered."""
    return UNKNOWN in codes


def creation_fails_request(b: AclBinding) -> bool:
    """A creation Kafka cannot even build (ResourcePattern / AccessControlEntry refuse ANY and
    MATCH): the whole CreateAcls request fails with UNKNOWN_SERVER_ERROR, nothing stored."""
    return b.resource_type == ANY or b.pattern_type in (ANY, MATCH) or b.operation == ANY or b.permission == ANY


def validate_new_binding(b: AclBinding) -> Optional[str]:
    """Why Kafka refuses to store ``b`` (INVALID_REQUEST with this message), or None.

    AK AclApis.handleCreateAcls (cluster name, empty name) then the controller's
    AclControlManager.validateNewAcl (type, pattern, operation, permission, host, principal), in
    Kafka's order so the first failing rule gives the message (checked against Kafka 4.4,
    tests/differential/test_acls.py)."""
    if b.resource_type == CLUSTER and b.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if not b.name:
        return "Invalid empty resource name"
    if b.resource_type not in RESOURCE_TYPES:
        return "Invalid resourceType " + _name(b.resource_type, RESOURCE_TYPES)
    if b.pattern_type not in (LITERAL, PREFIXED):
        return "Invalid patternType " + _name(b.pattern_type, PATTERN_TYPES)
    if b.operation in (UNKNOWN, ANY):
        return "Invalid operation " + _name(b.operation, OPERATIONS)
    if b.permission not in (DENY, ALLOW):
        return "Invalid permissionType " + _name(b.permission, PERMISSIONS)
    if not b.host:
        return "Host pattern cannot be null or empty"
    if ":" not in b.principal:
        return "Could not parse principal from `%s` (no colon is present separating the principal type " \
               "from the principal name)" % b.principal
    return None


def _name(code: int, table: dict) -> str:
    # codes outside the enums parse as UNKNOWN, so the .get always finds one
    return {UNKNOWN: "UNKNOWN", ANY: "ANY", MATCH: "MATCH"}.get(code) if code not in table else table[code]  # type: ignore[return-value]
