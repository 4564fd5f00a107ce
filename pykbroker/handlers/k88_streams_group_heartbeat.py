"""StreamsGroupHeartbeat (key 88), versions 0-1: the KIP-1071 streams group protocol.

Behaviour (as Apache Kafka 4.4): see coordinator/group/streams.py (topology initialisation on the
first join, topology configuration against the metadata with the statuses MISSING_SOURCE_TOPICS /
MISSING_INTERNAL_TOPICS / INCORRECTLY_PARTITIONED_TOPICS / ASSIGNMENT_DELAYED /
SHUTDOWN_APPLICATION, creation of the repartition and changelog topics by the coordinator, group
and member epochs, sticky assignment of active tasks, revocation before reassignment, session
expiry).  Group-level checks: empty group id: INVALID_REQUEST ("GroupId can't be empty.", Kafka's
request validation, not INVALID_GROUP_ID); NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
COORDINATOR_LOAD_IN_PROGRESS.  A group of another type: GROUP_ID_NOT_FOUND ("Group X is not a
streams group."), except an empty classic group (offsets only), which the streams group replaces.
With an authorizer: READ on the group, then DESCRIBE on every topic the topology names (source,
repartition, changelog): GROUP_ / TOPIC_AUTHORIZATION_FAILED, as Kafka 4.4; the internal topics
the coordinator would create need CREATE on the cluster or on each of them, else none is created
and the MISSING_INTERNAL_TOPICS status ends "; Unauthorized to CREATE on topics a, b." (Kafka 4.4's
KafkaApis; compared in tests/differential/test_acl_enforcement.py); a creation that failed in the
last two heartbeat intervals is reported there too ("; Creation failed: t (why).", at most three
named, compared in tests/differential/test_streams_groups.py).  Before the DESCRIBE check,
whatever the ACLs: a topology naming an internal topic or an invalid topic name is answered
STREAMS_INVALID_TOPOLOGY, as Kafka 4.4.
Error answers carry member id "" and member epoch 0, as Kafka's.
Persistence: the records a heartbeat changes are appended to __consumer_offsets (Kafka's streams
group record layout) before it is answered; an append failure is answered with Kafka's mapping.
Version notes: v1 replaces AcceptableRecoveryLagLegacy (int32) by AcceptableRecoveryLag (int64)
and adds TopologyDescriptionRequired (KIP-1331; always false here: pykbroker has no topology
description plugin, as a default Kafka broker).
"""
from __future__ import annotations

from typing import Any

from ..acl.check import permits
from ..acl.requirements import need, needs
from ..cluster.metadata import INTERNAL_TOPICS, is_valid_topic_name
from ..coordinator.group.api import client_host
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.modern_group import group_heartbeat, HEARTBEAT_ROLES as _group_acl
from .support.versions import VERSIONS

API_KEY = 88
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the rows group_heartbeat checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_group_acl)
# and this API's own: CREATE on the internal topics the coordinator would create
_CREATE_ANY = need(API_KEY, "internal_topics_any")
_CREATE = need(API_KEY, "internal_topic")


def _err(code: int, msg: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg, "member_id": "",
            "member_epoch": 0, "heartbeat_interval_ms": 0, "acceptable_recovery_lag_legacy": 0,
            "task_offset_interval_ms": 0, "acceptable_recovery_lag": -1, "status": [], "active_tasks": None,
            "standby_tasks": None, "warmup_tasks": None, "topology_description_required": False,
            "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}


async def handle(ctx: RequestContext, request: dict) -> dict:
    topics = _topology_topics(request)
    # answered once the heartbeat's records are in __consumer_offsets (group_heartbeat); an empty
    # group id fails Kafka's request validation (INVALID_REQUEST), not the group lookup
    return await group_heartbeat(
        ctx, request, _err, lambda gc: gc.streams,
        lambda streams: streams.heartbeat(request, ctx.api_version, ctx.client_id or "", client_host(ctx),
                                          lambda names: _refused_creates(ctx, names)),
        empty_group_id=E.INVALID_REQUEST, described_topics=topics,
        refuse_topics=lambda error: _refused_names(topics, error))


def _refused_creates(ctx: RequestContext, names: list) -> list:
    """The internal topics of ``names`` the client may not create: none with CREATE on the
    cluster (checked without logging a denial, as Kafka), else those without CREATE on the topic."""
    if permits(ctx, _CREATE_ANY, log_denied=False):
        return []
    return [n for n in names if not permits(ctx, _CREATE, n)]


def _topology_topics(request: dict) -> list:
    """Every topic a topology names, once each, in Kafka 4.4's order (per subtopology: source,
    repartition sink, repartition source, changelog): Kafka requires DESCRIBE on each of them
    before the coordinator sees the topology."""
    topo = request.get("topology")
    if not topo:
        return []
    out: list = []
    for s in topo.get("subtopologies") or ():
        out += s.get("source_topics") or []
        out += s.get("repartition_sink_topics") or []
        out += [t["name"] for t in s.get("repartition_source_topics") or ()]
        out += [t["name"] for t in s.get("state_changelog_topics") or ()]
    return list(dict.fromkeys(out))


def _refused_names(topics: list, error: Any) -> dict | None:
    """Kafka 4.4's KafkaApis, whatever the ACLs (after READ on the group, before DESCRIBE on the
    topics): internal topics, then invalid names, are STREAMS_INVALID_TOPOLOGY."""
    internal = [t for t in topics if t in INTERNAL_TOPICS]
    if internal:
        return error(E.STREAMS_INVALID_TOPOLOGY, "Use of Kafka internal topics %s in a Kafka Streams topology is "
                     "prohibited." % ", ".join(internal))
    invalid = [t for t in topics if not is_valid_topic_name(t)]
    if invalid:
        return error(E.STREAMS_INVALID_TOPOLOGY, "Topic names %s are not valid topic names." % ", ".join(invalid))
    return None


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _err(code)
