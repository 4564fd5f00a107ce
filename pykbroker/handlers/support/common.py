"""What several request handlers share (not a handler: ``load_handlers`` loads only ``kNN_*``).

- :func:`leader_partition` (cluster/replica_manager.py's): look up a partition for a client
  request, or raise the :class:`KafkaError` Kafka answers for it (unknown, offline, fenced or
  unknown leader epoch).
- :class:`PartitionResponses`: the per-topic / per-partition layout of one API's response,
  declared once per handler (the key names differ from API to API).  It builds one
  partition's error entry, runs an answer function over every requested partition, and makes
  the whole-request ``error_response`` (every partition answering the same code).
- :func:`error_per_item`: the ``error_response`` of APIs answering per topic / resource / group.
- :func:`classic_group`: the classic group a Heartbeat / LeaveGroup / SyncGroup addresses, after
  the READ check on it.
- :func:`each_topic_once`: CreateTopics / CreatePartitions' handling of a topic named twice.

Handlers without an ``error_response`` get the connection's fallback: the top-level
``error_code``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import trio

from ...acl.check import permits
from ...cluster.metadata_cache import MetadataCache, PartitionState

# The partition lookup of client requests and the errors after which an answer names the new
# leader are the ReplicaManager's rules (Kafka's getPartitionOrException), shared by the handlers.
from ...cluster.replica_manager import NEW_LEADER_ERRORS, leader_partition  # noqa: F401
from ...coordinator.group.api import group_precheck
from ...protocol.errors import ErrorCode, KafkaError
from ...server.dispatch import RequestContext


def current_leader(metadata: MetadataCache, topic: str, index: int) -> tuple:
    """``({"leader_id", "leader_epoch"}, BrokerRegistration or None)`` of the partition as this
    broker's metadata says (KIP-951's currentLeader), or (None, None) when it has no leader."""
    st = metadata.partition_state(topic, index) if metadata.get(topic) is not None else None
    if st is None or st.leader < 0:
        return None, None
    return {"leader_id": st.leader, "leader_epoch": st.leader_epoch}, metadata.broker(st.leader)



class PartitionResponses:
    """One API's per-partition response layout.

    ``request``: the request's (topics array, topic name, partitions array, partition index)
    keys; ``response``: the same four for the response.  ``error_fields``: what an errored
    partition carries besides its index and error code (Kafka's -1 / empty placeholders; a
    list value is copied per entry).  The response's other top-level field is
    ``throttle_time_ms`` (0)."""

    __slots__ = ("req_topics", "req_topic", "req_parts", "req_index",
                 "topics", "topic", "parts", "index", "error_fields")

    def __init__(self, request: tuple, response: tuple, error_fields: dict) -> None:
        self.req_topics, self.req_topic, self.req_parts, self.req_index = request
        self.topics, self.topic, self.parts, self.index = response
        self.error_fields = error_fields

    def error(self, index: int, code: int) -> dict:
        r: dict[str, Any] = {self.index: index, "error_code": int(code)}
        for k, v in self.error_fields.items():
            r[k] = list(v) if type(v) is list else v
        return r

    def error_response(self, ctx: RequestContext, request: dict, code: int, **fields: Any) -> dict:
        """Every requested partition answers ``code`` (Kafka's getErrorResponse); ``fields``
        are set on every entry too (e.g. an error_message)."""
        def error(index: int) -> dict:
            r = self.error(index, code)
            r.update(fields)
            return r
        return self.response([
            {self.topic: t[self.req_topic], self.parts: [error(p[self.req_index]) for p in t[self.req_parts]]}
            for t in request[self.req_topics]])

    def response(self, topics: list) -> dict:
        return {"throttle_time_ms": 0, self.topics: topics}

    async def answer_each(self, request: dict, answer: Any) -> list:
        """The response's topic list, in request order: ``await answer(topic, partition)`` gives
        each requested partition's entry (``partition`` is the request's entry); a KafkaError
        it raises becomes that partition's error entry."""
        topics = []
        for t in request[self.req_topics]:
            name = t[self.req_topic]
            parts: list[dict] = []
            topics.append({self.topic: name, self.parts: parts})
            for p in t[self.req_parts]:
                try:
                    parts.append(await answer(name, p))
                except KafkaError as e:
                    parts.append(self.error(p[self.req_index], e.code))
        return topics


def error_per_item(request_items: str, response_items: str, entry: Any) -> Callable[[RequestContext, dict, int], dict]:
    """An ``error_response`` for APIs answering per topic / resource / group: ``entry(item,
    code)`` builds the response entry of each item of the request's ``request_items`` array."""
    def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
        return {"throttle_time_ms": 0,
                response_items: [entry(item, code) for item in request.get(request_items) or []]}
    return error_response


async def classic_group(ctx: RequestContext, need: Any, group_id: str) -> tuple:
    """``(group, 0)`` for the classic group a member request addresses, else ``(None, code)``:
    INVALID_GROUP_ID for an empty id, the coordinator's prechecks (``group_precheck``), then
    UNKNOWN_MEMBER_ID for a group that does not exist or is not a classic group.  Before all of
    them, ``need`` (READ on the group, Kafka's order): refused, the whole request fails with its
    denial code (KafkaError)."""
    if not permits(ctx, need, group_id):
        raise KafkaError(need.denial)
    if not group_id:
        return None, ErrorCode.INVALID_GROUP_ID
    gc, err = await group_precheck(ctx, group_id)
    if err:
        return None, err
    g = gc.get_group(group_id)
    if g is None or g.kind != "classic":
        return None, ErrorCode.UNKNOWN_MEMBER_ID
    return g, 0


# ---------------------------------------------------------------------- topic batches (controller)
DUPLICATE_TOPIC = "Duplicate topic name."
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def request_wait(timeout_ms: int) -> Callable[[], float]:
    """CreateTopics / CreatePartitions: ``wait()`` -> the seconds left of the request's
    ``timeout_ms`` (one deadline for the whole request, as Kafka has), for the controller's
    ``timeout_s``.  A ``timeout_ms`` <= 0 is handed on as it is (a ZooKeeper controller answers
    REQUEST_TIMED_OUT for what it wrote, Controller.expired_at_once); a positive one once spent
    becomes a microsecond, never 0, so a topic made meanwhile is still answered as made."""
    if timeout_ms <= 0:
        return lambda: timeout_ms / 1000
    deadline = trio.current_time() + timeout_ms / 1000
    return lambda: max(deadline - trio.current_time(), 1e-6)


def each_topic_once(topics: list, counts: dict) -> Iterator[tuple[str, dict | None]]:
    """CreateTopics / CreatePartitions: yields ``(name, entry)`` for the request's topics in
    order, each name once; ``entry`` is None for a name listed more than once (``counts[name] >
    1``), which Kafka's controller answers once, where it first appears, with INVALID_REQUEST
    DUPLICATE_TOPIC."""
    done = set()
    for t in topics:
        name = t["name"]
        if counts[name] == 1:
            yield name, t
        elif name not in done:
            done.add(name)
            yield name, None


def partition_metadata(cache: MetadataCache, topic: str, p: int) -> dict:
    """One partition as Metadata and DescribeTopicPartitions describe it, from the MetadataCache."""
    # callers pass partitions of topics the cache holds, whose state always exists (no check on
    # this per-partition path; a missing one would be a bug and fail here)
    st: PartitionState = cache.partition_state(topic, p)  # type: ignore[assignment]
    leader = st.leader
    offline = list(st.offline_replicas)
    # A replica on a broker that is not registered (down, in a cluster) is offline, and a
    # leader that is not registered is no leader, until the controller elects another
    # (Kafka's metadata cache answers the same in the meantime).
    offline += [b for b in st.replicas if cache.broker(b) is None and b not in offline]
    if leader != -1 and cache.broker(leader) is None:
        leader = -1
    # No leader (every replica offline, e.g. its log dir failed): LEADER_NOT_AVAILABLE,
    # as a KRaft cluster answers once the controller learned of the offline dir.
    code = ErrorCode.LEADER_NOT_AVAILABLE if leader == -1 else 0
    return {"error_code": int(code), "partition_index": p, "leader_id": leader,
            "leader_epoch": st.leader_epoch, "replica_nodes": list(st.replicas),
            "isr_nodes": list(st.isr), "offline_replicas": offline}
