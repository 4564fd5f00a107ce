"""Per-record validation of Produce (Kafka's LogValidator.validateRecord), against Apache Kafka:
keyless records on a compacted topic (INVALID_RECORD) and CreateTime timestamps outside
``message.timestamp.before/after.max.ms`` (INVALID_TIMESTAMP), plain and compressed, answered with
``record_errors`` (each bad record's index and text) and Kafka's ``error_message``; a
LogAppendTime topic does not check timestamps.  Then the client's view: a confluent-kafka
(librdkafka) batch of 100 records with 10 keyless ones fails exactly those 10 with
INVALID_RECORD and the other 90 with librdkafka's "different record" error, as against Kafka."""
import re
import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer

from .helpers import batch, create_topic, explain, produce, wait_for_topic

HOUR_MS = 3600 * 1000
TOPICS = {
    "re-ts": None,
    "re-cmp": {"cleanup.policy": "compact"},
    "re-before": {"message.timestamp.before.max.ms": str(HOUR_MS)},
    "re-lat": {"message.timestamp.type": "LogAppendTime", "message.timestamp.after.max.ms": "1000"},
}


def _norm(part):
    """The partition answer with the clock-dependent numbers (the window's bounds, the append
    time, the offsets of successful appends) masked."""
    p = dict(part)
    p.pop("current_leader", None)
    if p["log_append_time_ms"] != -1:
        p["log_append_time_ms"] = "<time>"
    if p["error_code"] == 0:
        p["base_offset"] = "<offset>"
    mask = lambda s: s and re.sub(r"within \[-?\d+, -?\d+\]", "within [<lo>, <hi>]", s)
    p["record_errors"] = [{"batch_index": e["batch_index"],
                           "batch_index_error_message": mask(e["batch_index_error_message"])}
                          for e in p["record_errors"]]
    p["error_message"] = mask(p["error_message"])
    return p


def _cases():
    now = int(time.time() * 1000)
    fut, past = now + 2 * HOUR_MS, now - 2 * HOUR_MS
    vals = [b"a", b"b", b"c", b"d", b"e"]
    return {
        "future timestamps": ("re-ts", batch(vals, timestamps=[now, fut, now, fut, now])),
        "future timestamps, gzip": ("re-ts", batch(vals, timestamps=[now, fut, now, fut, now], compression=1)),
        "future timestamp first": ("re-ts", batch(vals[:2], timestamps=[fut, now])),
        "past timestamp inside a batch": ("re-before", batch(vals[:3], timestamps=[now, past, now])),
        "LogAppendTime topic": ("re-lat", batch(vals[:2], timestamps=[now, fut])),
        "keyless on compacted": ("re-cmp", batch(vals[:4], keys=[None, b"k", None, b"k2"])),
        "keyless on compacted, lz4": ("re-cmp", batch(vals[:4], keys=[None, b"k", None, b"k2"], compression=3)),
        "four keyless (message shows three)": ("re-cmp", batch(vals[:4], keys=[None] * 4)),
        "keyless and future together": ("re-cmp", batch(vals[:3], keys=[None, b"k", b"k"],
                                                        timestamps=[now, fut, now])),
        "all fine on compacted": ("re-cmp", batch(vals[:2], keys=[b"k", b"k2"])),
        # a client's batch must start at offset 0 (the broker assigns offsets); the base offset
        # is outside the CRC, so the batch is otherwise valid
        "base offset 5": ("re-ts", struct.pack(">q", 5) + batch(vals[:2])[8:]),
    }


@pytest.mark.parametrize("version", [7, 8, 11])
def test_record_errors_like_kafka(both, version):
    cases = _cases()   # the same bytes (timestamps) for both brokers

    def scenario(t):
        for name, configs in TOPICS.items():
            create_topic(t, name, 1, configs)
            wait_for_topic(t, name, 1)
        return {case: _norm(produce(t, topic, 0, records, version=version))
                for case, (topic, records) in cases.items()}

    p, k = both(scenario)
    assert p == k, explain(p, k)
    # the oracle really rejected what it should (the comparison is not between two silences)
    assert k["keyless on compacted"]["error_code"] == 87
    assert k["future timestamps"]["error_code"] == 32
    assert k["base offset 5"]["error_code"] == 87, k["base offset 5"]   # INVALID_RECORD
    if version >= 8:
        assert [e["batch_index"] for e in p["keyless on compacted"]["record_errors"]] == [0, 2]
        assert [e["batch_index"] for e in p["past timestamp inside a batch"]["record_errors"]] == [1]


def test_librdkafka_fails_only_the_bad_records(both):
    """100 records in one batch, every tenth keyless, on a compacted topic."""

    def scenario(t):
        topic = "re-client-" + uuid.uuid4().hex[:8]
        create_topic(t, topic, 1, {"cleanup.policy": "compact"})
        wait_for_topic(t, topic, 1)
        p = Producer({"bootstrap.servers": t.bootstrap, "linger.ms": 2000, "batch.num.messages": 1000,
                      "retries": 0, "enable.idempotence": False})
        results = {}
        for i in range(100):
            key = None if i % 10 == 3 else b"k%d" % i
            p.produce(topic, key=key, value=b"v%d" % i, partition=0,
                      on_delivery=lambda e, m, i=i: results.__setitem__(i, e))
        assert p.flush(30) == 0
        return {i: (None if e is None else e.code()) for i, e in sorted(results.items())}

    p, k = both(scenario)
    assert p == k, explain(p, k)
    bad = [i for i, code in k.items() if code == KafkaError.INVALID_RECORD]
    assert bad == [i for i in range(100) if i % 10 == 3]
    others = {code for i, code in k.items() if i not in bad}
    assert others == {KafkaError._INVALID_DIFFERENT_RECORD}


CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("topic_codec", list(CODECS))
def test_topic_compression_type_rewrites_batches(both, topic_codec):
    """A topic compression.type other than ``producer``: what a consumer fetches is in the topic's
    codec, with the producer's records, keys, headers-free values and timestamps unchanged;
    an idempotent batch keeps its producer id and sequence (a retry is still a duplicate)."""
    from pykbroker.protocol.records import parse_header
    from pykbroker.protocol.wire import decode_batches

    from .helpers import fetch, init_producer_id

    now = int(time.time() * 1000)
    sources = [c for c in CODECS.values() if c != CODECS[topic_codec]][:2] + [CODECS[topic_codec]]

    def scenario(t):
        topic = "re-comp-" + topic_codec
        create_topic(t, topic, 1, {"compression.type": topic_codec})
        wait_for_topic(t, topic, 1)
        pid, epoch = init_producer_id(t)
        out = []
        for i, src in enumerate(sources):
            b = batch([b"v%d-%d" % (i, j) for j in range(5)], keys=[b"k%d" % j for j in range(5)],
                      timestamps=[now + j for j in range(5)], compression=src,
                      producer_id=pid, producer_epoch=epoch, base_sequence=5 * i)
            r = produce(t, topic, 0, b, version=9)
            again = produce(t, topic, 0, b, version=9)   # the idempotent retry: same offset back
            out.append((r["error_code"], r["base_offset"], again["error_code"], again["base_offset"]))
        data = fetch(t, topic, 0, 0)["responses"][0]["partitions"][0]["records"]
        codecs, pos = [], 0
        while pos < len(data):
            h = parse_header(data, pos)
            codecs.append(h.codec)
            pos += h.size
        return out, codecs, decode_batches(data)

    p, k = both(scenario)
    # leader epochs differ between the brokers' histories; the rest must not
    strip = lambda r: (r[0], r[1], [(base, recs) for base, _epoch, recs in r[2]])
    assert strip(p) == strip(k), explain(strip(p), strip(k))
    assert k[1] == [CODECS[topic_codec]] * len(sources)
    assert [r[2] for r in k[2]] == [[(5 * i + j, now + j, b"v%d-%d" % (i, j)) for j in range(5)]
                                    for i in range(len(sources))]
