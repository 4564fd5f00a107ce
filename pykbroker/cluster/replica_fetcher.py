"""Replica fetchers: how a follower copies its leader's log (Kafka's ReplicaFetcherThread /
AbstractFetcherThread), one trio task per source broker.

Each ``ReplicaFetcher`` holds the follower partitions whose leader is its source broker and
loops: one Fetch (``replica_id`` = this node, ``current_leader_epoch`` = the epoch the
controller published, ``last_fetched_epoch`` = the log's latest epoch) over its own TCP
connection to the leader's ``inter.broker.listener.name`` endpoint, then per partition:
- records: the leader's batches appended as they are (``Partition.append_as_follower``: same
  offsets, same leader epochs, producer state and epoch cache follow), never re-validated per
  record;
- HW = min(leader's HW, own LEO); the log start follows the leader's;
- ``diverging_epoch`` (Kafka's truncation on fetch, KIP-595/KAFKA-10554): the leader says our
  last epoch ends earlier on its side.  We truncate to min(its end offset, our own end offset of
  that epoch); if our epoch for it differs, to our end offset and ask again (Kafka's
  intermediate truncation).  A log without any epoch (written before epochs) truncates to its
  HW first, as Kafka did before KIP-101.
- OFFSET_OUT_OF_RANGE (Kafka's handleOutOfRangeError): ListOffsets on the leader (as a
  replica, so it answers its log end): behind its log end -> the leader's log start is ahead
  of us, truncate fully and start there; ahead of it (an unclean election) -> truncate to it.
- NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / UNKNOWN_TOPIC: the
  metadata is about to change; the partition waits ``replica.fetch.backoff.ms`` (the controller's
  next state re-adds it to the right fetcher anyway).  UNKNOWN_TOPIC_ID (the leader does not
  know the id yet, or any more) and INCONSISTENT_TOPIC_ID (the leader's partition belongs to
  another incarnation of the topic: deleted and re-created under the same name, one side not
  caught up) are handled the same way, with Kafka's warning: transient while a topic is created
  or deleted; once this broker's metadata has the new topic, its partition is re-added with the
  new id (and the old id is forgotten in the session).
Fetch version (as Kafka's follower, which fetches at its metadata version's Fetch version): on
each connection an ApiVersions request learns the leader's range, and the fetcher uses the
highest version both sides serve (``MAX_FETCH_VERSION``, or less as the broker's ``--as-kafka``
profile limits it: cluster/interbroker.py).  v13+ names topics by id (the
partition's topic id, from the metadata this broker was given); a request with a partition
whose id is unknown (zero: a topic from before topic ids), or a leader below v13, falls back to
v12 with names, as Kafka's FetchSessionHandler does (``canUseTopicIds``).  Switching between ids
and names starts a new session (a leader answers FETCH_SESSION_TOPIC_ID_ERROR otherwise; that
error, like the other session errors, also starts over with a full request).  v15+ carry the
replica id in ``replica_state`` (broker epoch -1: no KIP-903 check), v17 a zero
``replica_directory_id`` (one directory id is not tracked per log), v18 the follower's high
watermark (KIP-1166).
Fetch sessions (KIP-227, leader side in cluster/fetch_session.py): the first request is a full
one (session epoch 0) naming every partition; the leader's answer carries a session id, and
from then on each request names only the partitions whose fetch fields (offset, epochs, log
start) changed since the leader last heard of them — the ones just added or answered — and
forgets the removed and backing-off ones.  An idle follower's fetch names no partition, so the
work per request does not grow with the partitions it follows.  A connection failure or
FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH starts over with a full request.
Connection failures back off ``replica.fetch.backoff.ms`` and reconnect to wherever the leader
is registered then.  On a secured inter-broker listener the connection is TLS and/or SASL with
the broker's own credentials (``interbroker.open_channel``, security/client.py); a leader that
refuses them is a warning naming the principal, mechanism and listener, then the same backoff.

Partitions are added/removed by the ReplicaManager (sync, from the controller's listener); a
response for a partition that was removed or re-added meanwhile (its ``PartitionFetchState``
object differs) is ignored, so a stale answer never touches a log.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import trio

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import HEADER_SIZE, RecordError, parse_header
from .interbroker import Channel, InterBrokerAuthenticationError, api_versions, open_channel

if TYPE_CHECKING:
    from ..security.client import InterBrokerSecurity
    from .interbroker import InterBrokerVersions
    from .partition import Partition

log = logging.getLogger("pykbroker.replica_fetcher")

FETCH, LIST_OFFSETS = 1, 2
API_VERSIONS = 18
# The newest Fetch version this fetcher speaks (the codec and the leader-side handler go as
# far); the one used is min(this, the leader's maximum).  Below 12 there is no
# last_fetched_epoch / diverging_epoch, which truncation on fetch needs: a leader without v12
# is not fetched from (the connection fails and is retried after the backoff).
MAX_FETCH_VERSION = 18
MIN_FETCH_VERSION = 12
TOPIC_IDS_FROM = 13         # Fetch v13+: topics by id
LIST_OFFSETS_VERSION = 4    # replica_id and current_leader_epoch
ZERO_UUID = bytes(16)
LATEST, EARLIEST = -1, -2
_WAIT_ERRORS = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE))
# Kafka's AbstractFetcherThread warns on these two (they should not last)
_TOPIC_ID_ERRORS = frozenset((int(ErrorCode.UNKNOWN_TOPIC_ID), int(ErrorCode.INCONSISTENT_TOPIC_ID)))
_SESSION_ERRORS = frozenset(int(c) for c in (
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR))


# Follower fetch sessions (KIP-227): on, as in Kafka.  (Off only to compare, e.g. benchmarks:
# a full sessionless fetch every round, session id 0 and epoch -1.)
FETCH_SESSIONS = True


class FetcherConfig:
    """The broker settings a fetcher reads (Kafka's replica.* keys)."""
    __slots__ = ("backoff_s", "wait_max_ms", "min_bytes", "max_bytes", "response_max_bytes",
                 "socket_timeout_s", "receive_buffer_bytes", "listener_name", "client_id", "versions",
                 "security")

    def __init__(self, config: Any, listener_name: str, node_id: int,   # BrokerConfig or its replica.* keys
                 versions: Optional[InterBrokerVersions] = None, security: Optional[InterBrokerSecurity] = None) -> None:
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000.0
        self.wait_max_ms = config["replica.fetch.wait.max.ms"]
        self.min_bytes = config["replica.fetch.min.bytes"]
        self.max_bytes = config["replica.fetch.max.bytes"]
        self.response_max_bytes = config["replica.fetch.response.max.bytes"]
        self.socket_timeout_s = config["replica.socket.timeout.ms"] / 1000.0
        # SO_RCVBUF of the connection to the leader (Kafka's 64 KiB; -1: the OS's autotuning)
        self.receive_buffer_bytes = config["replica.socket.receive.buffer.bytes"]
        self.listener_name = listener_name
        # Kafka's fetcher client id (ReplicaFetcherThread-<fetcherId>-<sourceBrokerId> on the
        # leader's request log is the thread name; the client id is broker-<id>-fetcher-<n>)
        self.client_id = "broker-%d-fetcher-0" % node_id
        # what this broker's own code sends (cluster/interbroker.py; None: everything pykbroker builds)
        self.versions = versions
        # TLS and SASL of the inter-broker listener (security/client.py; None: PLAINTEXT)
        self.security = security


class PartitionFetchState:
    """One follower partition in a fetcher: a new object each time it is (re-)added."""
    __slots__ = ("partition", "leader_epoch", "topic_id", "delayed_until", "added_round")

    def __init__(self, partition: Partition, leader_epoch: int, added_round: int = 0) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        # the id this incarnation of the topic has in this broker's metadata (zero: none)
        self.topic_id = bytes(getattr(partition, "topic_id", None) or ZERO_UUID)
        self.delayed_until = 0.0
        # answers to requests sent before it was added are stale
        self.added_round = added_round


class ReplicaFetcher:
    """The fetcher of one source broker (see the module docstring)."""

    def __init__(self, node_id: int, source_id: int, address_of: Callable[[int], Optional[tuple]],
                 cfg: FetcherConfig) -> None:
        self.node_id = node_id
        self.source_id = source_id
        self._address_of = address_of
        self.cfg = cfg
        self.partitions: dict[tuple[str, int], PartitionFetchState] = {}
        # the fetch session (KIP-227; leader side in cluster/fetch_session.py): its id (0: none),
        # the epoch of the next request (0: a full request creating one), what the leader was
        # last told of each partition in it; partitions to look at for the next request
        # (added, answered), removed ones (forgotten next time), ones backing off after an error
        self._session_id = 0
        self._session_epoch = 0
        # tp -> (topic id it was named with, the fields the leader was told)
        self._in_session: dict[tuple[str, int], tuple] = {}
        self._touched: set[tuple[str, int]] = set()
        # in the leader's session but no longer fetched (removed, backing off after an error,
        # or re-added under a new topic id): (topic, topic id, partition), forgotten by the next
        # incremental request unless it names the same one again
        self._to_forget: set[tuple[str, bytes, int]] = set()
        # the Fetch version of the current connection (ApiVersions) and whether the session
        # names topics by id
        self.fetch_version = MIN_FETCH_VERSION
        self._session_uses_ids = False
        # the partitions without a topic id (kept up to date on add/remove, so that choosing
        # between ids and names costs nothing per request)
        self._without_id: set[tuple[str, int]] = set()
        # topic id -> [name, partitions fetched under it]: names the topics of an answer (v13+
        # answers carry ids only) without a pass over every partition
        self._names_by_id: dict[bytes, list] = {}
        self._delayed: set[tuple[str, int]] = set()
        self._round = 0
        self._changed = trio.Event()
        self._cancel = trio.CancelScope()

    def __repr__(self) -> str:
        return "ReplicaFetcher(%d <- %d)" % (self.node_id, self.source_id)

    # ------------------------------------------------------------------ membership
    def add_partition(self, partition: Partition) -> None:
        tp = (partition.topic, partition.partition_id)
        st = PartitionFetchState(partition, partition.leader_epoch, self._round + 1)
        known = self._in_session.get(tp)
        if known is not None and known[0] != st.topic_id:
            # another incarnation of the topic (deleted, re-created under the same name): the
            # leader's session holds the old id, which must be forgotten
            self._leave_session(tp)
        old = self.partitions.get(tp)
        if old is not None:
            self._unname(old.topic_id)
        self.partitions[tp] = st
        self._names_by_id.setdefault(st.topic_id, [tp[0], 0])[1] += 1
        if st.topic_id == ZERO_UUID:
            self._without_id.add(tp)
        else:
            self._without_id.discard(tp)
        self._touched.add(tp)
        self._delayed.discard(tp)
        self._changed.set()

    def remove_partition(self, tp: tuple[str, int]) -> None:
        st = self.partitions.pop(tp, None)
        if st is not None:
            self._unname(st.topic_id)
            self._without_id.discard(tp)
            self._leave_session(tp)
            self._touched.discard(tp)
            self._delayed.discard(tp)
            self._changed.set()

    def _unname(self, topic_id: bytes) -> None:
        entry = self._names_by_id.get(topic_id)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._names_by_id[topic_id]

    def _leave_session(self, tp: tuple[str, int]) -> None:
        """``tp`` is not fetched for now: the next incremental request forgets it, and naming it
        again later tells the leader its fields afresh.  (Without this, a partition that erred and
        came back after its backoff with the same fetch offset was never named again: the
        leader, which had answered an error for it, never re-read it, and the follower never
        caught up: the ISR shrank under an acks=all produce right after topic creation.)"""
        known = self._in_session.pop(tp, None)
        if known is not None:
            self._to_forget.add((tp[0], known[0], tp[1]))

    def shutdown(self) -> None:
        self._cancel.cancel()

    # ------------------------------------------------------------------ the loop
    async def run(self) -> None:
        with self._cancel:
            while True:
                await self._wait_for_work()
                addr = self._address_of(self.source_id)
                if addr is None:
                    await self._backoff()
                    continue
                try:
                    with trio.fail_after(self.cfg.socket_timeout_s):
                        stream, chan = await open_channel(addr[0], addr[1], self.cfg.client_id, (1 << 31) - 1,
                                                          self.cfg.security, self.cfg.receive_buffer_bytes)
                except InterBrokerAuthenticationError as e:
                    # the leader refused this broker's inter-broker credentials: no replication
                    # until they are fixed (the ISR leaves this replica out); said once per attempt
                    log.warning("%r: %s", self, e)
                    await self._backoff()
                    continue
                except (OSError, trio.TooSlowError, trio.BrokenResourceError, ConnectionError, KafkaError) as e:
                    log.info("%r: cannot connect to %s:%d: %s", self, addr[0], addr[1], e)
                    await self._backoff()
                    continue
                try:
                    async with stream:
                        self.fetch_version = await self._negotiate(chan)
                        while self.partitions:
                            await self._fetch_once(chan)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                        ConnectionError, KafkaError) as e:
                    log.info("%r: fetch failed (%s: %s); reconnecting", self, type(e).__name__, e)
                    await self._backoff()

    async def _negotiate(self, chan: Channel) -> int:
        """The Fetch version for this connection: the highest this broker's own code sends (its
        ``--as-kafka`` profile's, cluster/interbroker.py) and the leader serves (ApiVersions)."""
        with trio.fail_after(self.cfg.socket_timeout_s):
            theirs = await api_versions(chan, "pykbroker-replica-fetcher")
        versions = self.cfg.versions
        if versions is not None:
            v = versions.usable(FETCH, theirs, MIN_FETCH_VERSION, MAX_FETCH_VERSION)
        else:
            rng = theirs.get(FETCH)
            v = min(MAX_FETCH_VERSION, rng[1]) if rng is not None and rng[0] <= min(MAX_FETCH_VERSION, rng[1]) \
                and rng[1] >= MIN_FETCH_VERSION else None
        if v is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "no Fetch version from %d both this broker and the "
                             "leader (%s) serve" % (MIN_FETCH_VERSION, theirs.get(FETCH)))
        if v != self.fetch_version:
            log.info("%r: Fetch v%d", self, v)
        return v

    async def _wait_for_work(self) -> None:
        while not self.partitions:
            self._changed = trio.Event()
            await self._changed.wait()

    async def _backoff(self) -> None:
        with trio.move_on_after(self.cfg.backoff_s):
            await trio.sleep_forever()

    def _entry(self, tp: tuple[str, int], st: PartitionFetchState) -> dict:
        part = st.partition
        lg = part.log
        latest = lg.epoch_cache.latest_epoch
        if latest is None and lg.log_end_offset > lg.high_watermark:
            # no epochs to compare with the leader's: keep only what is known committed
            part.truncate_to(lg.high_watermark)
        return {"partition": tp[1], "current_leader_epoch": st.leader_epoch,
                "fetch_offset": lg.log_end_offset,
                "last_fetched_epoch": latest if latest is not None else -1,
                "log_start_offset": lg.log_start_offset, "partition_max_bytes": self.cfg.max_bytes,
                "replica_directory_id": ZERO_UUID, "high_watermark": lg.high_watermark}

    def _reset_session(self) -> None:
        """The next request is a full one (closing the current session, if any, on the leader)."""
        self._session_epoch = 0
        self._in_session = {}
        self._to_forget = set()

    async def _fetch_once(self, chan: Channel) -> None:
        now = trio.current_time()
        for tp in [tp for tp in self._delayed if tp not in self.partitions or self.partitions[tp].delayed_until <= now]:
            self._delayed.discard(tp)
            self._touched.add(tp)
        if len(self._delayed) >= len(self.partitions):
            # every partition waits out replica.fetch.backoff.ms after an error
            soonest = min(self.partitions[tp].delayed_until for tp in self._delayed)
            self._changed = trio.Event()
            with trio.move_on_at(soonest):
                await self._changed.wait()
            return
        version = self.fetch_version
        if version >= TOPIC_IDS_FROM and self._without_id:
            version = TOPIC_IDS_FROM - 1     # Kafka's canUseTopicIds: all by id, or all by name
        uses_ids = version >= TOPIC_IDS_FROM
        if uses_ids != self._session_uses_ids:
            self._reset_session()
            self._session_uses_ids = uses_ids
        full = self._session_epoch == 0 or not FETCH_SESSIONS
        consider: Iterable[tuple[str, int]]
        if full:
            consider = [tp for tp in self.partitions if tp not in self._delayed]
            self._in_session = {}
            self._to_forget = set()
        else:
            consider = self._touched
        self._touched = set()
        topics: dict[tuple[str, bytes], list] = {}
        for tp in consider:
            st = self.partitions.get(tp)
            if st is None or tp in self._delayed:
                continue
            entry = self._entry(tp, st)
            key = (st.topic_id, tuple(entry.values()))
            if full or self._in_session.get(tp) != key:
                topics.setdefault((tp[0], st.topic_id), []).append(entry)
                self._in_session[tp] = key
                # named again: not forgotten (the leader applies forgotten_topics_data after
                # the named partitions, so both in one request would drop it)
                self._to_forget.discard((tp[0], st.topic_id, tp[1]))
        forgotten: dict[tuple, list] = {}
        for t, tid, p in self._to_forget:
            forgotten.setdefault((t, tid), []).append(p)
        self._to_forget = set()
        self._round += 1
        round_ = self._round
        req = {"cluster_id": None, "replica_id": self.node_id,
               "replica_state": {"replica_id": self.node_id, "replica_epoch": -1},
               "max_wait_ms": self.cfg.wait_max_ms,
               "min_bytes": self.cfg.min_bytes, "max_bytes": self.cfg.response_max_bytes,
               "isolation_level": 0, "session_id": self._session_id if FETCH_SESSIONS else 0,
               "session_epoch": self._session_epoch if FETCH_SESSIONS else -1,
               "topics": [{"topic": t, "topic_id": tid, "partitions": ps} for (t, tid), ps in topics.items()],
               "forgotten_topics_data": [{"topic": t, "topic_id": tid, "partitions": ps}
                                         for (t, tid), ps in forgotten.items()],
               "rack_id": ""}
        try:
            with trio.fail_after(self.cfg.socket_timeout_s + self.cfg.wait_max_ms / 1000.0):
                resp = await chan.call(FETCH, version, req)
        except BaseException:
            self._reset_session()
            raise
        code = resp["error_code"]
        if code in _SESSION_ERRORS:
            log.info("%r: fetch session %d: %s; starting a new one", self, self._session_id, ErrorCode(code).name)
            self._session_id = 0
            self._reset_session()
            return
        if code:
            self._reset_session()
            raise KafkaError(code, "fetch refused")
        if not FETCH_SESSIONS:
            pass
        elif full:
            # session id 0: the leader keeps no session for us (full fetches from now on)
            self._session_id = resp["session_id"]
            self._session_epoch = 1 if self._session_id else 0
        else:
            # Kafka's FetchMetadata.nextEpoch: after the largest int32 comes 1
            self._session_epoch = 1 if self._session_epoch >= (1 << 31) - 1 else self._session_epoch + 1
        any_error = False
        for t in resp["responses"]:
            if uses_ids:
                # (an incremental answer also lists session partitions this request did not
                # name: any fetched partition's id names its topic)
                named = self._names_by_id.get(t["topic_id"])
                if named is None:
                    continue   # no partition of that topic is fetched any more
                name = named[0]
            else:
                name = t["topic"]
            for p in t["partitions"]:
                tp = (name, p["partition_index"])
                st = self.partitions.get(tp)
                if st is None or st.added_round > round_ or tp in self._delayed:
                    continue   # removed or re-added meanwhile: a stale answer
                if uses_ids and st.topic_id != t["topic_id"]:
                    continue   # an answer for another incarnation of the topic
                self._touched.add(tp)
                try:
                    ok = await self._process(chan, tp, st, p)
                except (KafkaError, RecordError) as e:
                    log.warning("%r: %s-%d: %s", self, tp[0], tp[1], e)
                    ok = False
                if not ok and self.partitions.get(tp) is st:
                    any_error = True
                    st.delayed_until = trio.current_time() + self.cfg.backoff_s
                    self._delayed.add(tp)
                    self._leave_session(tp)
        if any_error:
            await trio.sleep(0)

    async def _process(self, chan: Channel, tp: tuple[str, int], st: PartitionFetchState, p: dict) -> bool:
        part = st.partition
        code = p["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(chan, tp, st)
            return True
        if code:
            if code in _TOPIC_ID_ERRORS:
                log.warning("%r: %s-%d: %s from the leader; transient while the topic is created or "
                            "deleted, not expected to persist", self, tp[0], tp[1], ErrorCode(code).name)
            elif code not in _WAIT_ERRORS:
                log.warning("%r: %s-%d: fetch error %s", self, tp[0], tp[1], ErrorCode(code).name)
            return False
        div = p.get("diverging_epoch")
        if div is not None and (div["epoch"] != -1 or div["end_offset"] != -1):
            self._truncate_on_divergence(part, div["epoch"], div["end_offset"])
            return True
        records = p["records"]
        if records is not None and len(records):
            self._append(part, records)
        part.update_follower_high_watermark(p["high_watermark"], p["log_start_offset"])
        return True

    @staticmethod
    def _append(part: Partition, records: bytes | bytearray | memoryview) -> None:
        # ``records`` is a view into the answer's frame (a bytearray of its own, nothing else
        # holds it): the batches are checked and written from there without a copy, as
        # Kafka's follower appends the fetched MemoryRecords as they are
        buf = records if isinstance(records, memoryview) else memoryview(records)
        leo = part.log.log_end_offset
        start = end = None
        pos, n = 0, len(buf)
        # whole batches only: a response may end with a partial one (Kafka's size limits)
        while pos + HEADER_SIZE <= n:
            h = parse_header(buf, pos)
            if pos + h.size > n:
                break
            if h.next_offset > leo:
                if start is None:
                    if h.base_offset < leo:
                        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "batch %d-%d straddles the log end %d"
                                          % (h.base_offset, h.last_offset, leo))
                    start = pos
                end = pos + h.size
            # else: already here (the leader answers from the batch holding the fetch offset)
            pos += h.size
        if start is not None:
            part.append_as_follower(buf[start:end])

    @staticmethod
    def _truncate_on_divergence(part: Partition, leader_epoch: int, leader_end: int) -> None:
        """Kafka's truncation on a diverging epoch (AbstractFetcherThread.truncateOnFetchResponse)."""
        lg = part.log
        if leader_end < 0:
            # the leader knows no epoch at or below ours: keep only what is known committed
            part.truncate_to(lg.high_watermark)
            return
        if leader_epoch < 0:
            part.truncate_to(min(leader_end, lg.log_end_offset))
            return
        epoch, end = lg.end_offset_for_epoch(leader_epoch)
        if epoch == -1:
            # we know nothing of that epoch or anything before it
            part.truncate_to(min(leader_end, lg.log_end_offset))
        elif epoch != leader_epoch:
            # our epochs before it end elsewhere: cut there; the next fetch asks again
            part.truncate_to(min(end, lg.log_end_offset))
        else:
            part.truncate_to(min(leader_end, end, lg.log_end_offset))

    async def _handle_out_of_range(self, chan: Channel, tp: tuple[str, int], st: PartitionFetchState) -> None:
        part = st.partition
        leo = part.log.log_end_offset
        leader_end = await self._list_offset(chan, tp, st, LATEST)
        if leader_end < leo:
            # the leader's log ends before ours (unclean election): truncate to its end
            part.truncate_to(leader_end)
            return
        leader_start = await self._list_offset(chan, tp, st, EARLIEST)
        if leader_start > leo:
            # we are behind the leader's log start (retention / DeleteRecords there)
            part.truncate_fully_and_start_at(leader_start)

    async def _list_offset(self, chan: Channel, tp: tuple[str, int], st: PartitionFetchState, ts: int) -> int:
        req = {"replica_id": self.node_id, "isolation_level": 0,
               "topics": [{"name": tp[0], "partitions": [
                   {"partition_index": tp[1], "current_leader_epoch": st.leader_epoch, "timestamp": ts}]}]}
        with trio.fail_after(self.cfg.socket_timeout_s):
            resp = await chan.call(LIST_OFFSETS, LIST_OFFSETS_VERSION, req)
        p = resp["topics"][0]["partitions"][0]
        if p["error_code"]:
            raise KafkaError(p["error_code"], "ListOffsets for %s-%d" % tp)
        return p["offset"]
