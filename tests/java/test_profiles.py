"""--as-kafka with the Java client: kafka-clients 4.x against a broker limited to Kafka 3.9's
APIs (pykbroker/profiles.py) works as against a 3.9 broker: produce, assign, classic groups;
and the KIP-848 consumer protocol, which a default 3.9 broker does not serve, fails in the client
(UnsupportedVersionException) instead of silently working."""
import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG

from compat.java import jvm

pytestmark = pytest.mark.timeout(900)


def java4_client_against_a_3_9_profile(bg, tmp_path):
    """The test's run, ahead of it from the start of tests/java (tests/java/conftest.py
    ``runs_ahead``), on a broker of its own."""
    classpath = jvm.build("kafka4")[0]
    with pykbroker.Broker.subprocess(config=TEST_CONFIG, as_kafka="3.9", control_port=None) as broker:
        _check(broker, classpath)


def _check(broker, classpath):
    r = jvm.run(classpath, "roundtrip", broker.bootstrap_servers, timeout_s=240,
                topic="java-prof", partitions=2, count=10, base_ts=1_700_000_000_000,
                protocols="classic,consumer")
    for phase in ("create_topic", "produce", "assign_read", "subscribe_classic", "resume_classic"):
        r.assert_phase(phase)
    err = r.one("phase_error", phase="subscribe_consumer")
    assert err["error"] == "UnsupportedVersionException", err
    assert len(broker.records("java-prof", 0)) + len(broker.records("java-prof", 1)) == 10


AHEAD = {"test_java4_client_against_a_3_9_profile": java4_client_against_a_3_9_profile}


def test_java4_client_against_a_3_9_profile(runs_ahead, request):
    runs_ahead[request.node.nodeid].result()
