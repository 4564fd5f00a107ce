"""Writing ``__transaction_state`` on this broker: the partitions' writer for the coordinator
runtime (:class:`TxnStateLog`) and Kafka's mapping of a failed write to the error the
coordinator answers with (:func:`append_error`).  The record layout is state_log.py's; a
partition's replay is the coordinator's ``TxnShard``."""
from __future__ import annotations

import time

from ...protocol.errors import ErrorCode as E
from ...storage.log_validator import validate_produce_records
from ..internal_log import InternalTopicLog
from .state_log import TRANSACTION_STATE_TOPIC


def wall_ms() -> int:
    return int(time.time() * 1000)


def append_error(code: int) -> int:
    """The error a failed ``__transaction_state`` write answers with (Kafka's mapping in
    TransactionStateManager.appendTransactionToLog)."""
    code = int(code)
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return int(E.COORDINATOR_NOT_AVAILABLE)
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return int(E.NOT_COORDINATOR)
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return int(E.UNKNOWN_SERVER_ERROR)
    return code


class TxnStateLog(InternalTopicLog):
    """``__transaction_state`` in this broker's own log (the runtime's PartitionWriter)."""

    TOPIC = TRANSACTION_STATE_TOPIC
    # Kafka's transaction state topic (4.4's TransactionCoordinator.transactionStateTopicConfigs,
    # 3.9's transactionTopicConfigs): compacted, uncompressed, never an unclean leader (a
    # replica missing committed transaction states must not lead); min.insync.replicas is
    # transaction.state.log.min.isr (the coordinator's MIN_ISR_CONFIG), segment.bytes its own
    CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed",
               "unclean.leader.election.enable": "false"}

    async def append(self, partition: int, batch: bytes) -> int:
        p = self._leader_for_write(partition)
        now = wall_ms()
        validated = validate_produce_records(batch, p.config["max.message.bytes"], now_ms=now)
        p.append_records_as_leader(validated, now)
        end = p.log_end_offset
        # Transaction state must survive a crash before the client hears of it (a PrepareCommit
        # acknowledged and then lost would lose a commit): fsync each write.
        await p.flush()
        return end
