"""Java kafka-clients (3.9.x and 4.x) recovering from faults injected over pykbroker's HTTP
control endpoint (compat/java/.../FaultsScenario.java): NOT_LEADER_OR_FOLLOWER, Produce
responses lost after the append, dropped connections, a crash and restart mid-read, and
coordinator errors. No record may be lost or duplicated: the default producer is idempotent.
The JVM drives the faults itself (plain JSON over java.net.http), as a Java test would."""
import json

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG

from compat.java import jvm

pytestmark = pytest.mark.timeout(900)   # the first test of a session may build the Maven project

COUNT = 300


@pytest.fixture(scope="module")
def broker():
    with pykbroker.Broker.subprocess(config=TEST_CONFIG) as b:
        yield b


@pytest.mark.parametrize("profile", ["kafka39", "kafka4"])
def test_java_clients_recover_from_injected_faults(broker, java_classpath, profile):
    topic = "java-faults-%s" % profile
    report = jvm.run(java_classpath(profile), "faults", broker.bootstrap_servers, timeout_s=240,
                     topic=topic, count=COUNT, control=broker.control_url)
    report.assert_clean()
    expected = {p: ["v-%d" % i for i in range(COUNT) if i % 2 == p] for p in (0, 1)}

    # what the broker holds: every record exactly once, in order, whatever the faults did
    for p in (0, 1):
        assert [r.value.decode() for r in broker.records(topic, p)] == expected[p], p
    sent = report.one("sent")
    assert sent["count"] == COUNT
    assert sent["p0_offsets"] == list(range(COUNT // 2)) and sent["p1_offsets"] == list(range(COUNT // 2))
    # every injected fault was met (spent) by the Java clients
    assert json.loads(report.one("rules_after_produce")["body"])["rules"] == []
    assert json.loads(report.one("rules_after_group")["body"])["rules"] == []
    # the crash and restart happened, and the assigned reader saw each record once
    assert [e["path"] for e in report.all("control") if e["path"].startswith("/broker")] == ["/broker/restart"]
    crash = report.one("consumed", phase="read_through_crash")
    assert (crash["p0"], crash["p1"]) == (expected[0], expected[1])
    grp = report.one("consumed", phase="group_through_coordinator_errors")
    assert (grp["p0"], grp["p1"]) == (expected[0], expected[1])
    assert (grp["committed0"], grp["committed1"]) == (COUNT // 2, COUNT // 2)
    assert broker.committed_offsets(topic + "-group") == {(topic, 0): COUNT // 2, (topic, 1): COUNT // 2}
