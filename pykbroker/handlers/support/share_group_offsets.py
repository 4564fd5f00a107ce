"""What the handlers of a share group's start offsets share (not a handler: ``load_handlers``
loads only ``kNN_*``).  AlterShareGroupOffsets (key 91) and DeleteShareGroupOffsets (key 92) run
the same group checks and answer in the same layout; only what they do to each topic differs.

- :func:`offsets_alterable_share_group`: the group checks of both.
- :func:`change_start_offsets`: both handlers' frame: the group checks, one ``responses`` entry
  per requested topic (built by the handler), the response.
- :func:`error_response`: their whole-request error answer.
- :data:`NO_TOPIC_ID`: the topic id answered for a topic this broker does not know (also k90).
"""
from __future__ import annotations

from typing import Any

from ...coordinator.group.api import group_precheck
from ...coordinator.group.share import ShareGroup
from ...acl.check import denial, permits_role
from ...protocol.errors import DEFAULT_MESSAGES, ErrorCode as E, KafkaError
from ...server.dispatch import RequestContext
from .modern_group import typed_group

# Kafka answers an unknown topic with the zero UUID (Uuid.ZERO_UUID) as its id.
NO_TOPIC_ID = b"\x00" * 16
# the rows of acl/requirements.py change_start_offsets' checks read, for its handlers to ask for
# at import
ACL_ROLES = ("group", "topic")


def _response(code: int = 0, msg: str | None = None, responses: Any = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg,
            "responses": responses if responses is not None else []}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    """A whole-request error is a top-level error_code with no topics, as Kafka answers it."""
    return _response(code)


async def offsets_alterable_share_group(ctx: RequestContext, group_id: str, *, create: bool) -> Any:
    """The share group whose start offsets an Alter/DeleteShareGroupOffsets changes, with
    ``__share_group_state`` ready; raises the KafkaError Kafka answers for the whole request.

    As Kafka: an empty id: INVALID_GROUP_ID; the coordinator's checks; a group of another type
    (or, unless ``create``, no group): GROUP_ID_NOT_FOUND; a group with members: NON_EMPTY_GROUP
    (its consumers would race the new offsets: Kafka's ShareGroup.validateOffsetsAlterable).
    With ``create`` a group that does not exist is created empty and its record written, so that
    its start offsets can be set before its consumers start and outlive a restart."""
    if not group_id:
        raise KafkaError(E.INVALID_GROUP_ID)
    gc, err = await group_precheck(ctx, group_id)
    if err:
        raise KafkaError(err)
    g = typed_group(gc, group_id, "share", missing_ok=create)
    if g is not None and g.members:
        raise KafkaError(E.NON_EMPTY_GROUP, "The group has active members.")
    if g is None:
        g = gc.groups[group_id] = ShareGroup(group_id, gc.now_ms())
        await gc.share.persist(g).get()
    await ctx.services.share_coordinator.ensure_topic()
    return g


async def change_start_offsets(ctx: RequestContext, request: dict, answer_topic: Any, *, create: bool,
                               denied_topic: Any) -> dict:
    """The response of Alter/DeleteShareGroupOffsets.  With an authorizer the API's "group" row
    of acl/requirements.py comes first (Alter: READ, Delete: DELETE; Kafka checks it before the
    coordinator):
    GROUP_AUTHORIZATION_FAILED for the whole request.  Then the group checks
    (:func:`offsets_alterable_share_group` with ``create``); their error is the whole answer,
    with no topics.  A topic the client may not READ gets ``denied_topic(topic)`` (Kafka answers
    it TOPIC_AUTHORIZATION_FAILED without asking the coordinator); for the others
    ``await answer_topic(ctx, group_id, topic, info)`` gives the ``responses`` entry, one at a
    time in request order (``info``: the topic's metadata, None for a topic this broker does not
    know).  The denied topics come first, as Kafka merges its own answers before the
    coordinator's."""
    gid = request["group_id"]
    if not permits_role(ctx, "group", gid):
        code = denial(ctx, "group")
        return _response(code, DEFAULT_MESSAGES[code])
    try:
        await offsets_alterable_share_group(ctx, gid, create=create)
    except KafkaError as e:
        return _response(e.code, e.message)
    md = ctx.services.metadata_cache
    denied, responses = [], []
    for t in request["topics"]:
        if not permits_role(ctx, "topic", t["topic_name"]):
            denied.append(denied_topic(t))
            continue
        responses.append(await answer_topic(ctx, gid, t, md.get(t["topic_name"])))
    return _response(responses=denied + responses)
