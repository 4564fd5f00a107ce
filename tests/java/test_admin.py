"""Java AdminClient 3.9.x and 4.x: cluster, topics, partitions and configs.

A JVM per profile runs the ``admin`` scenario, beside other modules' scenarios, (compat/java/.../AdminScenario.java); every test
checks one part of what the AdminClient observed.
"""
import pytest

from tests import against
from tests.java.batch import batch, reports

pytestmark = [pytest.mark.timeout(900), pytest.mark.parametrize("profile", ["kafka39", "kafka4"])]


def admin_args(profile):
    return {"prefix": "java-admin-" + profile}


# both profiles' scenarios at once, one JVM each, on the session's shared broker with other
# modules' (tests/java/conftest.py, batch.py)
JAVA_BATCH = batch("admin", admin_args)
JAVA_SHARED_BROKER = True
_admin = reports("admin", "admin", admin_args)


def test_describe_cluster(admin, profile, broker):
    r = admin(profile)
    r.assert_phase("describe_cluster")
    c = r.one("cluster")
    assert len(c["nodes"]) == 1
    node = c["nodes"][0]
    assert (node["host"], node["port"]) == ("127.0.0.1", broker.port)
    assert c["controller"] == node["id"]
    assert c["cluster_id"] and len(c["cluster_id"]) == 22   # base64 of a 16-byte uuid, as Kafka's


def test_create_topics(admin, profile):
    r = admin(profile)
    r.assert_phase("create_topics")
    a = r.one("created", topic="java-admin-%s-a" % profile)
    b = r.one("created", topic="java-admin-%s-b" % profile)
    assert (a["partitions"], a["replication_factor"]) == (3, 1)
    assert (a["retention_ms"], a["retention_ms_source"]) == ("123456789", "DYNAMIC_TOPIC_CONFIG")
    # Broker defaults: num.partitions=1, default.replication.factor=1, retention 7 days.
    assert (b["partitions"], b["replication_factor"]) == (1, 1)
    assert (b["retention_ms"], b["retention_ms_source"]) == ("604800000", "DEFAULT_CONFIG")
    assert a["topic_id"] != b["topic_id"] and "AAAAAAAAAAAAAAAAAAAAAA" not in (a["topic_id"], b["topic_id"])


def test_create_topic_errors(admin, profile):
    r = admin(profile)
    r.assert_phase("create_errors")
    errors = {c: e["error"] for c, e in r.by_case("create_error").items()}
    assert errors == {
        "exists": "TopicExistsException",
        "replication_factor_3": "InvalidReplicationFactorException",   # one broker
        "bad_config": "InvalidConfigurationException",
        "unknown_config": "InvalidConfigurationException",
        "bad_name": "InvalidTopicException",
        "validate_only": None,
    }


def test_list_and_describe_topics(admin, profile):
    r = admin(profile)
    prefix = "java-admin-" + profile
    r.assert_phase("list_topics")
    names = r.one("topics", phase="after_create")["names"]
    assert prefix + "-a" in names and prefix + "-b" in names
    # validateOnly and failed creations leave nothing behind
    assert not [n for n in names if n.startswith(prefix) and n not in (prefix + "-a", prefix + "-b")]
    r.assert_phase("describe_topics")
    node = r.one("cluster")["nodes"][0]["id"]
    created = {e["topic"]: e["topic_id"] for e in r.all("created")}
    for t, n in ((prefix + "-a", 3), (prefix + "-b", 1)):
        d = r.one("topic", phase="after_create", name=t)
        assert d["internal"] is False
        assert d["topic_id"] == created[t]
        assert d["partitions"] == [{"partition": p, "leader": node, "replicas": [node], "isr": [node]}
                                   for p in range(n)]
    r.assert_phase("describe_unknown")
    assert r.one("describe_error", case="unknown")["error"] == "UnknownTopicOrPartitionException"


def test_create_partitions(admin, profile):
    r = admin(profile)
    r.assert_phase("create_partitions")
    d = r.one("topic", phase="after_create_partitions")
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2, 3, 4]
    assert d["topic_id"] == r.one("topic", phase="after_create", name=d["name"])["topic_id"]
    errors = {c: e["error"] for c, e in r.by_case("create_partitions_error").items()}
    assert errors == {"decrease": "InvalidPartitionsException", "same": "InvalidPartitionsException",
                      "unknown": "UnknownTopicOrPartitionException"}


def test_describe_configs(admin, profile, broker):
    r = admin(profile)
    r.assert_phase("describe_configs_topic")
    topic = {e["name"]: e for e in r.one("config", type="TOPIC")["entries"]}
    assert topic["retention.ms"]["value"] == "123456789"
    assert topic["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG" and not topic["retention.ms"]["default"]
    assert topic["cleanup.policy"]["value"] == "compact"
    assert topic["cleanup.policy"]["type"] == "LIST"
    for name, val, typ in (("segment.bytes", "1073741824", "INT"), ("max.message.bytes", "1048588", "INT"),
                           ("min.insync.replicas", "1", "INT"), ("message.timestamp.type", "CreateTime", "STRING"),
                           ("retention.bytes", "-1", "LONG"), ("compression.type", "producer", "STRING")):
        e = topic[name]
        source = ("DEFAULT_CONFIG", True)
        if name == "min.insync.replicas" and against.AGAINST_KAFKA:
            # SKIPPED.md (DescribeConfigs): a freshly formatted Kafka 4 holds a cluster-level 1
            source = ("DYNAMIC_DEFAULT_BROKER_CONFIG", False)
        assert (e["value"], e["source"], e["default"], e["type"]) == (val,) + source + (typ,), e
        assert e["read_only"] is False and e["sensitive"] is False
    r.assert_phase("describe_configs_broker")
    b = r.one("config", type="BROKER")
    assert b["name"] == str(r.one("cluster")["nodes"][0]["id"])
    brk = {e["name"]: e for e in b["entries"]}
    assert brk["num.partitions"]["value"] == "1"
    assert brk["log.retention.hours"]["value"] == "168"
    assert brk["log.dirs"]["value"] == broker.data_dir
    assert brk["log.dirs"]["source"] == "STATIC_BROKER_CONFIG"
    r.assert_phase("describe_configs_unknown_topic")
    assert r.one("describe_configs_error")["error"] == "UnknownTopicOrPartitionException"


def test_delete_topics(admin, profile):
    r = admin(profile)
    prefix = "java-admin-" + profile
    r.assert_phase("delete_topics")
    names = r.one("topics", phase="after_delete")["names"]
    assert prefix + "-b" not in names and prefix + "-a" in names
    assert r.one("delete_error", case="unknown")["error"] == "UnknownTopicOrPartitionException"
    assert r.one("describe_error", case="deleted")["error"] == "UnknownTopicOrPartitionException"
