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


REQUIREMENTS: tuple[Need, ...] = tuple(
    # Produce
    _rows(0, ("transactional_id", WRITE, TRANSACTIONAL_ID, _TXN), ("topic", WRITE, TOPIC, _TOPIC))
    # Fetch: a follower (replica id >= 0) without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED
    # for every partition, as Kafka's handleFetchRequest
    + _rows(1, ("topic", READ, TOPIC, _TOPIC), ("follower", CLUSTER_ACTION, CLUSTER, _TOPIC))
    # ListOffsets
    + _rows(2, ("topic", DESCRIBE, TOPIC, _TOPIC))
    # Metadata
    + _rows(3, ("topic", DESCRIBE, TOPIC, _TOPIC), ("topics_listed", DESCRIBE, TOPIC, None),
            ("auto_create_any", CREATE, CLUSTER, None), ("auto_create", CREATE, TOPIC, _TOPIC))
    # OffsetCommit
    + _rows(8, ("group", READ, GROUP, _GROUP), ("topic", READ, TOPIC, _TOPIC))
    # OffsetFetch
    + _rows(9, ("group", DESCRIBE, GROUP, _GROUP), ("topic", DESCRIBE, TOPIC, _TOPIC))
    # FindCoordinator
    + _rows(10, ("group", DESCRIBE, GROUP, _GROUP),
            ("transactional_id", DESCRIBE, TRANSACTIONAL_ID, _TXN), ("share", CLUSTER_ACTION, CLUSTER, _CLUSTER))
    # JoinGroup
    + _rows(11, ("group", READ, GROUP, _GROUP))
    # Heartbeat
    + _rows(12, ("group", READ, GROUP, _GROUP))
    # LeaveGroup
    + _rows(13, ("group", READ, GROUP, _GROUP))
    # SyncGroup
    + _rows(14, ("group", READ, GROUP, _GROUP))
    # DescribeGroups
    + _rows(15, ("group", DESCRIBE, GROUP, _GROUP))
    # ListGroups
    + _rows(16, ("cluster", DESCRIBE, CLUSTER, None), ("group", DESCRIBE, GROUP, None))
    # CreateTopics
    + _rows(19, ("cluster", CREATE, CLUSTER, None), ("topic", CREATE, TOPIC, _TOPIC),
            ("configs", DESCRIBE_CONFIGS, TOPIC, None))
    # DeleteTopics
    + _rows(20, ("cluster", DELETE, CLUSTER, None), ("describe", DESCRIBE, TOPIC, _TOPIC),
            ("topic", DELETE, TOPIC, _TOPIC))
    # DeleteRecords
    + _rows(21, ("topic", DELETE, TOPIC, _TOPIC))
    # InitProducerId
    + _rows(22, ("transactional_id", WRITE, TRANSACTIONAL_ID, _TXN),
            ("idempotent", IDEMPOTENT_WRITE, CLUSTER, _CLUSTER),
            ("idempotent_any_topic", WRITE, TOPIC, _CLUSTER))   # KIP-679: WRITE on any topic will do
    # OffsetForLeaderEpoch
    + _rows(23, ("cluster", CLUSTER_ACTION, CLUSTER, None), ("topic", DESCRIBE, TOPIC, _TOPIC))
    # AddPartitionsToTxn
    + _rows(24, ("verify", CLUSTER_ACTION, CLUSTER, _CLUSTER),
            ("transactional_id", WRITE, TRANSACTIONAL_ID, _TXN), ("topic", WRITE, TOPIC, _TOPIC))
    # AddOffsetsToTxn
    + _rows(25, ("transactional_id", WRITE, TRANSACTIONAL_ID, _TXN), ("group", READ, GROUP, _GROUP))
    # EndTxn
    + _rows(26, ("transactional_id", WRITE, TRANSACTIONAL_ID, _TXN))
    # WriteTxnMarkers
    + _rows(27, ("cluster", CLUSTER_ACTION, CLUSTER, _CLUSTER))
    # TxnOffsetCommit
    + _rows(28, ("transactional_id", WRITE, TRANSACTIONAL_ID, _TXN), ("group", READ, GROUP, _GROUP),
            ("topic", READ, TOPIC, _TOPIC))
    # DescribeAcls
    + _rows(29, ("cluster", DESCRIBE, CLUSTER, _CLUSTER))
    # CreateAcls
    + _rows(30, ("cluster", ALTER, CLUSTER, _CLUSTER))
    # DeleteAcls
    + _rows(31, ("cluster", ALTER, CLUSTER, _CLUSTER))
    # configs: the broker, broker-logger and client-metrics resources are the cluster's
    # DescribeConfigs
    + _rows(32, ("topic", DESCRIBE_CONFIGS, TOPIC, _TOPIC), ("group", DESCRIBE_CONFIGS, GROUP, _GROUP),
            ("cluster", DESCRIBE_CONFIGS, CLUSTER, _CLUSTER))
    # AlterConfigs
    + _rows(33, ("topic", ALTER_CONFIGS, TOPIC, _TOPIC), ("group", ALTER_CONFIGS, GROUP, _GROUP),
            ("cluster", ALTER_CONFIGS, CLUSTER, _CLUSTER))
    # AlterReplicaLogDirs
    + _rows(34, ("cluster", ALTER, CLUSTER, _CLUSTER))
    # DescribeLogDirs
    + _rows(35, ("cluster", DESCRIBE, CLUSTER, _CLUSTER))
    # CreatePartitions
    + _rows(37, ("topic", ALTER, TOPIC, _TOPIC))
    # CreateDelegationToken
    + _rows(38, ("owner", CREATE_TOKENS, USER, E.DELEGATION_TOKEN_AUTHORIZATION_FAILED))
    # DescribeDelegationToken
    + _rows(41, ("token", DESCRIBE, DELEGATION_TOKEN, None), ("owner", DESCRIBE_TOKENS, USER, None))
    # DeleteGroups
    + _rows(42, ("group", DELETE, GROUP, _GROUP))
    # ElectLeaders
    + _rows(43, ("cluster", ALTER, CLUSTER, _CLUSTER))
    # IncrementalAlterConfigs
    + _rows(44, ("topic", ALTER_CONFIGS, TOPIC, _TOPIC), ("group", ALTER_CONFIGS, GROUP, _GROUP),
            ("cluster", ALTER_CONFIGS, CLUSTER, _CLUSTER))
    # AlterPartitionReassignments
    + _rows(45, ("cluster", ALTER, CLUSTER, _CLUSTER))
    # ListPartitionReassignments
    + _rows(46, ("cluster", DESCRIBE, CLUSTER, _CLUSTER))
    # OffsetDelete
    + _rows(47, ("group", DELETE, GROUP, _GROUP), ("topic", READ, TOPIC, _TOPIC))
    # DescribeClientQuotas
    + _rows(48, ("cluster", DESCRIBE_CONFIGS, CLUSTER, _CLUSTER))
    # AlterClientQuotas
    + _rows(49, ("cluster", ALTER_CONFIGS, CLUSTER, _CLUSTER))
    # DescribeUserScramCredentials
    + _rows(50, ("cluster", DESCRIBE, CLUSTER, _CLUSTER))
    # AlterUserScramCredentials
    + _rows(51, ("cluster", ALTER, CLUSTER, _CLUSTER))
    # DescribeProducers
    + _rows(61, ("topic", READ, TOPIC, _TOPIC))
    # DescribeTransactions
    + _rows(65, ("transactional_id", DESCRIBE, TRANSACTIONAL_ID, _TXN))
    # ListTransactions
    + _rows(66, ("transactional_id", DESCRIBE, TRANSACTIONAL_ID, None))
    # ConsumerGroupHeartbeat
    + _rows(68, ("group", READ, GROUP, _GROUP), ("topic", DESCRIBE, TOPIC, _TOPIC),
            ("regex_topic", DESCRIBE, TOPIC, None))
    # ConsumerGroupDescribe
    + _rows(69, ("group", DESCRIBE, GROUP, _GROUP))
    # ListConfigResources
    + _rows(74, ("cluster", DESCRIBE_CONFIGS, CLUSTER, _CLUSTER))
    # DescribeTopicPartitions
    + _rows(75, ("topic", DESCRIBE, TOPIC, _TOPIC))
    # ShareGroupHeartbeat
    + _rows(76, ("group", READ, GROUP, _GROUP), ("topic", DESCRIBE, TOPIC, _TOPIC))
    # ShareGroupDescribe
    + _rows(77, ("group", DESCRIBE, GROUP, _GROUP))
    # ShareFetch
    + _rows(78, ("group", READ, GROUP, _GROUP), ("topic", READ, TOPIC, _TOPIC))
    # ShareAcknowledge
    + _rows(79, ("group", READ, GROUP, _GROUP), ("topic", READ, TOPIC, _TOPIC))
    # the share coordinator's state APIs: brokers only
    + [Need(api, "cluster", CLUSTER_ACTION, CLUSTER, _CLUSTER) for api in (83, 84, 85, 86, 87)]
    # StreamsGroupHeartbeat
    + _rows(88, ("group", READ, GROUP, _GROUP), ("topic", DESCRIBE, TOPIC, _TOPIC),
            ("internal_topics_any", CREATE, CLUSTER, None), ("internal_topic", CREATE, TOPIC, None))
    # StreamsGroupDescribe
    + _rows(89, ("group", DESCRIBE, GROUP, _GROUP))
    # DescribeShareGroupOffsets
    + _rows(90, ("group", DESCRIBE, GROUP, _GROUP), ("topic", DESCRIBE, TOPIC, _TOPIC))
    # AlterShareGroupOffsets
    + _rows(91, ("group", READ, GROUP, _GROUP), ("topic", READ, TOPIC, _TOPIC))
    # DeleteShareGroupOffsets
    + _rows(92, ("group", DELETE, GROUP, _GROUP), ("topic", READ, TOPIC, _TOPIC))
    # StreamsGroupTopologyDescriptionUpdate
    + _rows(93, ("group", READ, GROUP, _GROUP))
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
