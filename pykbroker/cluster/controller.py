"""The controller seam: the only writer of cluster metadata.

``Controller`` is the interface every admin path goes through (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs/IncrementalAlterConfigs, auto-creation by Metadata and the group
coordinator, leader/ISR changes, broker registration).  It validates with Kafka's error codes
and messages, makes the change durable, and publishes it as records to the broker's
``MetadataCache`` (cluster/metadata_cache.py), the read-only view every handler reads.  Its
listeners register explicitly (``set_replica_manager``, ``add_topic_deleted_listener``,
``add_partition_change_listener``); the controller never reaches them through the broker.

``LocalController`` (cluster/local_controller.py) is the single-node implementation (no
``zookeeper.connect``); ``ZkController`` (cluster/zk_controller.py) the cluster one.  What it provides behind the same
interface (and any other implementation must):
- the same async operations with the same validation and messages (``TopicValidator``,
  cluster/topic_validator.py, is shared; only ``registered_brokers`` becomes the live ``/brokers/ids`` set);
- the same partition-state rules: every leader/ISR/replica-set change is computed by
  cluster/partition_change.py (docs/replication-contract.md), the controller only stores and
  publishes it; topics become records through cluster/topic_records.py;
- durability in ZooKeeper instead of the JSON file: ``/brokers/topics/<t>`` (assignment),
  ``/brokers/topics/<t>/partitions/<p>/state`` (leader, leader_epoch, isr, partition epoch =
  znode version, changed only by compare-and-set), ``/config/topics/<t>``,
  ``/config/brokers/<id>`` and ``/config/brokers/<default>`` (watched), pending deletions,
  ephemeral ``/brokers/ids/<id>`` from ``register_broker``, ``/controller`` election;
- on every broker (controller or not), records published to its ``MetadataCache`` from
  ZooKeeper watches / UpdateMetadata, with ``stage``/``publish_staged`` for new partitions so
  clients never see a partition whose log does not exist yet;
- the listener calls: ``replica_manager.make_partitions / delete_partitions / on_config_change``
  and the topic-deleted and partition-change listeners, on the brokers hosting the replicas.

Error codes and messages follow Apache Kafka's KRaft controller (ReplicationControlManager,
ControllerApis, Topic.validate), so admin clients show the same texts.
"""
from __future__ import annotations

import abc
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from ..protocol.errors import ErrorCode, KafkaError
from .metadata import TopicInfo, is_valid_topic_name
from .metadata_cache import Endpoint, MetadataCache, PartitionState
from .partition_change import manual_assignment_error
from .topic_validator import TopicValidator

if TYPE_CHECKING:
    import trio

    from ..acl.bindings import AclBinding
    from ..security.delegation_tokens import TokenInformation
    from .replica_manager import ReplicaManager

log = logging.getLogger("pykbroker.metadata")


class Controller(abc.ABC):
    """The controller interface (see the module docstring).  Every operation raises
    ``KafkaError`` with Kafka's code and message when refused."""

    # Set by every implementation's constructor: the broker's config (read by name) and the
    # shared topic checks (auto_create and _plan_partitions below use them).
    config: Any
    validator: TopicValidator

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        # The host of this broker's partition logs (the ReplicaManager), handed over by
        # set_replica_manager once it exists; None until then.
        self._replica_manager: Any = None
        self._topic_deleted: list[Callable[[str], Any]] = []
        self._partition_changed: list[Callable[[str, int, PartitionState], Any]] = []
        # Dynamic broker configs as stored (Kafka's strings): entity "" = the cluster-wide
        # default, "<id>" = one broker's.  Published to the broker-config listeners.
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_listeners: list[Callable[[str, dict], Any]] = []
        # Dynamic group configs as stored (Kafka's strings), per group id (pykbroker/config/group.py)
        self._group_configs: dict[str, dict[str, str]] = {}
        # SCRAM credentials as Kafka stores them (security/scram.py ScramCredential.to_text):
        # user -> {mechanism: "salt=...,stored_key=...,server_key=...,iterations=N"}; never a
        # password.  Read by SASL/SCRAM authentication, written by AlterUserScramCredentials.
        self._scram: dict[str, dict[str, str]] = {}
        # ACL bindings (acl/bindings.AclBinding), written by CreateAcls/DeleteAcls, followed by
        # the authorizer's index through the ACL listeners (as Kafka's authorizer follows the
        # metadata log's ACL records).
        self._acls: set = set()
        self._acl_listeners: list[Callable] = []
        # Client quotas (quota/entities.py): {entity tuple: {key: value}}, written by
        # AlterClientQuotas, followed by the broker's ClientQuotaManager through the listeners
        self._client_quotas: dict = {}
        self._client_quota_listeners: list[Callable] = []
        # Delegation tokens (security/delegation_tokens.TokenInformation) by token id, written by
        # Create/Renew/ExpireDelegationToken and the expiry check, followed by the broker's
        # DelegationTokenManager through the listeners (Kafka's token cache following the metadata)
        self._tokens: dict = {}
        self._token_listeners: list[Callable] = []

    # ------------------------------------------------------------------ client quotas
    def client_quotas(self) -> dict:
        return {e: dict(v) for e, v in self._client_quotas.items()}

    def add_client_quota_listener(self, callback: Callable) -> None:
        """``callback(quotas)`` with every stored quota after every change, and once at load."""
        self._client_quota_listeners.append(callback)

    def _publish_client_quotas(self) -> None:
        for cb in self._client_quota_listeners:
            cb(self.client_quotas())

    async def alter_client_quotas(self, changes: dict) -> None:
        """Apply ``{entity: {key: value or None}}`` (validated by the caller) as one change.  In
        memory here (test controllers); durable in LocalController (the metadata file) and
        ZkController (Kafka's /config znodes, zookeeper/security_store.py)."""
        from ..quota.entities import apply_changes
        self._client_quotas = apply_changes(self._client_quotas, changes)
        self._publish_client_quotas()

    # ------------------------------------------------------------------ delegation tokens
    def delegation_tokens(self) -> dict:
        return dict(self._tokens)

    def add_delegation_token_listener(self, callback: Callable) -> None:
        """``callback(upserts=[TokenInformation], removals=[token id])`` after every change, and
        once with every stored token at load."""
        self._token_listeners.append(callback)

    def _publish_tokens(self, upserts: Iterable[TokenInformation] = (), removals: Iterable[str] = ()) -> None:
        for cb in self._token_listeners:
            cb(upserts=list(upserts), removals=list(removals))

    def _store_tokens(self, upserts: Iterable[TokenInformation] = (), removals: Iterable[str] = ()) -> dict:
        """Apply; returns the previous state to roll back."""
        old = dict(self._tokens)
        for token_id in removals:
            self._tokens.pop(token_id, None)
        for info in upserts:
            self._tokens[info.token_id] = info
        return old

    async def alter_delegation_tokens(self, upserts: Iterable[TokenInformation] = (), removals: Iterable[str] = ()) -> None:
        """Store (create or update) and remove tokens as one change.  In memory here (test
        controllers); durable in LocalController's metadata file, and in Kafka's
        ``/delegation_token`` znodes on ZooKeeper (zookeeper/security_store.py)."""
        self._store_tokens(upserts, removals)
        self._publish_tokens(upserts, removals)

    # ------------------------------------------------------------------ ACLs
    def acls(self) -> set:
        return set(self._acls)

    def add_acl_listener(self, callback: Callable) -> None:
        """``callback(added=..., removed=...)`` after every change, and once with every stored
        binding at load."""
        self._acl_listeners.append(callback)

    def _publish_acls(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        for cb in self._acl_listeners:
            cb(added=added, removed=removed)

    def _store_acls(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]) -> tuple:
        """Apply; the (added, removed) that actually changed the set (to publish or roll back)."""
        add = [b for b in dict.fromkeys(added) if b not in self._acls]
        rem = [b for b in dict.fromkeys(removed) if b in self._acls]
        self._acls.difference_update(rem)
        self._acls.update(add)
        return add, rem

    async def alter_acls(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        """Add and remove bindings as one change (validated by the caller).  In memory here (the
        in-memory test controllers); durable in LocalController's metadata file, and in Kafka's
        ACL znodes on ZooKeeper (zookeeper/security_store.py)."""
        add, rem = self._store_acls(added, removed)
        self._publish_acls(add, rem)

    # ------------------------------------------------------------------ SCRAM credentials
    def scram_credential(self, user: str, mechanism: str) -> Optional[str]:
        return self._scram.get(user, {}).get(mechanism)

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {u: dict(m) for u, m in self._scram.items()}

    def _store_scram(self, changes: list) -> dict:
        """Apply ``[(user, mechanism, text or None)]``; returns the previous state to roll back."""
        old = {u: dict(m) for u, m in self._scram.items()}
        for user, mech, text in changes:
            if text is None:
                self._scram.get(user, {}).pop(mech, None)
                if not self._scram.get(user):
                    self._scram.pop(user, None)
            else:
                self._scram.setdefault(user, {})[mech] = text
        return old

    async def alter_scram_credentials(self, changes: list) -> None:
        """Upsert/delete credentials (validated by the caller).  In memory here (the in-memory
        test controllers); durable in LocalController's metadata file, and in /config/users on
        ZooKeeper (zookeeper/security_store.py)."""
        self._store_scram(changes)

    # ------------------------------------------------------------------ listeners
    def set_replica_manager(self, replica_manager: ReplicaManager) -> None:
        """The host of this broker's partition logs: ``make_partitions(info, ids)`` and
        ``delete_partitions(info)`` (awaited; a failed creation is rolled back) and
        ``on_config_change(info)`` (may be sync or async)."""
        self._replica_manager = replica_manager

    def add_topic_deleted_listener(self, callback: Callable[[str], Any]) -> None:
        """``callback(name)`` after a topic is gone (e.g. the group coordinator drops the
        topic's committed offsets, Kafka's onPartitionsDeleted).  Errors are logged."""
        self._topic_deleted.append(callback)

    def add_partition_change_listener(self, callback: Callable[[str, int, PartitionState], Any]) -> None:
        """``callback(topic, partition, new_state)`` after a leader/ISR change was published."""
        self._partition_changed.append(callback)

    def add_broker_config_listener(self, callback: Callable[[str, dict], Any]) -> None:
        """``callback(entity, configs)`` when the dynamic configs of the cluster default
        (entity "") or of a broker ("<id>") were loaded or changed (strings, the whole set)."""
        self._broker_config_listeners.append(callback)

    def broker_configs(self, entity: str) -> dict[str, str]:
        """The stored dynamic configs of ``entity`` ("" = cluster default, "<id>")."""
        return dict(self._broker_configs.get(entity, {}))

    def _store_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        if configs:
            self._broker_configs[entity] = dict(configs)
        else:
            self._broker_configs.pop(entity, None)

    def _publish_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Store and tell the listeners."""
        self._store_broker_configs(entity, configs)
        for cb in self._broker_config_listeners:
            try:
                cb(entity, dict(configs))
            except Exception:
                log.exception("broker-config listener failed for %r", entity)

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (validated by the caller) durably, then
        publish them.  This base version keeps them in memory (test controllers)."""
        self._publish_broker_configs(entity, configs)

    # A cluster's controller hands each broker blocks of producer ids unique in the cluster
    # (Kafka's AllocateProducerIds); a single node allocates its own from its log dir
    # (cluster/producer_ids.py), so the default is False and the method is never called.
    allocates_producer_ids = False

    async def allocate_producer_id_block(self, broker_id: int) -> int:
        """The start of a block of producer ids unique in the cluster (allocates_producer_ids)."""
        raise NotImplementedError("a single node allocates its producer ids itself")

    def group_configs(self, group_id: str) -> dict[str, str]:
        """The stored dynamic configs of a group (empty when none)."""
        return dict(self._group_configs.get(group_id, {}))

    def groups_with_configs(self) -> list[str]:
        return sorted(self._group_configs)

    def _store_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        if configs:
            self._group_configs[group_id] = dict(configs)
        else:
            self._group_configs.pop(group_id, None)

    async def read_group_configs(self, group_id: str) -> dict[str, str]:
        """A group's configs as the authoritative store holds them now (here: the local one);
        a ZooKeeper cluster reads the znode, since its watches follow a moment behind a change
        made through another broker."""
        return self.group_configs(group_id)

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's configs (validated by the caller) durably.  In memory here."""
        self._store_group_configs(group_id, configs)

    def _notify_partition_changed(self, topic: str, partition: int, state: PartitionState) -> None:
        for cb in self._partition_changed:
            try:
                cb(topic, partition, state)
            except Exception:
                log.exception("partition-change listener failed for %s-%d", topic, partition)

    def _notify_topic_deleted(self, name: str) -> None:
        for cb in self._topic_deleted:
            try:
                cb(name)
            except Exception:
                log.exception("topic-deleted listener failed for %s", name)

    # ------------------------------------------------------------------ life cycle
    async def load(self) -> None:
        """Load the durable metadata and publish it to the cache (before the logs open)."""

    async def startup(self, nursery: Optional[trio.Nursery] = None) -> None:
        """Start listening for changes (after the ReplicaManager started)."""

    async def shutdown(self) -> None:
        pass

    # ------------------------------------------------------------------ operations
    def expired_at_once(self, timeout_ms: int) -> bool:
        """CreateTopics / CreatePartitions with this ``timeout_ms`` fail whole, every topic
        REQUEST_TIMED_OUT (message null), before anything is checked or made.

        This default is a KRaft controller's rule (Kafka 4.4, measured with compat/kafka/oracle.py):
        the request is an event of the controller's queue with the deadline now + ``timeout_ms``,
        and an event not started by its deadline fails, so ``timeout_ms <= 0`` always does (even
        ``validate_only``, unknown topics, topics the client may not create).  An event that
        started is answered once committed however long it runs: a creation whose logs outlast
        ``timeout_ms`` is answered NONE and its partitions appear when their logs exist (Kafka's
        brokers create theirs after the answer, replaying the committed records).  The ZooKeeper
        controller keeps the ZooKeeper-era rule instead (cluster/zookeeper/admin.py)."""
        return timeout_ms <= 0

    @abc.abstractmethod
    async def register_broker(self, broker_id: int, endpoints: tuple[Endpoint, ...] = (),
                              rack: Optional[str] = None) -> None:
        """A broker (re-)registers with its advertised endpoints."""

    @abc.abstractmethod
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, Optional[str]] | None = None,
                          assignments: Optional[Iterable[tuple[int, list[int]]]] = None,
                           validate_only: bool = False, internal: bool = False,
                           timeout_s: Optional[float] = None) -> TopicInfo:
        """``assignments``: iterable of ``(partition_index, [broker ids])`` or None; -1 counts
        mean the broker defaults.  Returns the topic (not created when ``validate_only``).
        ``timeout_s``: how long the requester waits (the request's ``timeout_ms``; None: until
        done), see :meth:`expired_at_once`."""

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> TopicInfo:
        ...

    @abc.abstractmethod
    async def create_partitions(self, name: str, new_total: int, assignments: Optional[list[list[int]]] = None,
                                validate_only: bool = False, timeout_s: Optional[float] = None) -> TopicInfo:
        """``assignments``: one broker-id list per new partition, or None; ``timeout_s`` as in
        :meth:`create_topic`."""

    @abc.abstractmethod
    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        """Replace the topic's overrides (parsed values) with ``new_overrides``."""

    @abc.abstractmethod
    async def alter_partition(self, topic: str, partition: int, partition_epoch: int,
                              leader: Optional[int] = None, isr: Optional[list[int]] = None,
                              leader_epoch: Optional[int] = None) -> PartitionState:
        """Change a partition's ISR (Kafka's AlterPartition; ``leader_epoch``: the proposer's,
        None = not checked) or, as the controller, its leader; compare-and-set on
        ``partition_epoch``.  Rules and error codes: cluster/partition_change.py."""

    @abc.abstractmethod
    def replicas_offline(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        """``broker_id`` reports its replicas of ``partitions`` ((topic, p) pairs) offline (a
        failed log dir; Kafka's handleDirectoriesOffline): listed in ``offline_replicas``, out
        of the ISR unless the last member, leadership to the next live ISR member or none (-1)
        (cluster/partition_change.py; docs/replication-contract.md)."""

    # -- what only a cluster's controller does: the defaults are a single node's answers, so
    # callers never probe for them
    def reassignments(self, wanted: Optional[Iterable[tuple[str, int]]] = None) -> dict:
        """The ongoing reassignments {(topic, p): (replicas, adding, removing)} (of ``wanted``,
        a set of (topic, p), or all): a single node never has one."""
        return {}

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Move this broker's leaderships to other in-sync replicas before it stops (a
        cluster's controller): nothing to move on a single node."""

    async def elect_leaders(self, partitions: Iterable[tuple[str, int]], election_type: int = 0,
                            timeout_s: float = 30.0) -> dict[tuple[str, int], int]:
        """ElectLeaders of ``partitions`` (existing (topic, p) pairs; ``election_type`` 0
        preferred, 1 unclean) -> {(topic, p): error code, 0 when elected}, within ``timeout_s``
        (the request's; 30 s: Kafka's default).  A single node is every partition's preferred
        and only leader: no election is ever needed."""
        return {tp: ErrorCode.ELECTION_NOT_NEEDED for tp in partitions}

    async def alter_reassignments(self, items: Iterable[tuple[str, int, Optional[list[int]]]],
                                  allow_rf_change: bool = True,
                                  timeout_s: float = 30.0) -> dict[tuple[str, int], tuple[int, Optional[str]]]:
        """AlterPartitionReassignments: ``items`` [(topic, p, target replicas, or None to cancel)]
        -> {(topic, p): (error code, message)}.  A single node can only be "reassigned" to itself
        (a no-op) and has nothing to cancel; its checks and texts are Kafka 4.4's, the same as a
        cluster controller's (cluster/zookeeper/active.py check_target)."""
        cache = self.cache
        out: dict[tuple[str, int], tuple[int, Optional[str]]] = {}
        for topic, p, target in items:
            if cache.get(topic) is None:
                out[(topic, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named %s." % topic)
            elif cache.partition_state(topic, p) is None:
                out[(topic, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "Unable to find partition %s:%d." % (topic, p))
            elif target is None:
                out[(topic, p)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)   # Kafka gives no text
            else:
                error = manual_assignment_error(list(target), {b.broker_id for b in cache.alive_brokers()})
                out[(topic, p)] = ((ErrorCode.INVALID_REPLICA_ASSIGNMENT, error) if error is not None
                                   else (0, None))
        return out

    def replicas_online(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        """``broker_id``'s replicas of ``partitions`` are back (the controllers that track
        offline replicas override it)."""

    async def auto_create(self, name: str) -> Optional[TopicInfo]:
        """Auto-creation (Metadata, the coordinators): the topic, or None when disabled, the
        name is invalid, the creation is in flight or failed.  Uses num.partitions and
        default.replication.factor, as Kafka does."""
        if not self.config["auto.create.topics.enable"] or not is_valid_topic_name(name):
            return None
        if name in self.cache.topics:
            return self.cache.topics[name]
        if self._creation_in_flight(name):
            return None  # Kafka answers UNKNOWN_TOPIC_OR_PARTITION meanwhile
        try:
            return await self.create_topic(name, -1, -1, {})
        except KafkaError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return await self._created_elsewhere(name)
            log.warning("auto-creation of topic %s failed: %s", name, e)
            return None

    def _creation_in_flight(self, name: str) -> bool:
        return self.cache.is_staged(name)

    async def _created_elsewhere(self, name: str) -> Optional[TopicInfo]:
        """The topic another request created first (auto-creation lost the race)."""
        return self.cache.get(name)

    def _existing(self, name: str) -> TopicInfo:
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return info

    def _plan_partitions(self, name: str, new_total: int, assignments: Optional[list[list[int]]]) -> tuple[TopicInfo, int, dict]:
        """(topic, partitions it has, placement of the new ones), counted with partitions still
        being added by a concurrent request, as they will be."""
        info = self._existing(name)
        pending = self.cache.including_staged(name)
        assert pending is not None   # the topic exists (``_existing``), so does its pending view
        return info, pending.num_partitions, self.validator.plan_partitions(pending, new_total, assignments)
