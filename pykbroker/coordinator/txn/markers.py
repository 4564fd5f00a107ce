"""WriteTxnMarkers to partitions led by other brokers (Kafka's TransactionMarkerChannelManager).

A transaction coordinator in a cluster completes a transaction by writing a COMMIT or ABORT
marker to every partition of it; the partitions this broker leads get theirs in process, the
others through a WriteTxnMarkers v1 request to their leader, exactly as Kafka's coordinator
sends them.  The caller retries (with backoff) until the leader answers 0 or an error that
means the marker is no longer needed.  Markers are rare (once per transaction per partition),
so each request uses a fresh connection to the leader's inter-broker listener: no connection
state to keep consistent across leader changes.
"""
from __future__ import annotations

import logging

import trio

from ...cluster.replica_fetcher import _Channel
from ...protocol.errors import ErrorCode as E

log = logging.getLogger("pykbroker.txn.markers")

# Like the replica fetcher's socket timeout: a leader that does not answer is retried later.
REQUEST_TIMEOUT_S = 30.0
MAX_FRAME = 16 << 20


class RemoteMarkerWriter:
    def __init__(self, metadata_cache, node_id: int, listener_name: str):
        self.cache = metadata_cache
        self.node_id = node_id
        self.listener_name = listener_name

    async def write(self, leader_id: int, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    commit: bool, coordinator_epoch: int) -> int:
        """The leader's error code for this partition's marker (NOT_LEADER_OR_FOLLOWER if the
        leader cannot be reached: the caller retries once the metadata moved on)."""
        reg = self.cache.broker(leader_id)
        ep = reg.endpoint(self.listener_name) if reg is not None else None
        if ep is None:
            return int(E.NOT_LEADER_OR_FOLLOWER)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": topic, "partition_indexes": [partition]}]}]}
        try:
            with trio.fail_after(REQUEST_TIMEOUT_S):
                stream = await trio.open_tcp_stream(ep.host, ep.port)
                async with stream:
                    chan = _Channel(stream, "broker-%d-txn-marker-sender" % self.node_id, MAX_FRAME)
                    resp = await chan.call(27, 1, body)
        except (OSError, ConnectionError, trio.TooSlowError) as e:
            log.info("WriteTxnMarkers to broker %d for %s-%d: %s", leader_id, topic, partition, e)
            return int(E.NOT_LEADER_OR_FOLLOWER)
        return int(resp["markers"][0]["topics"][0]["partitions"][0]["error_code"])
