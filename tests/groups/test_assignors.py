"""Server-side KIP-848 assignors: balance, exclusivity, stickiness, range layout."""
from pykbroker.coordinator.group.assignors import range_, uniform

T1, T2 = b"\x01" * 16, b"\x02" * 16


def owners(out):
    seen = {}
    for m, tps in out.items():
        for tp in tps:
            assert tp not in seen, "partition %r assigned twice" % (tp,)
            seen[tp] = m
    return seen


def test_uniform_balanced_exclusive_and_sticky():
    members = {"a": {"t1"}, "b": {"t1"}, "c": {"t1"}}
    out = uniform(members, {"t1": (T1, 6)}, {})
    assert len(owners(out)) == 6 and sorted(len(v) for v in out.values()) == [2, 2, 2]
    # c leaves: a and b keep what they had and split c's partitions
    out2 = uniform({"a": {"t1"}, "b": {"t1"}}, {"t1": (T1, 6)}, out)
    assert out["a"] <= out2["a"] and out["b"] <= out2["b"] and len(owners(out2)) == 6
    # unsubscribed topics are not assigned
    out3 = uniform({"a": {"t1"}, "b": {"t2"}}, {"t1": (T1, 2), "t2": (T2, 3)}, {})
    assert {t for t, _ in out3["a"]} == {T1} and {t for t, _ in out3["b"]} == {T2}


def test_range_contiguous():
    out = range_({"b": {"t1"}, "a": {"t1"}}, {"t1": (T1, 5)}, {})
    assert out["a"] == {(T1, 0), (T1, 1), (T1, 2)} and out["b"] == {(T1, 3), (T1, 4)}
