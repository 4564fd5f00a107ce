"""DescribeLogDirs and AlterReplicaLogDirs on brokers with two log dirs (JBOD): the same answers
as Apache Kafka 4.4 for sizes, lags, future logs during a move, the move's errors, and the
records read back after the partition moved online.  Log dirs are named by role ("current":
where the partition was placed, "other") since the two brokers may place it differently."""
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol import wire

from .conftest import COMMON_OVERRIDES, Target, _load_oracle, at_once
from .helpers import connect, explain, produce_accepted

TOPIC = "ld-topic"


def start_jbod(base):
    """Both JBOD brokers under ``base``, started side by side (the JVM's 5-15 s start covers
    pykbroker's): (pykbroker's BrokerProcess, Kafka's KafkaOracle).  Run ahead, in the
    directory's background thread (``jbod_run``, tests/differential/conftest.py)."""
    dirs_p = "%s,%s" % (base / "p1", base / "p2")
    pyk = BrokerProcess(dirs_p, COMMON_OVERRIDES)
    oracle = _load_oracle()
    k = oracle.KafkaOracle(base / "kafka", dict(COMMON_OVERRIDES, **{"log.dirs": "%s,%s" % (base / "k1", base / "k2")}))
    with ThreadPoolExecutor(1) as pool:
        kafka_started = pool.submit(k.start)
        try:
            pyk.start()
        except BaseException:
            kafka_started.exception()   # the JVM's start ended: stop it, nothing outlives the module
            k.stop()
            raise
        kafka_error = kafka_started.exception()
    if kafka_error is not None:
        pyk.stop()
        k.stop()
        pytest.fail("Apache Kafka (the oracle) could not be started: %s" % kafka_error, pytrace=False)
    return pyk, k


@pytest.fixture(scope="module")
def jbod(jbod_run):
    """Both JBOD brokers (started ahead, in the background), stopped with the module."""
    pyk, k = jbod_run.result()
    jbod_run.taken = True
    yield Target("pykbroker", pyk.bootstrap, 1, pyk), Target("kafka", k.bootstrap, k.node_id, k)
    k.stop()
    pyk.stop()


def describe(c, topics):
    r = c.request(35, 5, {"topics": topics})
    assert r["error_code"] == 0
    out = {}
    for res in r["results"]:
        out[res["log_dir"]] = (res["error_code"], res["total_bytes"] > 0 and 0 < res["usable_bytes"] <= res["total_bytes"],
                               res["is_cordoned"],
                               sorted((t["name"], p["partition_index"], p["partition_size"], p["offset_lag"],
                                       p["is_future_key"]) for t in res["topics"] for p in t["partitions"]
                                      if not t["name"].startswith("__")))
    return out


def by_role(d, current):
    """{"current": ..., "other": ...} from {path: ...}."""
    return {("current" if k == current else "other"): v for k, v in d.items()}


def produce(c, partition, batch):
    return produce_accepted(c, TOPIC, partition, batch, 1)


def scenario(t):
    out = []
    with connect(t) as c:
        wire.create_topic(c, TOPIC, 2, None, 5, exist_ok=True)
        wire.wait_for_topic(c, TOPIC, 2)
        for i in range(30):
            produce(c, 0, wire.make_batch([b"v%03d-" % i + b"x" * 500] * 10, timestamps=[1000] * 10))
        d = describe(c, [{"topic": TOPIC, "partitions": [0, 5]}])
        current = next(k for k, v in d.items() if any(p[1] == 0 for p in v[3]))
        other = next(k for k in d if k != current)
        out.append(("placed", by_role(d, current)))
        r = c.request(34, 2, {"dirs": [
            {"path": other, "topics": [{"name": TOPIC, "partitions": [0, 9]}, {"name": "no-such-topic", "partitions": [0]}]},
            {"path": other + "-missing", "topics": [{"name": TOPIC, "partitions": [1]}]}]})
        out.append(("alter", sorted((x["topic_name"], p["partition_index"], p["error_code"])
                                    for x in r["results"] for p in x["partitions"])))
        deadline = time.monotonic() + 30
        while True:   # the move completes in the background
            d = describe(c, [{"topic": TOPIC, "partitions": [0]}])
            entries = [p for v in d.values() for p in v[3]]
            # done: no future log, and the old log gone (Kafka lists it briefly after the swap)
            if (len(entries) == 1 and not entries[0][4]) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        out.append(("moved", by_role(d, current)))
        # the same dir again: nothing to do
        r = c.request(34, 1, {"dirs": [{"path": other, "topics": [{"name": TOPIC, "partitions": [0]}]}]})
        out.append(("again", r["results"]))
        produce(c, 0, wire.make_batch([b"after"], timestamps=[2000]))
        f = wire.fetch_part(wire.fetch(c, TOPIC, 0, 0, max_bytes=10 << 20, partition_max_bytes=10 << 20))
        recs = [r_ for b in wire.decode_batches(f["records"]) for r_ in b[2]]
        out.append(("read", f["high_watermark"], f["log_start_offset"], len(recs), recs[0], recs[-1]))
        # v1, every topic (topics null): each dir with what it holds, by role as above
        r = c.request(35, 1, {"topics": None})
        out.append(("v1_all", by_role({x["log_dir"]: (x["error_code"], sorted(
            (t["name"], p["partition_index"], p["partition_size"], p["offset_lag"], p["is_future_key"])
            for t in x["topics"] for p in t["partitions"] if not t["name"].startswith("__")))
            for x in r["results"]}, current)))
    return out


def test_describe_and_move_between_log_dirs(jbod):
    p, k = at_once(scenario, *jbod)   # the two brokers share nothing; each waits for its move
    assert p == k, explain(p, k)
