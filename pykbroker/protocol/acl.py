"""Kafka's ACL operation codes as authorized-operations bit fields (Metadata, DescribeCluster).

pykbroker has no authorizer, so, as Kafka without one, a request that asks for its authorized
operations gets every operation the resource type supports (AclEntry.supportedOperations);
otherwise the schema's "not requested" value.
"""
NOT_REQUESTED = -2147483648
# TOPIC: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
TOPIC_ALL_OPERATIONS = sum(1 << c for c in (3, 4, 5, 6, 7, 8, 10, 11))
# CLUSTER: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12.
CLUSTER_ALL_OPERATIONS = sum(1 << c for c in (5, 7, 8, 9, 10, 11, 12))
