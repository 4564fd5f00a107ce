"""The full client matrix: variants that only ``PYKBROKER_FULL_MATRIX=1`` runs.

A client scenario runs on one broker and on the 3-broker cluster.  The cluster run proves what
one broker cannot: replicas on three brokers, the group and transaction coordinators on one
broker and the partition leaders on others, metadata naming three brokers.  Once one variant of
a client's scenario proves that on the cluster, its other variants there (another assignor,
codec set, client-side option or client version) repeat the same broker paths, which their
single-broker runs check on every run.  Those cluster repeats are listed here, each with what
still proves it on every run; the default run skips them saying so (``-rs`` lists the reason),
``PYKBROKER_FULL_MATRIX=1`` runs them.  Never listed: a fault test (kill -9, partitions) and a
scenario's only cluster run.

Keys are node ids relative to tests/ (``dir/file.py::test[params]``);
tests/install/test_full_matrix.py checks each still names a collected test.
"""
from __future__ import annotations

import os

FLAG = "PYKBROKER_FULL_MATRIX"
FULL = os.environ.get(FLAG) == "1"

_FRANZ_EOS = ("franz-go's exactly-once session on the cluster is proven by [cluster-range] (coordinators and "
              "leaders on different brokers); this variant's broker rules by its [single-...] run")
_GO_CODECS = ("compressed batches replicated and read back on the cluster: franz-go's "
              "test_produce_consume_every_codec[cluster]; this client's batches by its [single-...] run")
_GO_ASSIGNOR = ("the assignor is the client's; the broker's group paths on the cluster are proven by the "
                "client's [cluster-...-range] run, this assignor by its [single-...] run")

FULL_MATRIX_ONLY: dict[str, str] = {
    # tests/go: franz-go
    "go/test_franz_go.py::test_group_commits_resume_across_members[cluster-cooperative-sticky]":
        "the assignor is franz-go's; its classic and KIP-848 groups on the cluster are [cluster-range] and "
        "[cluster-consumer], this assignor [single-cooperative-sticky]",
    "go/test_franz_go.py::test_group_transact_session_exactly_once[cluster-cooperative-sticky-static]": _FRANZ_EOS,
    "go/test_franz_go.py::test_group_transact_session_exactly_once[cluster-kip848]":
        _FRANZ_EOS + "; KIP-848 groups on the cluster by test_group_commits_resume_across_members[cluster-consumer]",
    "go/test_franz_go.py::test_group_transact_session_exactly_once[cluster-lost-end-txn-answer]":
        _FRANZ_EOS + "; the lost EndTxn answer is the coordinator's alone, also compared with Apache Kafka in "
        "tests/differential/test_franz_go.py",
    # tests/go: sarama and kafka-go
    "go/test_sarama_kafka_go.py::test_produce_consume_every_codec[cluster-sarama]": _GO_CODECS,
    "go/test_sarama_kafka_go.py::test_produce_consume_every_codec[cluster-kafkago]": _GO_CODECS,
    "go/test_sarama_kafka_go.py::test_group_commits_resume_across_members[cluster-sarama-roundrobin]": _GO_ASSIGNOR,
    "go/test_sarama_kafka_go.py::test_group_commits_resume_across_members[cluster-sarama-sticky]": _GO_ASSIGNOR,
    "go/test_sarama_kafka_go.py::test_group_commits_resume_across_members[cluster-kafkago-roundrobin]": _GO_ASSIGNOR,
}
# tests/java/test_on_cluster.py: the single-broker modules' scenarios on the cluster, once per
# Java client profile.  The kafka4 profile's runs prove the cluster's part (the 4.x client of
# the same scenarios, its classic and consumer groups, the replicated admin answers; the admin
# runs, 1 s each, stay for both profiles); the kafka39 profile's runs of the same scenarios on
# one broker stay (tests/java/test_*.py).
_JAVA39 = ("the kafka39 profile repeats on the cluster what the kafka4 profile's run of the same scenario proves "
           "there; the 3.9 client itself runs it on one broker (tests/java/%s)")
FULL_MATRIX_ONLY.update({"java/test_on_cluster.py::%s[%s]" % (test, param): _JAVA39 % module
                         for module, tests, param in (
                             ("test_groups.py", ("test_empty_group_and_delete", "test_rebalance"), "kafka39-classic"),
                             ("test_produce_consume.py", ("test_assign_seek_read", "test_default_producer",
                                                          "test_subscribe_classic_group"), "kafka39"),
                             ("test_offsets.py", ("test_list_offsets", "test_consumer_offsets_for_times",
                                                  "test_delete_records", "test_consumer_below_log_start"), "kafka39"))
                         for test in tests})

# tests/clients/test_on_cluster.py: each Python client's and kcat's round trip per codec on the
# cluster.  confluent-kafka's idempotent round trips with every codec prove compressed batches
# replicated and read back there; each client keeps its uncompressed run on the cluster and
# its every codec on one broker (tests/clients/test_<client>.py).
_PY_CODECS = ("compressed batches replicated and read back on the cluster: test_confluent_roundtrip[<codec>-idempotent]; "
              "this client's %s batches on one broker: tests/clients/%s")
FULL_MATRIX_ONLY.update({"clients/test_on_cluster.py::%s[%s]" % (test, param % codec): _PY_CODECS % (codec, module)
                         for test, module, param in (("test_kafka_python_roundtrip", "test_kafka_python.py", "%s"),
                                                     ("test_aiokafka_roundtrip", "test_aiokafka.py", "%s"),
                                                     ("test_kcat_roundtrip", "test_kcat.py", "%s"),
                                                     ("test_confluent_roundtrip", "test_confluent.py", "%s-plain"))
                         for codec in ("gzip", "snappy", "lz4", "zstd")})


def skip_reason(rel_nodeid: str) -> str | None:
    """The skip reason of a test left to the full matrix, or None (run it)."""
    if FULL:
        return None
    why = FULL_MATRIX_ONLY.get(rel_nodeid)
    return None if why is None else "%s=1: %s" % (FLAG, why)
