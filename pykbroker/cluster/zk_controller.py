"""``ZkController``: the controller interface (cluster/controller.py) on a real ZooKeeper, in
Kafka's pre-KRaft layout (cluster/zk.py).  Used when ``zookeeper.connect`` is set.

Every broker runs one.  This front composes the roles, each in its own module of
cluster/zookeeper/ with the state it owns, and keeps the ``Controller`` interface every caller
uses (broker.py, the handlers, the coordinators):

1. **Metadata listener (every broker)**, ``listener.MetadataListener``: ZooKeeper watches turned
   into ``MetadataCache`` records and ReplicaManager calls (this replaces Kafka's LeaderAndIsr /
   UpdateMetadata / StopReplica requests).
2. **Admin writer (any broker)**, ``admin.AdminWriter``: CreateTopics, CreatePartitions,
   AlterConfigs, DeleteTopics, ElectLeaders, AlterPartitionReassignments, a leader's ISR change
   (``alter_partition``) and producer id blocks, written to ZooKeeper directly.
3. **Active controller (one broker)**, ``active.ActiveController``: the term (``/controller_epoch``,
   fenced writes) and its duties: elections when brokers come and go, preferred and unclean
   elections, rebalance, reassignments, deletions, offline replicas.
4. **Membership (every broker)**, ``membership.Membership``: the registration
   ``/brokers/ids/<id>``, the session's states (SUSPENDED vs LOST: a blip within the session
   changes nothing, only expiry ends a term), the ``/controller`` election race, controlled
   shutdown.

Under them, ``znodes.ZnodeStore`` reads the layout and ``events.EventTask`` handles every
ZooKeeper event one at a time, in ZooKeeper's order, on one trio task (Kafka's
ControllerEventManager); the table in ``startup`` says which role handles which event.  Partition
epochs are the state znodes' versions; leader epochs are in the state JSON.

5. **Security store (every broker)**, ``security_store.SecurityStore``: SCRAM credentials
   (``/config/users``), client quotas (``/config/users``, ``/config/clients``, ``/config/ips``)
   and ACL bindings (``/kafka-acl``, ``/kafka-acl-extended``) written in
   Kafka's layout, and followed through their change notices.

Owns nothing but the composition: the ZooKeeper session, and (as every ``Controller``) the
listener registry and the stored dynamic broker and group configs (cluster/controller.py).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from . import zk as Z
from .controller import Controller
from .topic_validator import TopicValidator
from .metadata import TopicInfo
from .metadata_cache import MetadataCache, PartitionState
from .zookeeper.active import ActiveController
from .zookeeper.admin import AdminWriter
from .zookeeper.events import APPLY_TIMEOUT_S, EventTask
from .zookeeper.listener import MetadataListener
from .zookeeper.membership import Membership
from .zookeeper.security_store import SecurityStore
from .zookeeper.znodes import ZnodeStore

if TYPE_CHECKING:
    from ..acl.bindings import AclBinding
    from ..config.broker import BrokerConfig
    from ..security.delegation_tokens import TokenInformation
    from .metadata_cache import Endpoint

log = logging.getLogger("pykbroker.controller")


class ZkController(Controller):
    def __init__(self, cache: MetadataCache, config: BrokerConfig, node_id: int) -> None:
        super().__init__(cache)
        self.config = config
        self.node_id = node_id
        self.validator = TopicValidator(cache, config)
        session_ms = config["zookeeper.session.timeout.ms"]
        conn_ms = config["zookeeper.connection.timeout.ms"] or session_ms
        self.zk = Z.ZkSession(config["zookeeper.connect"], session_ms, conn_ms)
        self.events = EventTask()
        store = ZnodeStore(self.zk)
        self.listener = MetadataListener(self, store, self.events, node_id)
        self.active = ActiveController(self.listener, store, self.events, config, node_id)
        self.membership = Membership(self.listener, self.active, store, self.events, config, node_id)
        self.admin = AdminWriter(self, self.listener, self.active, store, self.events, self.validator)
        # SCRAM credentials, client quotas and ACL bindings in Kafka's znodes, followed through the notices
        self.security = SecurityStore(self, self.zk, self.events, bool(config["authorizer.class.name"]),
                                      tokens_on=bool(config["delegation.token.secret.key"]
                                                     or config["delegation.token.master.key"]))

    @property
    def is_active(self) -> bool:
        """This broker is the active controller."""
        return self.active.is_active

    @property
    def controller_epoch(self) -> int:
        return self.active.controller_epoch

    def _post(self, event: Any) -> None:
        self.events.post(event)

    # ================================================================== life cycle
    async def connect(self, cluster_id_hint: str) -> str:
        """Connect, create Kafka's persistent paths, and agree on the cluster id (the one in
        ``/cluster/id``; a new cluster takes ``cluster_id_hint``).  Returns it."""
        return await self.membership.connect(cluster_id_hint)

    async def load(self) -> None:
        """Read the whole image into the cache (before the logs are opened).

        A broker restarted right after a kill -9 first waits for the registration of its previous
        life to expire.  Kafka's broker acts on nothing before it is registered (its controller
        sends LeaderAndIsr only to registered brokers); this one reads partition states itself,
        so it must not read them, open its logs or bind its listeners while the controller still
        counts the old process as alive and has not yet moved its leaderships away."""
        await self.membership.await_previous_registration_gone()
        await self.listener.load()
        await self.security.load()

    async def startup(self, nursery: Any = None) -> None:   # the broker's trio.Nursery, always handed in
        """Install the watches and start the event task (after the ReplicaManager started)."""
        listener, active, membership = self.listener, self.active, self.membership
        handlers = {
            "session": membership.on_session,
            "controller": membership.on_controller,
            "elect": membership.on_elect,
            "brokers": active.on_brokers,           # the listener's view, then elections
            "topics": listener.on_topics,
            "topic_hint": listener.on_topic_hint,
            "topic": listener.on_topic,
            "state": active.on_state,               # published, then a reassignment may complete
            "config": listener.on_config,
            "broker_configs": listener.on_broker_configs,
            "group_children": listener.on_group_children,
            "group_config": listener.on_group_config,
            "deletions": active.on_deletions,
            "preferred": active.on_preferred,
            "auto_rebalance": active.on_auto_rebalance,   # posted by active.rebalance_loop's timer
            "reassign": active.on_reassign,
            "log_dir_events": active.on_log_dir_events,
            "offline_report": active.on_offline_report,
            "security_changes": self.security.on_changes,
        }
        post = self.events.post
        nursery.start_soon(self.events.run, handlers)
        self.zk.on_state(lambda state: post(("session", state)))
        self.zk.children_watch(Z.BROKER_IDS, lambda ch: post(("brokers", ch)))
        self.zk.children_watch(Z.TOPICS, lambda ch: post(("topics", ch)))
        self.zk.data_watch(Z.CONTROLLER, lambda data, stat: post(("controller", data)))
        self.zk.children_watch(Z.DELETE_TOPICS, lambda ch: post(("deletions", ch)))
        self.zk.data_watch(Z.PREFERRED_ELECTION, lambda data, stat: post(("preferred", data)))
        self.zk.data_watch(Z.REASSIGN_PARTITIONS, lambda data, stat: post(("reassign", data)))
        self.zk.children_watch(Z.LOG_DIR_EVENTS, lambda ch: post(("log_dir_events", ch)))
        # Dynamic broker configs written by any broker or tool (Kafka's brokers followed the
        # /config/changes notifications; watching the two znodes sees the same changes).
        for entity in ("", str(self.node_id)):
            on_change: Callable[..., Any] = lambda data, stat, e=entity: post(("broker_configs", e, data))
            self.zk.data_watch(Z.broker_config_path(entity), on_change)
        # Group configs written through any broker (one znode per group under /config/groups)
        await self.zk.call("ensure_path", Z.CONFIG_GROUPS)
        self.zk.children_watch(Z.CONFIG_GROUPS, lambda ch: post(("group_children", ch)))
        self.security.watch()
        await listener.watch_known_topics()
        nursery.start_soon(active.rebalance_loop)

    async def shutdown(self) -> None:
        self.active.stop()
        await self.zk.stop()

    async def controlled_shutdown(self, timeout_s: float) -> None:
        await self.membership.controlled_shutdown(timeout_s)

    async def register_broker(self, broker_id: int, endpoints: Iterable[Endpoint] = (),
                              rack: Optional[str] = None) -> None:
        await self.membership.register_broker(broker_id, endpoints, rack)

    # ================================================================== admin operations
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, Optional[str]] | None = None,
                           assignments: Optional[Iterable[tuple[int, list[int]]]] = None, validate_only: bool = False,
                           internal: bool = False, timeout_s: Optional[float] = None) -> TopicInfo:
        return await self.admin.create_topic(name, num_partitions, replication_factor, configs,
                                             assignments, validate_only, internal, timeout_s)

    async def delete_topic(self, name: str) -> TopicInfo:
        return await self.admin.delete_topic(name)

    async def create_partitions(self, name: str, new_total: int, assignments: Optional[list[list[int]]] = None,
                                validate_only: bool = False, timeout_s: Optional[float] = None) -> TopicInfo:
        return await self.admin.create_partitions(name, new_total, assignments, validate_only, timeout_s)

    def expired_at_once(self, timeout_ms: int) -> bool:
        """Never: Kafka's ZooKeeper-era brokers check and write a request whatever its
        ``timeout_ms``, and answer REQUEST_TIMED_OUT for the topics written when it is <= 0 or
        passes before this broker shows them (AdminWriter._await_applied)."""
        return False

    def _creation_in_flight(self, name: str) -> bool:
        return False   # a creation by another broker is not staged here: ask, and wait below

    async def _created_elsewhere(self, name: str) -> Optional[TopicInfo]:
        return await self.admin.created_elsewhere(name)

    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        return await self.admin.alter_topic_configs(name, new_overrides)

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        await self.admin.alter_broker_configs(entity, configs)

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        await self.admin.alter_group_configs(group_id, configs)

    async def read_group_configs(self, group_id: str) -> dict[str, str]:
        return await self.admin.read_group_configs(group_id)

    async def alter_scram_credentials(self, changes: list) -> None:
        await self.security.alter_scram_credentials(changes)

    async def alter_acls(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        await self.security.alter_acls(added, removed)

    async def alter_delegation_tokens(self, upserts: Iterable[TokenInformation] = (), removals: Iterable[str] = ()) -> None:
        await self.security.alter_delegation_tokens(upserts, removals)

    async def alter_client_quotas(self, changes: dict) -> None:
        if changes:
            await self.security.alter_client_quotas(changes)

    async def alter_partition(self, topic: str, partition: int, partition_epoch: int,
                              leader: Optional[int] = None, isr: Optional[list[int]] = None,
                              leader_epoch: Optional[int] = None) -> PartitionState:
        return await self.admin.alter_partition(topic, partition, partition_epoch, leader, isr, leader_epoch)

    async def elect_leaders(self, partitions: Iterable[tuple[str, int]], election_type: int = 0, timeout_s: float = APPLY_TIMEOUT_S) -> dict:
        return await self.admin.elect_leaders(partitions, election_type, timeout_s)

    def reassignments(self, wanted: Optional[Iterable[tuple[str, int]]] = None) -> dict:
        return self.listener.reassignments(wanted)

    async def alter_reassignments(self, items: Any, allow_rf_change: bool = True,
                                  timeout_s: float = APPLY_TIMEOUT_S) -> dict:
        return await self.admin.alter_reassignments(items, allow_rf_change, timeout_s)

    allocates_producer_ids = True

    async def allocate_producer_id_block(self, broker_id: int) -> int:
        return await self.admin.allocate_producer_id_block(broker_id)

    def replicas_offline(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        """A failed log dir: this broker lists the replicas offline in its own view at once
        (KAFKA_STORAGE_ERROR, Metadata), and reports them to the active controller through
        Kafka's ``/log_dir_event_notification``; the controller applies Kafka's rule
        (cluster/partition_change.py: out of the ISR, leadership moved)."""
        tps = self.listener.replicas_offline(broker_id, partitions)
        if tps:
            self._post(("offline_report", broker_id, tps))
