"""ShareFetch (key 78), versions 1-2 (KIP-932, as Kafka 4.4 serves it).

Behaviour (state in pykbroker/share/: partition.py, manager.py):
- GroupId and MemberId must be non-empty (else INVALID_REQUEST).  The share session
  (ShareSessionEpoch 0 opens, N continues, -1 closes) is checked first: SHARE_SESSION_NOT_FOUND,
  INVALID_SHARE_SESSION_EPOCH or SHARE_SESSION_LIMIT_REACHED are top-level errors with no
  partitions.
- Piggybacked acknowledgements are applied first, per partition (AcknowledgeErrorCode:
  INVALID_RECORD_STATE when a record is not acquired by this member), and the partition's new
  state written through the share coordinator (``__share_group_state``) before the answer.
- A partition's state is read from the share coordinator on the group's first fetch of it
  after a start (so deliveries, acknowledgements and the start offset survive a restart).
- Then every partition of the session is fetched: records acquired for the member, as whole
  batches (file regions) plus AcquiredRecords ranges with their delivery counts; at most
  MaxRecords records in all (by whole batches; ShareAcquireMode 1 = record limit, v2, cuts
  exactly), MaxBytes bytes (the first batch always fits, KIP-74).  With nothing acquired the
  request waits up to MaxWaitMs for new data, an expiring acquisition lock, or records released
  by another member or a closed session.
- With an authorizer (Kafka's order): READ on the group, checked after the group id is found
  non-empty and before the member id and the session: GROUP_AUTHORIZATION_FAILED at the top;
  READ on each topic: a partition of a topic the client may not read is answered
  TOPIC_AUTHORIZATION_FAILED, neither fetched nor acknowledged (AcknowledgeErrorCode too).
- Per-partition errors as Fetch's partition lookup: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER (with CurrentLeader and NodeEndpoints).
- Listed partitions: those in the request and those with acquired records or an error.
- AcquisitionLockTimeoutMs: ``group.share.record.lock.duration.ms``.
- Epoch -1: acknowledgements only; the session closes and the member's records are released.
Version notes: v1 is Kafka 4.x's first supported version (MaxRecords, BatchSize); v2 adds
ShareAcquireMode and IsRenewAck (acknowledge type 4 renews a lock, KIP-1222).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode as E, KafkaError
from ..server.dispatch import RequestContext
from .support.common import current_leader, leader_partition
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from ..share.manager import SharePartitionManager

API_KEY = 78
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")


def _top(code: int, msg: str | None = None, lock_ms: Any = 0) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg,
            "acquisition_lock_timeout_ms": lock_ms, "responses": [], "node_endpoints": []}


def _part(idx: int, code: int = 0, msg: str | None = None) -> dict:
    return {"partition_index": idx, "error_code": int(code), "error_message": msg,
            "acknowledge_error_code": 0, "acknowledge_error_message": None,
            "current_leader": {"leader_id": -1, "leader_epoch": -1}, "records": b"", "acquired_records": []}


def _spm(ctx: RequestContext) -> SharePartitionManager:
    spm = ctx.services.share_partition_manager
    if spm is None:
        raise KafkaError(E.COORDINATOR_NOT_AVAILABLE)
    return spm


async def handle(ctx: RequestContext, request: dict) -> dict:
    spm = _spm(ctx)
    gid, mid, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    if gid and not permits(ctx, _GROUP, gid):
        return _top(_GROUP.denial)
    if not gid or not mid:
        return _top(E.INVALID_REQUEST, "GroupId and MemberId must be set.")
    session, err = spm.session(gid, mid, epoch, connection=ctx.connection)
    if err or session is None:   # (no session only with an error)
        return _top(err)
    md = ctx.services.metadata_cache
    now = trio.current_time()
    out: dict = {}   # (topic id, partition) -> partition answer
    endpoints: dict = {}
    listener = ctx.listener_name

    def entry(tid: Any, idx: int) -> dict:
        r = out.get((tid, idx))
        if r is None:
            r = out[(tid, idx)] = _part(idx)
        return r

    # 1. acknowledgements, and the request's partitions join the session
    for t in request["topics"]:
        tid = t["topic_id"]
        for p in t["partitions"]:
            idx = p["partition_index"]
            r = entry(tid, idx)
            if epoch != -1:
                session.partitions[(tid, idx)] = None
            name = md.name_of(tid)
            if name is not None and not permits(ctx, _TOPIC, name):
                if p["acknowledgement_batches"]:
                    r["acknowledge_error_code"] = int(_TOPIC.denial)
                continue
            if p["acknowledgement_batches"]:
                code, msg = spm.acknowledge(gid, mid, tid, idx, p["acknowledgement_batches"], now)
                if not code:
                    code = await _persist(ctx, spm, gid, tid, idx)
                r["acknowledge_error_code"], r["acknowledge_error_message"] = int(code), msg
    for t in request["forgotten_topics_data"]:
        for idx in t["partitions"]:
            session.partitions.pop((t["topic_id"], idx), None)
    lock_ms = spm.lock_ms
    if epoch == -1:
        spm.close(session)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "acquisition_lock_timeout_ms": lock_ms, "responses": _group(out), "node_endpoints": []}

    # 2. the session's partitions
    targets = []
    for (tid, idx) in list(session.partitions):
        name = md.name_of(tid)
        if name is None:
            entry(tid, idx).update(error_code=int(E.UNKNOWN_TOPIC_ID))
            continue
        if not permits(ctx, _TOPIC, name):
            # Kafka's partitionResponse: the current leader at the schema default (0, 0)
            entry(tid, idx).update(error_code=int(_TOPIC.denial),
                                   current_leader={"leader_id": 0, "leader_epoch": 0})
            continue
        try:
            part = leader_partition(ctx.services.replica_manager, name, idx)
        except KafkaError as e:
            r = entry(tid, idx)
            r["error_code"] = int(e.code)
            if e.code in (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH):
                leader, reg = current_leader(md, name, idx)
                if leader is not None:
                    r["current_leader"] = leader
                if reg is not None and (ep := reg.endpoint(listener)) is not None:
                    endpoints[reg.broker_id] = {"node_id": reg.broker_id, "host": ep.host, "port": ep.port,
                                                "rack": reg.rack}
            continue
        targets.append((tid, idx, part, await spm.load(gid, tid, part)))
    strict = ctx.api_version >= 2 and request["share_acquire_mode"] == 1

    def acquire_all() -> bool:
        left_records = request["max_records"] if request["max_records"] > 0 else 500
        left_bytes = max(request["max_bytes"], 0)
        got = False
        t_now = trio.current_time()
        for tid, idx, part, sp in targets:
            if left_records <= 0:
                break
            acquired, records, size = spm.acquire(sp, part, mid, left_records, left_bytes, strict, t_now)
            if not acquired:
                continue
            r = entry(tid, idx)
            r["records"] = records
            r["acquired_records"] = [{"first_offset": a, "last_offset": b, "delivery_count": c}
                                     for a, b, c in acquired]
            r["current_leader"] = {"leader_id": ctx.services.node_id, "leader_epoch": part.leader_epoch}
            left_records -= sum(b - a + 1 for a, b, _ in acquired)
            left_bytes = max(0, left_bytes - size)
            got = True
        return got

    got = acquire_all()
    max_wait = request["max_wait_ms"]
    if not got and max_wait > 0 and targets:
        deadline = trio.current_time() + max_wait / 1000.0
        while not got and trio.current_time() < deadline:
            lock_deadline = spm.next_deadline([(gid, tid, idx) for tid, idx, _, _ in targets])
            until = deadline if lock_deadline is None else min(deadline, lock_deadline + 0.001)
            wake = trio.Event()
            for *_, part, _sp in targets:
                part.data_waiters.add(wake)
            spm.waiters.add(wake)   # records released by another member or a closed session
            try:
                with trio.move_on_at(until):
                    await wake.wait()
            finally:
                spm.waiters.discard(wake)
                for *_, part, _sp in targets:
                    part.data_waiters.discard(wake)
            if spm.sessions.get((gid, mid)) is not session:
                # closed meanwhile, or replaced by a new session of the same member (the client
                # reconnected, e.g. after its SASL session expired): acquiring here would hand
                # records to a dead connection, held until their acquisition lock runs out
                break
            got = acquire_all()
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": _group(out),
            "node_endpoints": sorted(endpoints.values(), key=lambda e: e["node_id"])}


async def _persist(ctx: RequestContext, spm: Any, gid: str, tid: Any, idx: int) -> int:
    """The acknowledged state is written through the share coordinator before the answer."""
    name = ctx.services.metadata_cache.name_of(tid)
    part = ctx.services.replica_manager.get_partition(name, idx) if name is not None else None
    if part is None:
        return 0
    return await spm.persist(gid, tid, part)


def _group(out: dict) -> list:
    by: dict = {}
    for (tid, idx), r in out.items():
        by.setdefault(tid, []).append(r)
    return [{"topic_id": tid, "partitions": ps} for tid, ps in by.items()]


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _top(code)
