"""KIP-360 InitProducerId after a transaction version 2 EndTxn, on the wire, without Apache Kafka:
the answers Kafka 4.4 gives (pinned from ``tests/differential/test_transactions.py::
test_tv2_init_producer_id_retry_after_end_txn``, which compares the same scenario with Kafka).

A TV2 client whose EndTxn answer was lost re-runs InitProducerId with its producer id and the
epoch *before* that EndTxn's bump.  The coordinator keeps that epoch as the last epoch through
Complete* and takes the request for a retry: the current epoch, written as Empty.  (pykbroker
answered PRODUCER_FENCED there; franz-go's GroupTransactSession then failed every buffered record
with it.)  A new incarnation (InitProducerId without id/epoch) forgets the last epoch, so the old
incarnation's re-init is fenced."""
from __future__ import annotations

import pytest

from pykbroker.testing import BrokerProcess

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
    }, out
