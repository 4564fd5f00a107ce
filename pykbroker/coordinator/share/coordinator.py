"""The share coordinator (KIP-932): durable share-partition state on ``__share_group_state``.

As Kafka's share-coordinator: the state of one share partition (group, topic id, partition) is
its state epoch, leader epoch, start offset (SPSO) and the in-flight state batches (first and last
offset, delivery state, delivery count), keyed by ``group:topicId:partition``; the key's Java
string hash picks the ``__share_group_state`` partition (``share.coordinator.state.topic.num.partitions``,
50), a shard of the coordinator runtime (one writer per partition, answered once committed,
replayed when this broker becomes its leader).  The topic is created on first use.

Operations (the share coordinator APIs 83-87, and the in-process persister of
pykbroker/share/manager.py on this broker):
- initialize: a new state epoch and start offset, no batches.  A state epoch below the stored one:
  FENCED_STATE_EPOCH.
- write: the partition leader's new state.  A leader epoch below the stored one:
  FENCED_LEADER_EPOCH; a state epoch below it: FENCED_STATE_EPOCH.
- read: the state (and a higher leader epoch is recorded, FENCED_LEADER_EPOCH for a lower one);
  a partition with no state is INVALID_REQUEST "Read operation on uninitialized share partition
  not allowed." (Kafka 4.4's answer).
- read summary: the same without batches (and without touching the leader epoch); no state:
  start offset -1, no error.
- delete: the state is removed (tombstones).
pykbroker always writes ShareSnapshot records (the whole state; Kafka writes ShareUpdate deltas
between snapshots); both kinds are replayed, so a log Kafka wrote loads here too.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    import trio

from ...protocol.errors import ErrorCode as E
from ...storage.log_validator import validate_produce_records
from ..group.classic import Future
from ..internal_log import InternalTopicLog
from ..runtime import CoordinatorRuntime
from ..service import CoordinatorService
from . import records as R

log = logging.getLogger("pykbroker.share.coordinator")


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ShareState:
    __slots__ = ("snapshot_epoch", "state_epoch", "leader_epoch", "start_offset", "create_ts", "write_ts",
                 "batches", "delivery_complete_count")

    def __init__(self, snapshot_epoch: int = 0, state_epoch: int = 0, leader_epoch: int = -1, start_offset: int = -1,
                 create_ts: int = 0, write_ts: int = 0, batches: Iterable[tuple] = (),
                 delivery_complete_count: int = -1) -> None:
        self.snapshot_epoch, self.state_epoch, self.leader_epoch = snapshot_epoch, state_epoch, leader_epoch
        self.start_offset, self.create_ts, self.write_ts = start_offset, create_ts, write_ts
        self.batches = list(batches)
        self.delivery_complete_count = delivery_complete_count


def merge_batches(old: Iterable[tuple], new: Iterable[tuple], start_offset: int) -> list:
    """A ShareUpdate's batches over the snapshot's: the new ones replace the offsets they cover;
    everything below the start offset is gone."""
    out: list = []
    for f, l, s, c in old:
        pieces = [(f, l)]
        for nf, nl, _, _ in new:
            nxt = []
            for a, b in pieces:
                if nl < a or nf > b:
                    nxt.append((a, b))
                    continue
                if a < nf:
                    nxt.append((a, nf - 1))
                if nl < b:
                    nxt.append((nl + 1, b))
            pieces = nxt
        out.extend((a, b, s, c) for a, b in pieces)
    out.extend(new)
    res = []
    for f, l, s, c in sorted(out):
        if l < start_offset:
            continue
        res.append((max(f, start_offset), l, s, c))
    return res


class ShareShard:
    def __init__(self, sc: "ShareCoordinator", partition: int) -> None:
        self.sc = sc
        self.partition = partition
        self.states: dict[tuple, ShareState] = {}

    def replay(self, key: bytes, value: bytes | None) -> None:
        kind, g, tid, p = R.parse_key(key)
        k = (g, tid, p)
        if value is None:
            if kind == R.SNAPSHOT:
                self.states.pop(k, None)
            return
        v = R.parse_value(kind, value)
        if kind == R.SNAPSHOT:
            self.states[k] = ShareState(v["snapshot_epoch"], v["state_epoch"], v["leader_epoch"], v["start_offset"],
                                        v["create_timestamp"], v["write_timestamp"], v["state_batches"],
                                        v["delivery_complete_count"])
        elif kind == R.UPDATE:
            st = self.states.get(k)
            if st is None:
                return   # an update without its snapshot (Kafka ignores it too)
            if v["leader_epoch"] != -1:
                st.leader_epoch = v["leader_epoch"]
            if v["start_offset"] != -1:
                st.start_offset = v["start_offset"]
            st.batches = merge_batches(st.batches, v["state_batches"], st.start_offset)
            st.delivery_complete_count = v["delivery_complete_count"]

    def loaded(self) -> None:
        self.sc.states.update(self.states)

    def unloaded(self) -> None:
        for k in [k for k in self.sc.states if self.sc.partition_for(*k) == self.partition]:
            del self.sc.states[k]


class ShareStateLog(InternalTopicLog):
    """``__share_group_state`` in this broker's own log (the runtime's PartitionWriter)."""

    TOPIC = R.SHARE_STATE_TOPIC
    # Kafka's share-group state topic: compacted, internal, compression by the producer
    CONFIGS = {"cleanup.policy": "delete,compact", "compression.type": "producer"}

    async def append(self, partition: int, batch: bytes) -> int:
        p = self._leader_for_write(partition)
        now = _wall_ms()
        p.append_records_as_leader(validate_produce_records(batch, p.config["max.message.bytes"], now_ms=now), now)
        end = p.log_end_offset
        if p.needs_flush():
            await p.flush()
        return end


class ShareCoordinator(CoordinatorService):
    """Handed its dependencies: ``config`` and ``log`` (:class:`ShareStateLog`, the
    ``__share_group_state`` partitions)."""

    # __share_group_state at creation
    REPLICATION_FACTOR_CONFIG = "share.coordinator.state.topic.replication.factor"
    SEGMENT_BYTES_CONFIG = "share.coordinator.state.topic.segment.bytes"
    MIN_ISR_CONFIG = "share.coordinator.state.topic.min.isr"

    def __init__(self, config: Any, log_: Any, leads_every_partition: bool = True,
                 now_ms: Callable[[], int] = _wall_ms) -> None:
        super().__init__(config, log_, leads_every_partition, config["share.coordinator.state.topic.num.partitions"])
        self.now_ms = now_ms
        self.states: dict[tuple, ShareState] = {}   # (group, topic id, partition) of loaded shards

    async def startup(self, nursery: trio.Nursery) -> None:
        # Kafka's share coordinator runtime times writes out after share.coordinator.write.timeout.ms
        self.runtime = CoordinatorRuntime(R.SHARE_STATE_TOPIC, self.log, lambda p: ShareShard(self, p), nursery,
                                          now_ms=self.now_ms,
                                          write_timeout_ms=self.config_value("share.coordinator.write.timeout.ms", None))
        await self._load_existing_topic()

    async def shutdown(self) -> None:
        pass

    def _log_loaded(self, seconds: float) -> None:
        log.info("loaded the state of %d share partition(s) from %s", len(self.states), R.SHARE_STATE_TOPIC)

    def partition_for(self, group_id: str, topic_id: bytes, partition: int) -> int:
        return R.partition_for(group_id, topic_id, partition, self.num_partitions)

    def coordinator_error(self, group_id: str, topic_id: bytes, partition: int) -> int:
        assert self.runtime is not None     # set in startup
        return self.runtime.status(self.partition_for(group_id, topic_id, partition))

    # -- operations: each returns (error code, message) or a Future of it once written ----------
    def _write(self, k: tuple, st: ShareState | None) -> Future:
        g, tid, p = k
        part = self.partition_for(g, tid, p)
        recs: list[tuple[bytes, bytes | None]]
        if st is None:
            recs = [(R.key(R.SNAPSHOT, g, tid, p), None), (R.key(R.UPDATE, g, tid, p), None)]
        else:
            recs = [(R.key(R.SNAPSHOT, g, tid, p),
                     R.snapshot_value(st.snapshot_epoch, st.state_epoch, st.leader_epoch, st.start_offset,
                                      st.create_ts, st.write_ts, st.batches, st.delivery_complete_count))]
        fut = Future()

        def done(code: int) -> None:
            if not code:
                if st is None:
                    self.states.pop(k, None)
                else:
                    self.states[k] = st
            fut.set(int(code))
        assert self.runtime is not None     # set in startup
        self.runtime.write(part, recs, done)
        return fut

    def initialize(self, group_id: str, topic_id: bytes, partition: int, state_epoch: int,
                   start_offset: int) -> Future:
        k = (group_id, topic_id, partition)
        old = self.states.get(k)
        if old is not None and state_epoch < old.state_epoch:
            return Future(int(E.FENCED_STATE_EPOCH), done=True)
        now = self.now_ms()
        st = ShareState(0 if old is None else old.snapshot_epoch + 1, state_epoch,
                        -1 if old is None else old.leader_epoch, start_offset, now, now, ())
        return self._write(k, st)

    def write(self, group_id: str, topic_id: bytes, partition: int, state_epoch: int, leader_epoch: int,
              start_offset: int, batches: Iterable[tuple], delivery_complete_count: int = -1) -> Future:
        k = (group_id, topic_id, partition)
        old = self.states.get(k)
        if old is not None:
            if leader_epoch != -1 and leader_epoch < old.leader_epoch:
                return Future(int(E.FENCED_LEADER_EPOCH), done=True)
            if state_epoch < old.state_epoch:
                return Future(int(E.FENCED_STATE_EPOCH), done=True)
        now = self.now_ms()
        st = ShareState(0 if old is None else old.snapshot_epoch + 1, state_epoch,
                        leader_epoch if leader_epoch != -1 or old is None else old.leader_epoch,
                        start_offset if start_offset != -1 or old is None else old.start_offset,
                        now if old is None else old.create_ts, now,
                        merge_batches(old.batches if old is not None else [], batches,
                                      start_offset if start_offset != -1 else (old.start_offset if old else -1)),
                        delivery_complete_count)
        return self._write(k, st)

    def read(self, group_id: str, topic_id: bytes, partition: int,
             leader_epoch: int = -1) -> tuple[int, ShareState | None, Future | None]:
        """-> (error code, ShareState or None, Future or None: the leader-epoch write to await)."""
        k = (group_id, topic_id, partition)
        st = self.states.get(k)
        if st is None:
            return int(E.INVALID_REQUEST), None, None
        if leader_epoch != -1 and leader_epoch < st.leader_epoch:
            return int(E.FENCED_LEADER_EPOCH), None, None
        if leader_epoch > st.leader_epoch:
            new = ShareState(st.snapshot_epoch + 1, st.state_epoch, leader_epoch, st.start_offset, st.create_ts,
                             self.now_ms(), st.batches, st.delivery_complete_count)
            return 0, new, self._write(k, new)
        return 0, st, None

    def summary(self, group_id: str, topic_id: bytes, partition: int) -> ShareState | None:
        return self.states.get((group_id, topic_id, partition))

    def delete(self, group_id: str, topic_id: bytes, partition: int) -> Future:
        k = (group_id, topic_id, partition)
        if k not in self.states:
            return Future(0, done=True)
        return self._write(k, None)
