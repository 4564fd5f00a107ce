import time

from pykbroker.local.broker_process import wait_until
from pykbroker.protocol import wire


def wait_replicated(cluster, topic, partition, brokers=None, timeout=15.0):
    """Until every replica's log end and HW equal the leader's; returns the leader's LEO."""
    brokers = brokers or sorted(cluster.brokers)

    def done():
        offs = [cluster.offsets(b, topic, partition) for b in brokers]
        ends = {o[2] for o in offs}
        hws = {o[1] for o in offs}
        return len(ends) == 1 and hws == ends and offs[0][2]
    wait_until(lambda: done() is not False, timeout, what="replicas of %s-%d in sync" % (topic, partition))
    return cluster.offsets(brokers[0], topic, partition)[2]


def wait_isr(cluster, topic, partition, isr, timeout=15.0):
    wait_until(lambda: sorted(cluster.state(topic, partition).isr) == sorted(isr), timeout,
               what="ISR of %s-%d == %s (now %s)" % (topic, partition, isr, cluster.state(topic, partition).isr))


def produce(cluster, node, topic, partition, values, acks=-1, timeout_ms=10000):
    with wire.WireClient(cluster.address(node)) as w:
        return wire.produce_part(wire.produce(w, topic, partition, wire.make_batch(values), acks=acks,
                                              timeout_ms=timeout_ms))


def fetch_values(cluster, node, topic, partition, offset=0, **kw):
    with wire.WireClient(cluster.address(node)) as w:
        p = wire.fetch_part(wire.fetch(w, topic, partition, offset, **kw))
    vals = [v for _, _, recs in wire.decode_batches(p["records"]) for (o, _, v) in recs if o >= offset]
    return p, vals


def followers(cluster, topic, partition):
    st = cluster.state(topic, partition)
    return st.leader, [b for b in st.replicas if b != st.leader]


def sleep(s):
    time.sleep(s)
