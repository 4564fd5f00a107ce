"""Java consumer groups 3.9.x and 4.x, seen by their members and by the AdminClient.

A JVM per profile runs the ``groups`` scenario (compat/java/.../GroupsScenario.java) once per group
protocol, all at once and beside other modules' scenarios: member a takes all 4 partitions and
consumes the 40 records (committing), member b joins and the partitions are split, the AdminClient lists and describes the stable group and its offsets, b
leaves and a takes everything back, a leaves (the group is empty), and the group is deleted.
"""
import pytest

pytestmark = pytest.mark.timeout(900)

PARTITIONS = 4
COUNT = 40
CASES = [("kafka39", "classic"), ("kafka4", "classic"), ("kafka4", "consumer")]


def groups_args(profile, protocol):
    name = "java-groups-%s-%s" % (profile, protocol)
    return {"topic": name, "group": name, "protocol": protocol, "partitions": PARTITIONS, "count": COUNT}


# every case at once, one JVM per profile, on the session's shared broker with other modules'
# (tests/java/conftest.py)
JAVA_BATCH = [(p, "groups", groups_args(p, proto)) for p, proto in CASES]
JAVA_SHARED_BROKER = True


@pytest.fixture(scope="module")
def groups(scenario):
    return lambda profile, protocol: scenario(profile, "groups", **groups_args(profile, protocol))


@pytest.mark.parametrize("profile,protocol", CASES)
def test_rebalance(groups, profile, protocol):
    r = groups(profile, protocol)
    r.assert_phase("setup")
    r.assert_phase("one_member")
    one = r.one("assignment", phase="one_member")
    assert one["a"] == list(range(PARTITIONS)) and one["consumed"] == COUNT
    r.assert_phase("two_members")
    two = r.one("assignment", phase="two_members")
    assert sorted(two["a"] + two["b"]) == list(range(PARTITIONS))
    assert len(two["a"]) == len(two["b"]) == PARTITIONS // 2     # range / uniform assignors balance 4 over 2
    r.assert_phase("member_leaves")
    assert r.one("assignment", phase="after_leave")["a"] == list(range(PARTITIONS))
    assert not r.all("member_error"), r.context()


@pytest.mark.parametrize("profile,protocol", CASES)
def test_admin_view_of_stable_group(groups, profile, protocol):
    r = groups(profile, protocol)
    r.assert_phase("admin_stable")
    group = "java-groups-%s-%s" % (profile, protocol)
    listed = r.one("list_groups", phase="stable")["found"]
    assert len(listed) == 1
    assert listed[0]["state"] == "STABLE" and listed[0]["simple"] is False
    assert listed[0]["type"] == protocol.upper()
    d = r.one("group", phase="stable")
    assert (d["group_id"], d["state"], d["simple"], d["type"]) == (group, "STABLE", False, protocol.upper())
    assert d["coordinator"] == 1           # the only broker (node.id defaults to 1)
    two = r.one("assignment", phase="two_members")
    members = {m["client_id"]: m for m in d["members"]}
    assert sorted(members) == ["compat-member-a", "compat-member-b"]
    assert members["compat-member-a"]["partitions"] == two["a"]
    assert members["compat-member-b"]["partitions"] == two["b"]
    for m in members.values():
        assert m["member_id"] and m["host"].lstrip("/") == "127.0.0.1" and m["group_instance_id"] is None
    if protocol == "classic":
        assert d["assignor"] == "range"        # the first of the Java consumer's default assignors
    else:
        assert d["assignor"] in ("uniform", "range")   # server-side assignors (KIP-848)
    offsets = {(o["topic"], o["partition"]): o["offset"] for o in r.one("group_offsets", phase="stable")["offsets"]}
    assert offsets == {(group, p): COUNT // PARTITIONS for p in range(PARTITIONS)}


@pytest.mark.parametrize("profile,protocol", CASES)
def test_empty_group_and_delete(groups, profile, protocol):
    r = groups(profile, protocol)
    group = "java-groups-%s-%s" % (profile, protocol)
    r.assert_phase("group_empty")
    listed = r.one("list_groups", phase="empty")["found"]
    assert [g["state"] for g in listed] == ["EMPTY"]
    d = r.one("group", phase="empty")
    assert (d["state"], d["members"]) == ("EMPTY", [])
    offsets = {(o["topic"], o["partition"]): o["offset"] for o in r.one("group_offsets", phase="empty")["offsets"]}
    assert offsets == {(group, p): COUNT // PARTITIONS for p in range(PARTITIONS)}
    r.assert_phase("delete_group")
    assert r.one("delete_group")["error"] is None
    assert r.one("list_groups", phase="deleted")["found"] == []
    # A deleted group: DescribeGroups v5 (kafka-clients 3.9's maximum) answers state Dead; v6
    # (KIP-1043, kafka-clients 4.x) and ConsumerGroupDescribe answer GROUP_ID_NOT_FOUND.
    gone = r.one("describe_group_error", case="deleted")["error"]
    dead = r.all("group", phase="deleted")
    if profile == "kafka39":
        assert gone is None and dead and dead[0]["state"] == "DEAD" and dead[0]["members"] == 0, (gone, dead)
    else:
        assert gone == "GroupIdNotFoundException", (gone, dead)
