"""What every API served needs from the authorizer: one table, read by the handlers' checks and
iterated by the tests (tests/acl/test_required_acls.py, tests/differential/test_acl_enforcement.py),
in the shape of Kafka's AuthorizerIntegrationTest (``requestKeysToAcls``).

A row (:class:`Need`) names an API, the part of the request it applies to (``role``: "topic",
"group", "cluster", "transactional_id"... the same API may need several), the operation, the
resource type, and the error a denial is answered with.  ``error`` is None for the checks Kafka
makes without failing anything: filters (ListGroups, ListTransactions, DescribeDelegationToken,
regex subscriptions), probes that widen a permission (CREATE or DELETE on the cluster before the
per-topic check) and checks whose denial is reported another way (the streams internal topics'
status).  A handler asks :func:`need` (or :func:`needs`, when a shared helper makes its checks)
for its rows when it is imported (a missing row fails there, not at the first request) and
checks with ``acl.check.permits``; it never names an operation itself.  The tests check that
every API served has rows and that every row is asked for by its API's handler.  The order of the checks and what a denial leaves out of the answer stay the
handler's business: they are Kafka's, API by API, and described in each handler's docstring.

Every value here was read from Kafka 4.4 (KafkaApis, AuthHelper, the group and share
coordinators) and is compared with it in tests/differential/test_acl_enforcement.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import ErrorCode as E
from .bindings import (
    ALTER, ALTER_CONFIGS, CLUSTER, CLUSTER_ACTION, CREATE, CREATE_TOKENS, DELEGATION_TOKEN, DELETE, DESCRIBE,
    DESCRIBE_CONFIGS, DESCRIBE_TOKENS, GROUP, IDEMPOTENT_WRITE, READ, TOPIC, TRANSACTIONAL_ID, USER, WRITE,
)

_TOPIC = E.TOPIC_AUTHORIZATION_FAILED
_GROUP = E.GROUP_AUTHORIZATION_FAILED
_CLUSTER = E.CLUSTER_AUTHORIZATION_FAILED
_TXN = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@dataclass(frozen=True)
class Need:
    api: int
    role: str
    operation: int
    resource_type: int
    error: E | None

    @property
    def denial(self) -> E:
        """The error a denial is answered with (a row whose denial fails the request)."""
        assert self.error is not None, "%s fails nothing when denied" % (self,)
        return self.error


def _rows(api: int, *needs: tuple) -> list[Need]:
    return [Need(api, *n) for n in needs]


# The needs many APIs share: an operation on the request's resource of a type (the role is the
# type's name), a denial answered with that type's *_AUTHORIZATION_FAILED (Kafka's
# AuthorizerIntegrationTest names them alike: groupReadAcl, topicDescribeAcl, clusterAlterAcl...)
_GROUP_READ, _GROUP_DESCRIBE, _GROUP_DELETE = [("group", op, GROUP, _GROUP) for op in (READ, DESCRIBE, DELETE)]
_TOPIC_READ, _TOPIC_DESCRIBE, _TOPIC_WRITE = [("topic", op, TOPIC, _TOPIC) for op in (READ, DESCRIBE, WRITE)]
_TXN_WRITE, _TXN_DESCRIBE = [("transactional_id", op, TRANSACTIONAL_ID, _TXN) for op in (WRITE, DESCRIBE)]
_CLUSTER_ALTER, _CLUSTER_DESCRIBE, _CLUSTER_ACTION, _CLUSTER_DESCRIBE_CONFIGS, _CLUSTER_ALTER_CONFIGS = [
    ("cluster", op, CLUSTER, _CLUSTER) for op in (ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS)]
# configs: the broker, broker-logger and client-metrics resources are the cluster's
_ALTER_CONFIGS = (("topic", ALTER_CONFIGS, TOPIC, _TOPIC), ("group", ALTER_CONFIGS, GROUP, _GROUP),
                  _CLUSTER_ALTER_CONFIGS)

REQUIREMENTS: tuple[Need, ...] = tuple(
    _rows(0, _TXN_WRITE, _TOPIC_WRITE)   # Produce
    # Fetch: a follower (replica id >= 0) without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED
    # for every partition, as Kafka's handleFetchRequest
    + _rows(1, _TOPIC_READ, ("follower", CLUSTER_ACTION, CLUSTER, _TOPIC))
    + _rows(2, _TOPIC_DESCRIBE)   # ListOffsets
    # Metadata
    + _rows(3, _TOPIC_DESCRIBE, ("topics_listed", DESCRIBE, TOPIC, None),
            ("auto_create_any", CREATE, CLUSTER, None), ("auto_create", CREATE, TOPIC, _TOPIC))
    + _rows(8, _GROUP_READ, _TOPIC_READ)   # OffsetCommit
    + _rows(9, _GROUP_DESCRIBE, _TOPIC_DESCRIBE)   # OffsetFetch
    + _rows(10, _GROUP_DESCRIBE, _TXN_DESCRIBE, ("share", CLUSTER_ACTION, CLUSTER, _CLUSTER))   # FindCoordinator
    + _rows(11, _GROUP_READ)   # JoinGroup
    + _rows(12, _GROUP_READ)   # Heartbeat
    + _rows(13, _GROUP_READ)   # LeaveGroup
    + _rows(14, _GROUP_READ)   # SyncGroup
    + _rows(15, _GROUP_DESCRIBE)   # DescribeGroups
    + _rows(16, ("cluster", DESCRIBE, CLUSTER, None), ("group", DESCRIBE, GROUP, None))   # ListGroups
    # CreateTopics
    + _rows(19, ("cluster", CREATE, CLUSTER, None), ("topic", CREATE, TOPIC, _TOPIC),
            ("configs", DESCRIBE_CONFIGS, TOPIC, None))
    # DeleteTopics
    + _rows(20, ("cluster", DELETE, CLUSTER, None), ("describe", DESCRIBE, TOPIC, _TOPIC),
            ("topic", DELETE, TOPIC, _TOPIC))
    + _rows(21, ("topic", DELETE, TOPIC, _TOPIC))   # DeleteRecords
    # InitProducerId
    + _rows(22, _TXN_WRITE, ("idempotent", IDEMPOTENT_WRITE, CLUSTER, _CLUSTER),
            ("idempotent_any_topic", WRITE, TOPIC, _CLUSTER))   # KIP-679: WRITE on any topic will do
    + _rows(23, ("cluster", CLUSTER_ACTION, CLUSTER, None), _TOPIC_DESCRIBE)   # OffsetForLeaderEpoch
    + _rows(24, ("verify", CLUSTER_ACTION, CLUSTER, _CLUSTER), _TXN_WRITE, _TOPIC_WRITE)   # AddPartitionsToTxn
    + _rows(25, _TXN_WRITE, _GROUP_READ)   # AddOffsetsToTxn
    + _rows(26, _TXN_WRITE)   # EndTxn
    + _rows(27, _CLUSTER_ACTION)   # WriteTxnMarkers
    + _rows(28, _TXN_WRITE, _GROUP_READ, _TOPIC_READ)   # TxnOffsetCommit
    + _rows(29, _CLUSTER_DESCRIBE)   # DescribeAcls
    + _rows(30, _CLUSTER_ALTER)   # CreateAcls
    + _rows(31, _CLUSTER_ALTER)   # DeleteAcls
    # DescribeConfigs
    + _rows(32, ("topic", DESCRIBE_CONFIGS, TOPIC, _TOPIC), ("group", DESCRIBE_CONFIGS, GROUP, _GROUP),
            _CLUSTER_DESCRIBE_CONFIGS)
    + _rows(33, *_ALTER_CONFIGS)   # AlterConfigs
    + _rows(34, _CLUSTER_ALTER)   # AlterReplicaLogDirs
    + _rows(35, _CLUSTER_DESCRIBE)   # DescribeLogDirs
    + _rows(37, ("topic", ALTER, TOPIC, _TOPIC))   # CreatePartitions
    + _rows(38, ("owner", CREATE_TOKENS, USER, E.DELEGATION_TOKEN_AUTHORIZATION_FAILED))   # CreateDelegationToken
    # DescribeDelegationToken
    + _rows(41, ("token", DESCRIBE, DELEGATION_TOKEN, None), ("owner", DESCRIBE_TOKENS, USER, None))
    + _rows(42, _GROUP_DELETE)   # DeleteGroups
    + _rows(43, _CLUSTER_ALTER)   # ElectLeaders
    + _rows(44, *_ALTER_CONFIGS)   # IncrementalAlterConfigs
    + _rows(45, _CLUSTER_ALTER)   # AlterPartitionReassignments
    + _rows(46, _CLUSTER_DESCRIBE)   # ListPartitionReassignments
    + _rows(47, _GROUP_DELETE, _TOPIC_READ)   # OffsetDelete
    + _rows(48, _CLUSTER_DESCRIBE_CONFIGS)   # DescribeClientQuotas
    + _rows(49, _CLUSTER_ALTER_CONFIGS)   # AlterClientQuotas
    + _rows(50, _CLUSTER_DESCRIBE)   # DescribeUserScramCredentials
    + _rows(51, _CLUSTER_ALTER)   # AlterUserScramCredentials
    + _rows(61, _TOPIC_READ)   # DescribeProducers
    + _rows(65, _TXN_DESCRIBE)   # DescribeTransactions
    + _rows(66, ("transactional_id", DESCRIBE, TRANSACTIONAL_ID, None))   # ListTransactions
    # ConsumerGroupHeartbeat
    + _rows(68, _GROUP_READ, _TOPIC_DESCRIBE, ("regex_topic", DESCRIBE, TOPIC, None))
    + _rows(69, _GROUP_DESCRIBE)   # ConsumerGroupDescribe
    + _rows(74, _CLUSTER_DESCRIBE_CONFIGS)   # ListConfigResources
    + _rows(75, _TOPIC_DESCRIBE)   # DescribeTopicPartitions
    + _rows(76, _GROUP_READ, _TOPIC_DESCRIBE)   # ShareGroupHeartbeat
    + _rows(77, _GROUP_DESCRIBE)   # ShareGroupDescribe
    + _rows(78, _GROUP_READ, _TOPIC_READ)   # ShareFetch
    + _rows(79, _GROUP_READ, _TOPIC_READ)   # ShareAcknowledge
    # the share coordinator's state APIs: brokers only
    + [Need(api, *_CLUSTER_ACTION) for api in (83, 84, 85, 86, 87)]
    # StreamsGroupHeartbeat
    + _rows(88, _GROUP_READ, _TOPIC_DESCRIBE, ("internal_topics_any", CREATE, CLUSTER, None),
            ("internal_topic", CREATE, TOPIC, None))
    + _rows(89, _GROUP_DESCRIBE)   # StreamsGroupDescribe
    + _rows(90, _GROUP_DESCRIBE, _TOPIC_DESCRIBE)   # DescribeShareGroupOffsets
    + _rows(91, _GROUP_READ, _TOPIC_READ)   # AlterShareGroupOffsets
    + _rows(92, _GROUP_DELETE, _TOPIC_READ)   # DeleteShareGroupOffsets
    + _rows(93, _GROUP_READ)   # StreamsGroupTopologyDescriptionUpdate
)

# The APIs served that need no binding, and why (every other API served has rows above)
NO_ACL: dict[int, str] = {
    17: "SaslHandshake: authentication, before any principal",
    18: "ApiVersions: served to everyone, as Kafka",
    36: "SaslAuthenticate: authentication, before any principal",
    39: "RenewDelegationToken: the token's owner and renewers (Kafka's allowedToRenew), no binding",
    40: "ExpireDelegationToken: the token's owner and renewers (Kafka's allowedToRenew), no binding",
    60: "DescribeCluster: served to everyone; its authorized_operations are computed",
}

_BY_KEY: dict[tuple[int, str], Need] = {(n.api, n.role): n for n in REQUIREMENTS}
assert len(_BY_KEY) == len(REQUIREMENTS), "a (api, role) pair twice in REQUIREMENTS"
# the rows the handler modules imported so far asked for (by need/needs, at their import): a row
# no handler asks for is enforced by nothing (tests/acl/test_required_acls.py iterates this)
_ASKED: set[tuple[int, str]] = set()


def need(api: int, role: str) -> Need:
    """The row of ``api`` for ``role``, for a handler module to keep at its import; KeyError
    when the table has none (so a check without its row never runs)."""
    row = _BY_KEY[(api, role)]
    _ASKED.add((api, role))
    return row


def needs(api: int, *roles: str) -> tuple[Need, ...]:
    """:func:`need` of each role: what a handler whose checks a shared helper makes (modern
    groups, configs, share state and offsets) asks for at its import."""
    return tuple(need(api, role) for role in roles)


def row(api: int, role: str) -> Need:
    """The row a shared helper reads while serving a request of ``api`` (its handler asked for
    it at import: :func:`needs`); not counted as asked."""
    return _BY_KEY[(api, role)]


def unasked() -> list[Need]:
    """The rows no handler module imported so far asked for."""
    return [n for n in REQUIREMENTS if (n.api, n.role) not in _ASKED]
