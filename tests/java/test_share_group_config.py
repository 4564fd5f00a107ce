"""A GROUP config taking effect with the real Java clients (kafka-clients 4.4): records produced
before any share consumer exists; the Admin sets ``share.auto.offset.reset=earliest`` on the share
group (IncrementalAlterConfigs on ConfigResource.Type.GROUP) and describes it (source
DYNAMIC_GROUP_CONFIG); a KafkaShareConsumer of the group then receives those records, which the default
(latest) would never deliver (compat/java/.../ShareConfigScenario.java)."""
import pytest

from tests.java.batch import batch, reports

pytestmark = pytest.mark.timeout(600)

COUNT = 5


ARGS = {"topic": "java-share-config", "group": "java-share-config", "count": COUNT}
# in one JVM with other modules' scenarios, on the session's shared broker (tests/java/conftest.py)
JAVA_BATCH = batch("share_config", lambda p: ARGS, ["kafka4"])
JAVA_SHARED_BROKER = True
_run = reports("run", "share_config", lambda p: ARGS, profile="kafka4")


def test_admin_sets_and_describes_the_group_config(run):
    run.assert_phase("setup")
    run.assert_phase("alter_config")
    d = run.one("described")
    assert (d["value"], d["source"]) == ("earliest", "DYNAMIC_GROUP_CONFIG"), d
    assert (d["lock_value"], d["lock_source"]) == ("30000", "DEFAULT_CONFIG"), d


def test_share_consumer_reads_records_produced_before_it_joined(run):
    run.assert_phase("consume")
    assert sorted(run.one("consumed")["values"]) == ["early-%d" % i for i in range(COUNT)], run.context()
