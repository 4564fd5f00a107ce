"""Java AdminClient (3.9.x and 4.x): listConfigResources (ListConfigResources v1, 4.x only),
listClientMetricsResources (v0 on 3.9) and deleteConsumerGroups (DeleteGroups v3 on 4.x) with a
group holding offsets only, a group with a live member and an unknown group
(compat/java/.../ConfigResourcesScenario.java)."""
import pytest

pytestmark = [pytest.mark.timeout(600), pytest.mark.parametrize("profile", ["kafka39", "kafka4"])]


# both profiles' scenarios at once, one JVM each (tests/java/conftest.py)
JAVA_BATCH = [(p, "config_resources", {"prefix": "java-cfgres-" + p}) for p in ("kafka39", "kafka4")]


@pytest.fixture(scope="module")
def run(scenario):
    return lambda profile: scenario(profile, "config_resources", prefix="java-cfgres-" + profile)


def test_list_config_resources(run, profile):
    r = run(profile)
    r.assert_phase("list_config_resources")
    topic = "TOPIC:java-cfgres-%s-t" % profile
    every = r.one("config_resources", case="all")
    if profile == "kafka39":        # kafka-clients 3.9 has no listConfigResources (KIP-1142 is 4.1)
        assert every["available"] is False
        return
    assert every["resources"] == ["BROKER:1", "BROKER_LOGGER:1", topic]
    assert r.one("config_resources", case="TOPIC")["resources"] == [topic]
    assert r.one("config_resources", case="BROKER")["resources"] == ["BROKER:1"]
    assert r.one("config_resources", case="GROUP")["resources"] == []
    assert r.one("config_resources_error", case="unknown_type")["error"] == "UnsupportedVersionException"


def test_list_client_metrics_resources(run, profile):
    r = run(profile)
    r.assert_phase("list_client_metrics_resources")
    assert r.one("client_metrics_resources")["count"] == 0


def test_delete_consumer_groups(run, profile):
    r = run(profile)
    r.assert_phase("setup")
    r.assert_phase("delete_groups")
    assert {c: e["error"] for c, e in r.by_case("delete_group").items()} == {
        "offsets_only": None, "live": "GroupNotEmptyException", "unknown": "GroupIdNotFoundException"}
    r.assert_clean()
