"""CreateTopics (key 19), versions 2-7.

Behaviour (Apache Kafka KRaft: ControllerApis.createTopics + ReplicationControlManager):
- Per topic, checked in Kafka's order: duplicate name in the request (INVALID_REQUEST
  "Duplicate topic name."), name (INVALID_TOPIC_EXCEPTION, '.'/'_' collisions included; creating
  ``__cluster_metadata`` is INVALID_REQUEST), TOPIC_ALREADY_EXISTS, configs (INVALID_CONFIG: null
  values, unknown names, bad values), manual assignment (INVALID_REQUEST unless partitions and
  replication factor are -1; INVALID_REPLICA_ASSIGNMENT for empty/unknown/duplicate brokers,
  uneven replica counts, non-consecutive partitions), INVALID_REPLICATION_FACTOR (0, < -1, or more
  than the registered brokers), INVALID_PARTITIONS (0 or < -1).  -1 means the broker default
  (``num.partitions``, ``default.replication.factor``, KIP-464).
- Authorization (with an authorizer): CREATE on the cluster or on the topic, else
  TOPIC_AUTHORIZATION_FAILED "Authorization failed." (after the duplicate check); without
  DESCRIBE_CONFIGS on the topic the answer leaves its configs out (topic_config_error_code
  TOPIC_AUTHORIZATION_FAILED).
- More than 10000 partitions in one request: every topic fails with POLICY_VIOLATION, as Kafka's
  controller refuses the whole batch.
- ``validate_only`` runs every check and reports what would be created without creating it.
- Every error carries Kafka's error message.
- ``timeout_ms`` (cluster/controller.py ``Controller.expired_at_once``): on a single node (KRaft's
  rule) <= 0 fails the whole request at once, every topic REQUEST_TIMED_OUT with a null message,
  nothing checked or created; a positive one bounds the wait for the new logs, after which the
  topic is answered as created (NONE: the creation is committed and goes on in the controller's
  task; the topic appears in Metadata once its logs exist), as Kafka answers once its controller
  committed the records.  With ZooKeeper (the ZooKeeper-era rule): checked and written whatever
  the timeout, a written topic answered REQUEST_TIMED_OUT when the timeout is <= 0 or passes
  before this broker shows it (it appears later).
Version notes: v5+ (flexible) returns the new topic's partition count, replication factor and
its effective configs (sorted by name; source TOPIC_CONFIG for the request's overrides, else the
broker default's source) plus ``topic_config_error_code``; v7 returns the topic id.  v2-v4 differ
only in encoding; v6 only in quota semantics.
- ``controller_mutation_rate`` (quota/manager.py MutationQuota, KIP-599): a valid topic's
  partitions are counted before it is created (not for ``validate_only``); from v6 a topic is
  refused with THROTTLING_QUOTA_EXCEEDED (message null) while the client's token bucket is below
  zero, before v6 it is created and only throttled; the answer carries the throttle time and the
  connection is muted for it (v3+) or the answer held (v2).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..acl.check import session
from ..acl.requirements import need
from ..config import SOURCE_TOPIC, TOPIC_CONFIGS
from ..protocol.errors import ErrorCode, KafkaError
from ..quota.manager import mutation_quota
from ..cluster.metadata import MAX_PARTITIONS_PER_REQUEST, ZERO_UUID
from ..server.dispatch import RequestContext
from .support.common import DUPLICATE_TOPIC, TOO_MANY_PARTITIONS, each_topic_once, error_per_item, request_wait
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from .support.services import BrokerServices

API_KEY = 19
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")
_CONFIGS = need(API_KEY, "configs")
_TOPIC = need(API_KEY, "topic")


def config_entries(services: BrokerServices, overrides: dict) -> list[dict]:
    out = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        if name in overrides:
            value, source = overrides[name], SOURCE_TOPIC
        else:
            value, source = services.config.topic_default(name)
        out.append({"name": name, "value": d.render(value), "read_only": False,
                    "config_source": source, "is_sensitive": d.type == "password"})
    return out


def _requested_partitions(services: BrokerServices, t: dict) -> int:
    if t["assignments"]:
        return len(t["assignments"])
    n = t["num_partitions"]
    return services.config["num.partitions"] if n == -1 else max(n, 0)


async def handle(ctx: RequestContext, request: dict) -> dict:
    services = ctx.services
    controller = services.controller
    topics = request["topics"]
    results = []
    counts: dict[str, int] = {}
    for t in topics:
        counts[t["name"]] = counts.get(t["name"], 0) + 1
    if controller.expired_at_once(request["timeout_ms"]):
        return error_response(ctx, request, ErrorCode.REQUEST_TIMED_OUT)   # nothing checked or made
    wait = request_wait(request["timeout_ms"])
    total = sum(_requested_partitions(services, t) for t in topics if counts[t["name"]] == 1)
    if total > MAX_PARTITIONS_PER_REQUEST:
        return {"throttle_time_ms": 0, "topics": [
            _failed(t["name"], ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS) for t in topics]}
    az = session(ctx)
    create_any = az is None or az.permits(_CLUSTER, log_denied=False)
    mq = mutation_quota(ctx)   # controller_mutation_rate (quota/manager.py); None: not counted
    if mq is not None and not request["validate_only"]:
        # Kafka's controller checks every topic and counts the valid ones' partitions before
        # creating any (one batch of records); creating logs here takes time, during which the
        # bucket would refill, so the counting is a first pass
        refused = await _count_mutations(controller, mq, topics, counts, create_any, az)
    else:
        refused = set()
    for name, t in each_topic_once(topics, counts):
        if t is None:
            results.append(_failed(name, ErrorCode.INVALID_REQUEST, DUPLICATE_TOPIC))
            continue
        if not create_any and not az.permits(_TOPIC, name):  # type: ignore[union-attr]  # create_any without az
            results.append(_failed(name, _TOPIC.denial, "Authorization failed."))
            continue
        if name in refused:
            results.append(_failed(name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, None))
            continue
        configs = {c["name"]: c["value"] for c in t["configs"]}
        assignments = [(a["partition_index"], a["broker_ids"]) for a in t["assignments"]]
        try:
            info = await controller.create_topic(name, t["num_partitions"], t["replication_factor"], configs,
                                                 assignments=assignments or None,
                                                 validate_only=request["validate_only"], timeout_s=wait())
        except KafkaError as e:
            results.append(_failed(name, e.code, e.message))
            continue
        if az is not None and not az.permits(_CONFIGS, name, log_denied=False):
            # created, but its configs are not shown to a client that may not describe them
            config_code, described = int(_TOPIC.denial), []
        else:
            config_code, described = 0, config_entries(services, info.configs)
        results.append({"name": name, "topic_id": info.topic_id, "error_code": 0, "error_message": None,
                        "topic_config_error_code": config_code, "num_partitions": info.num_partitions,
                        "replication_factor": info.replication_factor, "configs": described})
    return {"throttle_time_ms": mq.throttle_ms if mq is not None else 0, "topics": results}


async def _count_mutations(controller: Any, mq: Any, topics: list, counts: Any, create_any: Any, az: Any) -> set:
    """The names whose creation the controller mutation quota refuses: each valid topic's
    partitions counted in request order (invalid ones are answered with their own error)."""
    refused = set()
    for name, t in each_topic_once(topics, counts):
        if t is None or (not create_any and not az.permits(_TOPIC, name)):
            continue
        configs = {c["name"]: c["value"] for c in t["configs"]}
        assignments = [(a["partition_index"], a["broker_ids"]) for a in t["assignments"]]
        try:
            info = await controller.create_topic(name, t["num_partitions"], t["replication_factor"], configs,
                                                 assignments=assignments or None, validate_only=True)
        except KafkaError:
            continue
        if not mq.record(info.num_partitions, int(trio.current_time() * 1000)):
            refused.add(name)
    return refused


def _failed(name: str, code: int, message: str | None) -> dict:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": int(code), "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


error_response = error_per_item("topics", "topics", lambda t, code: _failed(t["name"], code, None))
