"""Transaction version 2 (KIP-890 part 2) with the Java kafka-clients 4.4 producer: the same
TxnScenario as test_transactions.py (commit and abort over 3 partitions, consume-transform-produce
with sendOffsetsToTransaction, fencing), on a broker that records every request it serves
(``--trace``), once with ``transaction.version`` finalized at 2 (the default, as Kafka 4.4) and once
at 1.  The records each isolation level reads back are checked exactly, and the trace shows which
protocol the client used: at level 2 no AddPartitionsToTxn / AddOffsetsToTxn at all, transactional
Produce v12+ (the leader adds the partition), TxnOffsetCommit v5 and EndTxn v5 (the epoch bumped on
every commit and abort); at level 1 the version 1 calls."""
import json
from collections import Counter

import pytest

from pykbroker.testing import BrokerProcess

from tests.conftest import TEST_OVERRIDES
from .test_transactions import COUNT, _read

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module", params=[2, 1], ids=["tv2", "tv1"])
def broker(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("broker-tv%d" % request.param)
    trace = d / "trace.jsonl"
    with BrokerProcess(str(d / "data"), {**TEST_OVERRIDES, "transaction.version": str(request.param)},
                       extra_args=["--trace", str(trace)]) as b:
        b.tv = request.param
        b.trace = trace
        yield b


def _calls(trace) -> Counter:
    """(api key, version, transactional?) -> how many requests of it the broker served."""
    out = Counter()
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            txn = e["api_key"] == 0 and (e["request"] or {}).get("transactional_id") is not None
            out[(e["api_key"], e["api_version"], txn)] += 1
    return out


def test_java_transactions_by_transaction_version(broker, scenario):
    r = scenario("kafka4", "txn", topic="java-tv%d" % broker.tv, count=COUNT)
    r.assert_clean()
    prefix = "java-tv%d" % broker.tv
    committed = ["c-%d" % i for i in range(12)] + ["c-last"]
    assert _read(r, prefix + "-basic", "read_committed") == sorted(committed)
    assert _read(r, prefix + "-basic", "read_uncommitted") == sorted(committed + ["a-%d" % i for i in range(9)])
    assert _read(r, prefix + "-out", "read_committed") == sorted("REC-%d" % i for i in range(COUNT))
    c = r.one("committed")
    assert c["rounds"] >= 3 and sum(c["offsets"].values()) == COUNT
    assert r.one("fenced")["error"] in ("ProducerFencedException", "InvalidProducerEpochException")
    assert _read(r, prefix + "-fence", "read_committed") == ["from-second"]

    calls = _calls(broker.trace)
    versions = lambda key, txn=False: {v for (k, v, t) in calls if k == key and (key != 0 or t == txn)}  # noqa: E731
    if broker.tv == 2:
        assert versions(24) == set() and versions(25) == set()        # no AddPartitionsToTxn / AddOffsetsToTxn
        assert versions(26) == {5}                                     # EndTxn v5: epoch bump per transaction
        assert versions(0, txn=True) and min(versions(0, txn=True)) >= 12   # the leader adds the partition
        assert versions(28) == {5}                                     # TxnOffsetCommit adds the offsets partition
    else:
        assert versions(24) and max(versions(24)) <= 3
        assert versions(25) and max(versions(25)) <= 4
        assert versions(26) and max(versions(26)) <= 4
        assert versions(0, txn=True) and max(versions(0, txn=True)) <= 11
        assert versions(28) and max(versions(28)) <= 4
