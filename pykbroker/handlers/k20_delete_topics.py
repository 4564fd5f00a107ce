"""DeleteTopics (key 20), versions 1-6.

Behaviour (Apache Kafka KRaft: ControllerApis.deleteTopics):
- v1-5 delete by name (``topic_names``); v6 by ``topics`` entries holding a name or a topic id.
- Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown id: UNKNOWN_TOPIC_ID (name null).
- A name given twice: INVALID_REQUEST "Duplicate topic name."; an id given twice: "Duplicate topic
  id."; both name and id in one entry: "You may not specify both topic name and topic id.";
  neither: "Neither topic name nor id were specified."; a name resolving to an id also given:
  "The provided topic name maps to an ID that was already supplied."
- ``delete.topic.enable=false``: the whole request fails, INVALID_REQUEST before v3 and
  TOPIC_DELETION_DISABLED from v3, as Kafka does.
- Authorization (with an authorizer): DELETE on the cluster, or DESCRIBE and DELETE on the topic,
  else TOPIC_AUTHORIZATION_FAILED before the existence check (by id: a name stays null unless
  DESCRIBE is allowed).
- The deletion is durable before the answer; the partition logs are removed right after.
- ``controller_mutation_rate`` (quota/manager.py MutationQuota, KIP-599): a topic's partitions
  are counted before it is deleted; from v5 a topic is refused with THROTTLING_QUOTA_EXCEEDED
  (message null) while the client's token bucket is below zero, before v5 it is deleted and only
  throttled; the answer carries the throttle time and the connection is muted for it (v2+) or
  the answer held (v1).
Version notes: v4 flexible; v5 adds error_message (Kafka's default texts for unknown topics);
v6 adds topic ids.
"""
from __future__ import annotations

from typing import Any

import trio

from ..acl.check import session
from ..acl.requirements import need
from ..protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError
from ..quota.manager import mutation_quota
from ..cluster.metadata import ZERO_UUID
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 20
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")
_DESCRIBE = need(API_KEY, "describe")
_TOPIC = need(API_KEY, "topic")

# Kafka answers unknown names and ids with ApiError(Errors), which carries the default text.
_DEFAULT_TEXT = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)


# Kafka's text for a topic denied DESCRIBE or DELETE (checked: tests/differential)
_DENIED = DEFAULT_MESSAGES[_TOPIC.denial]


def _result(name: str | None, tid: Any, code: int, message: str | None = None) -> dict:
    if message is None and code in _DEFAULT_TEXT:
        message = DEFAULT_MESSAGES[code]
    return {"name": name, "topic_id": tid, "error_code": int(code), "error_message": message}


def _add_once(x: Any, listed: list, twice: set) -> None:
    """``x`` stays in ``listed`` (request order) until it is named again; then it moves to ``twice``."""
    if x in twice:
        return
    if x in listed:
        listed.remove(x)
        twice.add(x)
    else:
        listed.append(x)


async def handle(ctx: RequestContext, request: dict) -> dict:
    services = ctx.services
    md = services.metadata_cache
    v = ctx.api_version
    if not services.config["delete.topic.enable"]:
        if v < 3:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Topic deletion is disabled.")
        raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED)
    out: list[dict] = []
    names: list[str] = []
    dup_names: set[str] = set()
    ids: list[bytes] = []
    dup_ids: set[bytes] = set()
    if v < 6:
        for n in request["topic_names"]:
            _add_once(n, names, dup_names)
    else:
        for t in request["topics"]:
            n, tid = t["name"], t["topic_id"]
            if n is None:
                if tid == ZERO_UUID:
                    out.append(_result(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                                       "Neither topic name nor id were specified."))
                else:
                    _add_once(tid, ids, dup_ids)
            elif tid == ZERO_UUID:
                _add_once(n, names, dup_names)
            else:
                out.append(_result(n, tid, ErrorCode.INVALID_REQUEST,
                                   "You may not specify both topic name and topic id."))
    for n in sorted(dup_names):
        out.append(_result(n, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    for tid in dup_ids:
        out.append(_result(None, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
    to_delete: dict[bytes, str] = {}
    az = session(ctx)
    if az is not None and az.permits(_CLUSTER):
        az = None   # DELETE on the cluster covers every topic
    for tid in ids:
        info = md.by_id.get(tid)
        if info is None:
            out.append(_result(None, tid, ErrorCode.UNKNOWN_TOPIC_ID))
        elif az is not None and not az.permits(_DESCRIBE, info.name):
            out.append(_result(None, tid, _DESCRIBE.denial, _DENIED))   # the name stays unknown
        elif az is not None and not az.permits(_TOPIC, info.name):
            out.append(_result(info.name, tid, _TOPIC.denial, _DENIED))
        else:
            to_delete[tid] = info.name
    for n in names:
        if az is not None and not (az.permits(_DESCRIBE, n) and az.permits(_TOPIC, n)):
            # before the existence check: a denied client cannot probe names
            out.append(_result(n, ZERO_UUID, _TOPIC.denial, _DENIED))
            continue
        info = md.topics.get(n)
        if info is None:
            out.append(_result(n, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif info.topic_id in to_delete:
            del to_delete[info.topic_id]
            out.append(_result(n, info.topic_id, ErrorCode.INVALID_REQUEST,
                               "The provided topic name maps to an ID that was already supplied."))
        else:
            to_delete[info.topic_id] = n
    mq = mutation_quota(ctx)   # controller_mutation_rate (quota/manager.py); None: not counted
    refused = set()
    if mq is not None:
        # counted for every topic before any is deleted, as Kafka's controller does in one batch
        now_ms = int(trio.current_time() * 1000)
        for tid in to_delete:
            info = md.by_id.get(tid)
            if info is not None and not mq.record(info.num_partitions, now_ms):
                refused.add(tid)
    for tid, n in to_delete.items():
        if tid in refused:
            out.append(_result(n, tid, ErrorCode.THROTTLING_QUOTA_EXCEEDED))
            continue
        try:
            await services.controller.delete_topic(n)
            out.append(_result(n, tid, ErrorCode.NONE))
        except KafkaError as e:
            out.append(_result(n, tid, e.code, e.message))
    return {"throttle_time_ms": mq.throttle_ms if mq is not None else 0, "responses": out}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    """Kafka's DeleteTopicsRequest.getErrorResponse: the error on every requested topic."""
    out = []
    if ctx.api_version < 6:
        for n in request.get("topic_names") or []:
            out.append(_result(n, ZERO_UUID, code))
    else:
        for t in request.get("topics") or []:
            out.append(_result(t["name"], t["topic_id"], code))
    return {"throttle_time_ms": 0, "responses": out}
