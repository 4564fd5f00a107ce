"""Transaction version 2 (KIP-890 part 2) with the Java kafka-clients 4.4 producer: the same
TxnScenario as test_transactions.py (commit and abort over 3 partitions, consume-transform-produce
with sendOffsetsToTransaction, fencing), on a broker that records every request it serves
(``--trace``), once with ``transaction.version`` finalized at 2 (the default, as Kafka 4.4) and once
at 1, and on a 3-broker cluster at level 2 (partitions, groups and coordinators spread over the
brokers: the leaders ask the coordinator with AddPartitionsToTxn v5, the coordinator sends
WriteTxnMarkers v2).  The records each isolation level reads back are checked exactly, and the
trace shows which protocol the client used: at level 2 no AddPartitionsToTxn / AddOffsetsToTxn at
all, transactional Produce v12+ (the leader adds the partition), TxnOffsetCommit v6 (KIP-1319: the
input topic named by its id, which the producer knows as the scenario looks the topic up first;
the broker resolves it and the group's offsets read back are the ones committed) and EndTxn v5
(the epoch bumped on every commit and abort); at level 1 the version 1 calls.  The log shows it
too (every test): with version 2 each COMMIT/ABORT marker carries the epoch after the bump, one
above its transaction's batches; with version 1 the same epoch."""
import contextlib
import json
import threading
from collections import Counter
from types import SimpleNamespace

import pytest

from compat.java import jvm
from tests import needs
from tests.background import Background

from pykbroker.protocol.primitives import uuid_to_str
from pykbroker.protocol.records import iter_batches
from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol import wire

from tests.conftest import TEST_OVERRIDES
from .test_transactions import COUNT, _read

pytestmark = pytest.mark.timeout(900)


class _ClusterBroker:
    def __init__(self, cluster, as_kafka):
        self.bootstrap = cluster.bootstrap_servers
        self.tv = 2
        self.trace = None
        self.as_kafka = as_kafka
        self.traces = [b.trace_path for b in cluster.brokers]   # each broker's requests served


@contextlib.contextmanager
def _broker(name, d):
    if name.startswith("tv2-cluster"):
        needs.require_zookeeper()
        from pykbroker.local.cluster import Cluster
        overrides = {**TEST_OVERRIDES, "zookeeper.session.timeout.ms": "6000", "offsets.topic.num.partitions": "5",
                     "transaction.state.log.num.partitions": "5"}
        as_kafka = "4.0" if name.endswith("4.0") else None
        with Cluster(3, str(d), overrides=overrides, zk_tick_time=500, as_kafka=as_kafka, trace=True) as c:
            c.wait_registered()
            yield _ClusterBroker(c, as_kafka)
        return
    tv = int(name[2])
    trace = d / "trace.jsonl"
    with BrokerProcess(str(d / "data"), {**TEST_OVERRIDES, "transaction.version": str(tv)},
                       extra_args=["--trace", str(trace)]) as b:
        b.tv = tv
        b.trace = trace
        yield b


def _attempt(fn):
    """fn()'s value, or the exception it raised (raised again by the test that reads it)."""
    try:
        return fn()
    except Exception as e:
        return e


def _observe(name, d, classpath):
    """Start ``name``'s broker(s), run the Java scenario, read back what the test checks while
    the brokers still run (the markers, the input topic's id), stop them (the traces stay)."""
    with _broker(name, d) as broker:
        prefix = "java-tv%d%s" % (broker.tv, "" if broker.trace else "-cluster")
        report = jvm.run(classpath, "txn", broker.bootstrap, topic=prefix, count=COUNT, offsets_by_id="true")
        return SimpleNamespace(broker=broker, prefix=prefix, report=report,
                               marker_epochs=_attempt(lambda: _marker_epochs(broker.bootstrap, prefix + "-basic", 3)),
                               in_topic_id=_attempt(lambda: _topic_id(broker.bootstrap, prefix + "-in")))


def _value(v):
    if isinstance(v, Exception):
        raise v
    return v


# Two lanes at once, each one broker setup after the other: a single broker beside a cluster (a
# lane mostly waits on its brokers and its JVM).  Each setup's broker is stopped before the lane
# starts the next one, so at most a cluster and a single broker run at a time.
LANES = [["tv2", "tv1"], ["tv2-cluster", "tv2-cluster-as-kafka-4.0"]]


@pytest.fixture(scope="module")
def observed(request, tmp_path_factory, java_classpath):
    """name -> Background whose result is that setup's observations; only the session's
    selected setups run."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    classpath = java_classpath("kafka4")
    events = {name: threading.Event() for lane in LANES for name in lane}
    results: dict = {}

    def lane(bg, names):
        for name in names:
            if name in selected:
                try:
                    results[name] = ("ok", _observe(name, tmp_path_factory.mktemp("broker-" + name), classpath))
                except BaseException as e:   # a skip (no ZooKeeper) included: the test raises it
                    results[name] = ("err", e)
            events[name].set()

    lanes = [Background(lambda bg, names=names: lane(bg, names), "txn-v2 lane") for names in LANES]

    def get(name):
        events[name].wait(900)
        assert name in results, "the %s setup did not end within 900 s" % name
        kind, value = results[name]
        if kind == "err":
            raise value
        return value

    yield get
    for bg in lanes:
        bg.join()


def _marker_epochs(bootstrap, topic, partitions) -> set:
    """{marker epoch - epoch of the transaction's batches} over every COMMIT/ABORT marker of
    ``topic``, read (read_uncommitted) from each partition's leader."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    m = wire.metadata((host, int(port)), [topic])
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in m["brokers"]}
    out = set()
    for p in m["topics"][0]["partitions"]:
        part = wire.fetch_part(wire.fetch(brokers[p["leader_id"]], topic, p["partition_index"], 0))
        open_epoch = {}
        for h in iter_batches(bytes(part["records"] or b"")):
            if h.is_control:
                out.add(h.producer_epoch - open_epoch.pop(h.producer_id))
            elif h.is_transactional:
                open_epoch.setdefault(h.producer_id, h.producer_epoch)
    return out


def _calls(trace, inter_broker=None) -> Counter:
    """(api key, version, transactional?) -> how many requests of it the broker served; only the
    other brokers' (client id ``broker-<id>-...``) or only the clients' with ``inter_broker``
    True / False."""
    out = Counter()
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            if inter_broker is not None and (e["header"]["client_id"] or "").startswith("broker-") != inter_broker:
                continue
            txn = e["api_key"] == 0 and (e["request"] or {}).get("transactional_id") is not None
            out[(e["api_key"], e["api_version"], txn)] += 1
    return out


def _cluster_versions(broker, inter_broker) -> dict:
    """api key -> the versions the cluster's brokers served it at (all brokers' traces)."""
    out: dict = {}
    for t in broker.traces:
        for (k, v, _txn) in _calls(t, inter_broker):
            out.setdefault(k, set()).add(v)
    return out


def _txn_offset_commit_topics(trace) -> list:
    """The topics of every TxnOffsetCommit the broker served, as the trace decoded them."""
    out = []
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            if e["api_key"] == 28:
                out.extend(e["request"]["topics"])
    return out


def _topic_id(bootstrap, topic):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return uuid_to_str(wire.metadata((host, int(port)), [topic])["topics"][0]["topic_id"])


@pytest.mark.parametrize("name", [name for lane in LANES for name in lane])
def test_java_transactions_by_transaction_version(observed, name):
    o = observed(name)
    broker, prefix, r = o.broker, o.prefix, o.report
    r.assert_clean()
    committed = ["c-%d" % i for i in range(12)] + ["c-last"]
    assert _read(r, prefix + "-basic", "read_committed") == sorted(committed)
    assert _read(r, prefix + "-basic", "read_uncommitted") == sorted(committed + ["a-%d" % i for i in range(9)])
    assert _read(r, prefix + "-out", "read_committed") == sorted("REC-%d" % i for i in range(COUNT))
    c = r.one("committed")
    assert c["rounds"] >= 3 and sum(c["offsets"].values()) == COUNT
    assert r.one("fenced")["error"] in ("ProducerFencedException", "InvalidProducerEpochException")
    assert _read(r, prefix + "-fence", "read_committed") == ["from-second"]
    assert _value(o.marker_epochs) == ({1} if broker.tv == 2 else {0})
    if broker.trace is None:
        # the cluster: what the brokers sent each other, at the versions both ends allow
        # (cluster/interbroker.py); a Kafka 4.0 broker knows WriteTxnMarkers v1 and Fetch v17 at most
        between = _cluster_versions(broker, inter_broker=True)
        clients = _cluster_versions(broker, inter_broker=False)
        assert between.get(27) == ({1} if broker.as_kafka == "4.0" else {2}), between
        assert between.get(24) == {5}, between        # the leaders add partitions for TV2 Produce
        assert between.get(1) and max(between[1]) == (17 if broker.as_kafka == "4.0" else 18), between
        if broker.as_kafka == "4.0":                  # the clients met Kafka 4.0's versions too
            assert clients.get(28) == {5} and clients.get(26) == {5} and max(clients[0]) <= 12, clients
        return
    calls = _calls(broker.trace)
    versions = lambda key, txn=False: {v for (k, v, t) in calls if k == key and (key != 0 or t == txn)}  # noqa: E731
    if broker.tv == 2:
        assert versions(24) == set() and versions(25) == set()        # no AddPartitionsToTxn / AddOffsetsToTxn
        assert versions(26) == {5}                                     # EndTxn v5: epoch bump per transaction
        assert versions(0, txn=True) and min(versions(0, txn=True)) >= 12   # the leader adds the partition
        assert versions(28) == {6}                                     # TxnOffsetCommit adds the offsets partition
        ids = _txn_offset_commit_topics(broker.trace)                  # ... and names the input topic by id
        assert ids and all(t["name"] == "" and t["topic_id"] == _value(o.in_topic_id) for t in ids), ids
    else:
        assert versions(24) and max(versions(24)) <= 3
        assert versions(25) and max(versions(25)) <= 4
        assert versions(26) and max(versions(26)) <= 4
        assert versions(0, txn=True) and max(versions(0, txn=True)) <= 11
        assert versions(28) and max(versions(28)) <= 4
