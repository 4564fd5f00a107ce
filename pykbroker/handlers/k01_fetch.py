"""Fetch (key 1), versions 4-12 (consumer fetches by topic name).

Behaviour (Apache Kafka 4.x as the oracle):
- Sessions (KIP-227) are kept for followers only (``_session_fetch``, rules in
  cluster/fetch_session.py): an idle follower's incremental fetch names and gets no partition.
  A consumer's full request (session epoch 0 or -1) is answered with a full response listing
  every requested partition and ``session_id`` 0 — exactly what Kafka answers when its
  fetch-session cache is full, so clients keep sending full requests.  A consumer's request
  naming a session id with a positive epoch (incremental) gets the top-level error
  FETCH_SESSION_ID_NOT_FOUND, as Kafka answers for an unknown session; clients then start over
  with a full fetch.
- Per partition: unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; v9+
  ``current_leader_epoch`` lower than ours -> FENCED_LEADER_EPOCH, higher ->
  UNKNOWN_LEADER_EPOCH, -1 skips the check; ``fetch_offset`` below the log start or above the
  log end -> OFFSET_OUT_OF_RANGE.  Errored partitions carry high_watermark /
  last_stable_offset / log_start_offset = -1 and empty records, like Kafka.
- Data: whole batches read from the segment files as ``FileRegion`` chunks (sent with
  os.sendfile), starting at the batch containing ``fetch_offset`` (clients skip the earlier
  records), bounded by the high watermark (read_uncommitted) or the last stable offset
  (read_committed: the first offset of the earliest open transaction, capped by the high
  watermark).
  ``partition_max_bytes`` bounds each partition and ``max_bytes`` the response; the first
  partition that has data always returns at least one whole batch even when larger (KIP-74).
  Empty = zero-length bytes, never null.
- Long poll: if fewer than ``min_bytes`` are available (and no partition errored), the request
  parks until an append to one of its partitions or ``max_wait_ms`` passes, then reads again.
- aborted_transactions (as Kafka 4.4): on a successful read null under read_uncommitted; under
  read_committed the aborted transactions (producer id, first offset) overlapping the read, from
  the segments' ``.txnindex`` (storage/txn_index.py); null for errors raised by the log read
  (OFFSET_OUT_OF_RANGE, FENCED/UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR); empty for
  UNKNOWN_TOPIC_OR_PARTITION, which Kafka answers from its metadata check before reading.
- preferred_read_replica is always -1 (no fetch from followers, KIP-392); ``rack_id`` ignored.
- Consumers of a partition this broker only follows: NOT_LEADER_OR_FOLLOWER (after the epoch
  checks, as Kafka orders them); consumers never read past the high watermark.
- Follower fetch (``replica_id`` >= 0, from a replica of the partition): see
  ``_read_all_for_follower``: records up to the log end offset, the follower's position
  recorded (ISR expansion, high watermark), ``diverging_epoch`` on v12.  Its long poll waits
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

from ..protocol.errors import ErrorCode, KafkaError
from .common import NEW_LEADER_ERRORS, PartitionResponses, current_leader, leader_partition

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12
READ_COMMITTED = 1

# Per partition only: a request-level failure is the top-level error_code (error_response).
RESPONSES = PartitionResponses(
    ("topics", "topic", "partitions", "partition"), ("responses", "topic", "partitions", "partition_index"),
    {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
     "aborted_transactions": None, "preferred_read_replica": -1, "records": b""})


def error_response(ctx, request, code) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "session_id": 0, "responses": []}


def _read_all(broker, request, targets, version: int = 12):
    """One pass over the requested partitions.  Returns (responses, bytes read, any error)."""
    rm = broker.replica_manager
    if request["replica_id"] >= 0:
        return _read_all_for_follower(rm, request, targets, version)
    read_committed = request["isolation_level"] == READ_COMMITTED
    limit = max(request["max_bytes"], 0)
    min_one = True
    total = 0
    errored = False
    responses = []
    for t in request["topics"]:
        name = t["topic"]
        parts = []
        responses.append({"topic": name, "partitions": parts})
        for p in t["partitions"]:
            idx = p["partition"]
            try:
                # (current_leader_epoch is -1, no check, before v9)
                partition = leader_partition(rm, name, idx, p["current_leader_epoch"])
            except KafkaError as e:
                r = RESPONSES.error(idx, e.code)
                if e.code in NEW_LEADER_ERRORS and version >= 12:
                    # KIP-951: where the leader is now (node_endpoints need v16)
                    leader, _ = current_leader(broker.metadata_cache, name, idx)
                    if leader is not None:
                        r["current_leader"] = leader
                if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    # Kafka answers it from its metadata check, before the log read, with an
                    # empty (not null) aborted_transactions list.
                    r["aborted_transactions"] = []
                parts.append(r)
                errored = True
                continue
            targets.add(partition)
            max_bytes = min(max(p["partition_max_bytes"], 0), limit)
            res = partition.read_records(p["fetch_offset"], max_bytes, min_one, read_committed)
            if res.error:
                parts.append(RESPONSES.error(idx, res.error))
                errored = True
                continue
            if res.size:
                # Kafka: only the first partition with data may exceed the limits (KIP-74).
                min_one = False
                limit = max(0, limit - res.size)
                total += res.size
            parts.append({"partition_index": idx, "error_code": 0,
                          "high_watermark": res.high_watermark,
                          "last_stable_offset": res.last_stable_offset,
                          "log_start_offset": res.log_start_offset,
                          "aborted_transactions": None if res.aborted_transactions is None else [
                              {"producer_id": e.producer_id, "first_offset": e.first_offset}
                              for e in res.aborted_transactions],
                          "preferred_read_replica": -1,
                          "records": res.records})
    return responses, total, errored


def _read_all_for_follower(rm, request, targets, version: int):
    """A follower's fetch without a session: every named partition, see
    :func:`_read_for_follower`.  Returns (responses, bytes read, any error)."""
    budget = _Budget(request["max_bytes"])
    errored = False
    responses = []
    for t in request["topics"]:
        name = t["topic"]
        parts = []
        responses.append({"topic": name, "partitions": parts})
        for p in t["partitions"]:
            resp, err = _read_for_follower(rm, name, p, request["replica_id"], version, budget, targets)
            parts.append(resp)
            errored = errored or err
    return responses, budget.total, errored


class _Budget:
    """The response's byte limit across partitions (KIP-74: the first partition with data
    always returns at least one whole batch)."""
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


async def _session_fetch(ctx, request, sessions, version: int):
    """A follower's fetch with a session (cluster/fetch_session.py has the rules); None when
    no session can be created (the caller answers a sessionless full fetch)."""
    from ..cluster.fetch_session import FULL_SWEEP_S, CachedPartition
    rm = ctx.broker.replica_manager
    sid, epoch, rid = request["session_id"], request["session_epoch"], request["replica_id"]
    now = trio.current_time()
    if epoch == 0:
        if sid and sessions.get(sid, rid) is not None:
            sessions.remove(sid)
        s = sessions.create(rid)
        if s is None:
            return None
        full = True
    else:
        s = sessions.get(sid, rid)
        if s is None:
            return error_response(ctx, request, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != s.epoch:
            return error_response(ctx, request, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        full = False
    s.epoch = epoch + 1
    s.last_used = now
    for f in request["forgotten_topics_data"]:
        for idx in f["partitions"]:
            cp = s.partitions.pop((f["topic"], idx), None)
            if cp is not None:
                s.detach(cp)
                s.dirty.discard((f["topic"], idx))
    named = []
    for t in request["topics"]:
        for p in t["partitions"]:
            tp = (t["topic"], p["partition"])
            cp = s.partitions.get(tp)
            if cp is None:
                cp = s.partitions[tp] = CachedPartition(tp[0], tp[1], p)
            else:
                cp.fields = p
            s.attach(rm, cp)
            named.append(tp)
    if full or now - s.last_sweep >= FULL_SWEEP_S:
        s.last_sweep = now
        to_read = list(s.partitions)
    else:
        named_set = set(named)
        to_read = named + [tp for tp in s.dirty if tp not in named_set]
    s.dirty.clear()
    budget = _Budget(request["max_bytes"])
    out: dict = {}
    # partitions whose follower is still behind our log end after this answer (a partial or
    # budget-limited read): read again next time even if nothing wakes them
    lagging: set = set()

    def read(tps) -> bool:
        """Read ``tps`` into ``out``; whether the request can be answered now."""
        ready = False
        for tp in tps:
            cp = s.partitions.get(tp)
            if cp is None:
                continue
            s.attach(rm, cp)
            resp, at_once = _read_for_follower(rm, tp[0], cp.fields, rid, version, budget, None)
            if full or at_once or len(resp["records"]) or resp["high_watermark"] != cp.hw \
                    or resp["log_start_offset"] != cp.log_start:
                out[tp] = resp
                ready = ready or at_once or (not full)
            else:
                out.pop(tp, None)
            part = cp.part
            if not at_once and part is not None and not part.offline \
                    and part.log_end_offset > cp.fields["fetch_offset"]:
                lagging.add(tp)
            else:
                lagging.discard(tp)
        return ready or budget.total >= request["min_bytes"]

    ready = read(to_read)
    max_wait = request["max_wait_ms"]
    if not ready and max_wait > 0:
        with trio.move_on_after(max_wait / 1000.0):
            while not ready:
                if not s.dirty:
                    s.event = trio.Event()
                    try:
                        await s.event.wait()
                    finally:
                        s.event = None
                dirty, s.dirty = s.dirty, set()
                ready = read(dirty)
    s.dirty |= lagging
    by_topic: dict = {}
    for (name, _), resp in out.items():
        cp = s.partitions.get((name, resp["partition_index"]))
        if cp is not None and not resp["error_code"]:
            cp.hw, cp.log_start = resp["high_watermark"], resp["log_start_offset"]
        by_topic.setdefault(name, []).append(resp)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": s.id,
            "responses": [{"topic": n, "partitions": ps} for n, ps in by_topic.items()]}


async def handle(ctx, request):
    version = ctx.api_version
    if version >= 7:
        session_id, epoch = request["session_id"], request["session_epoch"]
        sessions = getattr(ctx.broker.replica_manager, "fetch_sessions", None)
        if request["replica_id"] >= 0 and sessions is not None:
            if epoch == -1 and session_id:
                if sessions.get(session_id, request["replica_id"]) is not None:
                    sessions.remove(session_id)   # the follower closes its session
            elif epoch >= 0:
                answer = await _session_fetch(ctx, request, sessions, version)
                if answer is not None:
                    return answer
        if epoch not in (0, -1):
            # Incremental fetch on a session we never created (we never hand out session ids).
            return error_response(ctx, request, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    targets: set = set()
    responses, total, errored = _read_all(ctx.broker, request, targets, version)
    max_wait = request["max_wait_ms"]
    if (max_wait > 0 and total < request["min_bytes"] and not errored and targets):
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
                responses, total, errored = _read_all(ctx.broker, request, targets, version)
                if total >= request["min_bytes"] or errored:
                    break
        if scope.cancelled_caught and wake.is_set():
            # Timed out after a wake-up that was not read yet: answer with whatever is there
            # now (like Kafka's DelayedFetch.onComplete).  Without a wake-up since the last
            # read nothing it depends on changed (appends, HW moves, leadership, deletion all
            # wake it), so that answer stands: an idle long poll costs one pass, not two.
            responses, total, errored = _read_all(ctx.broker, request, set(), version)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
