"""KIP-360 InitProducerId after a transaction version 2 EndTxn, on the wire, without Apache Kafka:
the answers Kafka 4.4 gives (pinned from ``tests/differential/test_transactions.py::
test_tv2_init_producer_id_retry_after_end_txn``, which compares the same scenario with Kafka).

A TV2 client whose EndTxn answer was lost re-runs InitProducerId with its producer id and the
epoch *before* that EndTxn's bump.  The coordinator keeps that epoch as the last epoch through
Complete* and takes the request for a retry: the current epoch, written as Empty.  (pykbroker
answered PRODUCER_FENCED there; franz-go's GroupTransactSession then failed every buffered record
with it.)  The same holds after the coordinator fenced and aborted an open transaction because
its producer re-ran InitProducerId with the transaction's epoch (franz-go does when its produce
retries run out).  A new incarnation (InitProducerId without id/epoch) forgets the last epoch, so
the old incarnation's re-init is fenced."""
from __future__ import annotations

import pytest

from pykbroker.local.broker_process import BrokerProcess

from differential.conftest import Target  # noqa: E402
from differential.test_transactions import scenario_tv2_reinit  # noqa: E402


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("tv2reinit")), {"group.initial.rebalance.delay.ms": "0"})
    b.start()
    yield Target("pykbroker", b.bootstrap, 1, b)
    b.stop()


def test_reinit_with_pre_bump_epoch_is_a_retry(target):
    out = scenario_tv2_reinit(target)
    # (error, epoch - initial epoch, same producer id)
    assert out == {
        "init": 0,
        "produce1": 0,
        "end1": (0, 1, True),                          # EndTxn v5: e0 -> e0+1
        "reinit_pre_bump_after_commit": (0, 1, True),  # a retry: the current epoch, no bump
        "state_after_reinit": (0, "Empty", 1),
        "reinit_current": (0, 2, True),                # the current epoch: bumped
        "reinit_stale": (90, -1, None),                # older than the last epoch: PRODUCER_FENCED
        "produce2": 0,
        "end2": (0, 3, True),
        "reinit_pre_bump_after_abort": (0, 3, True),   # same after an abort
        "describe_end": (0, "Empty", 3),
        "new_incarnation": (0, 4, True),
        "old_incarnation_reinit": (90, -1, None),      # the new incarnation fenced the old one
        "produce3": 0,
        # a re-init with the epoch of an open transaction: fenced and aborted (CONCURRENT_TRANSACTIONS),
        # then the retried re-init is a retry of that bump: the current epoch
        "reinit_while_open": (0, 5, True),
        "describe_after_fence": (0, "Empty", 5),
    }, out


def test_old_incarnation_fenced_after_coordinator_reload(tmp_path):
    """After a restart the coordinator reloads ``__transaction_state``; like Kafka it then knows
    no last epoch (Kafka's TransactionLog loads lastProducerEpoch as -1), so the re-init of an
    incarnation that a newer one replaced is fenced, not taken for a retry of the newer one's
    bump (which would hand the zombie the new incarnation's epoch)."""
    from differential.helpers import create_topic  # noqa: E402
    from differential.test_transactions import _coordinator, _init, _reinit  # noqa: E402
    b = BrokerProcess(str(tmp_path / "data"), {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        t = Target("pykbroker", b.bootstrap, 1, b)
        create_topic(t, "reload-topic", 1)
        tid = "reload-tid"
        _coordinator(t, tid)
        old = _init(t, tid, version=5)                 # the old incarnation
        new = _init(t, tid, version=5)                 # a new one replaces it (bump, last epoch forgotten)
        assert (old["error_code"], new["error_code"], new["producer_epoch"]) == (0, 0, old["producer_epoch"] + 1)
        # before any reload the same re-init is fenced too (the in-memory last epoch is -1)
        assert _reinit(t, tid, old["producer_id"], old["producer_epoch"], old["producer_epoch"])[0] == 90
        b.restart()
        t = Target("pykbroker", b.bootstrap, 1, b)
        _coordinator(t, tid)
        # the old incarnation recovers with the epoch it had: fenced
        assert _reinit(t, tid, old["producer_id"], old["producer_epoch"], old["producer_epoch"])[0] == 90
        # the new incarnation continues after an error with its own epoch: bumped
        assert _reinit(t, tid, new["producer_id"], new["producer_epoch"], new["producer_epoch"]) == (0, 1, True)
    finally:
        b.stop()
