"""Server-side assignors for KIP-848 consumer groups ("uniform" — Kafka's default — and "range").

Input: members (id -> set of subscribed topic names), topics (name -> (topic id, partition
count)), and the current assignment (id -> set of (topic id, partition)) for stickiness.
Output: id -> set of (topic id, partition).  Deterministic for a given input.
"""
from __future__ import annotations


def uniform(members: dict, topics: dict, current: dict) -> dict:
    """Balanced and sticky: each topic's partitions are spread over its subscribers so counts
    differ by at most one, keeping a member's current partitions where the balance allows."""
    out: dict[str, set[tuple[bytes, int]]] = {m: set() for m in members}
    load = {m: 0 for m in members}
    for name in sorted(topics):
        tid, n = topics[name]
        subs = sorted(m for m, s in members.items() if name in s)
        if not subs:
            continue
        free = []
        quota_hi = -(-n // len(subs))
        count = {m: 0 for m in subs}
        for p in range(n):
            keeper = next((m for m in subs if (tid, p) in current.get(m, ()) and count[m] < quota_hi), None)
            if keeper is None:
                free.append(p)
            else:
                out[keeper].add((tid, p))
                count[keeper] += 1
        # hand the rest to the least loaded subscribers (global load breaks ties across topics)
        for p in free:
            m = min(subs, key=lambda x: (count[x], load[x], x))
            out[m].add((tid, p))
            count[m] += 1
        # rebalance if stickiness left an imbalance above one
        while True:
            hi = max(subs, key=lambda x: (count[x], x))
            lo = min(subs, key=lambda x: (count[x], x))
            if count[hi] - count[lo] <= 1:
                break
            tp = max(t for t in out[hi] if t[0] == tid)
            out[hi].discard(tp)
            out[lo].add(tp)
            count[hi] -= 1
            count[lo] += 1
        for m in subs:
            load[m] += count[m]
    return out


def range_(members: dict, topics: dict, current: dict) -> dict:
    """Per topic, contiguous partition ranges over the subscribers sorted by member id (the
    first n % k members get one extra), as the classic RangeAssignor."""
    out: dict[str, set[tuple[bytes, int]]] = {m: set() for m in members}
    for name in sorted(topics):
        tid, n = topics[name]
        subs = sorted(m for m, s in members.items() if name in s)
        if not subs:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            cnt = per + (1 if i < extra else 0)
            out[m].update((tid, p) for p in range(start, start + cnt))
            start += cnt
    return out


ASSIGNORS = {"uniform": uniform, "range": range_}
DEFAULT = "uniform"
