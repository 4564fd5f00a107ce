"""What the handlers of Kafka's modern groups share: consumer (KIP-848), share (KIP-932) and
streams (KIP-1071) groups, whose members heartbeat and are assigned by the coordinator (not a
handler: ``load_handlers`` loads only ``kNN_*``).

- :func:`typed_group`: the group of one type that a request names, or Kafka's
  GROUP_ID_NOT_FOUND ("Group X not found." / "Group X is not a <type> group.").
- :func:`group_heartbeat`: ConsumerGroupHeartbeat / ShareGroupHeartbeat / StreamsGroupHeartbeat:
  the group-level checks, the heartbeat, and its answer once its records are written.
- :func:`member_heartbeat_error` / :func:`member_heartbeat_error_response`: the error answer of
  ConsumerGroupHeartbeat and ShareGroupHeartbeat (StreamsGroupHeartbeat's has other fields).
- :func:`describe_groups`: ConsumerGroupDescribe / ShareGroupDescribe / StreamsGroupDescribe:
  one entry per requested group id, in request order.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...acl.bindings import GROUP
from ...acl.check import authorized_operations, denial, permits_role
from ...coordinator.group.api import group_precheck
from ...coordinator.group.coordinator import append_error_to_response
from ...protocol.errors import ErrorCode as E, KafkaError
from ...server.dispatch import RequestContext

# Kafka's authorized_operations when the client did not ask for them: Integer.MIN_VALUE
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# the rows of acl/requirements.py the checks below read, for their handlers to ask for at import
HEARTBEAT_ROLES = ("group", "topic")   # group_heartbeat: READ on the group, DESCRIBE on topics
DESCRIBE_ROLES = ("group",)            # describe_groups: DESCRIBE on each group


def typed_group(gc: Any, group_id: str, group_type: str, *, missing_ok: bool = False) -> Any:
    """The live group ``group_id`` if it is of ``group_type`` ("consumer", "share", "streams":
    ``Group.kind``), as Kafka's GroupMetadataManager.consumerGroup / shareGroup / streamsGroup.
    Raises KafkaError GROUP_ID_NOT_FOUND, with Kafka's message, for a group of another type, and
    for a group that does not exist unless ``missing_ok`` (then None)."""
    g = gc.get_group(group_id)
    if g is None:
        if missing_ok:
            return None
        raise KafkaError(E.GROUP_ID_NOT_FOUND, "Group %s not found." % group_id)
    if g.kind != group_type:
        raise KafkaError(E.GROUP_ID_NOT_FOUND, "Group %s is not a %s group." % (group_id, group_type))
    return g


def member_heartbeat_error(code: int, msg: str | None = None) -> dict:
    """ConsumerGroupHeartbeat's and ShareGroupHeartbeat's error answer (the two responses have the
    same fields): no member id, member epoch -1, no assignment, as Kafka's."""
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg, "member_id": None,
            "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}


def member_heartbeat_error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    """The ``error_response`` of ConsumerGroupHeartbeat and ShareGroupHeartbeat."""
    return member_heartbeat_error(code)


async def group_heartbeat(ctx: RequestContext, request: dict, error: Callable[..., dict], manager: Callable[[Any], Any],
                          beat: Callable[[Any], Any], *, empty_group_id: int = E.INVALID_GROUP_ID,
                          no_manager: int = E.UNSUPPORTED_VERSION, described_topics: Any = (),
                          refuse_topics: Any = None) -> dict:
    """The answer to a modern group's heartbeat.  ``error(code, message=None)`` builds the API's
    error response; ``manager(gc)`` is the coordinator's manager of the group type (None when it
    is not built: answered ``no_manager``); ``beat(manager)`` runs the heartbeat and returns
    ``(response, written)``.

    Checks first, as Kafka: with an authorizer READ on the group, then DESCRIBE on every topic
    of ``described_topics`` (the subscribed topic names of a consumer or share group member, the
    topics of a streams topology; Kafka 4.x answers TOPIC_AUTHORIZATION_FAILED when any is
    denied, so a member cannot learn of topics through its assignment), after
    ``refuse_topics(error)`` (the API's answer to topic names it refuses whatever the ACLs, or
    None: StreamsGroupHeartbeat's internal and invalid names); an empty group id
    answers ``empty_group_id`` ("GroupId can't be empty."), then the coordinator's
    (``group_precheck``).  The response is sent only once the
    heartbeat's records are in __consumer_offsets, as Kafka's write operations: a member must
    never act on an epoch or assignment a coordinator restart could forget; an append failure is
    answered with Kafka's mapping (``append_error_to_response``)."""
    gid = request["group_id"]
    if not permits_role(ctx, "group", gid):
        # READ on the group, before the coordinator; Kafka answers with the request's error
        # response, whose member epoch is the schema default 0 (checked: tests/differential)
        r = error(denial(ctx, "group"))
        if "member_epoch" in r:
            r["member_epoch"] = 0
        return r
    if refuse_topics is not None:
        r = refuse_topics(error)
        if r is not None:
            return r
    if described_topics and not all(permits_role(ctx, "topic", t) for t in set(described_topics)):
        # Kafka answers a fresh response with only the error code (member epoch 0)
        r = error(denial(ctx, "topic"))
        if "member_epoch" in r:
            r["member_epoch"] = 0
        return r
    if not gid:
        return error(empty_group_id, "GroupId can't be empty.")
    gc, err = await group_precheck(ctx, gid)
    if err:
        return error(err)
    m = manager(gc)
    if m is None:
        return error(no_manager)
    res, written = beat(m)
    code = await written.get()
    if code:
        return error(append_error_to_response(code))
    res["throttle_time_ms"] = 0
    return res


async def describe_groups(ctx: RequestContext, request: dict, group_type: str, error: Any, describe: Any) -> list:
    """The ``groups`` of a modern group's Describe, in request order.  ``error(group_id, code,
    message=None)`` builds one group's error entry; ``describe(gc, group)`` its description.

    Per group, as Kafka: an empty id: INVALID_GROUP_ID; the coordinator's checks (the offsets
    topic is not created for a describe); an unknown group or one of another type:
    GROUP_ID_NOT_FOUND (``typed_group``).  ``authorized_operations``: the group operations the
    authorizer allows (every one without an authorizer) when asked for, else INT32_MIN."""
    out = []
    # with an authorizer: DESCRIBE on each group, the refused ones answered first (Kafka)
    denied = [gid for gid in request["group_ids"] if not permits_role(ctx, "group", gid)]
    for gid in denied:
        # KafkaApis builds these entries itself: the epochs stay at the schema default 0
        # (checked against Kafka 4.4: tests/differential/test_acl_enforcement.py)
        e = error(gid, denial(ctx, "group"))
        for k in ("group_epoch", "assignment_epoch"):
            if k in e:
                e[k] = 0
        out.append(e)
    for gid in request["group_ids"]:
        if denied and gid in denied:
            continue
        if not gid:
            out.append(error(gid, E.INVALID_GROUP_ID))
            continue
        gc, err = await group_precheck(ctx, gid, create_topic=False)
        if err:
            out.append(error(gid, err))
            continue
        try:
            g = typed_group(gc, gid, group_type)
        except KafkaError as e:
            out.append(error(gid, e.code, e.message))
            continue
        d = describe(gc, g)
        d["authorized_operations"] = (authorized_operations(ctx, GROUP, gid) if request["include_authorized_operations"]
                                      else AUTHORIZED_OPERATIONS_OMITTED)
        out.append(d)
    return out
