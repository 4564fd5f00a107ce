"""Each API's required ACLs, table-driven in the shape of Kafka's AuthorizerIntegrationTest
(requestKeysToAcls): without the bindings the request gets the API's authorization error; with
them (added through ``broker.acls``) it no longer does.  Raw requests over PLAINTEXT, where the
principal is User:ANONYMOUS."""
import base64
import itertools
import time
import uuid

import pytest

import pykbroker
from pykbroker.acl import bindings as B
from pykbroker.acl.requirements import NO_ACL, REQUIREMENTS, row as table_row
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.records import Record, encode_batch
from pykbroker.protocol.wire import WireClient

ANON = "User:ANONYMOUS"
_n = itertools.count()
# a client-generated member id (Kafka's Uuid.toString: 22 url-safe base64 characters)
MEMBER = base64.urlsafe_b64encode(uuid.UUID(int=0x1234).bytes).decode().rstrip("=")


class TopicId(str):
    """Where a request carries the id of topic ``t``: the runner puts the side's id in
    (:func:`resolve`), so that one table serves pykbroker and Apache Kafka."""


def resolve(body, topic_id_of):
    if isinstance(body, TopicId):
        return topic_id_of(str(body))
    if isinstance(body, dict):
        return {k: resolve(v, topic_id_of) for k, v in body.items()}
    if isinstance(body, list):
        return [resolve(v, topic_id_of) for v in body]
    return body


def _share_fetch(t, g):
    return {"group_id": g, "member_id": MEMBER, "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": TopicId(t), "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []}


def _streams_hb(t, g, topology=True):
    topo = {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [t], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
    return {"group_id": g, "member_id": MEMBER, "member_epoch": 0, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
            "topology": topo if topology else None, "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
            "process_id": "process-1", "user_endpoint": None, "client_tags": None, "task_offsets": None,
            "task_end_offsets": None, "shutdown_application": False}


def _state(t, g, **fields):
    return {"group_id": g, "topics": [{"topic_id": TopicId(t), "partitions": [dict({"partition": 0}, **fields)]}]}


def _results(r):
    return [p["error_code"] for x in r["results"] for p in x["partitions"]]


@pytest.fixture(scope="module")
def broker():
    b = pykbroker.Broker(config={**TEST_CONFIG,
                                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}).start()
    try:
        yield b
    finally:
        b.stop()


def _records():
    return bytes(encode_batch([Record(None, int(time.time() * 1000), None, b"v", [])]))


def _parts(resp, topics_key, parts_key, code_key="error_code"):
    return [p[code_key] for t in resp[topics_key] for p in t[parts_key]]


# name -> (api, version, body(topic, group, txn), role, codes(resp)[, kind]): ``role`` names the
# row of pykbroker's requirement table (acl/requirements.py) the case exercises: the binding it
# grants and the error it expects come from that row, the table the handlers check with.
# ``kind``: where to grant when not on the case's own topic/group/transactional id.
ROWS = {
    "produce": (0, 9, lambda t, g, x: {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": _records()}]}]},
        "topic", lambda r: _parts(r, "responses", "partition_responses")),
    "fetch": (1, 12, lambda t, g, x: {"replica_id": -1, "max_wait_ms": 0, "max_bytes": 1 << 20, "session_epoch": -1,
                                       "topics": [{"topic": t, "partitions": [
                                           {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
              "topic", lambda r: _parts(r, "responses", "partitions")),
    "list_offsets": (2, 7, lambda t, g, x: {"replica_id": -1, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        "topic", lambda r: _parts(r, "topics", "partitions")),
    "metadata": (3, 12, lambda t, g, x: {"topics": [{"name": t}], "allow_auto_topic_creation": False},
                 "topic", lambda r: [t["error_code"] for t in r["topics"]]),
    "create_partitions": (37, 3, lambda t, g, x: {"topics": [{"name": t, "count": 2}], "timeout_ms": 5000},
                          "topic", lambda r: [x["error_code"] for x in r["results"]]),
    "delete_records": (21, 2, lambda t, g, x: {"topics": [{"name": t, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000},
        "topic", lambda r: _parts(r, "topics", "partitions")),
    "describe_topic_configs": (32, 4, lambda t, g, x: {"resources": [
        {"resource_type": 2, "resource_name": t, "configuration_keys": None}]},
        "topic", lambda r: [x["error_code"] for x in r["results"]]),
    "alter_topic_configs": (44, 1, lambda t, g, x: {"resources": [
        {"resource_type": 2, "resource_name": t, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "100000"}]}]},
        "topic", lambda r: [x["error_code"] for x in r["responses"]]),
    "find_group_coordinator": (10, 4, lambda t, g, x: {"key_type": 0, "coordinator_keys": [g]},
                               "group", lambda r: [c["error_code"] for c in r["coordinators"]]),
    "find_txn_coordinator": (10, 4, lambda t, g, x: {"key_type": 1, "coordinator_keys": [x]},
                             "transactional_id",
                             lambda r: [c["error_code"] for c in r["coordinators"]]),
    "join_group": (11, 9, lambda t, g, x: {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                            "member_id": "", "protocol_type": "consumer",
                                            "protocols": [{"name": "range", "metadata": b""}]},
                   "group", lambda r: [r["error_code"]]),
    "heartbeat": (12, 4, lambda t, g, x: {"group_id": g, "generation_id": 1, "member_id": "m"},
                  "group", lambda r: [r["error_code"]]),
    "offset_commit_group": (8, 8, lambda t, g, x: {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                                    "topics": [{"name": t, "partitions": [
                                                        {"partition_index": 0, "committed_offset": 0}]}]},
                            "group", lambda r: _parts(r, "topics", "partitions")),
    "offset_commit_topic": (8, 8, lambda t, g, x: {"group_id": g, "generation_id_or_member_epoch": -1,
                                                    "member_id": "", "topics": [{"name": t, "partitions": [
                                                        {"partition_index": 0, "committed_offset": 0}]}]},
                            "topic", lambda r: _parts(r, "topics", "partitions")),
    "offset_fetch": (9, 7, lambda t, g, x: {"group_id": g, "topics": None},
                     "group", lambda r: [r["error_code"]]),
    "describe_groups": (15, 5, lambda t, g, x: {"groups": [g]},
                        "group", lambda r: [x["error_code"] for x in r["groups"]]),
    "delete_groups": (42, 2, lambda t, g, x: {"groups_names": [g]},
                      "group", lambda r: [x["error_code"] for x in r["results"]]),
    "init_producer_id_txn": (22, 4, lambda t, g, x: {"transactional_id": x, "transaction_timeout_ms": 60000,
                                                      "producer_id": -1, "producer_epoch": -1},
                             "transactional_id", lambda r: [r["error_code"]]),
    "init_producer_id_idempotent": (22, 4, lambda t, g, x: {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                             "producer_id": -1, "producer_epoch": -1},
                                    "idempotent", lambda r: [r["error_code"]]),
    "end_txn": (26, 3, lambda t, g, x: {"transactional_id": x, "producer_id": 1, "producer_epoch": 0,
                                         "committed": True},
                "transactional_id", lambda r: [r["error_code"]]),
    "describe_broker_configs": (32, 4, lambda t, g, x: {"resources": [
        {"resource_type": 4, "resource_name": "", "configuration_keys": ["log.retention.ms"]}]},
        "cluster", lambda r: [x["error_code"] for x in r["results"]]),
    "create_topics": (19, 7, lambda t, g, x: {"topics": [{"name": t + "-new", "num_partitions": 1,
                                                         "replication_factor": 1}], "timeout_ms": 5000},
                      ("topic", "topic_new"), lambda r: [x["error_code"] for x in r["topics"]]),
    "delete_topics": (20, 6, lambda t, g, x: {"topics": [{"name": t}], "timeout_ms": 5000},
                      "topic", lambda r: [x["error_code"] for x in r["responses"]]),
    "offset_fetch_topic": (9, 7, lambda t, g, x: {"group_id": g, "topics": [{"name": t, "partition_indexes": [0]}]},
                           "topic", lambda r: _parts(r, "topics", "partitions")),
    "add_offsets_to_txn": (25, 3, lambda t, g, x: {"transactional_id": x, "producer_id": 1, "producer_epoch": 0,
                                                    "group_id": g},
                           "transactional_id", lambda r: [r["error_code"]]),
    "consumer_group_heartbeat": (68, 0, lambda t, g, x: {"group_id": g, "member_id": "m", "member_epoch": 0,
                                                          "rebalance_timeout_ms": 10000, "subscribed_topic_names": [t],
                                                          "topic_partitions": []},
                                 "group", lambda r: [r["error_code"]]),
    "consumer_group_describe": (69, 0, lambda t, g, x: {"group_ids": [g], "include_authorized_operations": True},
                                "group", lambda r: [x["error_code"] for x in r["groups"]]),
    "offset_for_leader_epoch": (23, 4, lambda t, g, x: {"replica_id": -1, "topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        "topic", lambda r: _parts(r, "topics", "partitions")),
    "elect_leaders": (43, 2, lambda t, g, x: {"election_type": 0, "topic_partitions": [{"topic": t, "partitions": [0]}]},
                      "cluster",
                      lambda r: [p["error_code"] for t in r["replica_election_results"] for p in t["partition_result"]]),
    "alter_reassignments": (45, 0, lambda t, g, x: {"topics": [{"name": t, "partitions": [
        {"partition_index": 0, "replicas": None}]}]}, "cluster", lambda r: [r["error_code"]]),
    "list_reassignments": (46, 0, lambda t, g, x: {"topics": None},
                           "cluster", lambda r: [r["error_code"]]),
    "describe_producers": (61, 0, lambda t, g, x: {"topics": [{"name": t, "partition_indexes": [0]}]},
                           "topic", lambda r: _parts(r, "topics", "partitions")),
    "offset_delete_group": (47, 0, lambda t, g, x: {"group_id": g, "topics": [{"name": t, "partitions": [
        {"partition_index": 0}]}]}, "group", lambda r: [r["error_code"]]),
    "describe_transactions": (65, 0, lambda t, g, x: {"transactional_ids": [x]}, "transactional_id",
                              lambda r: [s["error_code"] for s in r["transaction_states"]]),
    "describe_user_scram_credentials": (50, 0, lambda t, g, x: {"users": [{"name": "alice"}]},
                                        "cluster", lambda r: [r["error_code"]]),
    "alter_user_scram_credentials": (51, 0, lambda t, g, x: {"deletions": [], "upsertions": [
        {"name": "carol", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}]},
        "cluster", lambda r: [u["error_code"] for u in r["results"]]),
    # log dirs: CLUSTER DESCRIBE answered at the top with no dirs; CLUSTER ALTER per partition
    "describe_log_dirs": (35, 4, lambda t, g, x: {"topics": None}, "cluster",
                          lambda r: [r["error_code"]]),
    "alter_replica_log_dirs": (34, 2, lambda t, g, x: {"dirs": [{"path": "/no-such-log-dir", "topics": [
        {"name": t, "partitions": [0]}]}]}, "cluster",
        lambda r: _parts(r, "results", "partitions")),
    "list_config_resources": (74, 1, lambda t, g, x: {"resource_types": []}, "cluster",
                              lambda r: [r["error_code"]]),
    # KIP-848 consumer groups: DESCRIBE on the subscribed topics (Kafka 4.x)
    "consumer_group_heartbeat_topic": (68, 0, lambda t, g, x: {
        "group_id": g, "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 10000,
        "subscribed_topic_names": [t], "topic_partitions": []},
        "topic", lambda r: [r["error_code"]]),
    # KIP-932 share groups
    "share_group_heartbeat": (76, 1, lambda t, g, x: {"group_id": g, "member_id": MEMBER, "member_epoch": 0,
                                                       "subscribed_topic_names": [t]},
                              "group", lambda r: [r["error_code"]]),
    "share_group_heartbeat_topic": (76, 1, lambda t, g, x: {"group_id": g, "member_id": MEMBER, "member_epoch": 0,
                                                             "subscribed_topic_names": [t]},
                                    "topic", lambda r: [r["error_code"]]),
    "share_group_describe": (77, 1, lambda t, g, x: {"group_ids": [g], "include_authorized_operations": True},
                             "group", lambda r: [x["error_code"] for x in r["groups"]]),
    "share_fetch_group": (78, 1, lambda t, g, x: _share_fetch(t, g), "group",
                          lambda r: [r["error_code"]]),
    "share_fetch_topic": (78, 1, lambda t, g, x: _share_fetch(t, g), "topic",
                          lambda r: _parts(r, "responses", "partitions")),
    "share_acknowledge_group": (79, 1, lambda t, g, x: {
        "group_id": g, "member_id": MEMBER, "share_session_epoch": 1, "topics": [
            {"topic_id": TopicId(t), "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]},
        "group", lambda r: [r["error_code"]]),
    "describe_share_group_offsets": (90, 0, lambda t, g, x: {"groups": [
        {"group_id": g, "topics": [{"topic_name": t, "partitions": [0]}]}]},
        "group", lambda r: [x["error_code"] for x in r["groups"]]),
    "describe_share_group_offsets_topic": (90, 0, lambda t, g, x: {"groups": [
        {"group_id": g, "topics": [{"topic_name": t, "partitions": [0]}]}]},
        "topic", lambda r: [p["error_code"] for x in r["groups"] for y in x["topics"]
                                             for p in y["partitions"]]),
    "alter_share_group_offsets": (91, 0, lambda t, g, x: {"group_id": g, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        "group", lambda r: [r["error_code"]]),
    "alter_share_group_offsets_topic": (91, 0, lambda t, g, x: {"group_id": g, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        "topic", lambda r: _parts(r, "responses", "partitions")),
    "delete_share_group_offsets": (92, 0, lambda t, g, x: {"group_id": g, "topics": [{"topic_name": t}]},
                                   "group", lambda r: [r["error_code"]]),
    # the share coordinator's APIs, called by brokers
    "initialize_share_group_state": (83, 0, lambda t, g, x: _state(t, g, state_epoch=0, start_offset=0),
                                     "cluster", _results),
    "read_share_group_state": (84, 0, lambda t, g, x: _state(t, g, leader_epoch=0),
                               "cluster", _results),
    "write_share_group_state": (85, 0, lambda t, g, x: _state(t, g, state_epoch=0, leader_epoch=0, start_offset=0,
                                                               state_batches=[]),
                                "cluster", _results),
    "delete_share_group_state": (86, 0, lambda t, g, x: _state(t, g), "cluster", _results),
    "read_share_group_state_summary": (87, 0, lambda t, g, x: _state(t, g, leader_epoch=0),
                                       "cluster", _results),
    # KIP-1071 streams groups: READ on the group, DESCRIBE on every topic of the topology
    "streams_group_heartbeat": (88, 1, lambda t, g, x: _streams_hb(t, g), "group",
                                lambda r: [r["error_code"]]),
    "streams_group_heartbeat_topic": (88, 1, lambda t, g, x: _streams_hb(t, g), "topic",
                                      lambda r: [r["error_code"]]),
    "streams_group_describe": (89, 0, lambda t, g, x: {"group_ids": [g], "include_authorized_operations": True},
                               "group", lambda r: [x["error_code"] for x in r["groups"]]),
    "streams_group_topology_description_update": (93, 0, lambda t, g, x: {
        "group_id": g, "member_id": MEMBER, "topology_epoch": 0,
        "topology_description": {"subtopologies": [], "global_stores": []}},
        "group", lambda r: [r["error_code"]]),
    "leave_group": (13, 3, lambda t, g, x: {"group_id": g, "members": [{"member_id": "m", "group_instance_id": None}]},
                    "group", lambda r: [r["error_code"]]),
    "sync_group": (14, 3, lambda t, g, x: {"group_id": g, "generation_id": 1, "member_id": "m",
                                            "group_instance_id": None, "assignments": []},
                   "group", lambda r: [r["error_code"]]),
    "add_partitions_to_txn": (24, 3, lambda t, g, x: {"v3_and_below_transactional_id": x,
                                                       "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
                                                       "v3_and_below_topics": [{"name": t, "partitions": [0]}]},
                              "transactional_id",
                              lambda r: _parts(r, "results_by_topic_v3_and_below", "results_by_partition",
                                               "partition_error_code")),
    "txn_offset_commit": (28, 3, lambda t, g, x: {"transactional_id": x, "group_id": g, "producer_id": 1,
                                                   "producer_epoch": 0, "generation_id_or_member_epoch": -1,
                                                   "member_id": "", "group_instance_id": None, "topics": [
                                                       {"name": t, "partitions": [{"partition_index": 0,
                                                                                   "committed_offset": 0}]}]},
                          "transactional_id", lambda r: _parts(r, "topics", "partitions")),
    "alter_topic_configs_legacy": (33, 2, lambda t, g, x: {"resources": [
        {"resource_type": 2, "resource_name": t, "configs": [{"name": "retention.ms", "value": "100000"}]}],
        "validate_only": True},
        "topic", lambda r: [x["error_code"] for x in r["responses"]]),
    "describe_client_quotas": (48, 1, lambda t, g, x: {"components": [], "strict": False},
                               "cluster", lambda r: [r["error_code"]]),
    "alter_client_quotas": (49, 1, lambda t, g, x: {"entries": [{"entity": [{"entity_type": "client-id",
                                                                              "entity_name": g}],
                                                                  "ops": [{"key": "producer_byte_rate", "value": 1e6,
                                                                           "remove": False}]}],
                                                     "validate_only": True},
                            "cluster", lambda r: [x["error_code"] for x in r["entries"]]),
    "describe_topic_partitions": (75, 0, lambda t, g, x: {"topics": [{"name": t}], "response_partition_limit": 100,
                                                          "cursor": None},
                                  "topic", lambda r: [x["error_code"] for x in r["topics"]]),
    # the ACL APIs themselves (filters and bindings on names no other row uses)
    "describe_acls": (29, 3, lambda t, g, x: {"resource_type_filter": 2, "resource_name_filter": t + "-acl",
                                              "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                                              "operation": 1, "permission_type": 1},
                      "cluster", lambda r: [r["error_code"]]),
    "create_acls": (30, 3, lambda t, g, x: {"creations": [
        {"resource_type": 2, "resource_name": t + "-acl", "resource_pattern_type": 3, "principal": "User:nobody",
         "host": "*", "operation": 3, "permission_type": 3}]},
        "cluster", lambda r: [x["error_code"] for x in r["results"]]),
    "delete_acls": (31, 3, lambda t, g, x: {"filters": [
        {"resource_type_filter": 2, "resource_name_filter": t + "-acl", "pattern_type_filter": 3,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
        "cluster", lambda r: [x["error_code"] for x in r["filter_results"]]),
    # brokers only (a transaction coordinator's markers to partition leaders)
    "write_txn_markers": (27, 1, lambda t, g, x: {"markers": [{
        "producer_id": 1, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
        "topics": [{"name": t, "partition_indexes": [0]}]}]},
        "cluster", lambda r: _parts(r["markers"][0], "topics", "partitions")),
}

_OP_NAMES = {B.READ: "READ", B.WRITE: "WRITE", B.CREATE: "CREATE", B.DELETE: "DELETE", B.ALTER: "ALTER",
             B.DESCRIBE: "DESCRIBE", B.CLUSTER_ACTION: "CLUSTER_ACTION", B.DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
             B.ALTER_CONFIGS: "ALTER_CONFIGS", B.IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE"}
_KINDS = {B.TOPIC: "topic", B.GROUP: "group", B.CLUSTER: "cluster", B.TRANSACTIONAL_ID: "transactional_id"}


def _role(row):
    """A row's (role, where to grant or None)."""
    return row[3] if isinstance(row[3], tuple) else (row[3], None)


def _expand(api, version, body, role, codes):
    role, kind = role if isinstance(role, tuple) else (role, None)
    n = table_row(api, role)
    assert n.error is not None, "a case of a row whose denial fails nothing: %s" % (n,)
    return api, version, body, [(_OP_NAMES[n.operation], kind or _KINDS[n.resource_type])], codes, int(n.error)


# name -> (api, version, body, [(operation, kind)], codes(resp), the row's error): what the runner
# (and tests/differential/test_acl_enforcement.py) iterate
CASES = {name: _expand(*row) for name, row in ROWS.items()}
CASE_ROWS = {name: table_row(row[0], _role(row)[0]) for name, row in ROWS.items()}

def _add_partitions(t, g, x):
    return {"v3_and_below_transactional_id": x, "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": t, "partitions": [0]}]}


def _txn_offset_commit(t, g, x):
    return {"transactional_id": x, "group_id": g, "producer_id": 1, "producer_epoch": 0,
            "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0}]}]}


# the rows behind a first check: the cases grant what comes before them (EXTRA)
ROWS.update({
    "add_partitions_to_txn_topic": (24, 3, _add_partitions, "topic",
                                    lambda r: _parts(r, "results_by_topic_v3_and_below", "results_by_partition",
                                                     "partition_error_code")),
    "add_offsets_to_txn_group": (25, 3, lambda t, g, x: {"transactional_id": x, "producer_id": 1,
                                                         "producer_epoch": 0, "group_id": g},
                                 "group", lambda r: [r["error_code"]]),
    "txn_offset_commit_group": (28, 3, _txn_offset_commit, "group", lambda r: _parts(r, "topics", "partitions")),
    "txn_offset_commit_topic": (28, 3, _txn_offset_commit, "topic", lambda r: _parts(r, "topics", "partitions")),
})
def _txn_records():
    return bytes(encode_batch([Record(None, int(time.time() * 1000), None, b"v", [])], producer_id=1,
                              producer_epoch=0, base_sequence=0, is_transactional=True))


# the rows behind a first check or a condition of the request
ROWS.update({
    "produce_transactional": (0, 9, lambda t, g, x: {"transactional_id": x, "acks": 1, "timeout_ms": 5000,
                                                     "topic_data": [{"name": t, "partition_data": [
                                                         {"index": 0, "records": _txn_records()}]}]},
                              "transactional_id", lambda r: _parts(r, "responses", "partition_responses")),
    "fetch_follower": (1, 12, lambda t, g, x: {"replica_id": 1, "max_wait_ms": 0, "max_bytes": 1 << 20,
                                               "session_epoch": -1, "topics": [{"topic": t, "partitions": [
                                                   {"partition": 0, "fetch_offset": 0,
                                                    "partition_max_bytes": 1 << 20}]}]},
                       "follower", lambda r: _parts(r, "responses", "partitions")),
    "metadata_auto_create": (3, 12, lambda t, g, x: {"topics": [{"name": t + "-new"}], "allow_auto_topic_creation": True},
                             ("auto_create", "topic_new"), lambda r: [t["error_code"] for t in r["topics"]]),
    # v4+: the brokers' verify-only batches, CLUSTER_ACTION first
    "add_partitions_to_txn_v4": (24, 4, lambda t, g, x: {"transactions": [
        {"transactional_id": x, "producer_id": 1, "producer_epoch": 0, "verify_only": True,
         "topics": [{"name": t, "partitions": [0]}]}]}, "verify", lambda r: [r["error_code"]]),
    "init_producer_id_any_topic": (22, 4, lambda t, g, x: {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                           "producer_id": -1, "producer_epoch": -1},
                                   "idempotent_any_topic", lambda r: [r["error_code"]]),
})

# configs of groups and of the broker (validate-only where the API has it: nothing changes)
ROWS.update({
    "describe_group_configs": (32, 4, lambda t, g, x: {"resources": [
        {"resource_type": 32, "resource_name": g, "configuration_keys": None}]},
        "group", lambda r: [x["error_code"] for x in r["results"]]),
    "alter_group_configs": (44, 1, lambda t, g, x: {"resources": [
        {"resource_type": 32, "resource_name": g, "configs": [
            {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "45000"}]}],
        "validate_only": True}, "group", lambda r: [x["error_code"] for x in r["responses"]]),
    "alter_broker_configs": (44, 1, lambda t, g, x: {"resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "604800000"}]}],
        "validate_only": True}, "cluster", lambda r: [x["error_code"] for x in r["responses"]]),
    "alter_broker_configs_legacy": (33, 2, lambda t, g, x: {"resources": [
        # a replacement of the cluster default keeps min.insync.replicas (Kafka 4.4's ELR rule)
        {"resource_type": 4, "resource_name": "", "configs": [{"name": "min.insync.replicas", "value": "1"},
                                                              {"name": "log.retention.ms", "value": "604800000"}]}],
        "validate_only": True}, "cluster", lambda r: [x["error_code"] for x in r["responses"]]),
    "alter_group_configs_legacy": (33, 2, lambda t, g, x: {"resources": [
        {"resource_type": 32, "resource_name": g, "configs": [
            {"name": "consumer.session.timeout.ms", "value": "45000"}]}],
        "validate_only": True}, "group", lambda r: [x["error_code"] for x in r["responses"]]),
})
CASES.update({name: _expand(*ROWS[name]) for name in ROWS if name not in CASES})
CASE_ROWS.update({name: table_row(row[0], _role(row)[0]) for name, row in ROWS.items()})

# what else a case needs so that only the binding under test is missing
EXTRA = {"offset_commit_topic": [("READ", "group")], "offset_commit_group": [("READ", "topic")],
         "offset_fetch_topic": [("DESCRIBE", "group")], "delete_topics": [("DESCRIBE", "topic")],
         "consumer_group_heartbeat_topic": [("READ", "group")], "share_group_heartbeat": [("DESCRIBE", "topic")],
         "share_group_heartbeat_topic": [("READ", "group")], "share_fetch_topic": [("READ", "group")],
         "describe_share_group_offsets_topic": [("DESCRIBE", "group")],
         "alter_share_group_offsets_topic": [("READ", "group")], "streams_group_heartbeat": [("DESCRIBE", "topic")],
         "streams_group_heartbeat_topic": [("READ", "group")],
         "add_partitions_to_txn_topic": [("WRITE", "transactional_id")],
         "add_offsets_to_txn_group": [("WRITE", "transactional_id")],
         "txn_offset_commit_group": [("WRITE", "transactional_id")],
         "txn_offset_commit_topic": [("WRITE", "transactional_id"), ("READ", "group")],
         "produce_transactional": [("WRITE", "topic")], "metadata_auto_create": [("DESCRIBE", "topic_new")],
}


# The rows of the requirement table whose denial is an error but that this table's runner (raw
# requests from User:ANONYMOUS over PLAINTEXT, one binding missing) cannot exercise, and where
# they are tested instead.  Every other such row must have a case: the test below fails when a
# row is added without one.
ELSEWHERE = {
    (10, "share"): "FindCoordinator for the share coordinator: sent by brokers only, not exercised here",
    (20, "describe"): "DeleteTopics' DESCRIBE-before-DELETE order: the delete_topics case grants DESCRIBE (EXTRA)",
    (79, "topic"): "test_share_acknowledge_needs_read_on_the_topic (a share session opened while readable)",
    (92, "topic"): "test_delete_share_group_offsets_needs_read_on_each_topic (needs offsets to delete)",
    (47, "topic"): "test_offset_delete_needs_read_on_the_topic (needs a group with offsets)",
    (38, "owner"): "delegation tokens refuse PLAINTEXT: tests/security/test_delegation_tokens.py, "
                   "tests/differential/test_delegation_tokens.py",
}


def _served():
    import importlib
    import pkgutil

    import pykbroker.handlers as h
    served = set()
    for m in pkgutil.iter_modules(h.__path__):
        if m.name[:1] == "k" and m.name[1:3].isdigit():
            served.add(importlib.import_module("pykbroker.handlers." + m.name).API_KEY)
    return served


def test_every_served_api_has_rows_and_every_row_a_case():
    """The requirement table covers every API served (or says why not: NO_ACL), and each of its
    rows whose denial is an error is exercised by a case here or named in ELSEWHERE."""
    served = _served()
    apis = {n.api for n in REQUIREMENTS}
    assert served - apis - set(NO_ACL) == set(), "APIs served without requirement rows"
    assert apis <= served and not (apis & set(NO_ACL)) and set(NO_ACL) <= served
    failing = {(n.api, n.role) for n in REQUIREMENTS if n.error is not None}
    cased = {(n.api, n.role) for n in CASE_ROWS.values()}
    assert failing - cased - set(ELSEWHERE) == set(), "rows without a case"
    assert set(ELSEWHERE) <= failing - cased, "ELSEWHERE names a row that has a case or fails nothing"


def test_every_row_is_asked_for_by_its_handler():
    """Each row of the requirement table is read by the handler of its API when that handler is
    imported (``need`` / ``needs``; a shared helper's rows through the handler's ``needs``), so
    no row describes a check nothing makes; and a row's denial error is an authorization error."""
    from pykbroker.acl import requirements
    _served()   # imports every handler module
    assert requirements.unasked() == [], "rows no handler asks for"
    assert all(n.error is None or n.error.name.endswith("_AUTHORIZATION_FAILED") for n in REQUIREMENTS)


def test_handlers_check_only_through_the_table():
    """No handler names an operation or a denial's error itself: the checks go through
    acl.check.permits / permits_role / AuthSession.permits with a row of the table, and a denial
    is answered with the row's error (so the table is the whole story)."""
    import re
    from pathlib import Path

    import pykbroker.handlers as h
    direct = re.compile(r"\.allowed\(|\bby_resource_type\(|\bauthorize\(|\.decide\(|"
                        r"\b(ErrorCode|E)\.[A-Z_]+_AUTHORIZATION_FAILED\b")
    bad = [(p.name, i + 1, line.strip()) for p in sorted(Path(h.__path__[0]).glob("*.py"))
           for i, line in enumerate(p.read_text().splitlines()) if direct.search(line)]
    assert not bad, bad


def _grant(b, op, kind, t, g, x):
    if kind == "cluster":
        return b.acls.allow(ANON, op, cluster=True)
    if kind == "topic_new":
        return b.acls.allow(ANON, op, topic=t + "-new")
    return b.acls.allow(ANON, op, **{kind: {"topic": t, "group": g, "transactional_id": x}[kind]})


async def _missing(b, name):
    return b.metadata_cache.get(name) is None


async def _topic_id(b, name):
    return b.metadata_cache.get(name).topic_id


@pytest.mark.parametrize("case", sorted(CASES))
def test_required_acls(broker, case):
    api, version, body, needs, codes, denied = CASES[case]
    n = next(_n)
    t, g, x = "t%d" % n, "g%d" % n, "x%d" % n
    broker.create_topic(t)
    granted = [_grant(broker, op, kind, t, g, x) for op, kind in EXTRA.get(case, [])]
    req = resolve(body(t, g, x), lambda name: broker._async(_topic_id, name))
    with WireClient(broker) as c:
        got = codes(c.request(api, version, req))
    assert got and set(got) == {denied}, got
    granted += [_grant(broker, op, kind, t, g, x) for op, kind in needs]
    with WireClient(broker) as c:
        got = codes(c.request(api, version, req))
    assert got and denied not in got, got
    broker.acls.remove(*granted)


def test_metadata_topic_id_and_all_topics(broker):
    """An all-topics request leaves out what the client may not describe; deny wins over allow."""
    broker.create_topic("visible-a")
    broker.create_topic("hidden-b")
    a = broker.acls.allow(ANON, "DESCRIBE", topic="visible-", pattern="PREFIXED")
    d = broker.acls.deny(ANON, "ALL", topic="visible-a")
    broker.create_topic("visible-c")
    with WireClient(broker) as c:
        names = {t["name"] for t in c.request(3, 12, {"topics": None})["topics"]}
    assert "visible-c" in names and "visible-a" not in names and "hidden-b" not in names
    broker.acls.remove(a, d)


def test_acls_change_takes_effect_on_an_open_connection(broker):
    """The per-connection decision cache is dropped when the bindings change."""
    broker.create_topic("cached")
    body = {"topics": [{"name": "cached"}], "allow_auto_topic_creation": False}
    with WireClient(broker) as c:
        assert c.request(3, 12, body)["topics"][0]["error_code"] == 29
        a = broker.acls.allow(ANON, "DESCRIBE", topic="cached")
        assert c.request(3, 12, body)["topics"][0]["error_code"] == 0
        broker.acls.remove(a)
        assert c.request(3, 12, body)["topics"][0]["error_code"] == 29


def test_share_acknowledge_needs_read_on_the_topic(broker):
    """A share session opened while the topic was readable: once READ on it is gone, its
    acknowledgements are answered TOPIC_AUTHORIZATION_FAILED per partition (nothing applied)."""
    n = next(_n)
    t, g = "t%d" % n, "g%d" % n
    broker.create_topic(t)
    granted = [_grant(broker, "READ", "group", t, g, None), _grant(broker, "READ", "topic", t, g, None)]
    tid = broker._async(_topic_id, t)
    ack = {"group_id": g, "member_id": MEMBER, "share_session_epoch": 1, "topics": [
        {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]}
    with WireClient(broker) as c:
        r = c.request(78, 1, resolve(_share_fetch(t, g), lambda name: tid))
        assert r["error_code"] == 0, r
        broker.acls.remove(granted.pop())             # READ on the topic
        r = c.request(79, 1, ack)
        assert r["error_code"] == 0, r
        assert [p["error_code"] for x in r["responses"] for p in x["partitions"]] == [29], r
    broker.acls.remove(*granted)


def test_delete_share_group_offsets_needs_read_on_each_topic(broker):
    """DELETE on the group lets the request in; a topic the client may not READ is answered
    TOPIC_AUTHORIZATION_FAILED (first, with its message) and its state kept, the others deleted."""
    n = next(_n)
    t, other, g = "t%d" % n, "u%d" % n, "g%d" % n
    broker.create_topic(t)
    broker.create_topic(other)
    granted = [_grant(broker, op, kind, t, g, None) for op, kind in (("READ", "group"), ("DELETE", "group"))]
    granted.append(broker.acls.allow(ANON, "READ", topic=other))
    read_t = _grant(broker, "READ", "topic", t, g, None)
    with WireClient(broker) as c:
        body = {"group_id": g, "topics": [{"topic_name": name, "partitions": [{"partition_index": 0,
                                                                               "start_offset": 0}]}
                                          for name in (other, t)]}
        r = c.request(91, 0, body)   # the group and the state of both topics exist
        assert r["error_code"] == 0 and _parts(r, "responses", "partitions") == [0, 0], r
        broker.acls.remove(read_t)
        r = c.request(92, 0, {"group_id": g, "topics": [{"topic_name": other}, {"topic_name": t}]})
    assert r["error_code"] == 0, r
    assert [(x["topic_name"], x["error_code"], x["error_message"]) for x in r["responses"]] == \
        [(t, 29, "Topic authorization failed."), (other, 0, None)], r
    broker.acls.remove(*granted)


def test_regex_subscription_leaves_out_topics_not_describable(broker):
    """KIP-848: the topics a SubscribedTopicRegex matches are filtered by DESCRIBE for the
    subscribing member's principal (compared with Kafka 4.4 in tests/differential)."""
    n = next(_n)
    g, seen, unseen = "g%d" % n, "rx%d-seen" % n, "rx%d-unseen" % n
    broker.create_topic(seen)
    broker.create_topic(unseen)
    granted = [broker.acls.allow(ANON, "READ", group=g), broker.acls.allow(ANON, "DESCRIBE", topic=seen)]
    body = {"group_id": g, "member_id": MEMBER, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 10000, "subscribed_topic_names": None, "subscribed_topic_regex": "rx%d-.*" % n,
            "server_assignor": None, "topic_partitions": []}
    with WireClient(broker) as c:
        r = c.request(68, 1, body)
    assert r["error_code"] == 0, r
    assert [tp["topic_id"] for tp in r["assignment"]["topic_partitions"]] == [broker._async(_topic_id, seen)], r
    broker.acls.remove(*granted)


def test_streams_internal_topics_need_create(broker):
    """StreamsGroupHeartbeat creates the topology's internal topics only with CREATE on them (or
    on the cluster); without it the MISSING_INTERNAL_TOPICS status says so and nothing is created."""
    n = next(_n)
    src, g = "t%d" % n, "g%d" % n
    changelog = g + "-store-changelog"
    broker.create_topic(src)
    granted = [broker.acls.allow(ANON, "READ", group=g), broker.acls.allow(ANON, "DESCRIBE", topic=src),
               broker.acls.allow(ANON, "DESCRIBE", topic=changelog)]
    body = _streams_hb(src, g)
    body["topology"]["subtopologies"][0]["state_changelog_topics"] = [
        {"name": changelog, "partitions": 0, "replication_factor": 0, "topic_configs": []}]
    with WireClient(broker) as c:
        r = c.request(88, 1, body)
        assert r["error_code"] == 0, r
        assert [s["status_detail"] for s in r["status"] if s["status_code"] == 3] == [
            "Internal topics are missing: %s; Unauthorized to CREATE on topics %s." % (changelog, changelog)], r
        time.sleep(0.3)
        assert broker._async(_missing, changelog)
        granted.append(broker.acls.allow(ANON, "CREATE", cluster=True))
        r = c.request(88, 1, dict(_streams_hb(src, g, topology=False), member_epoch=r["member_epoch"],
                                  active_tasks=None, standby_tasks=None, warmup_tasks=None))
        assert r["error_code"] == 0 and not any("Unauthorized" in s["status_detail"] for s in r["status"]), r
        deadline = time.monotonic() + 10
        while broker._async(_missing, changelog):
            assert time.monotonic() < deadline, "the changelog topic was never created"
            time.sleep(0.05)
    broker.acls.remove(*granted)


def test_offset_delete_needs_read_on_the_topic(broker):
    """OffsetDelete: DELETE on the group lets the request in; a partition of a topic the client
    may not READ is answered TOPIC_AUTHORIZATION_FAILED (the requirement table's row) and its
    offset kept."""
    n = next(_n)
    t, g = "t%d" % n, "g%d" % n
    broker.create_topic(t)
    row = table_row(47, "topic")
    granted = [broker.acls.allow(ANON, "READ", group=g), broker.acls.allow(ANON, "DELETE", group=g)]
    read_t = broker.acls.allow(ANON, "READ", topic=t)
    commit = {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
              "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0}]}]}
    delete = {"group_id": g, "topics": [{"name": t, "partitions": [{"partition_index": 0}]}]}
    with WireClient(broker) as c:
        assert _parts(c.request(8, 8, commit), "topics", "partitions") == [0]
        broker.acls.remove(read_t)
        r = c.request(47, 0, delete)
        assert r["error_code"] == 0 and _parts(r, "topics", "partitions") == [int(row.error)], r
        read_t = broker.acls.allow(ANON, "READ", topic=t)
        r = c.request(47, 0, delete)
        assert r["error_code"] == 0 and _parts(r, "topics", "partitions") == [0], r
    broker.acls.remove(read_t, *granted)
