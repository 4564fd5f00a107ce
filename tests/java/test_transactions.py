"""Java kafka-clients 3.9.x and 4.x transactions (compat/java/.../TxnScenario.java): commit and
abort over 3 partitions, a consume-transform-produce exactly-once loop with
sendOffsetsToTransaction (one round aborted and re-processed), fencing by a second producer with
the same transactional id; the records each isolation level reads back are checked exactly."""
import pytest

from tests.java.batch import batch, reports

pytestmark = pytest.mark.timeout(900)   # the first test of a session may build the Maven project

COUNT = 300


def txn_args(profile):
    return {"topic": "java-txn-%s" % profile, "count": COUNT}


# both profiles' scenarios at once, one JVM each, on the session's shared broker with other
# modules' (tests/java/conftest.py)
JAVA_BATCH = batch("txn", txn_args)
JAVA_SHARED_BROKER = True
_txn = reports("txn", "txn", txn_args)


def _read(r, topic, isolation):
    return sorted(r.one("read", topic=topic, isolation=isolation)["values"])


@pytest.mark.parametrize("profile", ["kafka39", "kafka4"])
def test_java_transactions(txn, profile):
    r = txn(profile)
    r.assert_clean()
    prefix = "java-txn-%s" % profile
    committed = ["c-%d" % i for i in range(12)] + ["c-last"]
    assert _read(r, prefix + "-basic", "read_committed") == sorted(committed)
    assert _read(r, prefix + "-basic", "read_uncommitted") == sorted(committed + ["a-%d" % i for i in range(9)])
    # exactly once: every input record transformed once, the aborted round re-processed
    assert _read(r, prefix + "-out", "read_committed") == sorted("REC-%d" % i for i in range(COUNT))
    c = r.one("committed")
    assert c["rounds"] >= 3
    assert sum(c["offsets"].values()) == COUNT
    # the first producer is fenced; only the second one's record is committed
    assert r.one("fenced")["error"] in ("ProducerFencedException", "InvalidProducerEpochException")
    assert _read(r, prefix + "-fence", "read_committed") == ["from-second"]
