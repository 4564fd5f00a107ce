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
from tests.background import Background

pytestmark = pytest.mark.timeout(900)   # the first test of a session may build the Maven project

COUNT = 300


def _observe(classpath, profile):
    """One profile's run on a broker of its own (the scenario crashes and restarts its broker):
    the report, then what the broker holds, read while it still runs."""
    topic = "java-faults-%s" % profile
    with pykbroker.Broker.subprocess(config=TEST_CONFIG) as broker:
        report = jvm.run(classpath, "faults", broker.bootstrap_servers, timeout_s=240,
                         topic=topic, count=COUNT, control=broker.control_url)
        held = {p: [r.value.decode() for r in broker.records(topic, p)] for p in (0, 1)}
        committed = broker.committed_offsets(topic + "-group")
    return report, held, committed


@pytest.fixture(scope="module")
def runs(request, java_classpath):
    """profile -> Background of its run; both profiles' runs at once, each with its own broker
    and JVM (they mostly wait on injected faults, timeouts and the restart)."""
    profiles = [p for p in ("kafka39", "kafka4") if any(
        getattr(item, "callspec", None) and item.module is request.module and item.callspec.params.get("profile") == p
        for item in request.session.items)]
    classpaths = {p: java_classpath(p) for p in profiles}
    bgs = {p: Background(lambda bg, p=p: _observe(classpaths[p], p), "java faults " + p) for p in profiles}
    yield bgs
    for bg in bgs.values():
        bg.join()


@pytest.mark.parametrize("profile", ["kafka39", "kafka4"])
def test_java_clients_recover_from_injected_faults(runs, profile):
    topic = "java-faults-%s" % profile
    report, held, committed = runs[profile].result()
    report.assert_clean()
    expected = {p: ["v-%d" % i for i in range(COUNT) if i % 2 == p] for p in (0, 1)}

    # what the broker holds: every record exactly once, in order, whatever the faults did
    for p in (0, 1):
        assert held[p] == expected[p], p
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
    assert committed == {(topic, 0): COUNT // 2, (topic, 1): COUNT // 2}
