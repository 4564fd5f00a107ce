"""KIP-1071 streams group state as records on ``__consumer_offsets`` (Apache Kafka 4.4's layout).

As for KIP-848 groups (:mod:`.consumer_records`), a key is an int16 record type followed by the
group id (and member id) as non-flexible int16-length strings; a value is an int16 value
version (0) followed by the flexible encoding of its schema.  The schemas are Kafka's
(``StreamsGroup*Key/Value.json`` of the group coordinator), written here as pykbroker field lists
and compiled by the protocol codec (:func:`pykbroker.protocol.codec._compile`), so the bytes are
those of Kafka's generated serializers:

====  ==========================================  =============================================
key   record                                      value (v0)
====  ==========================================  =============================================
17    StreamsGroupMetadata (group)                group epoch, metadata hash; tag 0: validated
                                                  topology epoch (tags 1-3 are not written)
19    StreamsGroupMemberMetadata (group, member)  instance/rack/client id/host, rebalance
                                                  timeout, topology epoch, process id, endpoint,
                                                  client tags
20    StreamsGroupTargetAssignmentMetadata        assignment epoch; tag 0: timestamp
21    StreamsGroupTargetAssignmentMember          target active/standby/warm-up tasks
22    StreamsGroupCurrentMemberAssignment         member epoch, previous epoch, state, tasks
                                                  and tasks pending revocation
23    StreamsGroupTopology (group)                the topology the group was initialised with
====  ==========================================  =============================================

(Type 18 was StreamsGroupPartitionMetadata before Kafka 4.1; it is skipped on load.)
"""
from __future__ import annotations

import struct
from typing import Any, Iterable, Optional

from ...protocol.codec import _compile
from .consumer_records import GroupRecordKeys

SG_METADATA = 17
SG_PARTITION_METADATA = 18   # Kafka < 4.1 only: skipped
SG_MEMBER_METADATA = 19
SG_TARGET_METADATA = 20
SG_TARGET_MEMBER = 21
SG_CURRENT_ASSIGNMENT = 22
SG_TOPOLOGY = 23
KEY_TYPES = (SG_METADATA, SG_PARTITION_METADATA, SG_MEMBER_METADATA, SG_TARGET_METADATA, SG_TARGET_MEMBER,
             SG_CURRENT_ASSIGNMENT, SG_TOPOLOGY)
MEMBER_KEYS = (SG_MEMBER_METADATA, SG_TARGET_MEMBER, SG_CURRENT_ASSIGNMENT)

# Kafka's streams MemberState byte values.
STATE_STABLE = 0
STATE_UNREVOKED_TASKS = 1
STATE_UNRELEASED_TASKS = 2

V0 = [0, 0]


def _f(name: str, type_: str, **kw: Any) -> dict:
    d = {"name": name, "type": type_, "versions": V0}
    d.update(kw)
    return d


def _arr(name: str, of: str, fields: Optional[list] = None, **kw: Any) -> dict:
    d = {"name": name, "type": "array", "of": of, "versions": V0}
    if fields is not None:
        d["fields"] = fields
    d.update(kw)
    return d


_TASK_IDS = [_f("subtopology_id", "string"), _arr("partitions", "int32")]
_TASK_IDS_EPOCHS = _TASK_IDS + [_arr("assignment_epochs", "int32", nullable=V0, tagged=V0, tag=0, default=None)]
_KV = [_f("key", "string"), _f("value", "string")]
_TOPIC_INFO = [_f("name", "string"), _f("partitions", "int32"), _f("replication_factor", "int16"),
               _arr("topic_configs", "struct", _KV)]

SCHEMAS = {
    SG_METADATA: [_f("epoch", "int32"), _f("metadata_hash", "int64"),
                  _f("validated_topology_epoch", "int32", tagged=V0, tag=0, default=-1)],
    SG_MEMBER_METADATA: [
        _f("instance_id", "string", nullable=V0), _f("rack_id", "string", nullable=V0),
        _f("client_id", "string"), _f("client_host", "string"), _f("rebalance_timeout_ms", "int32", default=-1),
        _f("topology_epoch", "int32"), _f("process_id", "string"),
        _f("user_endpoint", "struct", nullable=V0, default=None,
           fields=[_f("host", "string"), _f("port", "uint16")]),
        _arr("client_tags", "struct", _KV)],
    SG_TARGET_METADATA: [_f("assignment_epoch", "int32"),
                         _f("assignment_timestamp", "int64", tagged=V0, tag=0, default=0)],
    SG_TARGET_MEMBER: [_arr("active_tasks", "struct", _TASK_IDS), _arr("standby_tasks", "struct", _TASK_IDS),
                       _arr("warmup_tasks", "struct", _TASK_IDS)],
    SG_CURRENT_ASSIGNMENT: [
        _f("member_epoch", "int32"), _f("previous_member_epoch", "int32"), _f("state", "int8"),
        _arr("active_tasks", "struct", _TASK_IDS_EPOCHS), _arr("standby_tasks", "struct", _TASK_IDS_EPOCHS),
        _arr("warmup_tasks", "struct", _TASK_IDS_EPOCHS),
        _arr("active_tasks_pending_revocation", "struct", _TASK_IDS_EPOCHS),
        _arr("standby_tasks_pending_revocation", "struct", _TASK_IDS_EPOCHS),
        _arr("warmup_tasks_pending_revocation", "struct", _TASK_IDS_EPOCHS)],
    SG_TOPOLOGY: [_f("epoch", "int32"), _arr("subtopologies", "struct", [
        _f("subtopology_id", "string"), _arr("source_topics", "string"), _arr("source_topic_regex", "string"),
        _arr("state_changelog_topics", "struct", _TOPIC_INFO), _arr("repartition_sink_topics", "string"),
        _arr("repartition_source_topics", "struct", _TOPIC_INFO),
        _arr("copartition_groups", "struct", [_arr("source_topics", "int16"), _arr("source_topic_regex", "int16"),
                                              _arr("repartition_source_topics", "int16")])])],
}
_ENC = {k: _compile(f, 0, True, "encode")[0] for k, f in SCHEMAS.items()}
_DEC = {k: _compile(f, 0, True, "decode")[0] for k, f in SCHEMAS.items()}


_KEYS = GroupRecordKeys(MEMBER_KEYS)
key = _KEYS.key
parse_key = _KEYS.parse_key


def value(kind: int, msg: dict) -> bytes:
    out = _ENC[kind](bytearray(struct.pack(">h", 0)), [], msg)
    return bytes(out)


def parse_value(kind: int, buf: bytes | memoryview) -> dict:
    buf = memoryview(bytes(buf))
    m, _ = _DEC[kind](buf, 2)
    return m


# -- tasks: {subtopology id: set(partitions)} <-> [TaskIds] -----------------------------------
def task_ids(tasks: dict, epochs: dict | None = None) -> list:
    out = []
    for sid in sorted(tasks):
        ps = sorted(tasks[sid])
        if not ps:
            continue
        d = {"subtopology_id": sid, "partitions": ps}
        if epochs is not None:
            d["assignment_epochs"] = [epochs.get((sid, p), 0) for p in ps]
        out.append(d)
    return out


def from_task_ids(lst: Optional[Iterable[dict[str, Any]]]) -> dict:
    out: dict = {}
    for t in lst or ():
        out.setdefault(t["subtopology_id"], set()).update(t["partitions"])
    return out
