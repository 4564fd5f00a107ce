"""DescribeProducers (61): the producer state of a partition (none, then an idempotent producer
after two batches) and the per-partition errors, as
Apache Kafka 4.4 answers them."""

from pykbroker.protocol import wire

from .helpers import connect, explain, produce_accepted

TOPIC = "dp-topic"


def describe(c, parts):
    r = c.request(61, 0, {"topics": [{"name": t, "partition_indexes": ps} for t, ps in parts]})
    return [(t["name"], p["partition_index"], p["error_code"], p["error_message"],
             [(a["producer_epoch"], a["last_sequence"], a["last_timestamp"], a["coordinator_epoch"],
               a["current_txn_start_offset"]) for a in p["active_producers"]])
            for t in r["topics"] for p in t["partitions"]]


def produce(c, batch):
    return produce_accepted(c, TOPIC, 0, batch, -1)


def scenario(t):
    out = []
    with connect(t) as c:
        wire.create_topic(c, TOPIC, 1, None, 5, exist_ok=True)
        wire.wait_for_topic(c, TOPIC, 1)
        produce(c, wire.make_batch([b"c"], timestamps=[1002]))   # a plain batch: no producer state
        out.append(describe(c, [(TOPIC, [0])]))
        pid, epoch = wire.init_producer_id(c, 4)
        produce(c, wire.make_batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                   timestamps=[1000, 1001]))
        produce(c, wire.make_batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=2,
                                   timestamps=[1003]))
        out.append(describe(c, [(TOPIC, [0, 4]), ("dp-no-such-topic", [0])]))
    return out


def test_describe_producers(both):
    p, k = both(scenario)
    assert p == k, explain(p, k)
