"""DescribeTopicPartitions (75, KIP-966): topics by name and all topics, paginated with the
response partition limit and the cursor, unknown and illegal names, invalid cursors, as Apache
Kafka 4.4 answers them (topic ids normalised)."""
import pytest

from pykbroker.cluster.metadata import ZERO_UUID

from .helpers import call, create_topic, explain, wait_for_topic, connect

TOPICS = {"dtp-a": 3, "dtp-b": 1, "dtp-c": 5}
_ready = set()


def ready(t):
    if t.name not in _ready:
        for n, parts in TOPICS.items():
            create_topic(t, n, parts)
        with connect(t) as c:
            for n, parts in TOPICS.items():
                wait_for_topic(c, n, parts)
        _ready.add(t.name)


def norm(r):
    topics = []
    for x in r["topics"]:
        if x["name"] and x["name"].startswith("__"):
            continue
        topics.append({**x, "topic_id": "<id>" if x["topic_id"] != ZERO_UUID else "<zero>",
                       "partitions": [{**p, "leader_id": "<node>" if p["leader_id"] >= 0 else p["leader_id"],
                                       "replica_nodes": len(p["replica_nodes"]), "isr_nodes": len(p["isr_nodes"])}
                                      for p in x["partitions"]]})
    return {"topics": topics, "next_cursor": r["next_cursor"]}


CASES = {
    "by_name": ([ "dtp-c", "dtp-a", "dtp-b"], 2000, None),
    "unknown_and_illegal": (["dtp-a", "dtp-nope", "bad/name"], 2000, None),
    "limit_inside_topic": (["dtp-a", "dtp-b", "dtp-c"], 2, None),
    "limit_at_topic_end": (["dtp-a", "dtp-b", "dtp-c"], 3, None),
    "limit_zero": (["dtp-a", "dtp-b"], 0, None),
    "cursor": (["dtp-a", "dtp-b", "dtp-c"], 4, ("dtp-a", 1)),
    "cursor_past_end": (["dtp-b", "dtp-c"], 2000, ("dtp-b", 7)),
    "cursor_not_listed": (["dtp-a", "dtp-c"], 2000, ("dtp-b", 0)),
    "cursor_negative": (["dtp-a", "dtp-b"], 2000, ("dtp-a", -1)),
    "all_from_cursor": ([], 3, ("dtp-b", 0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_describe_topic_partitions(both, case):
    names, limit, cursor = CASES[case]

    def scenario(t):
        ready(t)
        r = call(t, 75, 0, {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
                            "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}})
        return norm(r)
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_paging_through_all_topics(both):
    """A client following next_cursor with a limit of 2 sees every partition once."""
    def scenario(t):
        ready(t)
        seen, cursor = [], None
        # the shared brokers hold every topic earlier modules made: page until the end (the
        # bound only stops a cursor that never ends)
        for _ in range(20000):
            r = call(t, 75, 0, {"topics": [], "response_partition_limit": 2, "cursor": cursor})
            seen += [(x["name"], p["partition_index"]) for x in r["topics"] for p in x["partitions"]
                     if x["name"].startswith("dtp-")]
            cursor = r["next_cursor"]
            if cursor is None:
                break
        return seen
    p, k = both(scenario)
    assert p == k, explain(p, k)
    assert p == [(n, i) for n in sorted(TOPICS) for i in range(TOPICS[n])]
