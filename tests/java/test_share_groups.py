"""KIP-932 share groups with the real Java KafkaShareConsumer and Admin (kafka-clients 4.4).

The ``share`` scenario (compat/java/.../ShareScenario.java) runs in the kafka4 batch JVM against the
shared broker (tests/java/conftest.py): two share consumers of one group consume one 2-partition topic (every record delivered
and acknowledged exactly once across them, values read back), the Admin describes the group; then
explicit acknowledgement: accept / release (redelivered with delivery count 2) / reject (never
again), and a record left unacknowledged at close is delivered to the next consumer with delivery
count 2.  About 30-40 s on a loaded machine.

The ``share_config`` scenario (compat/java/.../ShareConfigScenario.java), in the same JVM: a GROUP
config taking effect with the real Java clients: records produced before any share consumer
exists; the Admin sets ``share.auto.offset.reset=earliest`` on the share group
(IncrementalAlterConfigs on ConfigResource.Type.GROUP) and describes it (source
DYNAMIC_GROUP_CONFIG); a KafkaShareConsumer of the group then receives those records, which the
default (latest) would never deliver.
"""
import pytest

from tests.java.batch import batch, reports

pytestmark = pytest.mark.timeout(600)

COUNT, EARLY = 60, 5


ARGS = {"topic": "java-share", "group": "java-share", "partitions": 2, "count": COUNT, "timeout_s": 240}
CONFIG_ARGS = {"topic": "java-share-config", "group": "java-share-config", "count": EARLY}
# in one JVM with other modules' scenarios, on the session's shared broker (tests/java/conftest.py)
JAVA_BATCH = batch("share", lambda p: ARGS, ["kafka4"]) + batch("share_config", lambda p: CONFIG_ARGS, ["kafka4"])
JAVA_SHARED_BROKER = True
_share = reports("share", "share", lambda p: ARGS, profile="kafka4")
_config = reports("share_config", "share_config", lambda p: CONFIG_ARGS, profile="kafka4")


def test_admin_sets_and_describes_the_group_config(share_config):
    share_config.assert_phase("setup")
    share_config.assert_phase("alter_config")
    d = share_config.one("described")
    assert (d["value"], d["source"]) == ("earliest", "DYNAMIC_GROUP_CONFIG"), d
    assert (d["lock_value"], d["lock_source"]) == ("30000", "DEFAULT_CONFIG"), d


def test_share_consumer_reads_records_produced_before_it_joined(share_config):
    share_config.assert_phase("consume")
    assert sorted(share_config.one("consumed")["values"]) == ["early-%d" % i for i in range(EARLY)], \
        share_config.context()


def test_two_consumers_every_record_exactly_once(share):
    share.assert_phase("setup")
    share.assert_phase("two_consumers")
    d = share.one("delivered")
    assert d["values"] == ["v-%d" % i for i in range(COUNT)], share.context()
    assert d["duplicates"] == [], share.context()
    assert sum(d["by_member"].values()) == COUNT
    done = share.one("members_done")
    assert done["a_error"] is None and done["b_error"] is None, share.context()


def test_admin_describes_the_share_group(share):
    desc = share.one("describe")
    assert desc["state"] == "Stable"   # GroupState.STABLE.toString()
    assert sorted(m["client_id"] for m in desc["members"]) == ["share-a", "share-b"]
    parts = sorted(p for m in desc["members"] for p in m["partitions"])
    assert parts == ["java-share-0", "java-share-1"], desc   # one partition each (2 members, 2 partitions)


def test_explicit_acknowledgement_and_redelivery(share):
    share.assert_phase("explicit")
    log = share.one("explicit")["log"]
    deliveries = {}
    for e in log:
        assert "commit_error" not in e, log
        deliveries.setdefault(e["value"], []).append(e["delivery_count"])
    assert deliveries["r-accept"] == [1], log
    assert deliveries["r-release"] == [1, 2], log          # released, then delivered again
    assert deliveries["r-reject"] == [1], log              # rejected: archived, never again
    assert deliveries["u-unacked"] == [1, 2], log          # unacknowledged at close: back to the group
    assert not [e for e in log if e.get("late")], log


def test_admin_share_group_offsets(share, broker):
    """listShareGroupOffsets / alterShareGroupOffsets / deleteShareGroupOffsets / deleteShareGroups."""
    from pykbroker.protocol.wire import list_offsets

    share.assert_phase("admin_offsets")
    consumed = share.one("offsets", when="consumed")["offsets"]
    assert sorted(consumed) == ["java-share-0", "java-share-1"], consumed
    end = list_offsets(broker.bootstrap, "java-share", 0, -1)["offset"]   # nothing is produced after the run
    # everything delivered: no lag.  The start offset may stay behind the end where the last
    # records completed out of order (Kafka 4.4 answered 52 for an end of 53: lag counts only
    # records not yet delivered to completion)
    assert all(lag == "0" and start > 0 for start, lag in consumed.values()), consumed
    assert 0 < consumed["java-share-0"][0] <= end, (consumed, end)
    altered = share.one("offsets", when="altered")["offsets"]
    start, lag = altered["java-share-0"]
    assert start == 0 and int(lag) == end, (altered, end)   # back to 0: the whole partition is lag
    assert altered["java-share-1"] == consumed["java-share-1"]
    assert share.one("offsets", when="deleted")["offsets"] == {}
    assert share.one("group_deleted")["describe_error"] == "GroupIdNotFoundException"
