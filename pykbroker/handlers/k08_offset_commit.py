"""OffsetCommit (key 8), versions 2-10: store a group's consumed positions in __consumer_offsets.

Behaviour (as Apache Kafka's group coordinator):
- authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED for
  every partition; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
- topic checks first (as Kafka's request handler, before the coordinator): a topic or partition
  this cluster does not have: UNKNOWN_TOPIC_OR_PARTITION (v10: an unknown or zero topic id:
  UNKNOWN_TOPIC_ID); those partitions lead the response; the group checks below apply to the
  remaining partitions only.
- group checks, in Kafka's order (the empty group id is accepted, as Kafka's coordinator does
  for offsets "for backwards compatibility"): unknown group with
  generation >= 0: ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from v9 on (with generation -1 the commit creates a standalone Empty
  group: assign()+commit users); group.instance.id bound to another member: FENCED_INSTANCE_ID;
  generation -1 on an Empty group: accepted; CompletingRebalance: REBALANCE_IN_PROGRESS; unknown
  member: UNKNOWN_MEMBER_ID; wrong generation: ILLEGAL_GENERATION.  Commits during
  PreparingRebalance with the current generation are accepted (eager clients commit before
  rejoining).  KIP-848 groups check member id and epoch instead (STALE_MEMBER_EPOCH /
  UNKNOWN_MEMBER_ID).  A group error applies to every partition that passed the topic checks.
- per partition: metadata longer than offset.metadata.max.bytes (4096):
  OFFSET_METADATA_TOO_LARGE; null metadata is stored as "".
- the accepted partitions are appended as one batch to the group's __consumer_offsets partition
  and answered once the append is done; OffsetFetch sees them only then.
Version notes: v2-4 retention_time_ms (-1 = broker default; else an explicit expiry, stored as
OffsetCommitValue v1); v3 throttle_time_ms; v6 committed_leader_epoch; v7 group_instance_id;
v8 flexible; v9 generation field is the KIP-848 member epoch; v10 topics by id only
(response: topic_id echoed, name "").  v0/v1 (ZooKeeper-era offset storage) are not served,
as in Kafka 4.
"""
from __future__ import annotations

from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..protocol.errors import KafkaError
from ..server.dispatch import RequestContext
from .support.offset_commits import check_topics, every_partition, response, write_offsets
from .support.versions import VERSIONS

API_KEY = 8
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")


async def handle(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    by_id = v >= 10   # v10 names topics by id only (KIP-848)
    # 1. Topic checks come first (Kafka does them before handing the request to the
    #    coordinator): their errors lead the response, in request order.
    az = session(ctx)
    readable = None
    if az is not None:
        # READ on the group for the whole request, then READ on each topic
        if not az.permits(_GROUP, request["group_id"]):
            raise KafkaError(_GROUP.denial)
        readable = lambda name: az.permits(_TOPIC, name)   # noqa: E731
    failed, accepted = check_topics(ctx.services.metadata_cache, request, by_id, readable, _TOPIC)
    # 2. The coordinator: group checks apply to every accepted partition.
    answered = []
    if accepted:
        gid = request["group_id"]
        # The empty group id is a group like any other here: Kafka's coordinator keeps
        # accepting it for offsets "for backwards compatibility" (only a null id is invalid).
        gc, err = await group_precheck(ctx, gid)
        if not err:
            err, _ = gc.validate_commit(gid, request["generation_id_or_member_epoch"], request["member_id"] or "",
                                        request["group_instance_id"], commit_version=ctx.api_version)
        if err:
            answered = [(t, p, err) for t, _, p in accepted]
        else:
            now = ctx.services.clock.time_ms()   # the broker's clock (pykbroker/clock.py)
            retention = request["retention_time_ms"] if v <= 4 else -1
            expire = None
            if retention is not None and retention >= 0:
                # Kafka adds them as Java longs: a huge retention wraps (and then expires at the
                # next expiry pass) instead of failing the commit; the stored field is an int64
                expire = ((now + retention + (1 << 63)) % (1 << 64)) - (1 << 63)
            answered = await write_offsets(accepted, now, expire, lambda entries: gc.commit(gid, entries))
    # 3. Merged as Kafka's response builder does: topics with early errors first, the
    #    coordinator's partitions appended to their topic (or as new topics after them).
    return response(failed, answered, by_id)


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return every_partition(request, ctx.api_version >= 10, code)
