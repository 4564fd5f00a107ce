"""compat/chaos/partitions.py's ``lookup_batches``: the producer id, epoch and sequence of the
records at the positions of duplicated values, read from a live broker's batch headers (a raw
Fetch of the partition's leader), so that the checker can tell a client's re-send after an
epoch bump from a duplicate the broker let in.  ``PYKBROKER_AGAINST=kafka`` runs it against
Apache Kafka."""
from __future__ import annotations

import time
import uuid

from pykbroker.protocol.wire import WireClient, create_topic, make_batch, produce, produce_part

from compat.chaos.checker import Assign, History, Poll, Send, check
from compat.chaos.partitions import lookup_batches


def test_the_copies_of_a_value_written_under_two_epochs_are_found_and_told_apart(broker):
    topic = "batch-lookup-" + uuid.uuid4().hex[:8]
    create_topic(broker, topic, 2)
    with WireClient(broker) as c:
        deadline = time.monotonic() + 30
        while True:   # a fresh Kafka answers COORDINATOR_NOT_AVAILABLE for a moment
            r = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1})
            if r["error_code"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r["error_code"] == 0, r
        pid = r["producer_id"]
        # epoch 0: "v0", "dup" at sequences 0-1; then the same "dup" as the first record of
        # epoch 1 (what a client sends after bumping its epoch), and a plain batch after it
        assert produce_part(produce(c, topic, 1, make_batch([b"v0", b"dup"], pid, 0, 0)))["base_offset"] == 0
        assert produce_part(produce(c, topic, 1, make_batch([b"dup", b"v1"], pid, 1, 0)))["base_offset"] == 2
        assert produce_part(produce(c, topic, 1, make_batch([b"plain"])))["base_offset"] == 4
    h = History()
    t = time.monotonic()
    for i, v in enumerate(["v0", "dup", "v1", "plain"]):
        h.add(Send("p", v, 1, t, offset=[0, 1, 3, 4][i], ack_time=t))
    h.heal = t
    h.add(Assign("final", t + 1))
    h.add(Poll("final", t + 2, {1: [(0, "v0"), (1, "dup"), (2, "dup"), (3, "v1"), (4, "plain")]}))

    lookup_batches(broker.bootstrap, h, topic, log=lambda m: None)

    # only the duplicated value's positions are looked up; the second is the first record of
    # its batch (sequence 0), the first the second record of its (sequence 1)
    assert h.batches == {(1, 1): (pid, 0, 1), (1, 2): (pid, 1, 0)}
    r = check(h)
    assert r.ok and r.duplicated == 1 and r.client_duplicates == 1, (r.anomalies, r.client_anomalies)
