"""Writing a transaction's COMMIT/ABORT markers (:class:`TxnMarkerWriter`: in process to the
partitions this broker leads, by WriteTxnMarkers to the others' leaders, as Kafka's
TransactionMarkerChannelManager), and KIP-890 verification against a remote transaction
coordinator (Kafka's AddPartitionsToTxnManager).

A transaction coordinator in a cluster completes a transaction by writing a COMMIT or ABORT
marker to every partition of it; the partitions this broker leads get theirs in process, the
others through a WriteTxnMarkers request to their leader, exactly as Kafka's coordinator sends
them.  The caller retries (with backoff) until the leader answers 0 or an error that means the
marker is no longer needed.  Markers are rare (once per transaction per partition), so each
request uses a fresh connection to the leader's inter-broker listener: no connection state to
keep consistent across leader changes.  The connection has the inter-broker listener's TLS and
SASL (``security``: cluster/interbroker.py ``open_channel``).

Versions, as Kafka's NetworkClient negotiates them (cluster/interbroker.py): each connection
starts with ApiVersions, and the request goes at the highest version both this broker's own
code (its ``--as-kafka`` profile) and the receiver know.  WriteTxnMarkers v2 (KIP-1228) names
the transaction version, so the leader can hold a transaction version 2 marker to its stricter
epoch rule; at v1 (a Kafka 4.0 profile, or such a leader) the field is not sent and the leader
applies the v1 rule (the marker's epoch is not below the producer's), which a TV2 marker's
bumped epoch passes too, as on Kafka 4.0.  AddPartitionsToTxn v4+ is the broker's batched form
(the verification of KIP-890); a coordinator without it cannot verify, and the request goes on
unverified, as Kafka's AddPartitionsToTxnManager does on a version mismatch (for the TV2 add as
well: a cluster that finalized transaction version 2 serves v5 everywhere).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Optional

import trio

from ...cluster.interbroker import InterBrokerAuthenticationError, api_versions, open_channel
from ...protocol.errors import ErrorCode as E, KafkaError
from ..group.offsets import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ...cluster.interbroker import InterBrokerVersions
    from ...cluster.metadata_cache import MetadataCache
    from ...cluster.replica_manager import ReplicaManager
    from ...security.client import InterBrokerSecurity
    from ..group.coordinator import GroupCoordinator

log = logging.getLogger("pykbroker.txn.markers")
# a marker's outcome is part of its transaction's story: the coordinator's log
txn_log = logging.getLogger("pykbroker.txn")

# Like the replica fetcher's socket timeout: a leader that does not answer is retried later.
REQUEST_TIMEOUT_S = 30.0
MAX_FRAME = 16 << 20
# Marker errors after which retrying cannot help: the partition's producer state has moved on
# (a newer epoch or coordinator wrote there already), so the marker is not needed.
MARKER_SKIP = (E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED, E.UNKNOWN_TOPIC_OR_PARTITION)


async def call_broker(cache: MetadataCache, listener_name: str, client_id: str, broker_id: int, api_key: int,
                      versions: Optional[InterBrokerVersions], lo: int, hi: int, body: dict,
                      security: Optional[InterBrokerSecurity] = None) -> tuple[Optional[int], Optional[dict]]:
    """One request to ``broker_id``'s inter-broker listener on a fresh connection, at the highest
    version in [lo, hi] both this broker (``versions``: cluster/interbroker.py, None: no limit of
    its own) and the receiver's ApiVersions allow: (version, decoded answer); (None, None) when
    there is no such version; (version or None, None) when the broker is unknown or cannot be
    reached in time (callers retry)."""
    reg = cache.broker(broker_id)
    ep = reg.endpoint(listener_name) if reg is not None else None
    if ep is None:
        return -1, None
    try:
        with trio.fail_after(REQUEST_TIMEOUT_S):
            # TLS and SASL of the inter-broker listener (``security``: security/client.py)
            stream, chan = await open_channel(ep.host, ep.port, client_id, MAX_FRAME, security)
            async with stream:
                theirs = await api_versions(chan, "pykbroker-" + client_id)
                if versions is not None:
                    version = versions.usable(api_key, theirs, lo, hi)
                else:
                    rng = theirs.get(api_key)
                    version = min(hi, rng[1]) if rng is not None and max(lo, rng[0]) <= min(hi, rng[1]) else None
                if version is None:
                    log.warning("%s: no version of request %d within %d-%d that this broker and broker %d (%s) "
                                "both serve", client_id, api_key, lo, hi, broker_id, theirs.get(api_key))
                    return None, None
                return version, await chan.call(api_key, version, body)
    except InterBrokerAuthenticationError as e:
        log.warning("%s: request %d to broker %d: %s", client_id, api_key, broker_id, e)
        return -1, None
    except (OSError, ConnectionError, trio.TooSlowError, trio.BrokenResourceError) as e:
        log.info("%s: request %d to broker %d: %s", client_id, api_key, broker_id, e)
        return -1, None


class _InterBrokerSender:
    """What the remote writer and verifier share: how this broker reaches the others (its
    inter-broker listener, the versions it may send, that listener's TLS/SASL)."""

    def __init__(self, metadata_cache: MetadataCache, node_id: int, listener_name: str,
                 versions: Optional[InterBrokerVersions] = None,
                 security: Optional[InterBrokerSecurity] = None) -> None:
        self.cache = metadata_cache
        self.node_id = node_id
        self.listener_name = listener_name
        self.versions = versions
        self.security = security   # the inter-broker listener's TLS/SASL (security/client.py)

    async def _call(self, role: str, broker_id: int, api_key: int, lo: int, hi: int,
                    body: dict) -> tuple[Optional[int], Optional[dict]]:
        """``call_broker`` with this broker's settings; ``role`` names the client id
        (``broker-<node id>-<role>``, as Kafka's inter-broker clients)."""
        return await call_broker(self.cache, self.listener_name, "broker-%d-%s" % (self.node_id, role), broker_id,
                                 api_key, self.versions, lo, hi, body, self.security)


class RemoteMarkerWriter(_InterBrokerSender):
    async def write(self, leader_id: int, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    commit: bool, coordinator_epoch: int, transaction_version: int = 0) -> int:
        """The leader's error code for this partition's marker (NOT_LEADER_OR_FOLLOWER if the
        leader cannot be reached: the caller retries once the metadata moved on)."""
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "transaction_version": transaction_version,
                             "topics": [{"name": topic, "partition_indexes": [partition]}]}]}
        # v1 (Kafka 4.0's) and v2 (KIP-1228: transaction_version) are the versions Kafka 4 sends
        version, resp = await self._call("txn-marker-sender", leader_id, 27, 1, 2, body)
        if version is None:
            return int(E.UNSUPPORTED_VERSION)   # retried (the leader may be upgraded or replaced)
        if resp is None:
            return int(E.NOT_LEADER_OR_FOLLOWER)
        return int(resp["markers"][0]["topics"][0]["partitions"][0]["error_code"])


class RemoteVerifier(_InterBrokerSender):
    """KIP-890 verification against a transaction coordinator on another broker (Kafka's
    AddPartitionsToTxnManager): AddPartitionsToTxn v5 with ``verify_only``, which adds nothing
    and answers, per partition, whether it is in the producer's Ongoing transaction with its
    current epoch; without ``verify_only`` (transaction version 2: Produce v12+, TxnOffsetCommit
    v5+) the coordinator adds the partitions, as for a TV2 client.  Asked once per partition and transaction (a partition that already holds the
    producer's open transaction, or a group already holding its pending offsets, is not asked
    again), so a fresh connection per request costs little."""

    async def verify(self, coordinator_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[tuple[str, int]], verify_only: bool = True) -> dict:
        """Partition -> the coordinator's error code; NOT_COORDINATOR for all of them when the
        coordinator cannot be reached or answers with a request-level error (the caller maps it
        to its retriable error)."""
        topics: dict = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": verify_only,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]}
        # v4 is the first version of the brokers' batched form, v5 the newest (and the only one
        # with the TV2 add, which clients of transaction version 2 need)
        version, resp = await self._call("txn-verifier", coordinator_id, 24, 4 if verify_only else 5, 5, body)
        if version is None:
            # no common version: verification is not supported there; the request goes on
            # (Kafka's AddPartitionsToTxnManager on a version mismatch)
            return {tp: 0 for tp in partitions}
        if resp is None or resp["error_code"] or not resp["results_by_transaction"]:
            code = int(E.NOT_COORDINATOR) if resp is None or not resp["error_code"] else int(resp["error_code"])
            return {tp: code for tp in partitions}
        codes = {(t["name"], r["partition_index"]): int(r["partition_error_code"])
                 for t in resp["results_by_transaction"][0]["topic_results"] for r in t["results_by_partition"]}
        return {tp: codes.get(tp, int(E.NOT_COORDINATOR)) for tp in partitions}


class TxnMarkerWriter:
    """Writes one transaction's marker to one partition: to a data partition this broker leads
    (``Partition.append_end_txn_marker``, then waiting for it to be committed), to a
    ``__consumer_offsets`` partition through the group coordinator (which materializes the
    transactional offsets; ``group_coordinator`` may be None), and on a cluster
    (``leads_every_partition`` false) to a partition led elsewhere by WriteTxnMarkers
    (:class:`RemoteMarkerWriter`, made on first use).  The coordinator retries until
    :meth:`write` says the marker is in."""

    def __init__(self, replica_manager: ReplicaManager, group_coordinator: Optional[GroupCoordinator] = None,
                 leads_every_partition: bool = True,
                 interbroker_versions: Optional[InterBrokerVersions] = None) -> None:
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.leads_every_partition = leads_every_partition
        self.interbroker_versions = interbroker_versions
        self._remote: Optional[RemoteMarkerWriter] = None   # WriteTxnMarkers sender (cluster only)

    async def write(self, tp: tuple[str, int], pid: int, epoch: int, commit: bool, coordinator_epoch: int, tv: int = 0) -> bool:
        """True once the marker is in the partition (or not needed there)."""
        topic, p = tp
        try:
            if not self.leads_every_partition:
                # a cluster: partitions led by another broker get the marker by WriteTxnMarkers
                rm = self.replica_manager
                leader = rm.metadata.leader_of(topic, p)
                if leader != rm.node_id:
                    if rm.metadata.get(topic) is None:
                        return True   # deleted topic: nothing to mark
                    if leader == -1:
                        return False  # no leader yet: retried
                    if self._remote is None:
                        self._remote = RemoteMarkerWriter(rm.metadata, rm.node_id, rm._listener_name(),
                                                          self.interbroker_versions, getattr(rm, "interbroker_security", None))
                    code = await self._remote.write(leader, topic, p, pid, epoch, commit, coordinator_epoch, tv)
                    if code in MARKER_SKIP:
                        return True
                    if code:
                        txn_log.info("marker for producer %d in %s-%d on broker %d: %s, retrying", pid, topic, p,
                                     leader, E(code).name)
                    return code == 0
            if topic == OFFSETS_TOPIC:
                gc = self.group_coordinator
                if gc is None:
                    return True
                code = await gc.complete_transaction(p, pid, epoch, commit).get()
                if code in MARKER_SKIP:
                    return True
                return code == 0
            partition = self.replica_manager.get_partition(topic, p)
            if partition is None:
                return True   # deleted topic: nothing to mark
            # Kafka writes markers with acks=all (requiredAcks -1): refused below
            # min.insync.replicas (NOT_ENOUGH_REPLICAS, which its marker channel retries) ...
            partition.check_min_isr_for_acks_all()
            offset = partition.append_end_txn_marker(pid, epoch, commit, coordinator_epoch, tv)
            if partition.needs_flush():
                await partition.flush()  # type: ignore[union-attr]  # OfflinePartition raised at append
            # ... and done once committed with the ISR still at min.insync.replicas (else
            # NOT_ENOUGH_REPLICAS_AFTER_APPEND, a lost leadership, or no HW in 30 s: retried)
            hw_code: Optional[int] = None
            with trio.move_on_after(30):
                hw_code = await partition.wait_for_high_watermark(offset + 1)  # type: ignore[union-attr]  # as above
            if hw_code:
                txn_log.info("marker for producer %d in %s-%d: %s, retrying", pid, topic, p, E(hw_code).name)
            return hw_code == 0
        except KafkaError as e:
            if e.code in MARKER_SKIP:
                txn_log.warning("marker for producer %d in %s-%d not written: %s", pid, topic, p, E(e.code).name)
                return True
            txn_log.warning("marker for producer %d in %s-%d failed (%s), retrying", pid, topic, p, E(e.code).name)
            return False
