"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

Per producer id we keep its epoch and the metadata of its last 5 batches
(Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN = 5, which is also the
client's max.in.flight.requests.per.connection limit for idempotence).

Rules of :meth:`check` (source of truth: Kafka 4.x ProducerAppendInfo
.checkProducerEpoch/.checkSequence and UnifiedLog.analyzeAndValidateProducerState):

1. same epoch and a (first seq, last seq) equal to one of the 5 retained
   batches -> duplicate: the original offsets are returned, nothing appended;
2. epoch lower than the current one -> INVALID_PRODUCER_EPOCH (47).  Since
   Kafka 2.7 the produce path answers this instead of PRODUCER_FENCED (90)
   so that clients can abort and retry;
3. a new (higher) epoch must start at sequence 0, else
   OUT_OF_ORDER_SEQUENCE_NUMBER (45) -- unless the producer has no known
   epoch;
4. same epoch: first seq must be last seq + 1 (wrapping INT32_MAX -> 0),
   else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
5. an unknown producer (no state, e.g. after retention or DeleteRecords
   removed it) is accepted at any sequence.  Kafka stopped answering
   UNKNOWN_PRODUCER_ID (59) here (KIP-360, Kafka 2.5+).
6. a non-transactional batch from a producer with an open transaction ->
   INVALID_TXN_STATE (48), as Kafka's ProducerAppendInfo.
7. a batch without a sequence (base sequence -1, only written by the broker
   itself: transactional offset commits of the group coordinator, Kafka's
   AppendOrigin.COORDINATOR) is checked for its epoch only.

Transactions (Kafka's ProducerStateManager ongoing/unreplicated transactions):
the first transactional batch of a producer opens a transaction at its base
offset (``txn_first_offset``, also kept in ``ongoing``); the COMMIT/ABORT
marker (:meth:`complete_txn`) closes it.  A completed transaction stays
*unreplicated* until the high watermark passes its marker, and the first
offset of any open or unreplicated transaction is the *first unstable offset*
that bounds the last stable offset (:meth:`first_unstable_offset`).
A marker with an older producer epoch -> INVALID_PRODUCER_EPOCH; one with an
older coordinator epoch -> TRANSACTION_COORDINATOR_FENCED; a newer epoch (the
coordinator bumped it when fencing or timing out) becomes the producer's epoch.

Log start offset and truncation (Kafka 2.4+ / 4.x, ``ProducerStateManager.truncateAndReload``
and ``onLogStartOffsetIncremented``): when retention or DeleteRecords moves the log start
offset, producers are *not* removed from the in-memory map, even when every batch they wrote
now lies below the new start (old Kafka evicted them, which made idle producers of repartition
topics fail with UNKNOWN_PRODUCER_ID, KAFKA-7190); they go only through
``producer.id.expiration.ms``.  Snapshots at or below the log start are deleted whenever the
state is rebuilt (on truncation and at load), so after a restart or a truncation a producer known
only from deleted data is forgotten and then accepted at any sequence (rule 5).

Snapshot file ``{offset:020d}.snapshot`` (our own format, big endian;
``offset`` = log end offset the snapshot covers)::

    magic   b"PKPS"
    version int16 = 1
    crc     uint32   CRC-32C of everything after this field
    count   int32    producers
    per producer:
        producer_id int64, epoch int16, last_timestamp int64,
        txn_first_offset int64 (-1: none), n_batches int8,
        n_batches x (first_seq int32, last_seq int32,
                     first_offset int64, last_offset int64, timestamp int64)

A snapshot with a bad magic/version/CRC is ignored (state is rebuilt from
the log instead).  After loading a snapshot the log is replayed from its
offset by reading *batch headers only*: producerId, epoch, baseSequence and
lastOffsetDelta are all in the 61-byte header.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from typing import NamedTuple, Optional, Union

from pykbroker.protocol.errors import ErrorCode
from pykbroker.protocol import records as _records
from pykbroker.protocol.records import INT32_MAX, increment_sequence
from .fs import FileSystem, REAL_FS

__all__ = [
    "ProducerStateManager", "ProducerStateEntry", "BatchMetadata",
    "OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH", "APPEND",
]

log = logging.getLogger(__name__)



# the outcomes of a sequence check are Kafka's error codes (or APPEND)
OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
INVALID_PRODUCER_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH
APPEND = "append"
NUM_BATCHES_TO_RETAIN = 5
NO_EPOCH = -1

_SNAP_MAGIC = b"PKPS"
_SNAP_VERSION = 1
_SNAP_HDR = struct.Struct(">4shI")
_I32 = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhqqb")
_BATCH = struct.Struct(">iiqqq")
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")


class BatchMetadata(NamedTuple):
    """One of a producer's last appended batches (Kafka's BatchMetadata), never changed once
    made; in a snapshot its fields in this order (``_BATCH``)."""
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateEntry:
    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp", "txn_first_offset",
                 "coordinator_epoch")

    def __init__(self, producer_id: int, epoch: int = NO_EPOCH) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = -1
        self.txn_first_offset = -1
        self.coordinator_epoch = -1   # of the last marker (in memory only: -1 after a restart)

    def copy(self) -> "ProducerStateEntry":
        e = ProducerStateEntry(self.producer_id, self.epoch)
        e.batches.extend(self.batches)
        e.last_timestamp = self.last_timestamp
        e.txn_first_offset = self.txn_first_offset
        e.coordinator_epoch = self.coordinator_epoch
        return e

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> Optional[BatchMetadata]:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


CheckResult = Union[str, tuple, int]


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int      # the marker's offset
    is_aborted: bool


class ProducerStateManager:
    def __init__(self, dir: Optional[str] = None, fs: FileSystem = REAL_FS) -> None:
        self.dir = dir
        self.fs = fs
        self._producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}           # producer id -> first offset of its open txn
        self.unreplicated: list[tuple[int, int]] = []  # (first offset, marker offset), completed

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        return self._producers

    @producers.setter
    def producers(self, value: dict) -> None:
        self._producers = value
        self.ongoing = {pid: e.txn_first_offset for pid, e in value.items() if e.txn_first_offset >= 0}
        self.unreplicated = []

    # ------------------------------------------------------ transactions
    def first_unstable_offset(self, high_watermark: int) -> Optional[int]:
        """Lowest first offset of an open transaction or of a completed one whose marker is not
        below the high watermark yet; None when every transaction is stable."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= high_watermark]
        best = None
        if self.ongoing:
            best = min(self.ongoing.values())
        for first, _ in self.unreplicated:
            if best is None or first < best:
                best = first
        return best

    def has_ongoing_txn(self, producer_id: int, epoch: int) -> bool:
        """Kafka's hasOngoingTransaction(producerId, producerEpoch): the producer has an open
        transaction here, written with this epoch.  A transaction version 2 producer's next
        transaction comes with the bumped epoch and may arrive before the previous one's
        marker: that is a new transaction, to be added (and refused until the marker is in)."""
        e = self._producers.get(producer_id)
        return e is not None and e.txn_first_offset >= 0 and e.epoch == epoch

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> int:
        """0 or the error a marker gets (Kafka's appendEndTxnMarker checks).  A transaction
        version 2 marker carries the epoch its EndTxn bumped, so it must be above the epoch of
        the producer's batches (KIP-1228); the same epoch is only accepted as the retry of a
        marker already written (no transaction open), as Kafka allows."""
        e = self._producers.get(producer_id)
        if e is None:
            return 0
        if transaction_version >= 2:
            if epoch < e.epoch or (epoch == e.epoch and e.txn_first_offset >= 0 and epoch != 32767):
                return ErrorCode.INVALID_PRODUCER_EPOCH
        elif epoch < e.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < e.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return 0

    def complete_txn(self, producer_id: int, epoch: int, commit: bool, marker_offset: int,
                     timestamp: int, coordinator_epoch: int = -1) -> CompletedTxn:
        """Apply a COMMIT/ABORT marker written at ``marker_offset`` (checked beforehand)."""
        e = self._producers.get(producer_id)
        if e is None:
            e = self._producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        if epoch != e.epoch:
            e.batches.clear()      # a bumped epoch restarts the sequence space
            e.epoch = epoch
        first = e.txn_first_offset if e.txn_first_offset >= 0 else marker_offset
        e.txn_first_offset = -1
        e.coordinator_epoch = max(e.coordinator_epoch, coordinator_epoch)
        e.last_timestamp = max(e.last_timestamp, timestamp)
        self.ongoing.pop(producer_id, None)
        if first < marker_offset:
            self.unreplicated.append((first, marker_offset))
        return CompletedTxn(producer_id, first, marker_offset, not commit)

    # ------------------------------------------------------------- checks
    def check(self, producer_id: int, epoch: int, base_seq: int, last_seq: int,
              staged: Optional[dict] = None, is_transactional: Optional[bool] = None) -> CheckResult:
        """``'append'``, ``('duplicate', first_offset, last_offset,
        timestamp)`` or a Kafka error code (see module doc).  ``staged``
        overlays entries updated earlier in the same append."""
        cur = None
        if staged is not None:
            cur = staged.get(producer_id)
        committed = self.producers.get(producer_id)
        if committed is not None:
            dup = committed.find_duplicate(epoch, base_seq, last_seq)
            if dup is not None:
                return ("duplicate", dup.first_offset, dup.last_offset, dup.timestamp)
        if cur is None:
            cur = committed
        if cur is None or cur.epoch == NO_EPOCH:
            return APPEND            # unknown producer: any sequence (rule 5)
        if epoch < cur.epoch:
            return INVALID_PRODUCER_EPOCH
        if is_transactional is False and cur.txn_first_offset >= 0:
            return ErrorCode.INVALID_TXN_STATE   # rule 6
        if base_seq < 0:
            return APPEND            # rule 7: broker-written, epoch checked only
        if epoch != cur.epoch:
            return APPEND if base_seq == 0 else OUT_OF_ORDER_SEQUENCE_NUMBER
        # no retained batch (e.g. epoch bumped by a marker): last seq is -1,
        # so the next batch must start at 0, as in Kafka
        if not _in_sequence(cur.last_seq, base_seq):
            return OUT_OF_ORDER_SEQUENCE_NUMBER
        return APPEND

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int,
               is_transactional: bool = False, staged: Optional[dict] = None) -> None:
        """Record an appended batch (also used when replaying the log)."""
        target = staged if staged is not None else self.producers
        e = target.get(producer_id)
        if e is None:
            base = self.producers.get(producer_id) if staged is not None else None
            e = base.copy() if base is not None else ProducerStateEntry(producer_id)
            target[producer_id] = e
        if epoch != e.epoch:
            e.batches.clear()      # a new epoch restarts the sequence space
            e.epoch = epoch
        if first_seq >= 0:
            e.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        e.last_timestamp = max(e.last_timestamp, timestamp)
        if is_transactional and e.txn_first_offset < 0:
            e.txn_first_offset = first_offset

    def commit(self, staged: dict) -> None:
        self._producers.update(staged)
        for pid, e in staged.items():
            if e.txn_first_offset >= 0 and pid not in self.ongoing:
                self.ongoing[pid] = e.txn_first_offset

    def update_from_header(self, h: _records.BatchHeader, control_type: Optional[int] = None) -> Optional[CompletedTxn]:
        """Replay one batch header (no record decoding).  A control batch needs its record's
        ``control_type`` (records.CONTROL_COMMIT / CONTROL_ABORT); returns the transaction a
        marker completed."""
        if h.producer_id < 0:
            return None
        if h.is_control:
            if control_type is None:
                return None
            return self.complete_txn(h.producer_id, h.producer_epoch, control_type == _records.CONTROL_COMMIT,
                                     h.base_offset, h.max_timestamp)
        self.update(h.producer_id, h.producer_epoch, h.base_sequence,
                    increment_sequence(h.base_sequence, h.last_offset_delta) if h.base_sequence >= 0 else -1,
                    h.base_offset, h.last_offset, h.max_timestamp, h.is_transactional)
        if h.is_transactional and h.producer_id not in self.ongoing:
            e = self._producers.get(h.producer_id)
            if e is not None and e.txn_first_offset >= 0:
                self.ongoing[h.producer_id] = e.txn_first_offset
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers idle for longer than producer.id.expiration.ms."""
        dead = [pid for pid, e in self.producers.items()
                if e.txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in dead:
            del self.producers[pid]
        return len(dead)

    def clear(self) -> None:
        self.producers = {}

    # ---------------------------------------------------------- snapshots
    def snapshot_path(self, offset: int) -> str:
        assert self.dir is not None   # snapshots are taken and read only for a log on disk
        return os.path.join(self.dir, f"{offset:020d}.snapshot")

    def list_snapshots(self) -> list[int]:
        if self.dir is None or not self.fs.exists(self.dir):
            return []
        out = []
        for name in self.fs.listdir(self.dir):
            m = _SNAPSHOT_RE.match(name)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def encode(self) -> bytes:
        body = bytearray(_I32.pack(len(self.producers)))
        for pid, e in sorted(self.producers.items()):
            body += _PRODUCER.pack(pid, e.epoch, e.last_timestamp, e.txn_first_offset, len(e.batches))
            for b in e.batches:
                body += _BATCH.pack(*b)
        return _SNAP_HDR.pack(_SNAP_MAGIC, _SNAP_VERSION, _records.crc32c(bytes(body))) + bytes(body)

    @staticmethod
    def decode(data: bytes) -> dict[int, ProducerStateEntry]:
        if len(data) < _SNAP_HDR.size + 4:
            raise ValueError("snapshot too short")
        magic, version, crc = _SNAP_HDR.unpack_from(data, 0)
        if magic != _SNAP_MAGIC or version != _SNAP_VERSION:
            raise ValueError("bad snapshot magic/version")
        body = data[_SNAP_HDR.size:]
        if _records.crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        (count,) = _I32.unpack_from(body, 0)
        pos = 4
        out = {}
        for _ in range(count):
            pid, epoch, last_ts, txn, nb = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            e = ProducerStateEntry(pid, epoch)
            e.last_timestamp, e.txn_first_offset = last_ts, txn
            for _ in range(nb):
                e.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            out[pid] = e
        if pos != len(body):
            raise ValueError("trailing bytes in snapshot")
        return out

    def take_snapshot(self, offset: int, fsync: bool = True, staged: list | None = None) -> None:
        """``staged``: see FileSystem.write_file_atomic (a clean shutdown's deferred sync)."""
        if self.dir is None:
            return
        self.fs.write_file_atomic(self.snapshot_path(offset), self.encode(), fsync=fsync, staged=staged)

    def load_latest_snapshot(self, max_offset: int) -> Optional[int]:
        """Load the newest readable snapshot with offset <= max_offset.
        Returns its offset, or None (state cleared) when there is none."""
        for off in reversed(self.list_snapshots()):
            if off > max_offset:
                continue
            try:
                self.producers = self.decode(self.fs.read_file(self.snapshot_path(off)))
                return off
            except (ValueError, struct.error, OSError) as e:
                log.warning("ignoring unreadable producer snapshot %s: %s", self.snapshot_path(off), e)
                self.fs.remove(self.snapshot_path(off))
        self.producers = {}
        return None

    def delete_snapshots_above(self, offset: int) -> None:
        for off in self.list_snapshots():
            if off > offset:
                self.fs.remove(self.snapshot_path(off))

    def delete_snapshots_at_or_below(self, offset: int) -> None:
        for off in self.list_snapshots():
            if off <= offset:
                self.fs.remove(self.snapshot_path(off))

    def delete_snapshots_below(self, offset: int, keep_latest: int = 2) -> None:
        """Retention: drop snapshots older than ``offset``, keeping a few."""
        snaps = self.list_snapshots()
        for off in snaps[:-keep_latest] if keep_latest else snaps:
            if off < offset:
                self.fs.remove(self.snapshot_path(off))
