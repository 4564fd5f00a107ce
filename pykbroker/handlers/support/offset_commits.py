"""What OffsetCommit (key 8) and TxnOffsetCommit (key 28) share (not a handler: ``load_handlers``
loads only ``kNN_*``).  Kafka's request handler checks both requests' topics before the group
coordinator sees them, and its response builder merges both kinds of answers the same way.
From one version on (OffsetCommit v10, TxnOffsetCommit v6) both name topics by id only:
``by_id`` below.

- :func:`check_topics`: the topic checks; the partitions left for the coordinator.
- :func:`write_offsets`: the per-partition metadata check, then one write of the others.
- :func:`response`: the answers of both steps merged in Kafka's layout.
- :func:`every_partition`: the whole-request error answer.
"""
from __future__ import annotations

from typing import Any

from ...cluster.metadata_cache import MetadataCache
from ...coordinator.group.coordinator import OFFSET_METADATA_MAX_BYTES
from ...coordinator.group.offsets import OffsetAndMetadata
from ...protocol.errors import ErrorCode as E


def _topic(t: dict, by_id: bool, parts: list) -> dict:
    # by id: the id is echoed and the name left empty, as Kafka answers
    if by_id:
        return {"name": "", "topic_id": t["topic_id"], "partitions": parts}
    return {"name": t["name"], "partitions": parts}


def every_partition(request: dict, by_id: bool, code: int) -> dict:
    """Every requested partition answers ``code`` (Kafka's getErrorResponse)."""
    return {"throttle_time_ms": 0, "topics": [
        _topic(t, by_id, [{"partition_index": p["partition_index"], "error_code": int(code)} for p in t["partitions"]])
        for t in request["topics"]]}


def check_topics(md: MetadataCache, request: dict, by_id: bool, readable: Any = None, topic_row: Any = None) -> tuple:
    """``(failed, accepted)``: the topic checks, in request order.  ``failed`` is
    ``[(topic, partition, code)]``: an unknown topic (by id: UNKNOWN_TOPIC_ID, the zero id
    included; by name: UNKNOWN_TOPIC_OR_PARTITION) or a partition the topic does not have
    (UNKNOWN_TOPIC_OR_PARTITION); ``accepted`` is ``[(topic, name, partition)]``, the others.
    ``readable(name)`` (with an authorizer: READ on the topic, ``topic_row`` of acl/requirements.py)
    false: the row's error (TOPIC_AUTHORIZATION_FAILED), before the existence check for a name (an
    id is resolved first, as Kafka)."""
    failed, accepted = [], []
    for t in request["topics"]:
        if by_id:
            name = md.name_of(t["topic_id"]) if md is not None else None
            info = md.get(name) if name is not None else None
            missing = E.UNKNOWN_TOPIC_ID
        else:
            name = t["name"]
            info = md.get(name) if md is not None else None
            missing = E.UNKNOWN_TOPIC_OR_PARTITION
        denied = readable is not None and name is not None and not readable(name)
        for p in t["partitions"]:
            idx = p["partition_index"]
            if denied:
                failed.append((t, p, topic_row.denial))
            elif info is None or not (0 <= idx < info.num_partitions):
                failed.append((t, p, missing if info is None else E.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                accepted.append((t, name, p))
    return failed, accepted


async def write_offsets(accepted: Any, now: int, expire: Any, write: Any) -> list:
    """``[(topic, partition, code)]`` of the ``accepted`` partitions (those that passed the topic
    and group checks), in order.  Metadata longer than ``offset.metadata.max.bytes``:
    OFFSET_METADATA_TOO_LARGE (null metadata is stored as ""); the others' offsets go in one
    ``write(entries)`` (``{(topic, partition): OffsetAndMetadata}``; it returns a pending write
    whose ``get()`` is the append's error code, then the answer of every partition written)."""
    entries: dict[tuple[str, int], OffsetAndMetadata] = {}
    out = []
    code: int
    for t, name, p in accepted:
        tp = (name, p["partition_index"])
        meta = p["committed_metadata"]
        if meta is not None and len(meta.encode("utf-8")) > OFFSET_METADATA_MAX_BYTES:
            code = E.OFFSET_METADATA_TOO_LARGE
        else:
            code = E.NONE
            entries[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"], meta or "", now, expire)
        out.append((t, p, code, tp))
    code = await write(entries).get() if entries else 0
    return [(t, p, code if code and tp in entries else c) for t, p, c, tp in out]


def response(failed: Any, answered: Any, by_id: bool) -> dict:
    """The response, merged as Kafka's response builder does: one entry per topic (by id or by
    name), the topics of ``failed`` first, each topic's failed partitions before the
    coordinator's ``answered`` ones, which are appended to their topic's entry (or make new
    entries after the others).  Both are ``[(topic, partition, code)]``."""
    out: dict = {}
    for group in (failed, answered):
        for t, p, code in group:
            key = t["topic_id"] if by_id else t["name"]
            entry = out.get(key)
            if entry is None:
                entry = out[key] = _topic(t, by_id, [])
            entry["partitions"].append({"partition_index": p["partition_index"], "error_code": int(code)})
    return {"throttle_time_ms": 0, "topics": list(out.values())}
