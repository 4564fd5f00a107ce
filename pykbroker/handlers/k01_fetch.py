"""Fetch (key 1), versions 4-18 (v13+: topics by id).

Behaviour (Apache Kafka 4.4 as the oracle):
- Sessions (KIP-227) for every fetcher, consumers and followers alike: the rules, the cache
  (``max.incremental.fetch.session.cache.slots``, eviction) and what an incremental answer lists
  are in cluster/fetch_session.py.  Epoch -1 (and every v4-6 request): sessionless full fetch,
  session id 0.  Epoch 0: a full fetch that gets a session id when the cache has room.  Epoch
  > 0: incremental; FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH /
  FETCH_SESSION_TOPIC_ID_ERROR as top-level errors with session id 0 and no partitions.
- v13+ name topics by id: an id this broker does not know -> UNKNOWN_TOPIC_ID for its
  partitions; a session's partition whose topic was re-created under the same name since (the
  partition's topic id differs from the session's) -> INCONSISTENT_TOPIC_ID (Kafka's
  ReplicaManager.readFromLog check, after the partition lookup, before the epoch checks).
  Answers name topics by id.  v15+ carry the follower's id in ``replica_state``; v16 adds
  ``node_endpoints`` for the leaders named in ``current_leader`` (KIP-951); v17
  ``replica_directory_id`` and v18 ``high_watermark`` (KIP-1166, the follower's HW) are read
  and ignored: the answer does not depend on them here (a follower's session answers at once
  when a partition's high watermark moves, which is what KIP-1166 asks for).
- Answers list partitions in the request's order (incremental: the session's order), topics
  grouped only where consecutive, as Kafka's FetchResponse.of does.
- Per partition: unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; v9+
  ``current_leader_epoch`` lower than ours -> FENCED_LEADER_EPOCH, higher ->
  UNKNOWN_LEADER_EPOCH, -1 skips the check; ``fetch_offset`` below the log start or above the
  log end -> OFFSET_OUT_OF_RANGE.  Errored partitions carry high_watermark /
  last_stable_offset / log_start_offset = -1 and empty records, like Kafka.
- Data: a byte slice of one segment file as a ``FileRegion`` (sent with os.sendfile),
  starting at the batch containing ``fetch_offset`` (clients skip the earlier records),
  bounded by the high watermark (read_uncommitted) or the last stable offset (read_committed:
  the first offset of the earliest open transaction, capped by the high watermark).
  ``partition_max_bytes`` bounds each partition and ``max_bytes`` the response, in bytes: as
  Kafka's LogSegment.read the slice is cut at the limit even inside a batch (clients drop the
  partial batch and fetch it again), the first partition that has data gets at least one whole
  batch even when larger (KIP-74), a later one whose first batch does not fit in what is left
  gets nothing, and a read never continues into the next segment (storage/log.py Log.read;
  tests/differential/test_fetch_sizing.py compares the sizes with Kafka's).
  Empty = zero-length bytes, never null.
- Long poll: if fewer than ``min_bytes`` are available (and no partition errored), the request
  parks until an append to one of its partitions or ``max_wait_ms`` passes, then reads again.
- aborted_transactions (as Kafka 4.4): on a successful read null under read_uncommitted; under
  read_committed the aborted transactions (producer id, first offset) overlapping the read, from
  the segments' ``.txnindex`` (storage/txn_index.py); null for errors raised by the log read
  (OFFSET_OUT_OF_RANGE, FENCED/UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR); empty for
  UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID, which Kafka answers from its metadata check
  before reading.
- preferred_read_replica is always -1 (no fetch from followers, KIP-392); ``rack_id`` ignored.
- Consumers of a partition this broker only follows: NOT_LEADER_OR_FOLLOWER (after the epoch
  checks, as Kafka orders them); consumers never read past the high watermark.
- Follower fetch (``replica_id`` >= 0, from a replica of the partition): see
  ``_read_for_follower``: records up to the log end offset, the follower's position
  recorded (ISR expansion, high watermark), ``diverging_epoch`` on v12+.  Its long poll waits
  like a consumer's (woken by appends).
Version notes: v5 adds log_start_offset; v7 sessions; v9 current_leader_epoch; v11 rack_id and
preferred_read_replica; v12 is flexible, adds last_fetched_epoch and tagged
diverging_epoch/current_leader/snapshot_id (current_leader filled for NOT_LEADER_OR_FOLLOWER /
FENCED_LEADER_EPOCH as Kafka does, KIP-951; snapshot_id left default).
- The partition lookup (unknown, offline: KAFKA_STORAGE_ERROR, leader epoch) is
  handlers/common.py's, shared with Produce, ListOffsets, DeleteRecords, OffsetForLeaderEpoch.
"""
from __future__ import annotations

import trio

from ..acl.bindings import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, READ, TOPIC
from ..acl.check import session
from ..cluster.fetch_session import FULL_SWEEP_S, next_epoch
from ..protocol.errors import ErrorCode, KafkaError
from .common import NEW_LEADER_ERRORS, PartitionResponses, current_leader, leader_partition

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
READ_COMMITTED = 1
TOPIC_IDS_FROM = 13

# Per partition only: a request-level failure is the top-level error_code (error_response).
RESPONSES = PartitionResponses(
    ("topics", "topic", "partitions", "partition"), ("responses", "topic", "partitions", "partition_index"),
    {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
     "aborted_transactions": None, "preferred_read_replica": -1, "records": b""})

# Answered from Kafka's metadata check (FetchResponse.partitionResponse), before any log read:
# an empty (not null) aborted_transactions list.
_METADATA_ERRORS = frozenset((int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), int(ErrorCode.UNKNOWN_TOPIC_ID)))


def error_response(ctx, request, code) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "session_id": 0, "responses": []}


class _Fetch:
    """One request's settings shared by its partition reads."""
    __slots__ = ("rm", "meta", "version", "replica_id", "read_committed", "budget", "endpoints",
                 "listener", "uses_ids", "az", "follower_denied")

    def __init__(self, ctx, request, version: int):
        broker = ctx.broker
        self.rm = broker.replica_manager
        self.meta = broker.metadata_cache
        self.version = version
        if version >= 15:
            rs = request.get("replica_state")
            self.replica_id = rs["replica_id"] if rs else -1
        else:
            self.replica_id = request["replica_id"]
        self.read_committed = request["isolation_level"] == READ_COMMITTED
        self.budget = _Budget(request["max_bytes"])
        self.endpoints: dict = {}
        self.listener = getattr(getattr(ctx, "connection", None), "listener_name", "PLAINTEXT")
        self.uses_ids = version >= TOPIC_IDS_FROM
        # Authorization (with an authorizer): a consumer needs READ on each topic, a follower
        # CLUSTER_ACTION on the cluster; else TOPIC_AUTHORIZATION_FAILED per partition (Kafka's
        # handleFetchRequest), before any existence or leadership check.
        self.az = az = session(ctx)
        self.follower_denied = az is not None and self.replica_id >= 0 and \
            not az.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)

    def new_budget(self, request) -> None:
        self.budget = _Budget(request["max_bytes"])

    def read(self, name, topic_id, fields: dict, targets):
        """One partition: (answer, answer at once, end offset this fetcher can read up to or
        -1).  ``targets`` collects the partitions to park on."""
        idx = fields["partition"]
        if name is None:
            r = RESPONSES.error(idx, ErrorCode.UNKNOWN_TOPIC_ID)
            r["aborted_transactions"] = []
            return r, True, -1
        az = self.az
        if az is not None and (self.follower_denied if self.replica_id >= 0 else not az.allowed(READ, TOPIC, name)):
            r = RESPONSES.error(idx, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            r["aborted_transactions"] = []
            return r, True, -1
        if self.uses_ids:
            part = self.rm.get_partition(name, idx)
            if part is not None and not part.offline and part.topic_id != topic_id:
                return RESPONSES.error(idx, ErrorCode.INCONSISTENT_TOPIC_ID), True, -1
        if self.replica_id >= 0:
            resp, at_once = _read_for_follower(self.rm, name, fields, self.replica_id, self.version,
                                               self.budget, targets)
            part = self.rm.get_partition(name, idx) if not resp["error_code"] else None
            return resp, at_once, (part.log_end_offset if part is not None and not part.offline else -1)
        try:
            # (current_leader_epoch is -1, no check, before v9)
            partition = leader_partition(self.rm, name, idx, fields["current_leader_epoch"])
        except KafkaError as e:
            r = RESPONSES.error(idx, e.code)
            if e.code in NEW_LEADER_ERRORS and self.version >= 12:
                self._current_leader(r, name, idx)
            if e.code in _METADATA_ERRORS:
                r["aborted_transactions"] = []
            return r, True, -1
        if targets is not None:
            targets.add(partition)
        b = self.budget
        max_bytes = min(max(fields["partition_max_bytes"], 0), b.limit)
        res = partition.read_records(fields["fetch_offset"], max_bytes, b.min_one, self.read_committed)
        if res.error:
            return RESPONSES.error(idx, res.error), True, -1
        if res.size:
            # Kafka: only the first partition with data may exceed the limits (KIP-74).
            b.min_one = False
            b.limit = max(0, b.limit - res.size)
            b.total += res.size
        return ({"partition_index": idx, "error_code": 0,
                 "high_watermark": res.high_watermark,
                 "last_stable_offset": res.last_stable_offset,
                 "log_start_offset": res.log_start_offset,
                 "aborted_transactions": None if res.aborted_transactions is None else [
                     {"producer_id": e.producer_id, "first_offset": e.first_offset}
                     for e in res.aborted_transactions],
                 "preferred_read_replica": -1,
                 "records": res.records}, False,
                res.last_stable_offset if self.read_committed else res.high_watermark)

    def _current_leader(self, r: dict, name: str, idx: int) -> None:
        """KIP-951: where the leader is now; v16+ also its endpoint in node_endpoints."""
        leader, reg = current_leader(self.meta, name, idx)
        if leader is None:
            return
        r["current_leader"] = leader
        if self.version >= 16 and reg is not None:
            e = reg.endpoint(self.listener)
            if e is not None:
                self.endpoints[reg.broker_id] = {"node_id": reg.broker_id, "host": e.host,
                                                 "port": e.port, "rack": reg.rack}


def _requested(request, f: _Fetch):
    """The request's partitions as (key, name, topic id, fields), in order (Kafka's
    FetchRequest.fetchData: v13+ resolve ids to names, None when unknown)."""
    out = []
    if f.uses_ids:
        by_id = f.meta.by_id
        for t in request["topics"]:
            tid = t["topic_id"]
            info = by_id.get(tid)
            name = info.name if info is not None else None
            for p in t["partitions"]:
                out.append(((tid, p["partition"]), name, tid, p))
    else:
        for t in request["topics"]:
            name = t["topic"]
            for p in t["partitions"]:
                out.append(((name, p["partition"]), name, None, p))
    return out


def _forgotten(request, f: _Fetch):
    if f.uses_ids:
        return [(t["topic_id"], idx) for t in request["forgotten_topics_data"] for idx in t["partitions"]]
    return [(t["topic"], idx) for t in request["forgotten_topics_data"] for idx in t["partitions"]]


def _group(items, f: _Fetch) -> list:
    """[(name, topic id, answer)] -> the responses array: consecutive partitions of one topic
    share an entry (Kafka's FetchResponse.toMessage keeps the order)."""
    out = []
    prev = None
    for name, tid, resp in items:
        k = tid if f.uses_ids else name
        if out and k == prev:
            out[-1]["partitions"].append(resp)
        else:
            out.append({"topic": name if name is not None else "", "topic_id": tid,
                        "partitions": [resp]})
            prev = k
    return out


def _respond(f: _Fetch, error: int, session_id: int, items) -> dict:
    r = {"throttle_time_ms": 0, "error_code": error, "session_id": session_id, "responses": _group(items, f)}
    if f.endpoints:
        r["node_endpoints"] = list(f.endpoints.values())
    return r


class _Budget:
    """The response's byte limit across partitions (KIP-74: the first partition with data
    always returns at least one whole batch; Kafka's ReplicaManager.readFromLog limitBytes)."""
    __slots__ = ("limit", "min_one", "total")

    def __init__(self, max_bytes: int):
        self.limit = max(max_bytes, 0)
        self.min_one = True
        self.total = 0


def _read_for_follower(rm, name: str, p: dict, replica_id: int, version: int, budget: _Budget, targets):
    """One partition of a follower's fetch (``replica_id`` >= 0, Kafka's FetchFromFollower): it
    must be led here; the fetch offset is the follower's log end offset, recorded (ISR, HW)
    before reading up to our log end offset, not the HW.  v12 ``last_fetched_epoch``: when that
    epoch ends earlier here than the fetch offset (or is unknown), the answer is
    ``diverging_epoch`` (our end of that epoch) and no records, and the follower truncates
    (Kafka's Partition.fetchRecords divergence check).  Returns (answer, answer at once)."""
    idx = p["partition"]
    try:
        partition = leader_partition(rm, name, idx, p["current_leader_epoch"])
    except KafkaError as e:
        return RESPONSES.error(idx, e.code), True
    fetch_offset = p["fetch_offset"]
    last_epoch = p["last_fetched_epoch"] if version >= 12 else -1
    # (fast path: the follower is on our latest epoch, which ends at our log end)
    if last_epoch >= 0 and not (last_epoch == partition.log.epoch_cache.latest_epoch
                                and fetch_offset <= partition.log_end_offset):
        epoch, end = partition.end_offset_for_epoch(last_epoch)
        if epoch < last_epoch or end < fetch_offset:
            hw = partition.high_watermark
            return ({"partition_index": idx, "error_code": 0, "high_watermark": hw,
                     "last_stable_offset": hw, "log_start_offset": partition.log_start_offset,
                     "diverging_epoch": {"epoch": epoch, "end_offset": end},
                     "aborted_transactions": None, "preferred_read_replica": -1,
                     "records": b""}, True)   # answer at once: the follower has to truncate
    code = partition.update_follower_fetch_state(replica_id, fetch_offset) \
        if 0 <= fetch_offset <= partition.log_end_offset else 0
    if code:
        return RESPONSES.error(idx, code), True
    if targets is not None:
        targets.add(partition)
    max_bytes = min(max(p["partition_max_bytes"], 0), budget.limit)
    res = partition.read_records_for_follower(fetch_offset, max_bytes, budget.min_one)
    if res.error:
        return RESPONSES.error(idx, res.error), True
    if res.size:
        budget.min_one = False
        budget.limit = max(0, budget.limit - res.size)
        budget.total += res.size
    return ({"partition_index": idx, "error_code": 0,
             "high_watermark": res.high_watermark,
             "last_stable_offset": res.last_stable_offset,
             "log_start_offset": res.log_start_offset,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": res.records}, False)




def _read_all(f: _Fetch, request, wanted, targets):
    """One pass over ``wanted`` [(key, name, id, fields)]: ([(name, id, answer)], [end offset
    the fetcher can read up to, or -1], any error)."""
    f.new_budget(request)
    f.endpoints = {}
    items = []
    ends = []
    errored = False
    for _key, name, tid, fields in wanted:
        resp, at_once, end = f.read(name, tid, fields, targets)
        items.append((name, tid, resp))
        ends.append(end)
        errored = errored or at_once
    return items, ends, errored


async def _full_fetch(f: _Fetch, request, wanted):
    """A sessionless / full read of ``wanted`` with the long poll: ([(name, id, answer)], ends)."""
    targets: set = set()
    items, ends, errored = _read_all(f, request, wanted, targets)
    max_wait = request["max_wait_ms"]
    if max_wait > 0 and f.budget.total < request["min_bytes"] and not errored and targets:
        deadline = trio.current_time() + max_wait / 1000.0
        with trio.move_on_at(deadline) as scope:
            while True:
                wake = trio.Event()
                for part in targets:
                    part.add_data_waiter(wake)
                try:
                    await wake.wait()
                finally:
                    for part in targets:
                        part.remove_data_waiter(wake)
                targets = set()
                items, ends, errored = _read_all(f, request, wanted, targets)
                if f.budget.total >= request["min_bytes"] or errored:
                    break
        if scope.cancelled_caught and wake.is_set():
            # Timed out after a wake-up that was not read yet: answer with whatever is there
            # now (like Kafka's DelayedFetch.onComplete).  Without a wake-up since the last
            # read nothing it depends on changed (appends, HW moves, leadership, deletion all
            # wake it), so that answer stands: an idle long poll costs one pass, not two.
            items, ends, errored = _read_all(f, request, wanted, None)
    return items, ends


def _must_list(cp, resp) -> bool:
    """Kafka's CachedPartition.maybeUpdateResponseData: whether an incremental answer lists the
    partition; remembers what it was told."""
    must = False
    if resp["error_code"]:
        cp.hw = -1     # listed again once the error goes away
        return True
    if len(resp["records"]):
        must = True
    if resp["high_watermark"] != cp.hw:
        cp.hw = resp["high_watermark"]
        must = True
    if resp["log_start_offset"] != cp.log_start:
        cp.log_start = resp["log_start_offset"]
        must = True
    div = resp.get("diverging_epoch")
    if div is not None and (div["epoch"] != -1 or div["end_offset"] != -1):
        must = True
    return must


async def _incremental_fetch(f: _Fetch, request, s, sessions) -> dict:
    """An incremental fetch on session ``s`` (already updated with the request's partitions).
    Reads the named, dirty, lagging and errored partitions (all of them every FULL_SWEEP_S)
    and answers the ones Kafka would list, in the session's order."""
    rm = f.rm
    now = trio.current_time()
    if now - s.last_sweep >= FULL_SWEEP_S:
        s.last_sweep = now
        to_read = set(s.partitions)
    else:
        to_read = s.dirty | s.lagging | s.errored | s.named
    s.dirty = set()
    s.lagging = set()
    f.new_budget(request)
    f.endpoints = {}
    out: dict = {}
    follower = f.replica_id >= 0

    def read(keys) -> bool:
        """Read ``keys`` into ``out``; whether the request can be answered now."""
        ready = False
        for cp in sorted((s.partitions[k] for k in keys if k in s.partitions), key=lambda c: c.seq):
            if cp.topic is None:
                info = f.meta.by_id.get(cp.topic_id)   # Kafka's maybeResolveUnknownName
                if info is not None:
                    cp.topic = info.name
            s.attach(rm, cp)
            resp, at_once, end = f.read(cp.topic, cp.topic_id, cp.fields, None)
            key = cp.key
            if resp["error_code"]:
                s.errored.add(key)
            else:
                s.errored.discard(key)
            # (a partition listed by an earlier read of this request stays listed: what made it
            # listable is already remembered as told)
            if _must_list(cp, resp) or key in out:
                out[key] = (cp, resp)
                # errors and divergence answer at once (Kafka's errorReadingData /
                # hasDivergingEpoch); a follower's session also answers a new high watermark
                # at once (what KIP-1166 gets followers), a consumer's waits for min_bytes
                ready = ready or at_once or follower
            if end > cp.fields["fetch_offset"] and not resp["error_code"]:
                s.lagging.add(key)   # more to give: read again next time even if nothing wakes it
            else:
                s.lagging.discard(key)
        return ready or f.budget.total >= request["min_bytes"]

    ready = read(to_read)
    max_wait = request["max_wait_ms"]
    if not ready and max_wait > 0 and s.partitions:
        with trio.move_on_after(max_wait / 1000.0):
            while not ready and s.id in _live(sessions, s):
                if not s.dirty:
                    ev = trio.Event()
                    s.events.add(ev)
                    try:
                        await ev.wait()
                    finally:
                        s.events.discard(ev)
                dirty, s.dirty = s.dirty, set()
                ready = read(dirty)
    if s.epoch != next_epoch(request["session_epoch"]):
        # another request moved the session on while this one waited (Kafka's
        # IncrementalFetchContext.updateAndGenerateResponseData: "possible duplicate request")
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                "session_id": s.id, "responses": []}
    items = []
    for cp, resp in sorted(out.values(), key=lambda x: x[0].seq):
        items.append((cp.topic, cp.topic_id, resp))
        if len(resp["records"]):
            cp.seq = s.next_seq()    # Kafka moves a partition that returned data to the end
    return _respond(f, 0, s.id, items)


def _live(sessions, s):
    """{s.id} while ``s`` is still in the cache (evicted or closed meanwhile: stop waiting)."""
    return (s.id,) if sessions.get(s.id) is s else ()


async def handle(ctx, request):
    version = ctx.api_version
    f = _Fetch(ctx, request, version)
    sessions = getattr(f.rm, "fetch_sessions", None)
    wanted = _requested(request, f)
    if version >= 7:
        session_id, epoch = request["session_id"], request["session_epoch"]
    else:
        session_id, epoch = 0, -1
    if sessions is None:
        epoch = -1 if epoch in (0, -1) else epoch
    if epoch in (0, -1):
        # Full fetch (Kafka's FetchMetadata.isFull): any session it names is closed.
        if session_id and sessions is not None:
            sessions.remove(session_id)
        items, ends = await _full_fetch(f, request, wanted)
        new_id = 0
        if epoch == 0 and sessions is not None:
            sessions.stats["full_fetches"] += 1
            s = sessions.maybe_create(f.replica_id >= 0, len(items), f.uses_ids)
            if s is not None:
                for (key, name, tid, fields), (_, _, resp), end in zip(wanted, items, ends):
                    cp = s.partitions.get(key) or s.add(key, name, tid, fields["partition"], fields)
                    cp.fields = fields
                    _must_list(cp, resp)
                    if resp["error_code"]:
                        s.errored.add(key)
                    elif end > fields["fetch_offset"]:
                        s.lagging.add(key)   # more to give than this answer held
                    s.attach(f.rm, cp)   # (in request order: Kafka reorders on incremental answers only)
                sessions.touch(s)
                new_id = s.id
        elif sessions is not None:
            sessions.stats["sessionless_fetches"] += 1
        return _respond(f, 0, new_id, items)
    # Incremental (Kafka's FetchManager.newContext)
    s = sessions.get(session_id) if sessions is not None else None
    if s is None:
        code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    elif s.epoch != epoch:
        code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    elif s.uses_topic_ids != f.uses_ids:
        code = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    else:
        code = 0
    if code:
        if sessions is not None:
            sessions.stats["session_errors"] += 1
        return error_response(ctx, request, code)
    named = set()
    for key, name, tid, fields in wanted:
        cp = s.partitions.get(key)
        if cp is None:
            cp = s.add(key, name, tid, fields["partition"], fields)
        else:
            cp.fields = fields
            if cp.topic is None and name is not None:
                cp.topic = name     # Kafka's maybeResolveUnknownName
        named.add(key)
    for key in _forgotten(request, f):
        s.forget(key)
        named.discard(key)
    if not s.partitions:
        # Kafka closes a session left empty and answers the request's partitions without one.
        sessions.remove(s.id)
        items, _ = await _full_fetch(f, request, wanted)
        return _respond(f, 0, 0, items)
    sessions.touch(s)
    s.epoch = next_epoch(s.epoch)
    sessions.stats["incremental_fetches"] += 1
    s.named = named
    try:
        return await _incremental_fetch(f, request, s, sessions)
    finally:
        s.named = set()
