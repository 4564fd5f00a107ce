"""Metadata (key 3), versions 0-13.

Behaviour (Apache Kafka 3.x/4.x KRaft broker, KafkaApis.handleTopicMetadataRequest):
- All topics when ``topics`` is null (v1+) or an empty list in v0; otherwise the listed topics.
  Internal topics are included (clients filter them).
- A missing topic is auto-created when the request allows it (``allow_auto_topic_creation``,
  v4+; always allowed before v4) and ``auto.create.topics.enable`` is on.  Like a KRaft broker,
  the request that triggers the creation answers UNKNOWN_TOPIC_OR_PARTITION for that topic (the
  creation is "in flight" from the client's point of view); the client's retry sees it.
  Auto-creation never happens for an all-topics request.
- Otherwise a missing topic is UNKNOWN_TOPIC_OR_PARTITION, an invalid name INVALID_TOPIC_EXCEPTION.
- Everything below comes from the broker's MetadataCache (the controller's published state):
  the registered brokers (advertised host/port, rack), ``controller_id`` (a KRaft broker reports
  a live broker, never a controller; the single node reports itself), ``cluster_id`` (v2+).
- Each partition: leader, ``leader_epoch`` (v7+), replicas, ISR and offline replicas (v5+) as
  the controller published them; replicas on unregistered (down) brokers are offline, and a
  down leader reads as none until the controller elects another.  A partition whose log dir failed has no leader (-1), error
  LEADER_NOT_AVAILABLE and this node in ``offline_replicas`` (what a KRaft cluster shows once
  the controller learns of the offline dir).
- Topic ids (v10+) are the real, stable ids.  v12 may ask by id (name null): known ids are
  answered by name, unknown ones with UNKNOWN_TOPIC_ID and a null name.  A null name or a topic
  id before v12 is INVALID_REQUEST for the whole request, as Kafka does.
- v13 (KIP-1102) adds a top-level ``error_code``: 0 (Kafka's brokers answer REBOOTSTRAP_REQUIRED
  there only when told to, which pykbroker never is).
- Authorization (with an authorizer): DESCRIBE on a topic is needed to see it; an all-topics
  request leaves the others out, a named topic (existing or not) answers TOPIC_AUTHORIZATION_FAILED
  (by id: the id and a null name); auto-creation needs CREATE on the cluster or the topic, else
  TOPIC_AUTHORIZATION_FAILED.  Kafka's order: authorized, denied CREATE, denied DESCRIBE.
- Authorized operations (v8+), when asked: the operations the authorizer allows (acl/check.py);
  without an authorizer Kafka grants everything, so every operation the resource type supports;
  otherwise the schema's "not requested" value (-2147483648).
"""
from __future__ import annotations

from typing import Any

from ..acl.bindings import TOPIC
from ..acl.check import authorized_operations, cluster_operations, session
from ..acl.requirements import need
from ..cluster.metadata_cache import MetadataCache
from ..protocol.acl import NOT_REQUESTED
from ..protocol.errors import ErrorCode, KafkaError
from ..cluster.metadata import ZERO_UUID, is_internal, is_valid_topic_name
from ..server.dispatch import RequestContext
from .support.common import partition_metadata
from .support.versions import VERSIONS

API_KEY = 3
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_AUTO_CREATE = need(API_KEY, "auto_create")
_AUTO_CREATE_ANY = need(API_KEY, "auto_create_any")
_TOPIC = need(API_KEY, "topic")
_TOPICS_LISTED = need(API_KEY, "topics_listed")


def brokers_of(cache: MetadataCache, listener_name: str = "PLAINTEXT") -> list[dict]:
    """Each broker's address on the listener the client connected through (Kafka's rule: a
    client on the EXTERNAL listener is sent EXTERNAL addresses)."""
    return [{"node_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack}
            for b, e in cache.live_endpoints(listener_name)]


def topic_entry(cache: MetadataCache, info: Any) -> dict:
    parts = [partition_metadata(cache, info.name, p) for p in range(info.num_partitions)]
    return {"error_code": 0, "name": info.name, "topic_id": info.topic_id,
            "is_internal": info.internal, "partitions": parts,
            "topic_authorized_operations": NOT_REQUESTED}


def _error_topic(code: int, name: str | None, topic_id: Any = ZERO_UUID) -> dict:
    return {"error_code": int(code), "name": name, "topic_id": topic_id,
            "is_internal": name is not None and is_internal(name), "partitions": [],
            "topic_authorized_operations": NOT_REQUESTED}


async def handle(ctx: RequestContext, request: dict) -> dict:
    services = ctx.services
    md = services.metadata_cache
    v = ctx.api_version
    req_topics = request["topics"]
    all_topics = req_topics is None or (v == 0 and not req_topics)
    if not all_topics:
        for t in req_topics:
            if t["name"] is None and v < 12:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Topic name can not be null for version %d" % v)
            if t.get("topic_id", ZERO_UUID) != ZERO_UUID and v < 12:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Topic IDs are not supported in requests for version %d" % v)
    topics_out: list[dict] = []
    az = session(ctx)
    # Kafka's order: the answers of authorized topics, then TOPIC_AUTHORIZATION_FAILED for those
    # denied CREATE, then for those denied DESCRIBE (whether or not they exist: a denied client
    # cannot probe names)
    denied_create: list[dict] = []
    denied_describe: list[dict] = []
    if all_topics:
        for name in sorted(md.topics):
            if az is not None and not az.permits(_TOPICS_LISTED, name, log_denied=False):
                continue   # an all-topics request silently leaves them out (and logs nothing: Kafka)
            topics_out.append(topic_entry(md, md.topics[name]))
    else:
        ids = [t["topic_id"] for t in req_topics if t.get("topic_id", ZERO_UUID) != ZERO_UUID]
        if ids:
            # Kafka: when any id is given the request is by id (names are ignored).
            seen = set()
            for tid in ids:
                if tid in seen:
                    continue
                seen.add(tid)
                info = md.by_id.get(tid)
                if info is None:
                    topics_out.append(_error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, tid))
                elif az is not None and not az.permits(_TOPIC, info.name):
                    # ids are not secret (Kafka): the id is answered, never the name
                    e = _error_topic(_TOPIC.denial, None, tid)
                    e["is_internal"] = False
                    denied_describe.append(e)
                else:
                    topics_out.append(topic_entry(md, info))
        else:
            allow_auto = request["allow_auto_topic_creation"] and services.config["auto.create.topics.enable"]
            # auto-creation needs CREATE on the cluster or on the topic
            create_anywhere = az is None or az.permits(_AUTO_CREATE_ANY, log_denied=False)
            seen = set()
            for t in req_topics:
                name = t["name"]
                if name in seen:
                    continue
                seen.add(name)
                if az is not None and not az.permits(_TOPIC, name):
                    e = _error_topic(_TOPIC.denial, name)
                    e["is_internal"] = False
                    denied_describe.append(e)
                    continue
                info = md.topics.get(name)
                if info is None and allow_auto and not create_anywhere and not az.permits(_AUTO_CREATE, name):  # type: ignore[union-attr]  # create_anywhere without az
                    denied_create.append(_error_topic(_AUTO_CREATE.denial, name))
                    continue
                if info is not None:
                    topics_out.append(topic_entry(md, info))
                elif not is_valid_topic_name(name):
                    topics_out.append(_error_topic(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                else:
                    if allow_auto:
                        # KRaft answers the creating request with UNKNOWN_TOPIC_OR_PARTITION.
                        await services.controller.auto_create(name)
                    topics_out.append(_error_topic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
    topics_out += denied_create
    topics_out += denied_describe
    if v >= 8 and request["include_topic_authorized_operations"]:
        for t in topics_out:
            if t["error_code"] == 0:
                t["topic_authorized_operations"] = authorized_operations(ctx, TOPIC, t["name"])
    cluster_ops = NOT_REQUESTED
    if 8 <= v <= 10 and request["include_cluster_authorized_operations"]:
        cluster_ops = cluster_operations(ctx)
    brokers = brokers_of(md, ctx.listener_name)
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": md.cluster_id,
            "controller_id": md.controller_id, "topics": topics_out,
            "cluster_authorized_operations": cluster_ops, "error_code": 0}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    """Kafka's MetadataRequest.getErrorResponse: the error on every requested topic (and, v13,
    at the top).  A null name is answered as "" as Kafka does: before v12 the response's name
    is not nullable (a v11 request naming a topic null gets INVALID_REQUEST, and a null there
    would make the answer undecodable)."""
    topics = []
    for t in request.get("topics") or []:
        name = t.get("name")
        topics.append(_error_topic(code, "" if name is None else name, t.get("topic_id", ZERO_UUID)))
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": topics, "error_code": int(code)}
