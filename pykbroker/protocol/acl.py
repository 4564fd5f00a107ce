"""The authorized-operations field of Metadata and DescribeCluster answers.

When a request does not ask for authorized operations, Kafka answers the schema's "not requested"
value, INT32_MIN; when it asks, the bits come from the authorizer (pykbroker/acl/: every operation
the resource type supports when no authorizer is configured, as Kafka does).
"""
NOT_REQUESTED = -2147483648
