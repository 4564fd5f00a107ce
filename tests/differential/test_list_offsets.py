"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3, v7+), lookups by timestamp on
out-of-order timestamps (exact, between, before all, after all = no match), an empty partition,
read_committed, unknown topic/partition; raw per version and through kafka-python."""
import pytest
from kafka import KafkaConsumer, TopicPartition

from .helpers import explain, batch, create_topic, list_offsets, produce

VERSIONS = list(range(1, 12))    # Kafka 4.4's 1-11
TIMESTAMPS = [-2, -1, -3, 0, 999, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5001]
# The tiered-storage specs (answered as Kafka does with tiering disabled) and ones no version
# knows: UNSUPPORTED_VERSION before the version that introduced them, on every version for -7.
SPECIAL = [-3, -4, -5, -6, -7]

_ready = set()


def filled(t):
    """lo-data: offsets 0-2 at 1000, 3000, 2000; offset 3 at 5000; offsets 4-5 at 4000."""
    if t.name not in _ready:
        create_topic(t, "lo-data", 1)
        create_topic(t, "lo-empty", 2)
        for values, ts in (([b"a", b"b", b"c"], [1000, 3000, 2000]), ([b"d"], [5000]),
                           ([b"e", b"f"], [4000, 4000])):
            r = produce(t, "lo-data", 0, batch(values, timestamps=ts))
            assert r["error_code"] == 0, r
        _ready.add(t.name)


def params():
    for v in VERSIONS:
        for ts in TIMESTAMPS:
            if ts == -3 and v < 7:
                continue
            yield pytest.param(v, ts, id="v%d-ts%d" % (v, ts))


@pytest.mark.parametrize("version,ts", list(params()) + [pytest.param(v, ts, id="v%d-special%d" % (v, ts))
                                                      for v in (1, 6, 7, 8, 9, 10, 11) for ts in SPECIAL])
def test_lookup(both, version, ts):
    def scenario(t):
        filled(t)
        return list_offsets(t, "lo-data", 0, ts, version=version)
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("ts", [-2, -1, -3, 0, 1000])
@pytest.mark.parametrize("version", [1, 4, 7])
def test_empty_partition(both, version, ts):
    if ts == -3 and version < 7:
        pytest.skip("-3 needs v7")

    def scenario(t):
        filled(t)
        return list_offsets(t, "lo-empty", 1, ts, version=version)
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("ts", [-2, -1, 2000])
@pytest.mark.parametrize("version", [2, 5, 7])
def test_read_committed(both, version, ts):
    def scenario(t):
        filled(t)
        return list_offsets(t, "lo-data", 0, ts, version=version, isolation_level=1)
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("what", ["unknown-topic", "unknown-partition"])
@pytest.mark.parametrize("version", [1, 4, 7])
def test_unknown(both, version, what):
    def scenario(t):
        filled(t)
        if what == "unknown-topic":
            return list_offsets(t, "lo-no-such-topic", 0, -1, version=version)
        return list_offsets(t, "lo-data", 7, -1, version=version)
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_kafka_python_client(both):
    """What kafka-python's consumer API reports: beginning/end offsets and offsets_for_times."""
    def scenario(t):
        filled(t)
        c = KafkaConsumer(bootstrap_servers=t.bootstrap, request_timeout_ms=20000)
        try:
            tps = [TopicPartition("lo-data", 0), TopicPartition("lo-empty", 0), TopicPartition("lo-empty", 1)]
            out = {"beginning": {tp.partition + 10 * (tp.topic == "lo-empty"): o
                                 for tp, o in c.beginning_offsets(tps).items()},
                   "end": {tp.partition + 10 * (tp.topic == "lo-empty"): o for tp, o in c.end_offsets(tps).items()}}
            for ts in (0, 1500, 2500, 4000, 4500, 5001):
                r = c.offsets_for_times({TopicPartition("lo-data", 0): ts, TopicPartition("lo-empty", 0): ts})
                out[ts] = sorted((tp.topic, None if v is None else (v.offset, v.timestamp)) for tp, v in r.items())
            return out
        finally:
            c.close()
    p, k = both(scenario)
    assert p == k, explain(p, k)
