"""The scenario suites' hand-written expectations hold on Apache Kafka 4.4 too: CI's sample of
``PYKBROKER_AGAINST=kafka`` (tests/against.py), and the pytest plugin's ``--kafka-bootstrap``
pointed at Apache Kafka.

One Apache Kafka node (compat/kafka/oracle.py) with the switch's settings
(``tests.against.ORACLE_OVERRIDES``) serves both tests of this module:

- ``test_scenario_sample_passes_on_kafka`` runs :data:`SAMPLE` (tests of tests/clients,
  tests/groups, tests/transactions and tests/java) in a child pytest with the switch on and that
  Kafka's address; every one must pass there (a skip or a failure fails this test, naming it).
- ``test_kafka_bootstrap_option_on_kafka`` runs the plugin's user tests
  (tests/embedding/test_pytest_plugin.py) with ``--kafka-bootstrap`` set to that Kafka and reads
  the record they produced back from it.

Cost: the JVM starts in ~5-15 s; the sample takes ~30 s (the Java scenario's Maven build, when
not yet built in the checkout, moves here from tests/java); both run ahead, in the directory's
background thread (``scenario_sample_run``, tests/differential/conftest.py).  ``PYKBROKER_QUICK=1`` skips it with the rest of the differential suite.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import against
from tests.embedding import test_pytest_plugin as plugin_tests

from .conftest import started_oracle

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

# Quick tests whose expectations are the broker's answers (not pykbroker internals), one or more
# per scenario suite; test_offsets_v10 is the one whose expectation Kafka once contradicted.
SAMPLE = [
    "tests/clients/test_kafka_python.py::test_end_and_beginning_offsets",
    "tests/clients/test_confluent.py::test_watermarks",
    "tests/groups/test_offsets_v10.py::test_offset_commit_and_fetch_v10_by_topic_id",
    "tests/groups/test_group_admin.py::test_confluent_admin",
    "tests/transactions/test_confluent.py::test_fetch_returns_aborted_transactions",
    "tests/java/test_admin.py::test_describe_configs[kafka4]",
]


def sample_run(tmp_path_factory, stack: contextlib.ExitStack, run):
    """The oracle (left open on ``stack``, closed by the fixture that made it) and the child
    pytest of :data:`SAMPLE` against it: (oracle, the child's CompletedProcess, its junit file).
    Run ahead, in the directory's background thread (tests/differential/conftest.py)."""
    oracle = stack.enter_context(started_oracle(tmp_path_factory, "kafka-scenarios", against.ORACLE_OVERRIDES))
    junit = tmp_path_factory.mktemp("scenario-sample") / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYKBROKER_AGAINST", "PYTEST_"))}
    env.update(PYKBROKER_AGAINST="kafka", PYKBROKER_AGAINST_BOOTSTRAP=oracle.bootstrap,
               PYKBROKER_AGAINST_LOG_DIRS=oracle.properties()["log.dirs"],
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("PYKBROKER_DURATIONS_FILE", None)   # the parent run's file, not this child's
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
                        "--junitxml", str(junit), *SAMPLE],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return oracle, r, junit


@pytest.fixture(scope="module")
def kafka_for_scenarios(scenario_sample_run):
    """The oracle the sample ran against (started in the background with the directory)."""
    return scenario_sample_run.result()[0]


def _outcomes(junit: Path) -> dict:
    """nodeid-ish ("file::name") -> "passed" / "skipped: reason" / "failed: message"."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        key = "%s::%s" % (path, case.get("name"))
        result = "passed"
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                result = "%s: %s" % ("skipped" if tag == "skipped" else "failed", (el.get("message") or "")[:300])
                break
        out[key] = result
    return out


def test_scenario_sample_passes_on_kafka(kafka_for_scenarios, scenario_sample_run):
    _k, r, junit = scenario_sample_run.result()
    assert junit.exists(), "the child pytest wrote no report (exit %d):\n%s\n%s" % (
        r.returncode, r.stdout[-4000:], r.stderr[-4000:])
    got = _outcomes(junit)
    want = {n: "passed" for n in SAMPLE}
    assert got == want, "not every sampled test passed on Apache Kafka %s:\n%s\n%s" % (
        kafka_for_scenarios.version,
        "\n".join("%s: %s" % (n, got.get(n, "not run")) for n in sorted(set(got) | set(want))
                  if got.get(n) != "passed"), r.stdout[-6000:])
    assert r.returncode == 0, r.stdout[-6000:]


def test_kafka_bootstrap_option_on_kafka(kafka_for_scenarios, pytester, monkeypatch):
    """``--kafka-bootstrap`` pointed at Apache Kafka: the user tests' fixtures use it (topics made
    through CreateTopics, ``kafka_broker`` introspecting it through the protocol), the private
    broker test skips, and the record produced is on Kafka's partition."""
    from pykbroker.embedded import WireBroker

    result, lines = plugin_tests._run(pytester, monkeypatch, "--kafka-bootstrap", kafka_for_scenarios.bootstrap)
    result.assert_outcomes(passed=2, skipped=1)
    bootstrap, topic = lines
    assert bootstrap == kafka_for_scenarios.bootstrap
    assert [(rec.key, rec.value) for rec in WireBroker(bootstrap).records(topic)] == [(b"k", b"hello")]
