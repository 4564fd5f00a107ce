"""What the crash-fault runs (chaos.py) and the exactly-once run (chaos_eos.py) share: the
nemesis's seed, a partition's leader as the running brokers report it and the creation of
their fully replicated topics."""
from __future__ import annotations

import random
import threading
import time
from typing import Callable, Optional

from pykbroker.local.cluster import Cluster
from pykbroker.protocol import wire


def leader_of(cluster: Cluster, partition: int, topic: str) -> Optional[int]:
    for b in cluster.brokers:
        if not b.running():
            continue
        try:
            m = wire.metadata(("127.0.0.1", b.port), [topic])
        except OSError:
            continue
        for p in m["topics"][0]["partitions"]:
            if p["partition_index"] == partition and p["leader_id"] >= 0:
                return p["leader_id"]
    return None


def create_replicated_topic(cluster: Cluster, topic: str, partitions: int, replication_factor: int = 3) -> dict:
    """CreateTopics (v5) of ``topic`` through the cluster's first broker, then until every
    running broker's Metadata lists every partition with a leader; returns the first broker's
    answer.  CreateTopics answers once the controller committed the topic and each broker learns
    it from the metadata log a little later (as Kafka's do), so a test that next asks another
    broker (a partition's leader, a transaction coordinator) would otherwise race that broker's
    UNKNOWN_TOPIC_OR_PARTITION.  (The brokers must be registered: the controller places replicas
    only on registered brokers, else INVALID_REPLICATION_FACTOR.)"""
    with wire.WireClient(("127.0.0.1", cluster.brokers[0].port)) as c:
        r = c.request(19, 5, {"topics": [{"name": topic, "num_partitions": partitions,
                                          "replication_factor": replication_factor,
                                          "assignments": [], "configs": []}],
                              "timeout_ms": 30000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0, r
        m = wire.wait_for_topic(c, topic, partitions, timeout=30)
    for b in cluster.brokers[1:]:
        if b.running():
            wire.wait_for_topic(("127.0.0.1", b.port), topic, partitions, timeout=30)
    return m


def draw_seed(seed: Optional[int], log: Callable[[str], None]) -> int:
    """``seed``, or a fresh one when None; logged either way so a failing run can be replayed."""
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 31)
    log("nemesis seed %d (replay with seed=%d, --seed %d or PYKBROKER_CHAOS_SEED=%d)" % (seed, seed, seed, seed))
    return seed


def pace(next_t: float, interval: float) -> float:
    """A sender's fixed rate: sleeps until ``next_t + interval`` and returns it; behind that
    schedule (a slow send), no sleep, and the schedule starts again from now."""
    next_t += interval
    delay = next_t - time.monotonic()
    if delay > 0:
        time.sleep(delay)
        return next_t
    return time.monotonic()


def start_threads(target: Callable[[int], None], n: int) -> list:
    """``n`` daemon threads running ``target(0)`` .. ``target(n - 1)``, started."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads
