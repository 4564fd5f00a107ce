"""kcat end to end. kcat has no admin API: topics are created with kafka-python's admin client.

kcat produces from a file (``-l``) with ``-K:`` key delimiter, ``-Z`` (empty → NULL), ``-H``
headers (duplicate keys included) and ``-z <codec>``, and consumes with ``-C -e`` and a
binary-safe format (lengths on a text line, then the raw key and value bytes). Note that kcat
(librdkafka) consumes with ``isolation.level=read_committed`` by default. Headers are checked
by reading the same records back with confluent-kafka.
"""
import pytest

from tests import needs

from .util import (CODECS, KCAT, KCAT_HEADERS, N, PARTITIONS, Rec, assert_partitions_equal,
                   check_kcat_subsequences, ck_consume, first_index_at_or_after, kcat, kcat_consume,
                   kcat_lines, kcat_produce, kp_create_topic, kp_seeded_topic, now_ms, unique_topic)

pytestmark = [pytest.mark.timeout(60), needs.kcat_skipif(KCAT)]

@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(broker, codec, tmp_path):
    topic = unique_topic("kcat-" + codec)
    kp_create_topic(broker.bootstrap, topic, PARTITIONS)
    lines = kcat_lines(N, seed=400 + CODECS.index(codec))
    t0 = now_ms()
    kcat_produce(broker.bootstrap, topic, lines, codec, tmp_path, ["-p", "-1"])
    t1 = now_ms()
    rows = kcat_consume(broker.bootstrap, topic)
    assert len(rows) == N, "kcat read back %d of %d" % (len(rows), N)
    got = {}
    for p, o, t, k, v in rows:
        assert t0 - 1000 <= t <= t1 + 1000, "timestamp %d outside produce window" % t
        got.setdefault(p, []).append((o, (k, v)))
    for p, recs in got.items():
        assert [o for o, _ in recs] == list(range(len(recs))), "partition %d offsets" % p
        ts = [t for pp, o, t, _, _ in rows if pp == p]
        assert ts == sorted(ts), "partition %d: CreateTime not in produce order" % p
    assert len(got) == PARTITIONS, "random partitioner used only partitions %r" % sorted(got)
    check_kcat_subsequences(lines, got, "kcat/" + codec)
    # The same bytes through another client, with headers and timestamps (byte-exact).
    exp = {p: [Rec(p, k, v, KCAT_HEADERS, t) for pp, o, t, k, v in rows if pp == p] for p in got}
    other = ck_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
    assert_partitions_equal(exp, other, what="kcat→confluent/" + codec)


def test_null_header_value(broker, tmp_path):
    """``-H name`` (no '=') sends a header with a NULL value."""
    topic = unique_topic("kcat-hnull")
    kp_create_topic(broker.bootstrap, topic, 1)
    f = tmp_path / "one.txt"
    f.write_bytes(b"k:v\n")
    kcat(["-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-K", ":", "-l", "-q",
          "-H", "novalue", "-H", "x=1", str(f)])
    [(_, rec)] = ck_consume(broker.bootstrap, topic, {0: (0, 1)})[0]
    assert (rec.key, rec.value, rec.headers) == (b"k", b"v", (("novalue", None), ("x", b"1")))


@pytest.fixture(scope="module")
def seeded(broker):
    """Binary records with explicit timestamps, produced by kafka-python, read by kcat."""
    return kp_seeded_topic(broker.bootstrap, "kcat-seek", 13, "lz4")


def _rows_to_got(rows):
    got = {}
    for p, o, t, k, v in rows:
        got.setdefault(p, []).append((o, (k, v, t)))
    return got


def test_read_other_clients_binary_data(broker, seeded):
    topic, exp = seeded
    got = _rows_to_got(kcat_consume(broker.bootstrap, topic))
    want = {p: [(r.key, r.value, r.timestamp) for r in recs] for p, recs in exp.items()}
    for p in exp:
        assert [o for o, _ in got[p]] == list(range(len(want[p])))
        assert [x for _, x in got[p]] == want[p], "partition %d differs" % p


def test_seek_to_offset(broker, seeded):
    topic, exp = seeded
    recs = exp[1]
    start = len(recs) // 2 + 3
    rows = kcat_consume(broker.bootstrap, topic, partition=1, offset=str(start))
    assert [(o, k, v, t) for _, o, t, k, v in rows] == [
        (start + i, r.key, r.value, r.timestamp) for i, r in enumerate(recs[start:])]
    # Relative from the end: -o -5 → the last five.
    rows = kcat_consume(broker.bootstrap, topic, partition=0, offset="-5")
    assert [o for _, o, _, _, _ in rows] == list(range(len(exp[0]) - 5, len(exp[0])))


def test_seek_to_timestamp(broker, seeded):
    topic, exp = seeded
    recs = exp[0]
    target = recs[len(recs) // 3].timestamp
    i = first_index_at_or_after(recs, target)
    rows = kcat_consume(broker.bootstrap, topic, partition=0, offset="s@%d" % target)
    assert [(o, k, v) for _, o, _, k, v in rows] == [
        (i + j, r.key, r.value) for j, r in enumerate(recs[i:])]
    # Query mode: -Q -t topic:partition:timestamp.
    out = kcat(["-Q", "-b", broker.bootstrap, "-t", "%s:0:%d" % (topic, target)]).decode()
    assert (" [0] offset %d" % i) in out, out


def test_empty_key_and_value_without_Z(broker, tmp_path):
    """Without -Z kcat sends empty keys and values as empty (not NULL): the broker must keep
    the distinction (length 0 vs -1) and kcat must print it back (%K / %S = 0, not -1)."""
    topic = unique_topic("kcat-empty")
    kp_create_topic(broker.bootstrap, topic, 1)
    f = tmp_path / "e.txt"
    f.write_bytes(b"k:v\n:v2\nv3\nk4:\n:\n")
    kcat(["-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-K", ":", "-l", "-q", str(f)])
    rows = kcat_consume(broker.bootstrap, topic, partition=0)
    assert [(o, k, v) for _, o, _, k, v in rows] == [
        (0, b"k", b"v"), (1, b"", b"v2"), (2, None, b"v3"), (3, b"k4", b""), (4, b"", b"")]
