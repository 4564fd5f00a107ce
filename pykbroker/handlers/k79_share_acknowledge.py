"""ShareAcknowledge (key 79), versions 1-2 (KIP-932, as Kafka 4.4 serves it).

Behaviour (state in pykbroker/share/): acknowledgements of records acquired through ShareFetch,
within the member's share session.  GroupId and MemberId must be non-empty (INVALID_REQUEST).
ShareSessionEpoch 0 is INVALID_SHARE_SESSION_EPOCH (only ShareFetch opens a session); a missing
session SHARE_SESSION_NOT_FOUND; another epoch than the session's INVALID_SHARE_SESSION_EPOCH
(top-level errors).  -1 closes the session after applying the acknowledgements and releases the
member's other acquired records.  Per partition: 0 gap / 3 reject archive, 1 accept, 2 release
(available again, archived at the delivery count limit), 4 renew (v2) extends the acquisition
lock; a record not acquired by this member: INVALID_RECORD_STATE (nothing of that partition's
acknowledgements is applied); an unknown topic id UNKNOWN_TOPIC_ID; a partition this broker does
not lead NOT_LEADER_OR_FOLLOWER.  With an authorizer (Kafka's order): READ on the group after the
group id is found non-empty, before the member id: GROUP_AUTHORIZATION_FAILED at the top; READ on
each topic: TOPIC_AUTHORIZATION_FAILED for its partitions, nothing of them acknowledged.
Version notes: v2 adds IsRenewAck and AcquisitionLockTimeoutMs.
"""
from __future__ import annotations

import trio

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode as E, KafkaError
from ..server.dispatch import RequestContext
from .support.common import leader_partition
from .support.versions import VERSIONS

API_KEY = 79
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")


def _top(code: int, msg: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg,
            "acquisition_lock_timeout_ms": 0, "responses": [], "node_endpoints": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    spm = ctx.services.share_partition_manager
    if spm is None:
        return _top(E.COORDINATOR_NOT_AVAILABLE)
    gid, mid, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    if gid and not permits(ctx, _GROUP, gid):
        # READ on the share group, after the group id and before the member id (Kafka's order)
        return _top(_GROUP.denial)
    if not gid or not mid:
        return _top(E.INVALID_REQUEST, "GroupId and MemberId must be set.")
    session, err = spm.session(gid, mid, epoch, acknowledge_only=True)
    if err or session is None:   # (no session only with an error)
        return _top(err)
    md = ctx.services.metadata_cache
    now = trio.current_time()
    responses = []
    for t in request["topics"]:
        tid = t["topic_id"]
        name = md.name_of(tid)
        parts = []
        for p in t["partitions"]:
            idx = p["partition_index"]
            code, msg = 0, None
            if name is None:
                code = E.UNKNOWN_TOPIC_ID
            elif not permits(ctx, _TOPIC, name):
                code = _TOPIC.denial   # READ on the topic: nothing acknowledged
            else:
                try:
                    part = leader_partition(ctx.services.replica_manager, name, idx)
                    code, msg = spm.acknowledge(gid, mid, tid, idx, p["acknowledgement_batches"], now)
                    if not code:
                        # written through the share coordinator before the answer, as Kafka
                        code = await spm.persist(gid, tid, part)
                except KafkaError as e:
                    code = e.code
            # a denied topic's entry is Kafka's partitionResponse: the current leader at the
            # schema default (0, 0) (checked against Kafka 4.4)
            leader = 0 if code == _TOPIC.denial else -1
            parts.append({"partition_index": idx, "error_code": int(code), "error_message": msg,
                          "current_leader": {"leader_id": leader, "leader_epoch": leader}})
        responses.append({"topic_id": tid, "partitions": parts})
    if epoch == -1:
        spm.close(session)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout_ms": spm.lock_ms, "responses": responses, "node_endpoints": []}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _top(code)
