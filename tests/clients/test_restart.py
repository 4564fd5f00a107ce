"""Durability through real clients: restart the broker (clean SIGTERM, or kill -9) between
produce and consume, and kill -9 it while a producer in another process is writing; everything
the broker acknowledged must be read back, at the offset it was acknowledged at."""
import logging
import os
import re
import subprocess
import sys
import time

import pytest

from pykbroker.local.broker_process import wait_until

from .util import (KCAT, acked_records, ak_consume, ak_create_topic, ak_produce,
                   assert_acks_match, assert_partitions_equal, by_partition,
                   check_kcat_subsequences, ck_consume, ck_create_topic, ck_produce,
                   kcat_consume, kcat_lines, kcat_produce, kp_consume, kp_create_topic,
                   kp_produce, make_records, run, unique_topic)

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 3
N = 1000
UTIL = os.path.join(os.path.dirname(__file__), "util.py")


def _restart(broker, mode):
    broker.restart(clean=(mode == "clean"))


def _roundtrip_kafka_python(broker, mode):
    topic = unique_topic("rs-kp")
    kp_create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(N, PARTITIONS, seed=501, null_header_values=False,
                           null_key_and_value=False)
    assert_acks_match(records, kp_produce(broker.bootstrap, topic, records, "gzip"))
    _restart(broker, mode)
    exp = by_partition(records)
    got = kp_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
    assert_partitions_equal(exp, got, what="after %s restart" % mode)
    # The log end offset survived: a new producer continues right after.
    more = make_records(300, PARTITIONS, seed=502, null_header_values=False,
                           null_key_and_value=False)
    assert_acks_match(more, kp_produce(broker.bootstrap, topic, more, "none"),
                      start={p: len(v) for p, v in exp.items()})


def _roundtrip_confluent(broker, mode):
    topic = unique_topic("rs-ck")
    ck_create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(N, PARTITIONS, seed=503)
    assert_acks_match(records, ck_produce(broker.bootstrap, topic, records, "zstd", True))
    _restart(broker, mode)
    exp = by_partition(records)
    got = ck_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
    assert_partitions_equal(exp, got, what="after %s restart" % mode)
    more = make_records(300, PARTITIONS, seed=504)
    assert_acks_match(more, ck_produce(broker.bootstrap, topic, more, "lz4", True),
                      start={p: len(v) for p, v in exp.items()})


def _roundtrip_aiokafka(broker, mode):
    topic = unique_topic("rs-ak")
    records = make_records(N, PARTITIONS, seed=505, null_key_and_value=False)
    run(ak_create_topic(broker.bootstrap, topic, PARTITIONS))
    assert_acks_match(records, run(ak_produce(broker.bootstrap, topic, records, "snappy")))
    _restart(broker, mode)
    exp = by_partition(records)
    got = run(ak_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()}))
    assert_partitions_equal(exp, got, what="after %s restart" % mode)


def _roundtrip_kcat(broker, mode, tmp_path):
    topic = unique_topic("rs-kcat")
    kp_create_topic(broker.bootstrap, topic, PARTITIONS)
    lines = kcat_lines(N, seed=506)
    kcat_produce(broker.bootstrap, topic, lines, "lz4", tmp_path, ["-p", "-1"])
    _restart(broker, mode)
    got = {}
    for p, o, t, k, v in kcat_consume(broker.bootstrap, topic):
        got.setdefault(p, []).append((o, (k, v)))
    for p, recs in got.items():
        assert [o for o, _ in recs] == list(range(len(recs)))
    check_kcat_subsequences(lines, got, "kcat after %s restart" % mode)


@pytest.mark.parametrize("mode", ["clean", "kill9"])
@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka", "kcat"])
def test_restart_between_produce_and_consume(fresh_broker, client, mode, tmp_path):
    if client == "kcat" and KCAT is None:
        from tests import needs
        needs.skip_missing("kcat (Debian package kcat)")
    {"kafka-python": lambda: _roundtrip_kafka_python(fresh_broker, mode),
     "confluent": lambda: _roundtrip_confluent(fresh_broker, mode),
     "aiokafka": lambda: _roundtrip_aiokafka(fresh_broker, mode),
     "kcat": lambda: _roundtrip_kcat(fresh_broker, mode, tmp_path)}[client]()


@pytest.mark.parametrize("mode", ["clean", "kill9"])
def test_idempotent_producer_across_restart(fresh_broker, mode):
    """One librdkafka idempotent producer keeps its producer id and sequence numbers across a
    broker restart: the broker must rebuild producer state (from its snapshot or the log) and
    accept the next sequence, with no duplicate and no gap."""
    from confluent_kafka import Producer
    topic = unique_topic("rs-idem")
    ck_create_topic(fresh_broker.bootstrap, topic, PARTITIONS)
    records = make_records(1200, PARTITIONS, seed=507)
    logs = []

    class Capture(logging.Handler):
        def emit(self, record):
            logs.append(record.getMessage())

    log = logging.getLogger("pykbroker-tests.librdkafka-eos")
    log.addHandler(Capture())
    log.setLevel(logging.DEBUG)
    log.propagate = False
    # debug=eos makes librdkafka log its idempotence state machine: a producer whose state the
    # broker lost would be answered UNKNOWN_PRODUCER_ID / OUT_OF_ORDER_SEQUENCE_NUMBER and
    # librdkafka would then silently acquire a new producer id (invisible in delivery reports).
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 40000, "compression.type": "gzip",
                  "reconnect.backoff.max.ms": 500, "debug": "eos"}, logger=log)
    acks = [None] * len(records)

    def cb(i):
        def done(err, msg):
            acks[i] = (err, msg.partition(), msg.offset())
        return done

    def send(lo, hi):
        for i in range(lo, hi):
            r = records[i]
            p.produce(topic, value=r.value, key=r.key, partition=r.partition,
                      timestamp=r.timestamp, headers=list(r.headers), on_delivery=cb(i))
        assert p.flush(30) == 0

    send(0, 600)
    _restart(fresh_broker, mode)
    send(600, 1200)
    errs = [(i, a) for i, a in enumerate(acks) if a is None or a[0] is not None]
    assert not errs, "delivery errors after %s restart (first 5): %r" % (mode, errs[:5])
    assert_acks_match(records, [(a[1], a[2]) for a in acks])
    pids = [m for m in logs if "Acquired PID" in m]
    assert len(pids) == 1, "producer id re-acquired after the %s restart: %r" % (mode, pids)
    bad = [m for m in logs if re.search(r"UNKNOWN_PRODUCER|OUT_OF_ORDER|DUPLICATE_SEQ|"
                                        r"INVALID_PRODUCER_EPOCH|epoch bump", m, re.I)]
    assert not bad, bad[:5]
    exp = by_partition(records)
    got = ck_consume(fresh_broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
    assert_partitions_equal(exp, got, what="idempotent producer across %s restart" % mode)


def _assert_topic_config(bootstrap, topic, name, value):
    from confluent_kafka.admin import AdminClient, ConfigResource
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = a.describe_configs([res], request_timeout=15)[res].result(timeout=20)
    assert entries[name].value == value, (name, entries[name])


@pytest.mark.parametrize("flush", ["flush1", "default"])
@pytest.mark.parametrize("client,idem", [("confluent", 1), ("confluent", 0), ("kafka-python", 1)],
                         ids=["confluent-idempotent", "confluent-plain", "kafka-python"])
def test_kill9_mid_produce(fresh_broker, tmp_path, client, idem, flush):
    """A producer process keeps writing while the broker is killed with SIGKILL; after the
    restart every acknowledged record is at the offset it was acknowledged at. ``flush1`` uses
    the topic config flush.messages=1 (fsync per message); with the default flush policy the
    page cache survives a process kill, so the same guarantee holds."""
    topic = unique_topic("k9")
    configs = {"flush.messages": "1"} if flush == "flush1" else {}
    ck_create_topic(fresh_broker.bootstrap, topic, PARTITIONS, configs)
    _assert_topic_config(fresh_broker.bootstrap, topic, "flush.messages",
                         "1" if flush == "flush1" else "9223372036854775807")
    out = str(tmp_path / "acked.txt")
    seed, count = 508, 60000
    prod = subprocess.Popen(
        [sys.executable, UTIL, "produce-acked", "--client", client,
         "--bootstrap", fresh_broker.bootstrap, "--topic", topic, "--out", out,
         "--seed", str(seed), "--count", str(count), "--partitions", str(PARTITIONS),
         "--idempotence", str(idem)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def n_acked():
            try:
                with open(out) as f:
                    return sum(1 for _ in f)
            except FileNotFoundError:
                return 0
        wait_until(lambda: n_acked() >= 3000 or prod.poll() is not None, timeout=40,
                   what="3000 acknowledged records")
        assert prod.poll() is None, ("producer finished before the kill; stderr: %s"
                                     % prod.stderr.read().decode(errors="replace")[-2000:])
        fresh_broker.kill()
        time.sleep(0.5)  # responses already on the wire still get read and logged
    finally:
        prod.kill()
        prod.wait()
    fresh_broker.start()
    records, acks = acked_records(out, seed, count, PARTITIONS)
    assert 3000 <= len(acks) < count, "the kill did not happen mid-produce (%d acked)" % len(acks)
    hi = {}
    for i, p, o in acks:
        hi[p] = max(hi.get(p, -1), o)
    got = ck_consume(fresh_broker.bootstrap, topic, {p: (0, hi[p] + 1) for p in hi}, timeout=40,
                     **{"isolation.level": "read_uncommitted"})
    for p, recs in got.items():
        assert [o for o, _ in recs] == list(range(len(recs))), "partition %d: offset gap" % p
    at = {(p, o): r for p, recs in got.items() for o, r in recs}
    for i, p, o in acks:
        want, have = records[i], at.get((p, o))
        assert have is not None, "acknowledged record %d (partition %d offset %d) lost" % (i, p, o)
        assert (have.partition, have.key, have.value, have.headers) == (
            want.partition, want.key, want.value, want.headers), (
            "record at partition %d offset %d is not acknowledged record %d" % (p, o, i))
    if idem:
        values = [r.value for recs in got.values() for _, r in recs]
        assert len(values) == len(set(values)), "idempotent producer: duplicates after restart"
