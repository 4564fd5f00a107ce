"""``__transaction_state`` records (coordinator/txn/state_log.py) against values written by Apache
Kafka 4.4 with ``transaction.version`` 2 (flexible v1 values with tagged fields), captured from a
real broker: pykbroker reads them field by field and writes the same bytes for the same fields;
and the partition's transaction version 2 marker rule (ProducerStateManager.check_marker)."""
import pytest

from pykbroker.coordinator.txn import state_log as S
from pykbroker.protocol.errors import ErrorCode
from pykbroker.storage.producer_state import ProducerStateManager

KEY = bytes.fromhex("0000000a74786e2d7476322d6964")   # v0 key of "txn-tv2-id"
# (value bytes from Kafka 4.4, fields): Empty after InitProducerId (client version 0), Ongoing added
# by a TV2 partition leader, PrepareAbort with the bumped epoch, CompleteCommit
KAFKA_VALUES = [
    ("0001000000000000000100000000ea600000000001a20bb25858ffffffffffffffff0100080000000000000001",
     dict(producer_id=1, producer_epoch=0, timeout_ms=60000, state=S.EMPTY, partitions=set(),
          last_update_ms=0x1a20bb25858, start_ms=-1, previous_producer_id=1, next_producer_id=-1,
          client_transaction_version=0)),
    ("0001000000000000000100000000ea6001020874786e2d747632020000000000000001a20bb25936000001a20bb25936"
     "020008000000000000000102020002",
     dict(producer_id=1, producer_epoch=0, timeout_ms=60000, state=S.ONGOING, partitions={("txn-tv2", 0)},
          last_update_ms=0x1a20bb25936, start_ms=0x1a20bb25936, previous_producer_id=1, next_producer_id=-1,
          client_transaction_version=2)),
    ("0001000000000000000100020000ea6003020874786e2d747632020000000000000001a20bb259b5000001a20bb259b2"
     "020008000000000000000102020002",
     dict(producer_id=1, producer_epoch=2, timeout_ms=60000, state=S.PREPARE_ABORT, partitions={("txn-tv2", 0)},
          last_update_ms=0x1a20bb259b5, start_ms=0x1a20bb259b2, previous_producer_id=1, next_producer_id=-1,
          client_transaction_version=2)),
    ("0001000000000000000100040000ea600401000001a20bb25a2b000001a20bb25a27020008000000000000000102020002",
     dict(producer_id=1, producer_epoch=4, timeout_ms=60000, state=S.COMPLETE_COMMIT, partitions=set(),
          last_update_ms=0x1a20bb25a2b, start_ms=0x1a20bb25a27, previous_producer_id=1, next_producer_id=-1,
          client_transaction_version=2)),
]


@pytest.mark.parametrize("raw,fields", KAFKA_VALUES, ids=["empty", "ongoing", "prepare-abort", "complete-commit"])
def test_kafka_v1_values_read_and_written_alike(raw, fields):
    assert S.parse_key(KEY) == "txn-tv2-id" and S.key("txn-tv2-id") == KEY
    v = S.parse_value(bytes.fromhex(raw))
    assert {k: v[k] for k in fields} == fields and v["next_producer_epoch"] == -1
    again = S.value(fields["producer_id"], fields["producer_epoch"], fields["timeout_ms"], fields["state"],
                    fields["partitions"], fields["last_update_ms"], fields["start_ms"], 1,
                    previous_producer_id=fields["previous_producer_id"], next_producer_id=fields["next_producer_id"],
                    client_transaction_version=fields["client_transaction_version"])
    assert again.hex() == raw


def test_two_topics_and_v0_values():
    # Kafka lists the offsets partition after the data topic (its map's order); the set is the same
    raw = ("0001000000000000000100000000ea6001030874786e2d74763203000000010000000000135f5f636f6e73756d65725f6f6666"
           "73657473020000002d00000001a20bb2594e000001a20bb25936020008000000000000000102020002")
    v = S.parse_value(bytes.fromhex(raw))
    assert v["partitions"] == {("txn-tv2", 0), ("txn-tv2", 1), ("__consumer_offsets", 45)}
    assert S.parse_value(S.value(*[v[k] for k in ("producer_id", "producer_epoch", "timeout_ms", "state",
                                                  "partitions", "last_update_ms", "start_ms")], 1,
                                 previous_producer_id=1, client_transaction_version=2)) == v
    old = S.value(7, 3, 1000, S.ONGOING, {("t", 2)}, 11, 10)          # v0 (transaction.version 0)
    assert old[:2] == b"\0\0"
    w = S.parse_value(old)
    assert (w["producer_id"], w["producer_epoch"], w["partitions"], w["client_transaction_version"]) == \
        (7, 3, {("t", 2)}, 0)
    nxt = S.parse_value(S.value(7, 32767, 1000, S.PREPARE_COMMIT, {("t", 2)}, 11, 10, 1, previous_producer_id=7,
                                next_producer_id=8, client_transaction_version=2))
    assert nxt["next_producer_id"] == 8 and nxt["producer_epoch"] == 32767


def test_transaction_version_2_marker_needs_a_bumped_epoch():
    ps = ProducerStateManager()
    ps.update(5, 3, 0, 0, 10, 10, 1000, is_transactional=True)       # open transaction, epoch 3
    assert ps.has_ongoing_txn(5, 3) and not ps.has_ongoing_txn(5, 4)
    assert ps.check_marker(5, 3, 0, transaction_version=0) == 0       # TV1: the batches' epoch
    assert ps.check_marker(5, 3, 0, transaction_version=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert ps.check_marker(5, 2, 0, transaction_version=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert ps.check_marker(5, 4, 0, transaction_version=2) == 0       # TV2: the bumped epoch
    ps.complete_txn(5, 4, True, 11, 1000)
    assert not ps.has_ongoing_txn(5, 4)
    assert ps.check_marker(5, 4, 0, transaction_version=2) == 0       # a retried marker: accepted
