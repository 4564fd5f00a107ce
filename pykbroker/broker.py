"""The broker: wires configuration, metadata, partitions, coordinators and listeners.

Start-up order: data dir identity (``meta.properties``: cluster id and node id, as Kafka keeps
them) → topic metadata → partition logs (recovery happens here) → coordinators → listeners.
``nursery.start(broker.run)`` returns once every listener is bound, with the bound addresses, so
callers (tests, the CLI) know the broker is ready.  Cancellation shuts down cleanly: logs are
flushed and the clean-shutdown marker written so the next start skips recovery.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Optional

import trio

from .cluster.metadata import new_topic_id, topic_id_str
from .config import BrokerConfig
from .config.group import GroupConfigView
from .handlers import load_handlers
from .server.faults import FaultPlan
from .server.serve import Listener, parse_listeners, serve_listener
from .storage.fs import REAL_FS

if TYPE_CHECKING:
    from .acl.authorizer import Authorizer
    from .cluster.controller import Controller
    from .cluster.metadata_cache import MetadataCache
    from .cluster.replica_manager import ReplicaManager
    from .coordinator.group.coordinator import GroupCoordinator
    from .coordinator.share.coordinator import ShareCoordinator
    from .coordinator.txn.coordinator import TransactionCoordinator
    from .handlers.support.services import BrokerServices
    from .security.delegation_tokens import DelegationTokenManager
    from .clock import BrokerClock
    from .share.manager import SharePartitionManager
    from .storage.manager import LogManager

log = logging.getLogger("pykbroker.broker")


def _read_meta(path: str) -> dict:
    from .config import parse_properties

    try:
        with open(path) as fh:
            return parse_properties(fh.read())
    except FileNotFoundError:
        return {}


class BrokerServer:
    """The broker itself (Kafka's ``BrokerServer``; ``pykbroker.Broker`` embeds one in a program).
    ``controller_factory(cache, config, node_id, metadata_dir, fs)`` builds the controller
    (default: the single-node ``LocalController``); tests pass an in-memory cluster's
    (pykbroker/testing/memory_cluster.py)."""

    def __init__(self, config: BrokerConfig, controller_factory: Any = None, clock: BrokerClock | None = None) -> None:
        from .clock import BrokerClock

        self.config = config
        self.controller_factory = controller_factory
        # The broker's notion of now (pykbroker/clock.py), handed to every component that reads
        # the time; run() belongs in a trio run started with clock=self.clock (else only the
        # wall-clock readings follow the clock: see BrokerClock).
        self.clock = clock if clock is not None else BrokerClock()
        self.node_id: int = config.node_id
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.handlers = load_handlers(lazy=True)   # each module imported by its first request
        from .config import parse_protocol_map
        # each listener's security protocol from listener.security.protocol.map (checked with
        # the other configs: BrokerConfig._check_consistency)
        self._protocol_map = parse_protocol_map(config["listener.security.protocol.map"])
        self.listeners: list[Listener] = parse_listeners(config["listeners"], self._protocol_map)
        # TLS contexts, SASL mechanisms and users of the secured listeners, built (and checked)
        # before anything starts (security/listeners.py); empty when every listener is PLAINTEXT
        from .security.setup import build_all
        self.listener_security = build_all(config, self.listeners)
        # password.encoder.secret: Kafka's PasswordEncoder for the dynamic password configs
        # stored (password_encoder.py); None without a secret
        self.password_encoder = None
        self._passwords_reencoded = False   # password.encoder.old.secret: done once per start
        if config["password.encoder.secret"]:
            from .password_encoder import PasswordEncoder
            self.password_encoder = PasswordEncoder.from_config(config)
        from .security.stats import AuthenticationStats
        self.auth_stats = AuthenticationStats()   # authentications per listener/mechanism (metrics)
        self.advertised: list[Listener] = []
        self.cluster_id: str = ""
        # None until run() builds them (start-up order: module docstring)
        self.metadata_cache: Optional[MetadataCache] = None   # read-only view of the cluster metadata (cluster/metadata_cache.py)
        self.controller: Optional[Controller] = None       # its only writer (cluster/controller.py)
        # authorizer.class.name set: Kafka's ACL authorizer (acl/authorizer.py), following the
        # controller's ACL bindings; None: every principal may do everything (Kafka's default)
        self.authorizer: Optional[Authorizer] = None
        # delegation tokens (security/delegation_tokens.py), built by run()
        self.token_manager: Optional[DelegationTokenManager] = None
        # client quotas (quota/manager.py), following the controller's stored quotas
        from .quota.manager import ClientQuotaManager
        self.client_quotas = ClientQuotaManager(config["quota.window.num"], config["quota.window.size.seconds"])
        # max.connections / max.connections.per.ip at accept time (quota/connections.py)
        from .quota.connections import ConnectionQuotas
        self.connection_quotas = ConnectionQuotas(config, self.listeners)
        self.log_manager: Optional[LogManager] = None
        self.replica_manager: Optional[ReplicaManager] = None
        self.storage_fs = None      # the storage fault seam (tests set a FaultFS before run)
        self.halt_hook = None       # replaces the process exit on a halt (in-process tests)
        self.faults = FaultPlan()   # injected request faults (server/faults.py; empty: off)
        self.observer = None        # metrics / trace / JSON request logs (observability/observer.py; None: off)
        self.group_coordinator: Optional[GroupCoordinator] = None
        self.transaction_coordinator: Optional[TransactionCoordinator] = None
        self.share_coordinator: Optional[ShareCoordinator] = None        # KIP-932 __share_group_state (coordinator/share/)
        # what the request handlers use (handlers/support/services.py), built once everything exists
        self.services: Optional[BrokerServices] = None
        # KIP-932 share partitions and sessions (share/manager.py): see share_partition_manager
        self._share_partition_manager: SharePartitionManager | None = None
        self._share_partition_args: Optional[tuple] = None   # its constructor's arguments, set at start-up
        self.ready = trio.Event()
        self.crashed = False
        self._components: list[Any] = []

    # -- share partitions (KIP-932) -----------------------------------------------------------

    @property
    def share_partition_manager(self) -> SharePartitionManager | None:
        """The share partitions and sessions (share/manager.py), created at the first use once the
        broker has started (None before): a broker whose clients never use share groups does not
        import or build them."""
        if self._share_partition_manager is None and self._share_partition_args is not None:
            from .share.manager import SharePartitionManager
            self._share_partition_manager = SharePartitionManager(*self._share_partition_args)
        return self._share_partition_manager

    @share_partition_manager.setter
    def share_partition_manager(self, spm: SharePartitionManager | None) -> None:
        self._share_partition_manager = spm

    @property
    def existing_share_partition_manager(self) -> SharePartitionManager | None:
        """The share partition manager if one was created (a connection closing ends its sessions;
        none created: no sessions to end, nothing to import)."""
        return self._share_partition_manager

    # -- identity ---------------------------------------------------------------------------

    def _load_identity(self, cluster_id: str | None = None) -> None:
        """``cluster_id``: the cluster's id from ZooKeeper (a broker whose data belongs to
        another cluster refuses to start, like Kafka's InconsistentClusterIdException)."""
        for d in self.log_dirs:
            _make_log_dir(d)
        path = os.path.join(self.log_dirs[0], "meta.properties")
        meta = _read_meta(path)
        if cluster_id is not None and meta.get("cluster.id") not in (None, cluster_id):
            raise RuntimeError("The cluster id %s in ZooKeeper does not match the cluster id %s in %s"
                               % (cluster_id, meta["cluster.id"], path))
        cid = cluster_id or self.config["cluster.id"] or meta.get("cluster.id")
        if not cid:
            # Kafka's cluster ids are Uuid.randomUuid() strings (22 chars of URL-safe base64), with
            # the same exclusions as topic ids (never one starting with '-', which tools would read
            # as a flag).
            cid = topic_id_str(new_topic_id())
        if meta.get("node.id") and int(meta["node.id"]) != self.node_id:
            raise RuntimeError("log dir %s belongs to node %s, not %d" % (self.log_dirs[0], meta["node.id"], self.node_id))
        self.cluster_id = cid
        # The storage seam (a fault-injecting one in durability tests) writes it atomically.
        fs = self.storage_fs or REAL_FS
        for d in self.log_dirs:
            p = os.path.join(d, "meta.properties")
            if not os.path.exists(p):
                fs.write_file_atomic(p, b"version=1\ncluster.id=%s\nnode.id=%d\n" % (cid.encode(), self.node_id))

    def advertised_listener(self, listener_name: str = "PLAINTEXT") -> Listener:
        for li in self.advertised:
            if li.name == listener_name:
                return li
        return self.advertised[0]

    def _decode_passwords(self, entity: str, raw: dict) -> dict:
        if not any(isinstance(v, str) and "encryptedPassword:" in v for v in raw.values()):
            return raw
        from .password_encoder import decode_layer
        return decode_layer(self.password_encoder, entity, raw)

    def _interbroker_stores_reloaded(self, sec: Any) -> None:
        """A listener took a dynamic keystore or truststore (security/reload.py): when it is the
        inter-broker listener, this broker's own new connections to the others present and
        trust the new ones too (Kafka reconfigures its replica fetchers' SSL factory alike)."""
        ibs = self.replica_manager.interbroker_security if self.replica_manager is not None else None
        if ibs is None or ibs.ssl_context is None or ibs.listener.lower() != sec.name.lower():
            return
        from .config import ConfigError
        from .security.client import client_context
        try:
            ibs.ssl_context = client_context(sec)[0]
        except ConfigError as e:   # the listener loaded them a moment ago: a file gone since
            log.error("inter-broker connections keep their keystore and truststore: %s", e)
            return
        log.info("inter-broker connections over %s take the new keystore and truststore", sec.name)

    def _reencode_passwords(self, entity: str, raw: dict) -> None:
        """The first load of this broker's stored dynamic set: the passwords the old secret
        encoded are stored again under the current secret (password_encoder.reencode_layer)."""
        if entity != str(self.node_id) or self._passwords_reencoded:
            return
        self._passwords_reencoded = True
        from .password_encoder import reencode_layer
        new = reencode_layer(self.password_encoder, raw)
        if new is not None:
            self.nursery.start_soon(self._store_reencoded, entity, raw, new)

    async def _store_reencoded(self, entity: str, raw: dict, new: dict) -> None:
        controller = self.controller
        assert controller is not None   # registered by _run with it
        if controller.broker_configs(entity) != raw:
            return   # changed meanwhile (an AlterConfigs): that write stored the current encoding
        try:
            await controller.alter_broker_configs(entity, new)
        except Exception:
            # the values still decode with the old secret: nothing is lost, the next start tries again
            log.exception("re-encoding the dynamic password configs with the new password.encoder.secret failed")
            return
        log.info("Dynamic password configs %s re-encoded with the current password.encoder.secret",
                 sorted(k for k in new if new[k] != raw.get(k)))

    # -- lifecycle --------------------------------------------------------------------------
    async def _expire_tokens(self) -> None:
        """Kafka's token expiry check: every ``delegation.token.expiry.check.interval.ms`` (on the
        broker's clock) the tokens past their expiry or max timestamp are removed through the
        controller; a failed removal is logged and tried again at the next check."""
        tm, controller = self.token_manager, self.controller
        assert tm is not None and controller is not None   # started by _run only with both
        while True:
            await trio.sleep(tm.check_interval_ms / 1000.0)
            expired = tm.expired()
            if not expired:
                continue
            try:
                await controller.alter_delegation_tokens(removals=expired)
                for token_id in expired:
                    log.info("Delegation token %s expired and removed", token_id)
            except Exception:
                log.exception("removing expired delegation tokens failed")

    async def run(self, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        """Lock the log dirs (storage/dirlock.py: one broker per data directory, Kafka's
        ``.lock``), then run the broker until cancelled; the locks go with it, after its
        components (a crash too: the next incarnation takes them again)."""
        from .storage.dirlock import lock_log_dirs

        for d in self.log_dirs:   # a path that cannot be a log dir: one clear OSError naming it
            _make_log_dir(d)
        locks = lock_log_dirs(self.log_dirs)   # before anything in them is read
        try:
            await self._run(task_status)
        finally:
            for lk in locks:
                lk.release()

    async def _run(self, task_status: trio.TaskStatus[Any]) -> None:
        from .cluster.local_controller import LocalController
        from .cluster.metadata_cache import Endpoint, MetadataCache
        from .cluster.replica_manager import ReplicaManager
        from .storage.manager import LogManager

        zk = bool(self.config["zookeeper.connect"])
        if not zk:
            self._load_identity()
        cache = self.metadata_cache = MetadataCache(self.node_id, self.cluster_id, self.config.effective_topic_config)
        controller: Controller
        if zk:
            # A cluster member: ZooKeeper holds the metadata (cluster/zk_controller.py) and
            # the cluster id (a new cluster takes this data dir's, or a fresh one).
            from .cluster.zk_controller import ZkController
            zkc = ZkController(cache, self.config, self.node_id)
            controller = self.controller = zkc
            try:
                meta = _read_meta(os.path.join(self.log_dirs[0], "meta.properties"))
                hint = self.config["cluster.id"] or meta.get("cluster.id") or topic_id_str(new_topic_id())
                cid = await zkc.connect(hint)
                self._load_identity(cid)
                cache.cluster_id = cid
            except BaseException:
                with trio.CancelScope(shield=True):
                    await zkc.shutdown()
                raise
        else:
            factory = self.controller_factory or LocalController
            controller = self.controller = factory(cache, self.config, self.node_id, self.log_dirs[0],
                                                   fs=self.storage_fs or REAL_FS)
        single_node = isinstance(controller, LocalController)
        if self.config["authorizer.class.name"]:
            # acl/ imported only when an authorizer is configured (start-up of the default broker)
            from .acl.authorizer import from_config as authorizer_from_config
            self.authorizer = authorizer_from_config(self.config)
        if self.authorizer is not None:
            # before load(): the stored bindings reach the index before any listener is bound
            controller.add_acl_listener(self.authorizer.apply)
        controller.add_client_quota_listener(self.client_quotas.apply)
        controller.add_client_quota_listener(self.connection_quotas.apply)
        # delegation tokens (security/delegation_tokens.py, imported only then): the cache follows
        # the controller's stored tokens; without a secret key none (the token APIs answer
        # DELEGATION_TOKEN_AUTH_DISABLED, as Kafka's)
        if self.config["delegation.token.secret.key"] or self.config["delegation.token.master.key"]:
            from .security.delegation_tokens import DelegationTokenManager
            tm = self.token_manager = DelegationTokenManager.from_config(self.config, self.clock.time_ms)
            controller.add_delegation_token_listener(tm.apply)
        log_manager = self.log_manager = LogManager(self.log_dirs, self.storage_fs, config=self.config,
                                                    metadata=cache, halt_hook=self.halt_hook, new_log_epoch=0,
                                                    clock=self.clock)
        # what this broker sends other brokers: the versions it serves itself (--as-kafka applied)
        from .cluster.interbroker import InterBrokerVersions
        versions = InterBrokerVersions(self.handlers)
        rm = self.replica_manager = ReplicaManager(self.node_id, log_manager, cache,
                                                   controller=controller, config=self.config, versions=versions)
        controller.set_replica_manager(rm)
        from .config.dynamic import DynamicBrokerConfig
        self.dynamic_config = DynamicBrokerConfig(self.config, self.node_id, cache, rm)
        if self.listener_security:
            # listener.name.<l>.ssl.keystore.* / ssl.truststore.*: Kafka's dynamic keystore and truststore updates
            from .security.reload import apply as apply_keystores
            self.dynamic_config.add_per_broker_hook(
                lambda raw: apply_keystores(self.listener_security, raw, self._interbroker_stores_reloaded))
        # listener.name.<l>.max.connections / max.connection.creation.rate set for this broker
        self.dynamic_config.add_per_broker_hook(self.connection_quotas.set_listener_dynamic)
        # password.encoder.secret: stored passwords are encoded (password_encoder.py); the module is
        # imported only when a secret is set or a stored value is an encoded one
        self.dynamic_config.set_password_decoder(self._decode_passwords)
        if self.password_encoder is not None and self.password_encoder.old_secret:
            # password.encoder.old.secret: this broker's stored passwords re-encoded with the new
            # secret once, when its dynamic set is first loaded (Kafka's start-up re-encoding)
            controller.add_broker_config_listener(self._reencode_passwords)
        self.dynamic_config.add_reconfigurable(log_manager)
        controller.add_broker_config_listener(self.dynamic_config.on_change)
        rm.on_replicas_offline = (
            lambda tps: controller.replicas_offline(self.node_id, tps))
        from .coordinator.group.coordinator import BrokerOffsetsLog, GroupCoordinator
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            try:
                await controller.load()
                # registered at once (topic creation counts registered brokers); its endpoints
                # follow once the listeners are bound
                await controller.register_broker(self.node_id, (), self.config["broker.rack"])
                await log_manager.startup(nursery)
                self._components.append(log_manager)
                await rm.startup(nursery)
                # watches/events from here on (the partitions exist to receive them)
                await controller.startup(nursery)
                if self.token_manager is not None:
                    nursery.start_soon(self._expire_tokens)
                # GROUP config resources: stored by the controller, read by the coordinators
                group_configs = GroupConfigView(controller.group_configs, self.config)
                gc = self.group_coordinator = GroupCoordinator(
                    self.config, cache, BrokerOffsetsLog(cache, rm, controller),
                    leads_every_partition=single_node, clock=self.clock, group_configs=group_configs)
                controller.add_topic_deleted_listener(gc.on_topic_deleted)
                gc.topic_creator = controller.create_topic  # streams groups' internal topics
                # Single node: startup() leads (loads) every __consumer_offsets partition; in
                # a cluster, the ReplicaManager's leadership changes of its partitions call
                # on_become_leader/on_resign.
                await gc.startup(nursery)
                if not single_node:
                    from .coordinator.group.offsets import OFFSETS_TOPIC
                    self._follow_leadership(OFFSETS_TOPIC, gc)
                self._components.append(gc)
                # KIP-932: the share coordinator (__share_group_state) and the share partitions,
                # which persist their delivery state through it
                from .coordinator.share.coordinator import ShareCoordinator, ShareStateLog
                sc = self.share_coordinator = ShareCoordinator(
                    self.config, ShareStateLog(cache, rm, controller),
                    leads_every_partition=single_node, now_ms=self.clock.time_ms)
                await sc.startup(nursery)
                if not single_node:
                    from .coordinator.share.records import SHARE_STATE_TOPIC
                    self._follow_leadership(SHARE_STATE_TOPIC, sc)
                self._components.append(sc)
                # the share partitions hold no state until a share group fetches: created (and
                # share/manager.py imported) by the first ShareFetch/ShareAcknowledge or share
                # offsets request (the share_partition_manager property), not before the first answer
                self._share_partition_args = (self.config, rm, cache, sc,
                                              group_configs, self.clock.time_ms, controller.read_group_configs)
                from .coordinator.txn.coordinator import TransactionCoordinator
                from .coordinator.txn.state_store import TxnStateLog
                # Single node: loads every __transaction_state partition (transactions left in
                # PrepareCommit/PrepareAbort by a crash are completed from here); in a cluster it
                # follows the leadership of those partitions like the group coordinator.
                tc = self.transaction_coordinator = TransactionCoordinator(
                    self.config, TxnStateLog(cache, rm, controller),
                    rm, rm.producer_ids, gc,
                    leads_every_partition=single_node, now_ms=self.clock.time_ms, interbroker_versions=versions)
                rm.set_transaction_coordinator(tc)
                await tc.startup(nursery)
                self.dynamic_config.add_reconfigurable(tc)
                if not single_node:
                    from .coordinator.txn.state_log import TRANSACTION_STATE_TOPIC
                    self._follow_leadership(TRANSACTION_STATE_TOPIC, tc)
                self._components.append(tc)
                for sec in self.listener_security.values():
                    # an http(s) JWKS of a signed-JWT validator, kept fresh (Kafka's RefreshingHttpsJwks)
                    refresher = getattr(getattr(sec, "oauth_validator", None), "refresher", None)
                    if refresher is not None:
                        nursery.start_soon(refresher.run)
                from .handlers.support.services import BrokerServices
                self.services = BrokerServices(
                    node_id=self.node_id, config=self.config, clock=self.clock, metadata_cache=cache,
                    controller=controller, replica_manager=rm, log_manager=log_manager,
                    handlers=self.handlers, group_coordinator=gc, transaction_coordinator=tc,
                    share_coordinator=sc, client_quotas=self.client_quotas, token_manager=self.token_manager,
                    password_encoder=self.password_encoder, listener_security=self.listener_security,
                    share_partitions=lambda: self.share_partition_manager)
                bound = []
                for li in self.listeners:
                    bound.append(await nursery.start(serve_listener, self, li))
                self.advertised = self._advertised(bound)
                self.bound = bound
                await controller.register_broker(
                    self.node_id, tuple(Endpoint(a.name, a.host, a.port) for a in self.advertised),
                    self.config["broker.rack"])
                log.info("pykbroker node %d (cluster %s) ready, listening on %s",
                         self.node_id, self.cluster_id, ", ".join(str(b) for b in bound))
                self.ready.set()
                task_status.started(self)
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    if self.crashed:
                        # as a killed process: no flush, no checkpoint, no clean-shutdown marker
                        # (the next start recovers); only the file descriptors are released
                        if self.log_manager is not None:
                            self.log_manager.abandon()
                        self._components = []
                        log.warning("pykbroker node %d crashed (no clean shutdown)", self.node_id)
                    for comp in reversed(self._components):
                        try:
                            await comp.shutdown()
                        except Exception:
                            log.exception("error while shutting down %s", type(comp).__name__)
                    try:
                        await controller.shutdown()
                    except Exception:
                        log.exception("error while stopping the controller")
                    log.info("pykbroker node %d stopped", self.node_id)

    async def controlled_shutdown(self) -> None:
        """Before stopping (SIGTERM): in a cluster with ``controlled.shutdown.enable``, move
        the leadership of this broker's partitions to other in-sync replicas first."""
        if not self.config["controlled.shutdown.enable"]:
            return
        # Kafka retries controlled shutdown max.retries times, backoff apart; one bounded wait
        # of the same total here.
        budget = max(5.0, (self.config["controlled.shutdown.max.retries"] *
                           self.config["controlled.shutdown.retry.backoff.ms"]) / 1000.0)
        assert self.controller is not None, "controlled_shutdown before run()"
        await self.controller.controlled_shutdown(budget)

    def _follow_leadership(self, internal_topic: str, coordinator: Any) -> None:
        """A coordinator loads a partition of its internal topic (``__consumer_offsets``,
        ``__transaction_state``) when this broker becomes its leader and unloads it when it
        stops leading (Kafka's onElection / onResignation); partitions already led at
        start-up are loaded now."""
        def on_leadership(topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
            if topic != internal_topic:
                return
            if is_leader:
                coordinator.on_become_leader(partition, leader_epoch)
            else:
                coordinator.on_resign(partition, leader_epoch)
        rm = self.replica_manager
        assert rm is not None   # called by _run once the ReplicaManager exists
        rm.add_leadership_listener(on_leadership)
        for part in rm.partitions_of(internal_topic):
            if part.is_leader:
                coordinator.on_become_leader(part.partition_id, part.leader_epoch)

    def crash(self) -> None:
        """Stop at once without a clean shutdown, as ``kill -9`` would (fault injection and an
        in-process halt): connections are dropped, and what reached the files stays there."""
        self.crashed = True
        self.nursery.cancel_scope.cancel()

    def _advertised(self, bound: list[Listener]) -> list[Listener]:
        text = self.config["advertised.listeners"]
        if text:
            adv = parse_listeners(text, self._protocol_map)
        else:
            adv = []
            for b in bound:
                host = b.host
                if host in ("", "0.0.0.0", "::"):
                    # Clients need a reachable address; a wildcard bind advertises loopback.
                    host = "127.0.0.1" if host != "::" else "::1"
                adv.append(Listener(b.name, host, b.port, b.protocol))
        # Port 0 (tests) advertises the port actually bound (matched by listener name, as the
        # advertised list may name them in another order).
        by_name = {b.name: b for b in bound}
        for i, a in enumerate(adv):
            src = by_name.get(a.name, bound[i] if i < len(bound) else None)
            if a.port == 0 and src is not None:
                a.port = src.port
        return adv


def _make_log_dir(d: str) -> None:
    """Create log dir ``d`` if missing.  One that cannot be a directory or written is an OSError
    naming it (Kafka refuses to start on such a log dir too), reported as one line."""
    import errno

    try:
        os.makedirs(d, exist_ok=True)
    except FileExistsError:   # a file (or a dangling link) where the directory should be
        raise NotADirectoryError(errno.ENOTDIR, "log dir %s is not a directory" % d) from None
    except OSError as e:
        raise type(e)(e.errno, "cannot create log dir %s: %s" % (d, e.strerror or e)) from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "log dir %s is not writable" % d)
