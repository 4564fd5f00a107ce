"""A coordinator's internal topic in this broker's own log: the runtime's PartitionWriter.

``__consumer_offsets`` (the group coordinator) and ``__transaction_state`` (the transaction
coordinator) are read and written the same way: through the replica manager's partitions, which
this broker leads while it coordinates their shards.  Subclasses name the topic and its configs
and say how a batch is appended (validation and fsync policy differ).

Every coordinator write is an ``acks=all`` append, as Kafka's coordinators append with
``requiredAcks = -1`` (the group coordinator's ``offsets.commit.required.acks`` default, the
transaction log's enforced value): refused with NOT_ENOUGH_REPLICAS when the partition's ISR is
below its ``min.insync.replicas`` (:meth:`InternalTopicLog._leader_for_write`), and failed with
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it before the high watermark covered
the write (:meth:`InternalTopicLog.wait_for_high_watermark`).  A coordinator whose ISR is the
leader alone (the others cut off or dead) therefore acknowledges nothing that a second replica
does not hold."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, AsyncIterator

import trio

from ..protocol.errors import ErrorCode as E, KafkaError
from ..protocol.records import iter_batches

if TYPE_CHECKING:
    from ..cluster.partition import Partition
    from ..cluster.replica_manager import ReplicaManager

# Bytes read from the log per step while a shard loads: large enough to amortize the calls,
# small enough that one step does not hold the event loop for long.
READ_CHUNK = 1 << 20


class InternalTopicLog:
    TOPIC = ""
    # the topic's configs at creation (cleanup.policy=compact and its codec); segment.bytes is added
    CONFIGS: dict = {}

    def __init__(self, metadata: Any, replica_manager: ReplicaManager, controller: Any) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.controller = controller

    def exists(self) -> bool:
        md = self.metadata
        return md is not None and md.get(self.TOPIC) is not None

    def num_partitions(self) -> int:
        return self.metadata.get(self.TOPIC).num_partitions

    def leader_epoch(self, partition: int) -> int:
        p = self.replica_manager.get_partition(self.TOPIC, partition)
        return getattr(p, "leader_epoch", 0) if p is not None else 0

    async def create(self, n: int, rf: int, segment_bytes: int, configs: dict | None = None) -> None:
        """Create the topic with its :attr:`CONFIGS`, ``segment.bytes`` and ``configs`` (the
        coordinator's broker-config-driven ones, e.g. ``min.insync.replicas``)."""
        configs = dict(self.CONFIGS, **{"segment.bytes": str(segment_bytes)}, **(configs or {}))
        try:
            await self.controller.create_topic(self.TOPIC, n, rf, configs, internal=True)
        except Exception as e:
            if getattr(e, "code", None) != E.TOPIC_ALREADY_EXISTS:
                raise

    def _partition(self, partition: int) -> Partition:
        p = self.replica_manager.get_partition(self.TOPIC, partition)
        if p is None:
            raise KafkaError(E.COORDINATOR_NOT_AVAILABLE, "%s-%d is not open" % (self.TOPIC, partition))
        return p  # type: ignore[return-value]  # an OfflinePartition raises on use like a missing one

    def _leader_for_write(self, partition: int) -> Partition:
        """The partition, to append to as its leader with acks=all: Kafka's
        appendRecordsToLeader refuses before appending when the ISR is smaller than
        ``min.insync.replicas`` (the topic's, else the broker default; capped by the replica
        count, Kafka's effectiveMinIsr)."""
        p = self._partition(partition)
        p.check_min_isr_for_acks_all()
        return p

    async def append(self, partition: int, batch: bytes) -> int:
        raise NotImplementedError

    async def wait_for_high_watermark(self, partition: int, offset: int) -> None:
        p = self._partition(partition)
        code = await p.wait_for_high_watermark(offset)
        if code == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            # the HW covers the write only because the ISR shrank below min.insync.replicas
            # (acks=all's answer in Kafka's DelayedProduce): not acknowledged
            raise KafkaError(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, "%s-%d: ISR %s shrank below min.insync.replicas"
                             % (self.TOPIC, partition, list(p.isr)))
        if code or p.high_watermark < offset:
            # leadership lost (or the partition failed) before the write was committed
            raise KafkaError(E.NOT_COORDINATOR, "%s-%d went away" % (self.TOPIC, partition))

    async def read(self, partition: int) -> AsyncIterator[bytes]:
        """Every batch of the partition, from the log start to the log end, as bytes."""
        p = self._partition(partition)
        lg = p.log
        offset = lg.log_start_offset
        while offset < lg.log_end_offset:
            regions = lg.read(offset, READ_CHUNK, None, True, whole_batches=True)
            if not regions:
                break
            data = b"".join([os.pread(r.fd, r.length, r.position) for r in regions])
            nxt = offset
            for h in iter_batches(data):
                nxt = h.next_offset
            yield data
            if nxt <= offset:
                break
            offset = nxt
            await trio.sleep(0)
