"""The versions each request handler serves, as data: the handler table (handlers/__init__.py)
and ApiVersions read them here, and each ``kNN_*`` handler module takes its ``MIN_VERSION`` /
``MAX_VERSION`` (and ``ADVERTISED_MIN_VERSION``) from its row, so the range is written once.

Why a table of its own rather than constants read from each handler module: the broker answers
ApiVersions and checks every request's version before it imports a handler (a handler module is
imported by its first request; importing all of them, with the coordinator and storage code they
pull in, was a good part of the time to the first answer), and this module imports nothing.

A row is the range advertised in ApiVersions, never wider than the semantics the handler builds
(what is not built is in SKIPPED.md).  Adding a handler: its module ``kNN_name.py`` and its row
here (tests/protocol/test_lazy_loading.py checks the two agree).
"""
from __future__ import annotations

from typing import NamedTuple, Optional


class Versions(NamedTuple):
    module: str                     # the handler module's name in this package (``kNN_name``)
    min_version: int                # the lowest version served
    max_version: int                # the highest version served (and advertised)
    # advertised lowest version, when it differs from the lowest served (a request below
    # ``min_version`` is still refused as an unsupported version)
    advertised_min_version: Optional[int] = None

    @property
    def served(self) -> tuple[int, int]:
        """``(MIN_VERSION, MAX_VERSION)`` of the handler module."""
        return self.min_version, self.max_version


# api key -> its handler's versions
VERSIONS: dict[int, Versions] = {
    # Apache Kafka 4 advertises Produce from v0 although it serves only v3+ (KAFKA-18659):
    # librdkafka's feature detection (e.g. compressed produce) requires the v0 floor.  A v0-2
    # request is still an unsupported version: the connection is closed, as Kafka 4.4 does.
    0: Versions("k00_produce", 3, 13, advertised_min_version=0),
    1: Versions("k01_fetch", 4, 18),
    2: Versions("k02_list_offsets", 1, 11),
    3: Versions("k03_metadata", 0, 13),
    8: Versions("k08_offset_commit", 2, 10),
    9: Versions("k09_offset_fetch", 1, 10),
    10: Versions("k10_find_coordinator", 0, 6),
    11: Versions("k11_join_group", 0, 9),
    12: Versions("k12_heartbeat", 0, 4),
    13: Versions("k13_leave_group", 0, 5),
    14: Versions("k14_sync_group", 0, 5),
    15: Versions("k15_describe_groups", 0, 6),
    16: Versions("k16_list_groups", 0, 5),
    17: Versions("k17_sasl_handshake", 0, 1),
    18: Versions("k18_api_versions", 0, 5),
    19: Versions("k19_create_topics", 2, 7),
    20: Versions("k20_delete_topics", 1, 6),
    21: Versions("k21_delete_records", 0, 2),
    22: Versions("k22_init_producer_id", 0, 5),
    23: Versions("k23_offset_for_leader_epoch", 2, 4),
    24: Versions("k24_add_partitions_to_txn", 0, 5),
    25: Versions("k25_add_offsets_to_txn", 0, 4),
    26: Versions("k26_end_txn", 0, 5),
    27: Versions("k27_write_txn_markers", 1, 2),
    28: Versions("k28_txn_offset_commit", 0, 6),
    29: Versions("k29_describe_acls", 1, 3),
    30: Versions("k30_create_acls", 1, 3),
    31: Versions("k31_delete_acls", 1, 3),
    32: Versions("k32_describe_configs", 1, 4),
    33: Versions("k33_alter_configs", 0, 2),
    34: Versions("k34_alter_replica_log_dirs", 1, 2),
    35: Versions("k35_describe_log_dirs", 1, 5),
    36: Versions("k36_sasl_authenticate", 0, 2),
    37: Versions("k37_create_partitions", 0, 3),
    38: Versions("k38_create_delegation_token", 1, 3),
    39: Versions("k39_renew_delegation_token", 1, 2),
    40: Versions("k40_expire_delegation_token", 1, 2),
    41: Versions("k41_describe_delegation_token", 1, 3),
    42: Versions("k42_delete_groups", 0, 3),
    43: Versions("k43_elect_leaders", 0, 2),
    44: Versions("k44_incremental_alter_configs", 0, 1),
    45: Versions("k45_alter_partition_reassignments", 0, 1),
    46: Versions("k46_list_partition_reassignments", 0, 0),
    47: Versions("k47_offset_delete", 0, 0),
    48: Versions("k48_describe_client_quotas", 0, 1),
    49: Versions("k49_alter_client_quotas", 0, 1),
    50: Versions("k50_describe_user_scram_credentials", 0, 0),
    51: Versions("k51_alter_user_scram_credentials", 0, 0),
    60: Versions("k60_describe_cluster", 0, 2),
    61: Versions("k61_describe_producers", 0, 0),
    65: Versions("k65_describe_transactions", 0, 0),
    66: Versions("k66_list_transactions", 0, 2),
    68: Versions("k68_consumer_group_heartbeat", 0, 1),
    69: Versions("k69_consumer_group_describe", 0, 1),
    74: Versions("k74_list_config_resources", 0, 1),
    75: Versions("k75_describe_topic_partitions", 0, 0),
    76: Versions("k76_share_group_heartbeat", 1, 1),
    77: Versions("k77_share_group_describe", 1, 1),
    78: Versions("k78_share_fetch", 1, 2),
    79: Versions("k79_share_acknowledge", 1, 2),
    83: Versions("k83_initialize_share_group_state", 0, 0),
    84: Versions("k84_read_share_group_state", 0, 0),
    85: Versions("k85_write_share_group_state", 0, 1),
    86: Versions("k86_delete_share_group_state", 0, 0),
    87: Versions("k87_read_share_group_state_summary", 0, 1),
    88: Versions("k88_streams_group_heartbeat", 0, 1),
    89: Versions("k89_streams_group_describe", 0, 1),
    90: Versions("k90_describe_share_group_offsets", 0, 1),
    91: Versions("k91_alter_share_group_offsets", 0, 0),
    92: Versions("k92_delete_share_group_offsets", 0, 0),
    93: Versions("k93_streams_group_topology_description_update", 0, 0),
}
