"""``pykbroker topics``, ``offsets`` and ``cluster describe`` against pykbroker and Apache Kafka:
the same commands, the same ``--json`` answers (ids and ports aside), and what they did read
back with a client."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from .helpers import cli, cli_json, name, same_as_kafka, scrub, wait_gone, wait_topic


def test_cluster_describe(both):
    def scenario(t):
        info = cli_json(t, "cluster", "describe")
        assert info["cluster_id"]
        assert [(b["host"], b["port"]) for b in info["brokers"]] == [(t.host, t.port)]
        text = cli(t, "cluster", "describe").stdout.decode()
        assert "cluster id: %s" % info["cluster_id"] in text and str(t.port) in text
        return scrub(info)

    p, k = both(scenario)
    assert p == {"cluster_id": "<cluster_id>", "controller": 1,
                 "brokers": [{"id": 1, "host": "<host>", "port": "<port>", "rack": None}]}
    same_as_kafka(p, k)


def _topic_configs(t, topic):
    admin = AdminClient({"bootstrap.servers": t.bootstrap})
    res = ConfigResource("topic", topic)
    entries = admin.describe_configs([res])[res].result(timeout=30)
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def test_topics_lifecycle(both):
    topic = name("cli-topics")

    def scenario(t):
        seen = {}
        seen["create"] = cli_json(t, "topics", "create", "--topic", topic, "--partitions", "2",
                                  "--replication-factor", "1", "--config", "retention.ms=3600000",
                                  "--config", "max.message.bytes=100000")
        wait_topic(t, topic, 2)
        # four reads of the same state, side by side (each its own process; none writes)
        with ThreadPoolExecutor(4) as pool:
            listed = pool.submit(cli_json, t, "topics", "list", "--topic", "cli-topics-.*")
            listed_text = pool.submit(cli, t, "topics", "list")
            described = pool.submit(cli_json, t, "topics", "describe", "--topic", topic)
            described_text = pool.submit(cli, t, "topics", "describe", "--topic", topic)
            seen["list"], seen["describe"] = listed.result(), described.result()
            listed_text, text = listed_text.result().stdout.decode(), described_text.result().stdout.decode()
        assert topic in seen["list"]
        assert listed_text.splitlines().count(topic) == 1
        assert "Topic: %s\t" % topic in text and "Partition: 1\tLeader: 1\tReplicas: 1\tIsr: 1" in text

        # an existing topic: exit 1 and Kafka's error name; --if-not-exists: 0
        r = cli(t, "topics", "create", "--topic", topic, check=False)
        seen["create_again"] = (r.returncode, r.stdout, b"TOPIC_ALREADY_EXISTS" in r.stderr)
        seen["create_if_not_exists"] = cli_json(t, "topics", "create", "--topic", topic, "--if-not-exists")

        seen["alter"] = cli_json(t, "topics", "alter-config", "--topic", topic, "--add-config",
                                 "cleanup.policy=compact", "--delete-config", "retention.ms")
        assert _topic_configs(t, topic) == {"cleanup.policy": "compact", "max.message.bytes": "100000"}
        seen["add_partitions"] = cli_json(t, "topics", "add-partitions", "--topic", topic, "--partitions", "4")
        wait_topic(t, topic, 4)
        seen["describe_after"] = cli_json(t, "topics", "describe", "--topic", topic)
        assert len(seen["describe_after"][0]["partitions"]) == 4
        r = cli(t, "topics", "add-partitions", "--topic", topic, "--partitions", "3", check=False)
        seen["shrink"] = (r.returncode, b"INVALID_PARTITIONS" in r.stderr)

        seen["delete"] = cli_json(t, "topics", "delete", "--topic", topic)
        wait_gone(t, topic)
        assert topic not in cli_json(t, "topics", "list")
        r = cli(t, "topics", "delete", "--topic", topic, check=False)
        seen["delete_again"] = (r.returncode, b"UNKNOWN_TOPIC_OR_PART" in r.stderr)
        seen["delete_if_exists"] = cli_json(t, "topics", "delete", "--topic", topic, "--if-exists")
        return scrub(seen)

    p, k = both(scenario)
    assert p["describe"] == [{"topic": topic, "topic_id": "<topic_id>", "internal": False, "partition_count": 2,
                              "replication_factor": 1,
                              "configs": {"max.message.bytes": "100000", "retention.ms": "3600000"},
                              "partitions": [{"partition": 0, "leader": 1, "replicas": [1], "isr": [1]},
                                             {"partition": 1, "leader": 1, "replicas": [1], "isr": [1]}]}]
    assert p["create_again"] == (1, b"", True) and p["create_if_not_exists"] == {"topic": topic, "created": False}
    assert p["shrink"] == (1, True) and p["delete_again"] == (1, True)
    assert p["delete_if_exists"] == [{"topic": topic, "deleted": False}]
    same_as_kafka(p, k)


def test_offsets(both):
    topic = name("cli-offsets")

    def scenario(t):
        cli(t, "topics", "create", "--topic", topic, "--partitions", "2")
        wait_topic(t, topic, 2)
        lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(10))
        produced = cli_json(t, "produce", "--topic", topic, "--partition", "1", "--key-separator", ":", input=lines)
        assert produced == {"topic": topic, "records": 10, "failed": 0,
                            "partitions": {"1": {"records": 10, "first_offset": 0, "last_offset": 9}}}
        out = cli_json(t, "offsets", "--topic", topic, "--time", "0")
        text = cli(t, "offsets", "--topic", topic).stdout.decode().splitlines()
        assert text[0].split() == ["TOPIC", "PARTITION", "EARLIEST", "LATEST"]
        assert text[2].split() == [topic, "1", "0", "10"]
        return out

    p, k = both(scenario)
    assert p == [{"topic": topic, "partition": 0, "earliest": 0, "latest": 0, "at_time": -1},
                 {"topic": topic, "partition": 1, "earliest": 0, "latest": 10, "at_time": 0}]
    same_as_kafka(p, k)
