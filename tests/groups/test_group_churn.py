"""Members join and leave while producers keep writing (classic protocol, real client processes).

Eager assignors (range, roundrobin) with kafka-python and confluent-kafka, and kafka-python's
cooperative-sticky (KIP-429): every member commits after processing, so nothing may be lost
(duplicates are allowed around a rebalance: counted and printed); and in no generation is a
partition owned by two members, as reported by each client's own per-generation assignment
callback (see consumer_worker.py, ``G`` lines).
"""
import os
import time

import pytest

from pykbroker.local.broker_process import wait_until

from .helpers import (BackgroundProducer, Worker, check_generations, consumed, create_topic, unique,
                      wait_consumed, wait_stable)

SESSION_MS = 3000


# The eager assignors are the clients' own code: to the broker, range and roundrobin are the same
# JoinGroup/SyncGroup rounds (it only relays the leader's assignment), so each client runs one of
# them on every run and the other with PYKBROKER_CHAOS_LONG=1 (the long runs' switch; about 10 s
# of suite time each).
LONG = os.environ.get("PYKBROKER_CHAOS_LONG") == "1"
_SAME_ROUNDS = pytest.mark.skipif(not LONG, reason="PYKBROKER_CHAOS_LONG=1: the broker's rounds are those of the "
                                                   "other eager assignor, which this client runs on every run")


@pytest.mark.parametrize("lib,assignor", [("kafka-python", "range"),
                                          pytest.param("kafka-python", "roundrobin", marks=_SAME_ROUNDS),
                                          pytest.param("confluent", "range", marks=_SAME_ROUNDS),
                                          ("confluent", "roundrobin"),
                                          ("kafka-python", "cooperative-sticky")])
def test_join_and_leave_under_load(gbroker, tmp_path, lib, assignor):
    topic, group = unique("churn"), unique("g")
    create_topic(gbroker.bootstrap, topic)
    n = [0]

    def start():
        w = Worker(tmp_path, lib, gbroker.bootstrap, topic, group, "%s-%d" % (assignor, n[0]),
                   assignor=assignor, session_ms=SESSION_MS)
        n[0] += 1
        return w
    workers = [start()]
    producer = None
    try:
        wait_stable(workers, timeout=40)
        producer = BackgroundProducer(gbroker.bootstrap, topic)
        live = list(workers)
        # join, join, leave, join, leave the first: each step waits for a settled assignment
        for step in ("join", "join", "leave", "join", "leave0"):
            time.sleep(0.7)
            if step == "join":
                w = start()
                workers.append(w)
                live.append(w)
            else:
                w = live.pop(0 if step == "leave0" else 1)
                w.stop()
            wait_stable(live, timeout=40)
        sent = producer.stop()
        producer = None
        seen = wait_consumed(workers, sent, timeout=60)
        missing = sorted(set(range(sent)) - set(seen))
        assert not missing, "records lost: %d, e.g. %s" % (len(missing), missing[:10])
        dups = sum(c - 1 for c in seen.values())
        by_gen = check_generations(workers)
        # every membership change was a rebalance the clients saw, and the settled last
        # generation hands out every partition exactly once
        assert len(by_gen) >= 5, sorted(by_gen)
        assert sorted(by_gen[max(by_gen)]) == list(range(6)), by_gen[max(by_gen)]
        print("%s/%s: %d records, %d duplicate(s), %d generation(s) checked" % (lib, assignor, sent, dups, len(by_gen)))
    finally:
        if producer is not None:
            producer.stop()
        for w in workers:
            if w.alive():
                w.stop()
