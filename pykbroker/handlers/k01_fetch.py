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
  ``replica_directory_id`` and v18 ``high_watermark`` (the follower's HW; KIP-1166 uses it for
  KRaft's own log) are read and ignored, as Kafka's ReplicaManager does: a follower's fetch, like
  a consumer's, completes on ``min_bytes`` of data, an error or a divergence, never on a high
  watermark move alone (Kafka's DelayedFetch since KAFKA-9952); the new HW goes out with the
  next data or when ``max_wait_ms`` ends.
- Under a client quota (KIP-219, server/connection.py) a throttled answer is empty and the
  session does not learn what it would have told: no session is created for a throttled full
  fetch (session id 0), and an incremental one lists its partitions again next time (Kafka's
  FetchContext.getThrottledResponse).  The session epoch still moves on, as in Kafka.
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
  ``ReplicaManager._read_for_follower``: records up to the log end offset, the follower's position
  recorded (ISR expansion, high watermark), ``diverging_epoch`` on v12+.  Its long poll waits
  like a consumer's (woken by appends).
Version notes: v5 adds log_start_offset; v7 sessions; v9 current_leader_epoch; v11 rack_id and
preferred_read_replica; v12 is flexible, adds last_fetched_epoch and tagged
diverging_epoch/current_leader/snapshot_id (current_leader filled for NOT_LEADER_OR_FOLLOWER /
FENCED_LEADER_EPOCH as Kafka does, KIP-951; snapshot_id left default).
- The partition lookup (unknown, offline: KAFKA_STORAGE_ERROR, leader epoch) is
  cluster/replica_manager.py's ``leader_partition``, shared with Produce, ListOffsets,
  DeleteRecords, OffsetForLeaderEpoch.
The path: this handler decodes the request and keeps the fetch session (which partitions, what
an incremental answer lists); ``ReplicaManager.fetch_messages`` / ``fetch_session_messages``
(cluster/replica_manager.py) read the partitions under the request's byte budget and park the
long poll (cluster/delayed.py); this handler encodes their reads (``ReadResult``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..acl.check import session
from ..acl.requirements import need
from ..cluster.fetch_session import next_epoch
from ..cluster.metadata_cache import MetadataCache
from ..cluster.replica_manager import FetchParams
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.common import PartitionResponses, current_leader
from .support.versions import VERSIONS

API_KEY = 1
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_FOLLOWER = need(API_KEY, "follower")
_TOPIC = need(API_KEY, "topic")
READ_COMMITTED = 1
TOPIC_IDS_FROM = 13


def _any_topic(topic: str) -> bool:
    """A follower's per-topic check: never called, its CLUSTER_ACTION decides (follower_denied)."""
    return True


# Per partition only: a request-level failure is the top-level error_code (error_response).
RESPONSES = PartitionResponses(
    ("topics", "topic", "partitions", "partition"), ("responses", "topic", "partitions", "partition_index"),
    {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
     "aborted_transactions": None, "preferred_read_replica": -1, "records": b""})


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "session_id": 0, "responses": []}


def _params(ctx: RequestContext, request: dict, version: int) -> FetchParams:
    if version >= 15:
        rs = request.get("replica_state")
        replica_id = rs["replica_id"] if rs else -1
    else:
        replica_id = request["replica_id"]
    # Authorization (with an authorizer): a consumer needs READ on each topic, decided once per
    # topic for the request however many of its partitions are read (and not again when a long
    # poll wakes), a follower CLUSTER_ACTION on the cluster; the ReplicaManager answers
    # TOPIC_AUTHORIZATION_FAILED per partition, before any existence or leadership check, as
    # Kafka's handleFetchRequest.
    az = session(ctx)
    authorized: Optional[Callable[[str], bool]] = None
    follower_denied = False
    if az is not None:
        if replica_id >= 0:
            follower_denied = not az.permits(_FOLLOWER)
            authorized = _any_topic
        else:
            authorized = az.once_per_name(_TOPIC)
    return FetchParams(version, replica_id, request["max_wait_ms"], request["min_bytes"], request["max_bytes"],
                       request["isolation_level"] == READ_COMMITTED, version >= TOPIC_IDS_FROM,
                       authorized, follower_denied)


def _respond(ctx: RequestContext, meta: MetadataCache, session_id: int, uses_ids: bool, reads: Any) -> dict:
    """The answer: ``reads`` [((key, name, topic id, request fields), ReadResult)] in answer
    order -> the response's partition entries, consecutive partitions of one topic sharing an
    entry (Kafka's FetchResponse.toMessage keeps the order), and the node_endpoints of the
    leaders named by current_leader (KIP-951: v12+ current_leader, v16+ its endpoint)."""
    version = ctx.api_version
    out: list = []
    prev = None
    endpoints: dict = {}
    for (_key, name, tid, fields), d in reads:
        idx = fields["partition"]
        if d.error:
            r = RESPONSES.error(idx, d.error)
            if d.aborted_transactions is not None:
                r["aborted_transactions"] = []
            if d.leader_hint and version >= 12:
                _current_leader(ctx, meta, r, name, idx, endpoints)
        else:
            aborted = d.aborted_transactions
            r = {"partition_index": idx, "error_code": 0,
                 "high_watermark": d.high_watermark,
                 "last_stable_offset": d.last_stable_offset,
                 "log_start_offset": d.log_start_offset,
                 "aborted_transactions": None if aborted is None else [
                     {"producer_id": e.producer_id, "first_offset": e.first_offset} for e in aborted],
                 "preferred_read_replica": -1,
                 "records": d.records}
            if d.diverging_epoch is not None:
                r["diverging_epoch"] = d.diverging_epoch
        k = tid if uses_ids else name
        if out and k == prev:
            out[-1]["partitions"].append(r)
        else:
            out.append({"topic": name if name is not None else "", "topic_id": tid, "partitions": [r]})
            prev = k
    resp = {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": out}
    if endpoints:
        resp["node_endpoints"] = list(endpoints.values())
    return resp


def _current_leader(ctx: RequestContext, meta: MetadataCache, r: dict, name: str, idx: int, endpoints: dict) -> None:
    """KIP-951: where the leader is now; v16+ also its endpoint in node_endpoints."""
    leader, reg = current_leader(meta, name, idx)
    if leader is None:
        return
    r["current_leader"] = leader
    if ctx.api_version >= 16 and reg is not None:
        e = reg.endpoint(ctx.listener_name)
        if e is not None:
            endpoints[reg.broker_id] = {"node_id": reg.broker_id, "host": e.host, "port": e.port, "rack": reg.rack}


def _requested(request: dict, meta: MetadataCache, uses_ids: bool) -> list[tuple]:
    """The request's partitions as (key, name, topic id, fields), in order (Kafka's
    FetchRequest.fetchData: v13+ resolve ids to names, None when unknown)."""
    out = []
    if uses_ids:
        by_id = meta.by_id
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


def _forgotten(request: dict, uses_ids: bool) -> list:
    if uses_ids:
        return [(t["topic_id"], idx) for t in request["forgotten_topics_data"] for idx in t["partitions"]]
    return [(t["topic"], idx) for t in request["forgotten_topics_data"] for idx in t["partitions"]]


async def handle(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    services = ctx.services
    rm = services.replica_manager
    params = _params(ctx, request, version)
    meta = services.metadata_cache
    uses_ids = params.uses_ids
    sessions = rm.fetch_sessions
    wanted = _requested(request, meta, uses_ids)
    if version >= 7:
        session_id, epoch = request["session_id"], request["session_epoch"]
    else:
        session_id, epoch = 0, -1
    if epoch in (0, -1):
        # Full fetch (Kafka's FetchMetadata.isFull): any session it names is closed.
        if session_id:
            sessions.remove(session_id)
        datas = await rm.fetch_messages(params, wanted)
        new_id = 0
        if epoch == 0:
            sessions.stats["full_fetches"] += 1
            s = sessions.maybe_create(params.replica_id >= 0, len(wanted), uses_ids)
            if s is not None:
                for (key, name, tid, fields), d in zip(wanted, datas):
                    cp = s.partitions.get(key) or s.add(key, name, tid, fields["partition"], fields)
                    cp.fields = fields
                    cp.must_list(d)
                    if d.error:
                        s.errored.add(key)
                    elif d.end > fields["fetch_offset"]:
                        s.lagging.add(key)   # more to give than this answer held
                    if params.replica_id >= 0 and name is not None and rm.outside_isr(name, fields["partition"],
                                                                                      params.replica_id):
                        s.out_of_isr.add(key)   # read at every fetch until the ISR holds it
                    s.attach(rm, cp)   # (in request order: Kafka reorders on incremental answers only)
                sessions.touch(s)
                new_id = s.id
                if ctx.on_throttled is not None:
                    # throttled: answered with session id 0, so no session is created (Kafka's
                    # FullFetchContext creates it only for an answer it sends)
                    ctx.on_throttled.append(lambda: sessions.remove(new_id))
        else:
            sessions.stats["sessionless_fetches"] += 1
        return _respond(ctx, meta, new_id, uses_ids, zip(wanted, datas))
    # Incremental (Kafka's FetchManager.newContext)
    s = sessions.get(session_id)
    code: int
    if s is None:
        code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    elif s.epoch != epoch:
        code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    elif s.uses_topic_ids != uses_ids:
        code = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    else:
        code = 0
    if code or s is None:   # (s is None only with a code)
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
    for key in _forgotten(request, uses_ids):
        s.forget(key)
        named.discard(key)
    if not s.partitions:
        # Kafka closes a session left empty and answers the request's partitions without one.
        sessions.remove(s.id)
        return _respond(ctx, meta, 0, uses_ids, zip(wanted, await rm.fetch_messages(params, wanted)))
    sessions.touch(s)
    s.epoch = next_epoch(s.epoch)
    sessions.stats["incremental_fetches"] += 1
    s.named = named
    # under a quota: what the session remembers as told, restored if the answer is throttled
    throttled = ctx.on_throttled
    told = [(cp, cp.hw, cp.log_start, cp.seq) for cp in s.partitions.values()] \
        if throttled is not None else None
    try:
        out = await rm.fetch_session_messages(params, s, lambda: sessions.get(s.id) is s)
    finally:
        s.named = set()
    if s.epoch != next_epoch(request["session_epoch"]):
        # another request moved the session on while this one waited (Kafka's
        # IncrementalFetchContext.updateAndGenerateResponseData: "possible duplicate request")
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                "session_id": s.id, "responses": []}
    reads = []
    for cp, d in sorted(out.values(), key=lambda x: x[0].seq):
        reads.append(((cp.key, cp.topic, cp.topic_id, cp.fields), d))
        if len(d.records):
            cp.seq = s.next_seq()    # Kafka moves a partition that returned data to the end
    if throttled is not None:
        throttled.append(lambda: _untold(s, told, out))
    return _respond(ctx, meta, s.id, uses_ids, reads)


def _untold(s: Any, told: Any, out: Any) -> None:
    """A throttled incremental answer listed nothing: the session forgets what it would have
    told (Kafka's IncrementalFetchContext.getThrottledResponse leaves its cached partitions as
    they were) and reads those partitions again at the next request."""
    for cp, hw, log_start, seq in told:
        cp.hw, cp.log_start, cp.seq = hw, log_start, seq
    s.dirty.update(out)
