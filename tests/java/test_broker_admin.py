"""Java AdminClient (3.9.x and 4.x) on the broker itself: describeFeatures, incrementalAlterConfigs
and describeConfigs on BROKER resources (per broker and the cluster default), describeTopics,
describeProducers, describeLogDirs and alterReplicaLogDirs (the broker has two log dirs).

One JVM per profile, in turn, runs the ``broker_admin`` scenario
(compat/java/.../BrokerAdminScenario.java); every test checks one part of what it observed.
"""
import pytest

from pykbroker.local.broker_process import BrokerProcess
from tests.conftest import TEST_OVERRIDES

pytestmark = [pytest.mark.timeout(900), pytest.mark.parametrize("profile", ["kafka39", "kafka4"])]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """This module's own broker, with two log dirs."""
    d = tmp_path_factory.mktemp("jbod")
    with BrokerProcess("%s,%s" % (d / "d1", d / "d2"), TEST_OVERRIDES) as b:
        yield b


# No JAVA_BATCH (tests/java/conftest.py): the scenario changes broker-wide configs
# (log.retention.ms of the broker and the cluster default), so the profiles' runs go in turn.
@pytest.fixture(scope="module")
def run(scenario):
    return lambda profile: scenario(profile, "broker_admin", prefix="java-badmin-" + profile, node="1")


def test_describe_features(run, profile):
    r = run(profile)
    r.assert_phase("features")
    f = r.one("features")
    assert f["supported"]["group.version"] == [0, 1]
    assert f["finalized"] == {"group.version": [1, 1], "transaction.version": [2, 2], "share.version": [1, 1],
                              "streams.version": [1, 1]}
    assert f["supported"]["share.version"] == [0, 1]   # KIP-932 share groups (dead-letter queues, level 2, not built)
    assert f["supported"]["streams.version"] == [0, 1]
    assert f["supported"]["transaction.version"] == [0, 2]
    assert f["epoch"] == 0
    assert "metadata.version" not in f["supported"]


def test_broker_configs(run, profile):
    r = run(profile)
    r.assert_phase("broker_configs")
    after = r.one("broker_configs", when="after_set")["configs"]
    assert after["log.retention.ms"] == {"value": "7200000", "source": "DYNAMIC_BROKER_CONFIG", "read_only": False}
    assert after["log.cleaner.backoff.ms"] == {"value": "16000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                                               "read_only": False}
    assert after["log.retention.hours"]["read_only"] is True
    assert after["log.dirs"]["read_only"] is True
    errors = {c: e["error"] for c, e in r.by_case("broker_config_error").items()}
    assert errors == {"read_only": "InvalidRequestException", "bad_value": "InvalidRequestException"}
    gone = r.one("broker_configs", when="after_delete")["configs"]
    assert gone["log.retention.ms"]["source"] == "DEFAULT_CONFIG" and gone["log.retention.ms"]["value"] is None
    assert gone["log.cleaner.backoff.ms"] == {"value": "15000", "source": "DEFAULT_CONFIG", "read_only": False}


def test_describe_topics(run, profile):
    r = run(profile)
    r.assert_phase("topic")
    d = r.one("described_topic")
    assert d["internal"] is False and d["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert d["partitions"] == [{"partition": 0, "leader": 1, "isr": 1}, {"partition": 1, "leader": 1, "isr": 1}]


def test_describe_producers(run, profile):
    r = run(profile)
    r.assert_phase("producers")
    (state,) = r.one("producers")["states"]   # the scenario's idempotent producer (default since 3.0)
    assert state["epoch"] == 0 and state["last_sequence"] == 99 and state["txn_start"] == -1


def test_log_dirs_and_move(run, profile):
    r = run(profile)
    r.assert_phase("log_dirs")
    before = {d["role"]: d for d in r.one("log_dirs", when="before")["dirs"]}
    after = {d["role"]: d for d in r.one("log_dirs", when="after")["dirs"]}
    assert all(d["error"] is None and d["total_positive"] and d["usable_positive"] for d in before.values())
    size = before["current"]["replicas"]["0"]["size"]
    assert size > 0 and before["current"]["replicas"]["0"] == {"size": size, "lag": 0, "future": False}
    assert "0" not in after["current"]["replicas"]
    assert after["other"]["replicas"]["0"] == {"size": size, "lag": 0, "future": False}
    assert r.one("alter_error", case="unknown_dir")["error"] == "LogDirNotFoundException"
