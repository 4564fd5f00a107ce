"""The owner of every share partition and share session on this broker (Kafka's
SharePartitionManager and ShareSessionCache).

Handed its dependencies: ``config`` (key -> value), the ``replica_manager`` (the partitions whose
logs it reads) and the ``metadata_cache`` (topic ids).  ShareFetch (k78) and ShareAcknowledge
(k79) call in between awaits; only this object mutates share state.

Share sessions (KIP-932): one per (group, member), opened by ShareSessionEpoch 0 with the
partitions of the request, grown by later requests' partitions and shrunk by their forgotten
topics; each request must carry the epoch the session expects (then 1, 2, ..., wrapping to 1
after INT32_MAX): a missing session is SHARE_SESSION_NOT_FOUND, another epoch
INVALID_SHARE_SESSION_EPOCH.  Epoch -1 closes the session after its acknowledgements and releases
the member's acquired records.  A new epoch 0 for a member that has a session replaces it (its
records are released first).  A session ends with the client connection that opened it (its
records are released).  At most ``group.share.max.share.sessions`` sessions
(SHARE_SESSION_LIMIT_REACHED).

Share partitions are created on a group's first fetch of a partition and start where the
group's ``share.auto.offset.reset`` says (a GROUP config, pykbroker/config/group.py: latest =
the high watermark, Kafka's default; earliest = the log start offset; by_duration:D = the first
record at or after now - D), or where AlterShareGroupOffsets put them.  Acquisition locks last
the group's ``share.record.lock.duration.ms``.  Reads are Fetch's:
whole batches as file regions (sent with sendfile), from the first offset the partition can
deliver; only batch headers are read to learn which offsets they cover.
"""
from __future__ import annotations

import logging

import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Optional, Union

import trio

from ..cluster.delayed import Waiters
from ..protocol.codec import Chunks
from ..protocol.errors import ErrorCode as E
from .partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, InvalidRecordState, Range, SharePartition

if TYPE_CHECKING:   # annotations only: the broker wires these in (no import at start-up)
    from ..cluster.metadata_cache import MetadataCache
    from ..cluster.partition import Partition
    from ..cluster.replica_manager import ReplicaManager
    from ..config import BrokerConfig
    from ..config.group import GroupConfigView
    from ..coordinator.share.coordinator import ShareCoordinator

log = logging.getLogger("pykbroker.share")

INT32_MAX = 2**31 - 1

# Kafka's RecordState ids as the share coordinator stores them; an ACQUIRED range is stored as
# AVAILABLE (a restart ends every acquisition lock; its delivery count is kept).
STATE_IDS = {AVAILABLE: 0, ACQUIRED: 0, ACKNOWLEDGED: 2, ARCHIVED: 4}
STATES_BY_ID = {0: AVAILABLE, 1: AVAILABLE, 2: ACKNOWLEDGED, 4: ARCHIVED}


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1


class ShareSession:
    __slots__ = ("group_id", "member_id", "epoch", "partitions", "connection")

    def __init__(self, group_id: str, member_id: str, connection: Any = None) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.connection = connection        # the client connection that opened it
        self.epoch = 1                      # the epoch the next request must carry
        self.partitions: dict = {}          # (topic id, partition) -> None, in arrival order


class SharePartitionManager:
    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 persister: Optional[ShareCoordinator] = None, group_configs: Optional[GroupConfigView] = None,
                 now_ms: Optional[Callable[[], int]] = None,
                 read_group_configs: Optional[Callable[[str], Awaitable[Any]]] = None) -> None:
        self.rm = replica_manager
        # the controller's authoritative read of a group's configs (ZooKeeper: the znode), made
        # before a share partition's start offset is decided: a share.auto.offset.reset set
        # through another broker just before the group's first fetch may not have reached this
        # broker's view yet, and the start offset, once initialized, stays
        self._read_group_configs = read_group_configs
        # the groups' dynamic configs (pykbroker/config/group.py GroupConfigView; None: the broker's
        # defaults): share.auto.offset.reset and share.record.lock.duration.ms
        self.group_configs = group_configs
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.metadata = metadata_cache
        # the share coordinator (coordinator/share/coordinator.py), None: state in memory only
        self.persister = persister
        self._loading: dict[tuple, trio.Event] = {}
        # ShareFetches parked for records to acquire, woken when some become available again (a
        # release, a closed session), as Kafka completes its delayed share fetches
        self.waiters = Waiters()
        self.lock_ms = config["group.share.record.lock.duration.ms"]
        self.delivery_limit = config["group.share.delivery.count.limit"]
        self.max_locks = config["group.share.partition.max.record.locks"]
        self.max_sessions = config["group.share.max.share.sessions"]
        self.partitions: dict[tuple, SharePartition] = {}   # (group, topic id, partition) -> state
        self.sessions: dict[tuple, ShareSession] = {}       # (group, member) -> session

    # -- sessions ------------------------------------------------------------------------------
    def session(self, group_id: str, member_id: str, epoch: int, acknowledge_only: bool = False,
                connection: Any = None) -> tuple[Optional[ShareSession], int]:
        """-> (session or None, error code).  Validates and moves the epoch on."""
        key = (group_id, member_id)
        s = self.sessions.get(key)
        if epoch == 0:
            if acknowledge_only:
                return None, E.INVALID_SHARE_SESSION_EPOCH   # ShareAcknowledge never opens one
            if s is not None:
                self.close(s)
            elif len(self.sessions) >= self.max_sessions:
                return None, E.SHARE_SESSION_LIMIT_REACHED
            s = self.sessions[key] = ShareSession(group_id, member_id, connection)
            return s, 0
        if s is None:
            return None, E.SHARE_SESSION_NOT_FOUND
        if epoch == -1:
            return s, 0
        if epoch != s.epoch:
            return None, E.INVALID_SHARE_SESSION_EPOCH
        s.epoch = next_epoch(epoch)
        return s, 0

    def close(self, s: ShareSession) -> None:
        """Session closed or replaced: the member's acquired records are released."""
        self.sessions.pop((s.group_id, s.member_id), None)
        for (tid, p) in s.partitions:
            sp = self.partitions.get((s.group_id, tid, p))
            if sp is not None and sp.release_member(s.member_id):
                self.waiters.wake()

    def connection_closed(self, connection: Any) -> None:
        """A client connection closed: the share sessions it opened end (Kafka 4.x ties a share
        session to the connection that opened it) and their acquired records are released."""
        for s in [s for s in self.sessions.values() if s.connection is connection]:
            self.close(s)

    # -- partitions ----------------------------------------------------------------------------
    def get(self, group_id: str, topic_id: bytes, partition: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic_id, partition))

    def _lock_ms(self, group_id: str) -> int:
        if self.group_configs is None:
            return self.lock_ms
        return self.group_configs.get(group_id, "share.record.lock.duration.ms")

    def _start_offset(self, group_id: str, partition_obj: Partition) -> int:
        """Where a share partition without state starts: the group's share.auto.offset.reset
        (latest, Kafka's default: the high watermark; earliest: the log start offset;
        by_duration:D: the first record at or after now - D, else the high watermark)."""
        reset = "latest" if self.group_configs is None else self.group_configs.get(group_id, "share.auto.offset.reset")
        reset = reset.lower()
        if reset == "earliest":
            return partition_obj.log_start_offset
        if reset.startswith("by_duration:"):
            from ..config.group import parse_duration_ms
            ms = parse_duration_ms(reset[len("by_duration:"):].upper())
            found = partition_obj.log.offset_for_timestamp(self.now_ms() - (ms or 0))
            if found is not None:
                return max(found[0], partition_obj.log_start_offset)
        return partition_obj.high_watermark

    async def _fresh_group_configs(self, group_id: str) -> None:
        if self._read_group_configs is not None:
            await self._read_group_configs(group_id)

    def get_or_create(self, group_id: str, topic_id: bytes, partition_obj: Partition) -> SharePartition:
        key = (group_id, topic_id, partition_obj.partition_id)
        sp = self.partitions.get(key)
        if sp is None:
            sp = SharePartition(self._start_offset(group_id, partition_obj), self._lock_ms(group_id),
                                self.delivery_limit, self.max_locks)
            self.partitions[key] = sp
        return sp

    async def load(self, group_id: str, topic_id: bytes, partition_obj: Partition) -> SharePartition:
        """The share partition, read from the share coordinator the first time (Kafka's
        SharePartition initialization: ReadShareGroupState; a partition without state starts at
        the high watermark and is initialized there)."""
        key = (group_id, topic_id, partition_obj.partition_id)
        while key not in self.partitions and key in self._loading:
            await self._loading[key].wait()
        sp = self.partitions.get(key)
        if sp is not None:
            sp.lock_ms = self._lock_ms(group_id)   # a changed group config applies to the next acquisitions
            return sp
        pc = self.persister
        if pc is None:
            await self._fresh_group_configs(group_id)
            return self.get_or_create(group_id, topic_id, partition_obj)
        ev = self._loading[key] = trio.Event()
        try:
            await pc.ensure_topic()
            if pc.coordinator_error(*key):
                # the state's coordinator is another broker (cluster): kept in memory here (SKIPPED.md)
                await self._fresh_group_configs(group_id)
                return self.get_or_create(group_id, topic_id, partition_obj)
            code, st, fut = pc.read(*key, leader_epoch=partition_obj.leader_epoch)
            if code:
                st = None   # no state yet (INVALID_REQUEST) or fenced: start afresh
            if fut is not None:
                await fut.get()
            if st is None or st.start_offset < 0:
                await self._fresh_group_configs(group_id)
                start = self._start_offset(group_id, partition_obj)
                await pc.initialize(*key, 0, start).get()
                sp = SharePartition(start, self._lock_ms(group_id), self.delivery_limit, self.max_locks)
            else:
                sp = SharePartition(st.start_offset, self._lock_ms(group_id), self.delivery_limit, self.max_locks)
                sp.state_epoch = st.state_epoch
                nxt = st.start_offset
                for first, last, state, count in sorted(st.batches):
                    if last < nxt:
                        continue
                    first = max(first, nxt)
                    if first > nxt:   # offsets the state does not name: not delivered yet
                        sp._append(Range(nxt, first - 1, AVAILABLE, 0))
                    sp._append(Range(first, last, STATES_BY_ID.get(state, AVAILABLE), count))
                    nxt = last + 1
                sp._merge_and_advance()
                sp.dirty = False
            self.partitions[key] = sp
            return sp
        finally:
            self._loading.pop(key, None)
            ev.set()

    async def persist(self, group_id: str, topic_id: bytes, partition_obj: Partition) -> int:
        """Write the partition's state to the share coordinator if it changed (Kafka answers an
        acknowledgement once its state is written).  -> 0 or the write's error."""
        key = (group_id, topic_id, partition_obj.partition_id)
        sp = self.partitions.get(key)
        pc = self.persister
        if sp is None or pc is None or not sp.dirty or pc.coordinator_error(*key):
            return 0
        sp.dirty = False
        batches = [(r.first, r.last, STATE_IDS[r.state], r.count) for r in sp.ranges]
        done = sum(r.last - r.first + 1 for r in sp.ranges if r.state in (ACKNOWLEDGED, ARCHIVED))
        return await pc.write(*key, sp.state_epoch, partition_obj.leader_epoch, sp.start_offset, batches, done).get()

    def group_partitions(self, group_id: str) -> dict:
        return {(tid, p): sp for (g, tid, p), sp in self.partitions.items() if g == group_id}

    def set_start_offset(self, group_id: str, topic_id: bytes, partition: int, offset: int) -> None:
        sp = self.partitions.get((group_id, topic_id, partition))
        if sp is None:
            sp = self.partitions[(group_id, topic_id, partition)] = SharePartition(
                offset, self.lock_ms, self.delivery_limit, self.max_locks)
        sp.reset(offset)

    def delete_group_partition(self, group_id: str, topic_id: bytes, partition: int) -> bool:
        return self.partitions.pop((group_id, topic_id, partition), None) is not None

    def acknowledge(self, group_id: str, member_id: str, topic_id: bytes, partition: int, batches: list,
                    now: float) -> tuple[int, Optional[str]]:
        """-> (error code, message)."""
        sp = self.partitions.get((group_id, topic_id, partition))
        if sp is None:
            return E.INVALID_RECORD_STATE, "The share partition has no acquired records."
        sp.expire_locks(now)
        try:
            sp.acknowledge(member_id, [(b["first_offset"], b["last_offset"], b["acknowledge_types"])
                                       for b in batches], now)
        except InvalidRecordState as e:
            return E.INVALID_RECORD_STATE, str(e)
        if any(t == 2 for b in batches for t in b["acknowledge_types"]):
            self.waiters.wake()   # released records may be acquired by a waiting member
        return 0, None

    def acquire(self, sp: SharePartition, partition_obj: Partition, member_id: str, max_records: int, max_bytes: int,
                strict: bool, now: float) -> tuple[list, Union[Chunks, bytes], int]:
        """Read from where ``sp`` can deliver and acquire for the member.
        -> (acquired ranges, records (Chunks or b""), size)."""
        sp.expire_locks(now)
        lso = partition_obj.log_start_offset
        if sp.start_offset < lso and not sp.ranges:
            sp.reset(lso)   # retention removed what the group had not consumed
        hw = partition_obj.high_watermark
        if max_records <= 0 or not sp.has_available(hw):
            return [], b"", 0
        offset = sp.fetch_offset()
        res = partition_obj.read_records(offset, max_bytes, True, False)
        if res.error or not res.size:
            return [], b"", 0
        regions = list(res.records.parts)  # type: ignore[union-attr]  # size > 0: Chunks
        headers: list = []
        owner: list = []
        for i, region in enumerate(regions):
            for h in region.batch_headers():
                headers.append(h)
                owner.append(i)
        acquired, used = sp.acquire(member_id, headers, now, max_records, strict)
        if not acquired:
            return [], b"", 0
        # the batches that hold acquired records, contiguous ones as one region
        out = Chunks()
        run = None   # (region index, start position, end position)
        for i in used:
            h, ri = headers[i], owner[i]
            if run is not None and run[0] == ri and run[2] == h.position:
                run = (ri, run[1], h.position + h.size)
                continue
            if run is not None:
                out.add(regions[run[0]].slice(run[1], run[2] - run[1]))
            run = (ri, h.position, h.position + h.size)
        if run is not None:
            out.add(regions[run[0]].slice(run[1], run[2] - run[1]))
        return acquired, out, out.size

    def next_deadline(self, keys: Iterable[tuple]) -> float | None:
        ds = [d for k in keys if (sp := self.partitions.get(k)) is not None and (d := sp.next_deadline()) is not None]
        return min(ds) if ds else None
