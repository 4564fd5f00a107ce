"""The pytest plugin, run the way a user runs it: pytester writes a small test file using the
fixtures with confluent-kafka and runs pytest on it in a child process."""
import importlib.metadata
import os

import pytest

import pykbroker

pytest_plugins = ["pytester"]

PLUGIN = "pykbroker.testing.pytest_plugin"

USER_TESTS = '''
import os
from confluent_kafka import Consumer, Producer


def test_produce_consume(kafka_bootstrap, kafka_topic):
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(kafka_topic, key=b"k", value=b"hello")
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "g-" + kafka_topic,
                  "auto.offset.reset": "earliest"})
    c.subscribe([kafka_topic])
    try:
        msg = None
        for _ in range(100):
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                break
        assert msg is not None and msg.value() == b"hello"
    finally:
        c.close()
    with open(os.environ["PYK_OUT"], "a") as fh:
        fh.write("%s %s\\n" % (kafka_bootstrap, kafka_topic))


def test_fresh_topics(kafka_broker, kafka_topic, kafka_topic_factory):
    other = kafka_topic_factory(partitions=3, config={"cleanup.policy": "compact"}, prefix="orders")
    assert other.startswith("orders-") and other != kafka_topic
    assert kafka_broker.records(kafka_topic) == []
    assert kafka_broker.records(other, 2) == []


def test_private_broker(kafka_private_broker, kafka_bootstrap):
    b = kafka_private_broker
    assert b.bootstrap_servers != kafka_bootstrap and b.control_url.startswith("http://127.0.0.1:")
    b.create_topic("priv")
    b.faults.partition_offline("priv", 0)
    b.crash()
    b.restart()
    assert b.faults.offline == [("priv", 0)]
    t = b.clock.time_ms()
    b.clock.advance(3600)
    assert b.clock.time_ms() >= t + 3600 * 1000
'''


def _plugin_args():
    """Load the plugin with -p unless the installed package already registers it (an editable
    install made before the entry point existed does not)."""
    eps = importlib.metadata.entry_points(group="pytest11")
    return [] if any(ep.value == PLUGIN for ep in eps) else ["-p", PLUGIN]


def _run(pytester, monkeypatch, *args):
    out = pytester.path / "out.txt"
    monkeypatch.setenv("PYK_OUT", str(out))
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", *args, timeout=120)
    lines = out.read_text().split() if out.exists() else []
    return result, lines


def test_fixtures_with_confluent_kafka(pytester, monkeypatch, tmp_path):
    keep = tmp_path / "kept"
    result, lines = _run(pytester, monkeypatch, "--kafka-keep-data", str(keep))
    result.assert_outcomes(passed=3)
    bootstrap, topic = lines
    assert bootstrap.startswith("127.0.0.1:") and topic.startswith("test_produce_consume-")
    # --kafka-keep-data: the session's data stays, topic included
    assert (keep / "meta.properties").exists()
    assert (keep / ("%s-0" % topic)).is_dir()


def test_external_cluster_option(pytester, monkeypatch):
    with pykbroker.Broker() as other:
        result, lines = _run(pytester, monkeypatch, "--kafka-bootstrap", other.bootstrap_servers)
        result.assert_outcomes(passed=2, skipped=1)   # kafka_private_broker starts pykbroker
        bootstrap, topic = lines
        assert bootstrap == other.bootstrap_servers
        # the test's topic and record went to that broker
        assert [(r.key, r.value) for r in other.records(topic)] == [(b"k", b"hello")]


def test_help_lists_the_options(pytester):
    result = pytester.runpytest_subprocess(*_plugin_args(), "--help")
    result.stdout.fnmatch_lines(["*--kafka-bootstrap=HOST:PORT*", "*--kafka-keep-data=DIR*"])
