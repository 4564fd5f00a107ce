"""The embedded broker's introspection through the Kafka protocol (pykbroker.protocol.wire):
:class:`WireBroker`, over any Kafka endpoint (the pytest plugin's ``--kafka-bootstrap``), and the
base of the subprocess broker."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from .base import BrokerFront

if TYPE_CHECKING:
    from ..protocol.wire import WireClient
from .introspection import GroupDescription, GroupMember, Record, decode_assignment, read_range

# ListOffsets errors a client retries: Apache Kafka lists a new partition's leader in Metadata a
# moment before that broker serves it (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
# LEADER_NOT_AVAILABLE), as Kafka's own clients see after CreateTopics.
_RETRIABLE_OFFSET_ERRORS = (3, 5, 6)


def _offset(c: WireClient, topic: str, partition: int, timestamp: int, timeout: float = 15.0) -> int:
    """ListOffsets of one partition (-2 earliest, -1 latest), retried as Kafka's clients do."""
    from ..protocol.wire import list_offsets

    deadline = time.monotonic() + timeout
    while True:
        p = list_offsets(c, topic, partition, timestamp)
        if p["error_code"] == 0:
            return p["offset"]
        if p["error_code"] not in _RETRIABLE_OFFSET_ERRORS or time.monotonic() > deadline:
            raise RuntimeError("ListOffsets %s-%d: error %d" % (topic, partition, p["error_code"]))
        time.sleep(0.05)


class WireBroker(BrokerFront):
    """Introspection of any Kafka endpoint through the protocol (pykbroker.protocol.wire): what
    the subprocess broker and the pytest plugin's ``--kafka-bootstrap`` mode use.  Works against
    Apache Kafka too (records are read from the partition's leader)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def start(self, timeout: float = 30.0) -> "WireBroker":
        return self

    def stop(self, timeout: float = 30.0) -> None:
        pass

    def _client(self, target: Optional[tuple[str, int]] = None) -> WireClient:
        from ..protocol.wire import WireClient

        secure = getattr(self, "_secure", None)
        if secure is not None:   # a secured subprocess broker: authenticated as its first user
            host, port = target or (self.host, self.port)
            return secure.wire_client(host, port)
        return WireClient(target or (self.host, self.port), client_id="pykbroker-introspection")

    def _leader(self, topic: str, partition: int) -> tuple[str, int]:
        from ..protocol.wire import metadata

        with self._client() as c:
            m = metadata(c, [topic])
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in m["brokers"]}
        for t in m["topics"]:
            for p in t["partitions"]:
                if p["partition_index"] == partition and p["error_code"] == 0:
                    return brokers[p["leader_id"]]
        raise KeyError("%s-%d has no leader: %r" % (topic, partition, m["topics"]))

    def _coordinator(self, group_id: str) -> tuple[str, int]:
        deadline = time.monotonic() + 15
        with self._client() as c:
            while True:
                r = c.request(10, 3, {"key": group_id, "key_type": 0})
                if r["error_code"] == 0:
                    return r["host"], r["port"]
                if time.monotonic() > deadline:
                    raise RuntimeError("no coordinator for group %r: %r" % (group_id, r))
                time.sleep(0.05)

    def records(self, topic: str, partition: int = 0) -> list[Record]:
        from ..protocol.wire import fetch, fetch_part

        with self._client(self._leader(topic, partition)) as c:
            def read(offset: int) -> bytes:
                p = fetch_part(fetch(c, topic, partition, offset, partition_max_bytes=8 << 20))
                if p["error_code"]:
                    raise RuntimeError("fetch %s-%d at %d: error %d" % (topic, partition, offset, p["error_code"]))
                return p["records"] or b""

            return read_range(_offset(c, topic, partition, -2), _offset(c, topic, partition, -1), read)

    def committed_offsets(self, group_id: str) -> dict:
        with self._client(self._coordinator(group_id)) as c:
            r = c.request(9, 8, {"groups": [{"group_id": group_id, "topics": None}], "require_stable": False})
        g = r["groups"][0]
        if g["error_code"]:
            raise RuntimeError("OffsetFetch %r: error %d" % (group_id, g["error_code"]))
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in g["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}

    def group(self, group_id: str) -> Optional[GroupDescription]:
        with self._client(self._coordinator(group_id)) as c:
            r = c.request(15, 5, {"groups": [group_id], "include_authorized_operations": False})
        g = r["groups"][0]
        if g["error_code"] or g["group_state"] == "Dead":
            # not a classic group: a KIP-848 one is described by ConsumerGroupDescribe
            return self._consumer_group(group_id)
        consumer = g["protocol_type"] == "consumer"
        members = [GroupMember(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                               decode_assignment(m["member_assignment"]) if consumer else {})
                   for m in g["members"]]
        # DescribeGroups carries no generation
        return GroupDescription(group_id, g["group_state"], g["protocol_type"], g["protocol_data"], -1, members)

    def _consumer_group(self, group_id: str) -> Optional[GroupDescription]:
        try:
            with self._client(self._coordinator(group_id)) as c:
                r = c.request(69, 0, {"group_ids": [group_id], "include_authorized_operations": False})
        except (OSError, ConnectionError):   # a broker without KIP-848 closes the connection
            return None
        g = r["groups"][0]
        if g["error_code"]:
            return None
        members = [GroupMember(m["member_id"], m["instance_id"], m["client_id"], m["client_host"],
                               {t["topic_name"]: sorted(t["partitions"])
                                for t in m["assignment"]["topic_partitions"]})
                   for m in g["members"]]
        return GroupDescription(group_id, g["group_state"], "consumer", g["assignor_name"],
                                g["group_epoch"], members)

    def create_topic(self, name: str, partitions: int = 1, config: Optional[dict] = None) -> None:
        """CreateTopics (replication factor 1), then wait until every partition has a leader."""
        from ..protocol.wire import wait_for_topic

        with self._client() as c:
            r = c.request(19, 5, {"topics": [{
                "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                "configs": [{"name": str(k), "value": None if v is None else str(v)}
                            for k, v in (config or {}).items()]}],
                "timeout_ms": 15000, "validate_only": False})
            t = r["topics"][0]
            if t["error_code"]:
                raise RuntimeError("CreateTopics %r: error %d %s" % (name, t["error_code"], t.get("error_message")))
            wait_for_topic(c, name, partitions)
