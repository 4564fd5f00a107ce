"""The controller seam: the only writer of cluster metadata.

``Controller`` is the interface every admin path goes through (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs/IncrementalAlterConfigs, auto-creation by Metadata and the group
coordinator, leader/ISR changes, broker registration).  It validates with Kafka's error codes
and messages, makes the change durable, and publishes it as records to the broker's
``MetadataCache`` (cluster/metadata_cache.py), the read-only view every handler reads.  Its
listeners register explicitly (``set_replica_manager``, ``add_topic_deleted_listener``,
``add_partition_change_listener``); the controller never reaches them through the broker.

``LocalController`` is the single-node implementation (no ``zookeeper.connect``);
``ZkController`` (cluster/zk_controller.py) the cluster one.  What it provides behind the same
interface (and any other implementation must):
- the same async operations with the same validation and messages (``TopicValidator`` below is
  shared; only ``registered_brokers`` becomes the live ``/brokers/ids`` set);
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

Persistence of ``LocalController``
----------------------------------
One small JSON file, ``<first log dir>/__pykbroker_metadata.json``::

    {"version": 1, "topics": [{"name": "t", "topic_id": "<22-char url-safe base64>",
      "num_partitions": 3, "replica_assignment": {"0": [1], ...},
      "configs": {"retention.ms": "1000"}, "internal": false,
      "partition_states": {"0": {"leader": 1, "leader_epoch": 2, "partition_epoch": 5,
                                 "isr": [1]}}}, ...]}

``"user_scram_credentials": {"<user>": {"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,
iterations=4096"}}`` when any SCRAM user exists, ``"acls": [["TOPIC", "t", "LITERAL", "User:alice",
"*", "READ", "ALLOW"], ...]`` when any ACL binding exists (CreateAcls/DeleteAcls, pykbroker/acl/) (AlterUserScramCredentials; Kafka's stored form,
never a password), ``"client_quotas": [{"entity": {"user": "alice", "client-id": null},
"values": {"producer_byte_rate": 1024.0}}]`` when any client quota exists (AlterClientQuotas,
pykbroker/quota/; a null name is the default entity), plus, when any is set, ``"broker_configs": {"": {...}, "1": {"log.retention.ms": "1000"}}``: the
dynamic broker configs of the cluster default ("") and of this node (IncrementalAlterConfigs /
AlterConfigs on BROKER resources), as Kafka's strings, published to the broker-config listeners
at load (before the topics) and on every change; and ``"group_configs": {"<group>": {...}}``:
the dynamic group configs (resource type GROUP, pykbroker/group_config.py); and
``"delegation_tokens": [{"version": 3, "owner": "User%3Aalice", "tokenId": ..., ...}]``: the
delegation tokens as Kafka's token znode holds them (security/delegation_tokens.py; never the
HMAC, derived from the id and ``delegation.token.secret.key``).

``partition_states`` is optional and holds only partitions whose state differs from a new
partition's (first replica leads, ISR = replicas, epochs 0), so files written before it existed
load unchanged; a single node writes one only once a replica went offline (a failed log dir
or fault injection).  Offline marks themselves are not written (a restart checks the log dirs
again), but the epochs they moved are: epochs never go back, as clients ignore metadata older
than what they saw.  A partition written without a leader is led again when the broker
registers at start-up (cluster/partition_change.py, a broker returning).

Every change rewrites the file atomically: write ``.tmp`` → fsync → rename over the old file →
fsync the directory.  A crash (kill -9, power loss) therefore leaves either the old or the new
image, never a torn one.  Topic metadata changes are rare (admin operations), so a full rewrite
is simpler than an append-only log and costs well under a millisecond for thousands of topics.
Config overrides are stored as the strings Kafka would show and re-parsed on load.

Ordering against the partition logs (owned by the ReplicaManager):
- create: the topic is persisted first, then ``replica_manager.make_partitions`` creates its
  logs (the creation is staged in the cache meanwhile), then it is published.  A crash in
  between leaves a persisted topic whose logs the ReplicaManager creates at its next start-up.
- delete: the removal is persisted and published first, then
  ``replica_manager.delete_partitions`` removes the logs, so a deleted topic never comes back
  after a crash (left-over directories are the ReplicaManager's to clean).

Concurrency: state changes happen between awaits; a name being created or deleted is reserved
(staged in the cache / ``_deleting``) so a concurrent request sees it.  Writes are
group-committed: a change bumps a generation number and waits until a write covering that
generation is durable; at most one write runs at a time, without holding a lock across the await.

Error codes and messages follow Apache Kafka's KRaft controller (ReplicationControlManager,
ControllerApis, Topic.validate), so admin clients show the same texts.
"""
from __future__ import annotations

import abc
import json
import logging
import os
import random
from typing import Any, Callable, Optional

import trio

from ..config import ConfigError, redacted, validate_topic_configs
from ..protocol.errors import ErrorCode, KafkaError
from ..storage.fs import REAL_FS
from . import partition_change as PC
from .metadata import (CLUSTER_METADATA_TOPIC, TopicInfo, is_internal, is_valid_topic_name,
                       new_topic_id, topic_id_from_str, topic_id_str, validate_topic_name)
from .metadata_cache import (BrokerRegistration, ConfigRecord, ControllerRecord, Endpoint, MetadataCache,
                             PartitionChangeRecord, PartitionState, RegisterBrokerRecord, RemoveTopicRecord)
from .topic_records import new_partition_records, render_configs, topic_records

log = logging.getLogger("pykbroker.metadata")

METADATA_FILE = "__pykbroker_metadata.json"


def _unify(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses topics differing only by them.
    return name.replace(".", "_")


class Controller(abc.ABC):
    """The controller interface (see the module docstring).  Every operation raises
    ``KafkaError`` with Kafka's code and message when refused."""

    def __init__(self, cache: MetadataCache):
        self.cache = cache
        self._replica_manager = None
        self._topic_deleted: list[Callable[[str], Any]] = []
        self._partition_changed: list[Callable[[str, int, PartitionState], Any]] = []
        # Dynamic broker configs as stored (Kafka's strings): entity "" = the cluster-wide
        # default, "<id>" = one broker's.  Published to the broker-config listeners.
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_listeners: list[Callable[[str, dict], Any]] = []
        # Dynamic group configs as stored (Kafka's strings), per group id (pykbroker/group_config.py)
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

    def _publish_tokens(self, upserts=(), removals=()) -> None:
        for cb in self._token_listeners:
            cb(upserts=list(upserts), removals=list(removals))

    def _store_tokens(self, upserts=(), removals=()) -> dict:
        """Apply; returns the previous state to roll back."""
        old = dict(self._tokens)
        for token_id in removals:
            self._tokens.pop(token_id, None)
        for info in upserts:
            self._tokens[info.token_id] = info
        return old

    async def alter_delegation_tokens(self, upserts=(), removals=()) -> None:
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

    def _publish_acls(self, added=(), removed=()) -> None:
        for cb in self._acl_listeners:
            cb(added=added, removed=removed)

    def _store_acls(self, added, removed) -> tuple:
        """Apply; the (added, removed) that actually changed the set (to publish or roll back)."""
        add = [b for b in dict.fromkeys(added) if b not in self._acls]
        rem = [b for b in dict.fromkeys(removed) if b in self._acls]
        self._acls.difference_update(rem)
        self._acls.update(add)
        return add, rem

    async def alter_acls(self, added=(), removed=()) -> None:
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
    def set_replica_manager(self, replica_manager) -> None:
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

    async def startup(self, nursery=None) -> None:
        """Start listening for changes (after the ReplicaManager started)."""

    async def shutdown(self) -> None:
        pass

    # ------------------------------------------------------------------ operations
    @abc.abstractmethod
    async def register_broker(self, broker_id: int, endpoints: tuple[Endpoint, ...] = (),
                              rack: Optional[str] = None) -> None:
        """A broker (re-)registers with its advertised endpoints."""

    @abc.abstractmethod
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, Optional[str]] | None = None, assignments=None,
                           validate_only: bool = False, internal: bool = False) -> TopicInfo:
        """``assignments``: iterable of ``(partition_index, [broker ids])`` or None; -1 counts
        mean the broker defaults.  Returns the topic (not created when ``validate_only``)."""

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> TopicInfo:
        ...

    @abc.abstractmethod
    async def create_partitions(self, name: str, new_total: int, assignments=None,
                                validate_only: bool = False) -> TopicInfo:
        """``assignments``: one broker-id list per new partition, or None."""

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
    def replicas_offline(self, broker_id: int, partitions) -> None:
        """``broker_id`` reports its replicas of ``partitions`` ((topic, p) pairs) offline (a
        failed log dir; Kafka's handleDirectoriesOffline): listed in ``offline_replicas``, out
        of the ISR unless the last member, leadership to the next live ISR member or none (-1)
        (cluster/partition_change.py; docs/replication-contract.md)."""

    # -- what only a cluster's controller does: the defaults are a single node's answers, so
    # callers never probe for them
    def reassignments(self, wanted=None) -> dict:
        """The ongoing reassignments {(topic, p): (replicas, adding, removing)} (of ``wanted``,
        a set of (topic, p), or all): a single node never has one."""
        return {}

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Move this broker's leaderships to other in-sync replicas before it stops (a
        cluster's controller): nothing to move on a single node."""

    def replicas_online(self, broker_id: int, partitions) -> None:
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

    def _plan_partitions(self, name: str, new_total: int, assignments) -> tuple[TopicInfo, int, dict]:
        """(topic, partitions it has, placement of the new ones), counted with partitions still
        being added by a concurrent request, as they will be."""
        info = self._existing(name)
        pending = self.cache.including_staged(name)
        return info, pending.num_partitions, self.validator.plan_partitions(pending, new_total, assignments)


class TopicValidator:
    """Kafka's controller-side checks of new topics and partitions (shared by controllers)."""

    def __init__(self, cache: MetadataCache, config):
        self.cache = cache
        self.config = config

    def registered_brokers(self) -> set[int]:
        return {b.broker_id for b in self.cache.alive_brokers()}

    def check_new_name(self, name: str) -> None:
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Creation of internal topic %s is prohibited." % CLUSTER_METADATA_TOPIC)
        staged = self.cache.staged_names()
        if name in self.cache.topics or name in staged:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)
        if "." in name or "_" in name:
            u = _unify(name)
            for other in list(self.cache.topics) + staged:
                if other != name and _unify(other) == u:
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     "Topic '%s' collides with existing topic: %s" % (name, other))

    def validate_manual_assignment(self, brokers: list[int], expected_rf: int | None) -> None:
        """Kafka's validateManualPartitionAssignment (cluster/partition_change.py), then the
        replica count against the topic's."""
        error = PC.manual_assignment_error(brokers, self.registered_brokers())
        if error is not None:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
        if expected_rf is not None and len(brokers) != expected_rf:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes a partition with %d replica(s), but "
                             "this is not consistent with previous partitions, which have %d replica(s)."
                             % (len(brokers), expected_rf))

    def place(self, start: int, count: int, rf: int, start_index: int | None = None) -> dict[int, list[int]]:
        """Kafka's rack-unaware placement: partition p's first replica is broker
        ``(p + start_index) % n`` (a random start unless given, so the first partitions of
        different topics do not all lead on one broker); followers come after it at a shift
        that is random too and grows by one every n partitions, so a broker's partitions do
        not all have their followers on the same brokers."""
        brokers = sorted(self.registered_brokers())
        n = len(brokers)
        if rf > n:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Unable to replicate the partition %d time(s): The target replication factor "
                             "of %d cannot be reached because only %d broker(s) are registered or some "
                             "brokers have all their log directories cordoned." % (rf, rf, n))
        first0 = random.randrange(n) if start_index is None else start_index % n
        shift = random.randrange(n)
        out = {}
        for p in range(start, start + count):
            if p > 0 and p % n == 0:
                shift += 1
            first = (p + first0) % n
            replicas = [brokers[first]]
            for j in range(rf - 1):
                replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
            out[p] = replicas
        return out

    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: dict[str, str | None], assignments=None) -> tuple[dict, dict[int, list[int]]]:
        """Validate a new topic as Kafka's controller does (in its order) and return the parsed
        config overrides and the replica assignment.  Raises KafkaError."""
        self.check_new_name(name)
        nulls = [k for k, v in (configs or {}).items() if v is None]
        if nulls:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             "Null value not supported for topic configs: %s" % ",".join(nulls))
        try:
            overrides = validate_topic_configs(dict(configs or {}))
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        if assignments:
            if replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                                 "but replication factor was not set to -1.")
            if num_partitions != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                                 "but numPartitions was not set to -1.")
            placed: dict[int, list[int]] = {}
            rf = None
            for p, brokers in assignments:
                if p in placed:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Found multiple manual partition assignments for partition %d" % p)
                self.validate_manual_assignment(list(brokers), rf)
                rf = len(brokers)
                placed[p] = list(brokers)
            for i in range(len(placed)):
                if i not in placed:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "partitions should be a consecutive 0-based integer sequence")
            return overrides, dict(sorted(placed.items()))
        if replication_factor < -1 or replication_factor == 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        if num_partitions < -1 or num_partitions == 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        n = self.config["num.partitions"] if num_partitions == -1 else num_partitions
        rf = self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        return overrides, self.place(0, n, rf)

    def new_topic(self, name: str, num_partitions: int, replication_factor: int,
                  configs: dict[str, str | None], assignments=None, internal: bool = False) -> TopicInfo:
        """``plan_topic``, as the topic it describes (a new topic id)."""
        overrides, placement = self.plan_topic(name, num_partitions, replication_factor, configs, assignments)
        return TopicInfo(name=name, topic_id=new_topic_id(), num_partitions=len(placement),
                         replica_assignment=placement, configs=overrides,
                         internal=internal or is_internal(name))

    def plan_partitions(self, info: TopicInfo, new_total: int, assignments) -> dict[int, list[int]]:
        """Kafka's createPartitions rules; returns the new partitions' placement."""
        name, current = info.name, info.num_partitions
        if new_total == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic already has %d partition(s)." % current)
        if new_total < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "The topic %s currently has %d partition(s); %d would not be an increase."
                             % (name, current, new_total))
        additional = new_total - current
        if assignments is None:
            # new partitions continue the topic's placement from its partition 0 (as Kafka)
            brokers = sorted(self.registered_brokers())
            first = (info.replica_assignment.get(0) or [None])[0]
            start_index = brokers.index(first) if first in brokers else None
            return self.place(current, additional, info.replication_factor, start_index)
        if len(assignments) != additional:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Attempted to add %d additional partition(s), but only %d assignment(s) "
                             "were specified." % (additional, len(assignments)))
        placed = {}
        for i, brokers in enumerate(assignments):
            self.validate_manual_assignment(list(brokers), info.replication_factor)
            placed[current + i] = list(brokers)
        return placed


class LocalController(Controller):
    """The single-node controller: durable in ``__pykbroker_metadata.json`` (module docstring)."""

    def __init__(self, cache: MetadataCache, config, node_id: int, log_dir: str, fs=REAL_FS):
        super().__init__(cache)
        self.fs = fs
        self.config = config
        self.node_id = node_id
        self.validator = TopicValidator(cache, config)
        self._deleting: dict[str, trio.Event] = {}     # being deleted (logs not yet removed)
        self._nursery = None
        self._persist_pending = False
        self._gen = 0
        self._durable_gen = 0
        self._writing = False
        self._written = trio.Event()
        self.path = os.path.join(log_dir, METADATA_FILE)

    # ------------------------------------------------------------------ persistence
    async def load(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            os.unlink(self.path + ".tmp")  # a write interrupted by a crash
        except FileNotFoundError:
            pass
        # this node is the controller (Metadata/DescribeCluster report it, as a KRaft broker
        # reports a live broker)
        records: list = [ControllerRecord(self.node_id)]
        try:
            with open(self.path, "rb") as fh:
                data = json.loads(fh.read())
        except FileNotFoundError:
            data = {}
        for entity, configs in sorted((data.get("broker_configs") or {}).items()):
            # before any topic is published: the logs open with the dynamic defaults in force
            self._publish_broker_configs(entity, {k: str(v) for k, v in configs.items()})
        for group_id, configs in (data.get("group_configs") or {}).items():
            self._store_group_configs(group_id, {k: str(v) for k, v in configs.items()})
        for user, mechs in (data.get("user_scram_credentials") or {}).items():
            self._scram[user] = {m: str(t) for m, t in mechs.items()}
        if data.get("client_quotas"):
            from ..quota.entities import from_json
            try:
                self._client_quotas = from_json(data["client_quotas"])
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                log.warning("ignoring stored client quotas: %s", e)
            self._publish_client_quotas()
        if data.get("delegation_tokens"):
            from ..security.delegation_tokens import TokenInformation
            for v in data["delegation_tokens"]:
                try:
                    info = TokenInformation.from_json(v)
                except (KeyError, TypeError, ValueError) as e:
                    log.warning("ignoring stored delegation token: %s", e)
                    continue
                self._tokens[info.token_id] = info
            self._publish_tokens(upserts=list(self._tokens.values()))
        if data.get("acls"):
            from ..acl.bindings import AclBinding
            for v in data["acls"]:
                try:
                    self._acls.add(AclBinding.from_json(v))
                except (StopIteration, IndexError, TypeError) as e:
                    log.warning("ignoring stored ACL %r: %s", v, e)
            self._publish_acls(added=sorted(self._acls))
        for t in data.get("topics", []):
            overrides = {}
            for k, v in (t.get("configs") or {}).items():
                try:
                    overrides.update(validate_topic_configs({k: v}))
                except ConfigError as e:
                    log.warning("ignoring stored config of topic %s: %s", t["name"], e)
            info = TopicInfo(
                name=t["name"], topic_id=topic_id_from_str(t["topic_id"]),
                num_partitions=int(t["num_partitions"]),
                replica_assignment={int(p): list(r) for p, r in t["replica_assignment"].items()},
                configs=overrides, internal=bool(t.get("internal")) or is_internal(t["name"]))
            states = {}
            for p, st in (t.get("partition_states") or {}).items():
                replicas = info.replica_assignment.get(int(p), [])
                states[int(p)] = PartitionState(
                    leader=int(st.get("leader", replicas[0] if replicas else -1)),
                    leader_epoch=int(st.get("leader_epoch", 0)),
                    partition_epoch=int(st.get("partition_epoch", 0)),
                    replicas=tuple(replicas), isr=tuple(st.get("isr", replicas)))
            records += topic_records(info, states)
        self.cache.apply(records)
        if data:
            log.info("loaded metadata of %d topic(s) from %s", len(self.cache.topics), self.path)

    async def startup(self, nursery=None) -> None:
        self._nursery = nursery
        if self._persist_pending and nursery is not None:
            self._persist_pending = False
            nursery.start_soon(self._persist_reported)

    def _snapshot(self) -> bytes:
        topics = []
        # staged creations included: persisted before their logs are made (module docstring)
        for info in self.cache.all_including_staged():
            entry = {
                "name": info.name, "topic_id": topic_id_str(info.topic_id),
                "num_partitions": info.num_partitions,
                "replica_assignment": {str(p): r for p, r in sorted(info.replica_assignment.items())},
                "configs": render_configs(info.configs),
                "internal": info.internal,
            }
            changed = {}
            for p, replicas in sorted(info.replica_assignment.items()):
                st = self.cache.partition_state(info.name, p)
                if st is not None and st != PartitionState.initial(replicas):
                    changed[str(p)] = {"leader": st.leader, "leader_epoch": st.leader_epoch,
                                       "partition_epoch": st.partition_epoch, "isr": list(st.isr)}
            if changed:
                entry["partition_states"] = changed
            topics.append(entry)
        out = {"version": 1, "topics": topics}
        if self._broker_configs:
            out["broker_configs"] = {e: dict(sorted(c.items())) for e, c in sorted(self._broker_configs.items())}
        if self._scram:
            # salted keys only (the password never reaches the broker's state or this file)
            out["user_scram_credentials"] = {u: dict(sorted(m.items())) for u, m in sorted(self._scram.items())}
        if self._client_quotas:
            from ..quota.entities import to_json
            out["client_quotas"] = to_json(self._client_quotas)
        if self._acls:
            # Kafka's names (TOPIC, LITERAL, READ, ALLOW), sorted: a readable, stable file
            out["acls"] = sorted(b.to_json() for b in self._acls)
        if self._tokens:
            # Kafka's token znode JSON (never the HMAC: it is derived from the id and the secret)
            out["delegation_tokens"] = [t.to_json() for _, t in sorted(self._tokens.items())]
        if self._group_configs:
            out["group_configs"] = {g: dict(sorted(c.items())) for g, c in sorted(self._group_configs.items())}
        return json.dumps(out, indent=1).encode()

    async def _persist(self) -> None:
        """Make the current metadata durable (group commit, one writer at a time)."""
        self._gen += 1
        mine = self._gen
        while self._durable_gen < mine:
            if self._writing:
                await self._written.wait()
                continue
            self._writing = True
            gen = self._gen
            try:
                data = self._snapshot()   # inside: a failure must not leave _writing set
                # Not cancellable: once started, the write completes (the state is already changed).
                await trio.to_thread.run_sync(self.fs.write_file_atomic, self.path, data)
                self._durable_gen = max(self._durable_gen, gen)
            finally:
                self._writing = False
                done, self._written = self._written, trio.Event()
                done.set()

    async def _persist_or_undo(self, undo: Callable[[], object]) -> None:
        """Make a change durable; when the write fails, ``undo`` puts the change back in memory
        first, so memory never holds what the metadata file does not, then the failure goes on."""
        try:
            await self._persist()
        except BaseException:
            undo()
            raise

    # ------------------------------------------------------------------ brokers
    async def register_broker(self, broker_id: int, endpoints=(), rack=None) -> None:
        # In memory only, like an ephemeral /brokers/ids znode: a broker registers at each start.
        self.cache.apply([RegisterBrokerRecord(BrokerRegistration(broker_id, tuple(endpoints), rack))])
        # a partition left without a leader (its replica was offline when the state was written)
        # whose ISR holds the broker is led by it again (Kafka's handleBrokerUnfenced)
        live = self.validator.registered_brokers()
        changed = False
        for info in list(self.cache.topics.values()):
            for p in info.partition_ids():
                st = self.cache.partition_state(info.name, p)
                new = PC.on_broker_returned(st, broker_id, live, self._unclean_allowed(info.name)) if st else None
                if new is not None:
                    self._publish_change(info, p, new)
                    changed = True
        if changed:
            await self._persist()

    # ------------------------------------------------------------------ topics
    async def create_topic(self, name, num_partitions, replication_factor, configs=None,
                           assignments=None, validate_only=False, internal=False) -> TopicInfo:
        while name in self._deleting:  # the old incarnation's logs are still being removed
            await self._deleting[name].wait()
        info = self.validator.new_topic(name, num_partitions, replication_factor, configs or {},
                                        assignments, internal)
        if validate_only:
            return info
        records = topic_records(info)
        # Reserved from here (TOPIC_ALREADY_EXISTS for a concurrent creation) but invisible to
        # clients until its logs exist.
        staged = self.cache.stage(records)
        await self._make_staged(records, staged, staged.partition_ids(), "creating topic %s" % name)
        info = self.cache.get(name)
        log.info("created topic %s (id %s, %d partition(s), configs %s)", name, topic_id_str(info.topic_id),
                 info.num_partitions, render_configs(info.configs))
        return info

    async def _make_staged(self, records, info: TopicInfo, partition_ids, what: str) -> None:
        """Persist staged creation records, have the ReplicaManager create the logs, publish;
        on any failure the creation is rolled back (it never became visible)."""
        try:
            await self._persist()
            await self._replica_manager.make_partitions(info, partition_ids)
        except BaseException:
            self.cache.discard_staged(records)
            with trio.CancelScope(shield=True):
                await self._persist()
            log.exception("%s failed", what)
            raise
        self.cache.publish_staged(records)

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self._existing(name)
        self.cache.apply([RemoveTopicRecord(info.topic_id)])
        done = self._deleting[name] = trio.Event()
        try:
            with trio.CancelScope(shield=True):  # a half-done delete must still finish
                await self._persist()
                await self._replica_manager.delete_partitions(info)
        finally:
            self._deleting.pop(name, None)
            done.set()
        log.info("deleted topic %s (id %s)", name, topic_id_str(info.topic_id))
        # Committed offsets of the deleted partitions go too (Kafka's onPartitionsDeleted).
        self._notify_topic_deleted(name)
        return info

    async def create_partitions(self, name: str, new_total: int, assignments=None,
                                validate_only: bool = False) -> TopicInfo:
        info, current, placed = self._plan_partitions(name, new_total, assignments)
        if validate_only:
            return info
        records = new_partition_records(info.topic_id, placed)
        self.cache.stage(records)
        await self._make_staged(records, info, list(range(current, new_total)), "adding partitions to %s" % name)
        log.info("topic %s now has %d partition(s)", name, new_total)
        return info

    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        info = self._existing(name)
        old = info.configs
        self.cache.apply([ConfigRecord(name, dict(new_overrides))])
        await self._persist_or_undo(lambda: self.cache.apply([ConfigRecord(name, old)]))
        res = self._replica_manager.on_config_change(info)
        if hasattr(res, "__await__"):
            await res
        log.info("topic %s config overrides now %s", name, render_configs(info.configs))
        return info

    async def _replace_configs(self, current, store, key: str, configs: dict[str, str]) -> bool:
        """One entity's config map replaced durably (``store(key, map)``, undone in memory if the
        write fails); False when it already was ``configs`` (nothing written)."""
        old = current(key)
        if old == configs:
            return False
        store(key, configs)
        await self._persist_or_undo(lambda: store(key, old))
        return True

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        if not await self._replace_configs(self.broker_configs, self._store_broker_configs, entity, configs):
            return
        self._publish_broker_configs(entity, configs)
        log.info("dynamic broker configs of %s now %s", entity or "the cluster default",
                 redacted(dict(sorted(configs.items()))))

    async def alter_acls(self, added=(), removed=()) -> None:
        add, rem = self._store_acls(added, removed)
        if not add and not rem:
            return
        await self._persist_or_undo(lambda: (self._acls.difference_update(add), self._acls.update(rem)))
        self._publish_acls(add, rem)
        for b in add:
            log.info("ACL added: %s", b.to_json())
        for b in rem:
            log.info("ACL removed: %s", b.to_json())

    async def alter_delegation_tokens(self, upserts=(), removals=()) -> None:
        upserts, removals = list(upserts), [r for r in removals if r in self._tokens]
        if not upserts and not removals:
            return
        old = self._store_tokens(upserts, removals)
        await self._persist_or_undo(lambda: setattr(self, "_tokens", old))
        self._publish_tokens(upserts, removals)

    async def alter_client_quotas(self, changes: dict) -> None:
        from ..quota.entities import apply_changes
        if not changes:
            return
        old = self._client_quotas
        self._client_quotas = apply_changes(old, changes)
        await self._persist_or_undo(lambda: setattr(self, "_client_quotas", old))
        self._publish_client_quotas()
        log.info("client quotas changed: %s", changes)

    async def alter_scram_credentials(self, changes: list) -> None:
        old = self._store_scram(changes)
        await self._persist_or_undo(lambda: setattr(self, "_scram", old))
        log.info("SCRAM credentials changed: %s", ", ".join(
            "%s %s %s" % ("deleted" if t is None else "set", m, u) for u, m, t in changes))

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        if not await self._replace_configs(self.group_configs, self._store_group_configs, group_id, configs):
            return
        log.info("group configs of %s now %s", group_id, dict(sorted(configs.items())))

    # ------------------------------------------------------------------ partitions
    # The rules are cluster/partition_change.py's; here only the file and the listeners.
    def _unclean_allowed(self, topic: str) -> bool:
        return bool(self.cache.effective_config(topic).get("unclean.leader.election.enable"))

    def _publish_change(self, info: TopicInfo, partition: int, new: PartitionState) -> None:
        self.cache.apply([PartitionChangeRecord(info.topic_id, partition, new)])
        self._notify_partition_changed(info.name, partition, new)

    async def alter_partition(self, topic: str, partition: int, partition_epoch: int,
                              leader: Optional[int] = None, isr: Optional[list[int]] = None,
                              leader_epoch: Optional[int] = None) -> PartitionState:
        info = self.cache.get(topic)
        st = self.cache.partition_state(topic, partition) if info is not None else None
        if st is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        new = PC.alter_partition(st, partition_epoch=partition_epoch, eligible=self.validator.registered_brokers(),
                                 isr=isr, leader=leader, leader_epoch=leader_epoch,
                                 where="%s-%d" % (topic, partition))
        if new is None:
            return st
        self.cache.apply([PartitionChangeRecord(info.topic_id, partition, new)])
        await self._persist_or_undo(lambda: self.cache.apply([PartitionChangeRecord(info.topic_id, partition, st)]))
        self._publish_change(info, partition, new)
        return new

    def _change_reported(self, broker_id: int, partitions, rule) -> None:
        """A replica state reported by a broker (sync, from its log dirs): published now,
        persisted in the background (epochs only move forward, across restarts too)."""
        live = self.validator.registered_brokers()
        changed = False
        for topic, p in partitions:
            info = self.cache.get(topic)
            st = self.cache.partition_state(topic, p) if info is not None else None
            new = rule(st, broker_id, live) if st is not None else None
            if new is not None:
                self._publish_change(info, p, new)
                changed = True
        if changed:
            if self._nursery is None:
                self._persist_pending = True    # written once startup() hands a nursery
            else:
                self._nursery.start_soon(self._persist_reported)

    async def _persist_reported(self) -> None:
        try:
            await self._persist()
        except Exception:
            log.exception("persisting reported replica states failed (written with the next change)")

    def replicas_offline(self, broker_id: int, partitions) -> None:
        # Kafka's rule (a failed log dir): out of the ISR, leadership moved or none
        self._change_reported(broker_id, partitions, PC.replicas_offline)

    def replicas_online(self, broker_id: int, partitions) -> None:
        """Undo :meth:`replicas_offline` for ``partitions`` (fault injection's partition coming
        back, pykbroker/run/runner.py): a partition left without a leader is led by it again, at a
        new leader epoch."""
        self._change_reported(broker_id, partitions, PC.replicas_online)
