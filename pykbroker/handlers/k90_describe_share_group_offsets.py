"""DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; what the Admin's
listShareGroupOffsets sends).

Behaviour: per group, the coordinator checks of the group APIs (empty id: INVALID_GROUP_ID;
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS) and a group of another type: GROUP_ID_NOT_FOUND
(group-level errors).  Topics null: every partition the share coordinator holds state for in this
group; else the named ones (an unknown topic: UNKNOWN_TOPIC_OR_PARTITION per partition).  Per
partition: the start offset (SPSO) and leader epoch the share coordinator stores, -1 for a
partition without state.  With an authorizer: DESCRIBE on each group first (else that group is
answered GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic: a named topic the client may not
describe gets TOPIC_AUTHORIZATION_FAILED per partition (after the others), and with topics null
such topics are left out, as Kafka.
Version notes: v1 adds Lag (KIP-1226): high watermark - start offset - records already delivered
beyond it, -1 without state.
"""
from __future__ import annotations

from typing import Any

from ..acl.check import permits
from ..acl.requirements import need
from ..cluster.partition import Partition
from ..coordinator.group.api import group_precheck
from ..protocol.errors import DEFAULT_MESSAGES, ErrorCode as E, KafkaError
from ..server.dispatch import RequestContext
from .support.common import error_per_item
from .support.modern_group import typed_group
from .support.share_group_offsets import NO_TOPIC_ID
from .support.versions import VERSIONS

API_KEY = 90
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")


def _gerr(item: Any, code: int, msg: str | None = None) -> dict:
    return {"group_id": item["group_id"] if isinstance(item, dict) else item, "topics": [],
            "error_code": int(code), "error_message": msg}


def _part(idx: int, start: Any = -1, epoch: Any = -1, lag: Any = -1, code: int = 0, msg: str | None = None) -> dict:
    return {"partition_index": idx, "start_offset": start, "leader_epoch": epoch, "lag": lag,
            "error_code": int(code), "error_message": msg}


async def handle(ctx: RequestContext, request: dict) -> dict:
    md = ctx.services.metadata_cache
    sc = ctx.services.share_coordinator
    rm = ctx.services.replica_manager
    out = []
    for g in request["groups"]:
        gid = g["group_id"]
        if not permits(ctx, _GROUP, gid):
            out.append(_gerr(gid, _GROUP.denial))   # no message, as Kafka's
            continue
        if not gid:
            out.append(_gerr(gid, E.INVALID_GROUP_ID))
            continue
        gc, err = await group_precheck(ctx, gid)
        if err:
            out.append(_gerr(gid, err))
            continue
        try:   # a group that does not exist yet is answered from the share coordinator's state
            typed_group(gc, gid, "share", missing_ok=True)
        except KafkaError as e:
            out.append(_gerr(gid, e.code, e.message))
            continue
        if sc is not None:
            await sc.ensure_topic()
        wanted = g["topics"]
        if wanted is None:   # every partition with state in this group
            by: dict = {}
            for (sg, tid, p) in sorted(sc.states if sc is not None else ()):
                name = md.name_of(tid)
                if sg == gid and name is not None and permits(ctx, _TOPIC, name):
                    by.setdefault(name, []).append(p)
            wanted = [{"topic_name": n, "partitions": ps} for n, ps in sorted(by.items())]
        topics, denied = [], []
        for t in wanted:
            name = t["topic_name"]
            info = md.get(name)
            if not permits(ctx, _TOPIC, name):
                code = _TOPIC.denial
                denied.append({"topic_name": name, "topic_id": info.topic_id if info is not None else NO_TOPIC_ID,
                               # Kafka leaves the leader epoch at the schema default 0 here
                               "partitions": [_part(i, epoch=0, code=code, msg=DEFAULT_MESSAGES[code])
                                              for i in t["partitions"]]})
                continue
            if info is None:
                topics.append({"topic_name": name, "topic_id": NO_TOPIC_ID,
                               "partitions": [_part(i, code=E.UNKNOWN_TOPIC_OR_PARTITION,
                                                    msg=DEFAULT_MESSAGES[E.UNKNOWN_TOPIC_OR_PARTITION])
                                              for i in t["partitions"]]})
                continue
            parts = []
            for i in t["partitions"]:
                st = sc.summary(gid, info.topic_id, i) if sc is not None else None
                if st is None or st.start_offset < 0:
                    parts.append(_part(i))
                    continue
                part = rm.get_partition(name, i)
                lag = -1
                if isinstance(part, Partition) and not part.offline:   # (an OfflinePartition is offline)
                    done = max(st.delivery_complete_count, 0)
                    lag = max(0, part.high_watermark - st.start_offset - done)
                parts.append(_part(i, st.start_offset, st.leader_epoch, lag))
            topics.append({"topic_name": name, "topic_id": info.topic_id, "partitions": parts})
        out.append({"group_id": gid, "topics": topics + denied, "error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "groups": out}


error_response = error_per_item("groups", "groups", _gerr)
