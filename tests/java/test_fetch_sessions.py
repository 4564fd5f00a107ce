"""A Java consumer (kafka-clients 4.x, Fetch v17/18 with topic ids) over 1,000 partitions uses
incremental fetch sessions (KIP-227): every record is read back, and the broker's session cache
saw a session created and served incremental fetches (its counters, read on the broker's loop)."""

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol import wire

from compat.java import jvm

pytestmark = pytest.mark.timeout(900)   # the first test of a session may build the Maven project

PARTITIONS = 1000
PER_PARTITION = 2


def _stats(b):
    return b._sync(lambda br: dict(br.replica_manager.fetch_sessions.stats))


def consumer_1000_partitions_incremental_fetch(bg, tmp_path):
    """The test's run, ahead of it from the start of tests/java (tests/java/conftest.py
    ``runs_ahead``): its broker is in-process (the counters are read on the broker's loop) and
    its own; producing 2,000 records, the consumer's fetches and the shutdown mostly wait."""
    classpath = jvm.build("kafka4")[0]
    with pykbroker.Broker(config=TEST_CONFIG) as broker:
        _consume(broker, classpath, tmp_path)


def _consume(broker, classpath, tmp_path):
    topic = "java-fetch-sessions"
    broker.create_topic(topic, PARTITIONS)
    sent = set()
    with wire.WireClient(broker.bootstrap_servers) as c:
        for p in range(PARTITIONS):
            vals = [b"p%d-v%d" % (p, i) for i in range(PER_PARTITION)]
            r = wire.produce(c, topic, p, wire.make_batch(vals), acks=1)
            assert wire.produce_part(r)["error_code"] == 0
            sent.update((p, v.decode()) for v in vals)
    before = _stats(broker)
    stop = tmp_path / "stop"
    stop.write_text("")    # consume until caught up with the end offsets, then exit
    out = str(tmp_path / "consumer.jsonl")
    proc = jvm.spawn(classpath, "consume_group", broker.bootstrap_servers, out,
                     timeout_s=400, topic=topic, group="java-fs", protocol="classic", stop_file=str(stop))
    try:
        rc = proc.wait(420)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rep = jvm.read(out, rc)
    assert rc == 0 and rep.all("consumed"), rep.context()
    got = [(p, v) for e in rep.all("records") for p, _off, v in e["records"]]
    assert len(got) == len(sent) and set(got) == sent
    after = _stats(broker)
    # the consumer asked for a session, got one, and then fetched incrementally
    assert after["sessions_created"] > before["sessions_created"], after
    assert after["incremental_fetches"] > before["incremental_fetches"], after
    assert after["session_errors"] == before["session_errors"], after


AHEAD = {"test_java_consumer_1000_partitions_incremental_fetch": consumer_1000_partitions_incremental_fetch}


def test_java_consumer_1000_partitions_incremental_fetch(runs_ahead, request):
    runs_ahead[request.node.nodeid].result()
