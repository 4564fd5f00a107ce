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

import trio

from .cluster.metadata import new_topic_id, topic_id_str
from .config import BrokerConfig
from .handlers import load_handlers
from .server.faults import FaultPlan
from .server.serve import Listener, parse_listeners, serve_listener
from .storage.fs import REAL_FS

log = logging.getLogger("pykbroker.broker")


def _read_meta(path: str) -> dict:
    from .config import parse_properties

    try:
        with open(path) as fh:
            return parse_properties(fh.read())
    except FileNotFoundError:
        return {}


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id: int = config.node_id
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.handlers = load_handlers(lazy=True)   # each module imported by its first request
        self.listeners: list[Listener] = parse_listeners(config["listeners"])
        self.advertised: list[Listener] = []
        self.cluster_id: str = ""
        self.metadata_cache = None   # read-only view of the cluster metadata (cluster/metadata_cache.py)
        self.controller = None       # its only writer (cluster/controller.py)
        self.log_manager = None
        self.replica_manager = None
        self.storage_fs = None      # the storage fault seam (tests set a FaultFS before run)
        self.halt_hook = None       # replaces the process exit on a halt (in-process tests)
        self.faults = FaultPlan()   # injected request faults (server/faults.py; empty: off)
        self.group_coordinator = None
        self.transaction_coordinator = None
        self.ready = trio.Event()
        self._components: list = []

    # -- identity ---------------------------------------------------------------------------
    def _load_identity(self) -> None:
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
        path = os.path.join(self.log_dirs[0], "meta.properties")
        meta = _read_meta(path)
        cid = self.config["cluster.id"] or meta.get("cluster.id")
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

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        from .cluster.controller import LocalController
        from .cluster.metadata_cache import Endpoint, MetadataCache
        from .cluster.replica_manager import ReplicaManager
        from .storage.manager import LogManager

        self._load_identity()
        self.metadata_cache = MetadataCache(self.node_id, self.cluster_id, self.config.effective_topic_config)
        self.controller = LocalController(self.metadata_cache, self.config, self.node_id, self.log_dirs[0],
                                          fs=self.storage_fs or REAL_FS)
        self.log_manager = LogManager(self.log_dirs, self.storage_fs, config=self.config,
                                      metadata=self.metadata_cache, halt_hook=self.halt_hook, new_log_epoch=0)
        self.replica_manager = ReplicaManager(self.node_id, self.log_manager, self.metadata_cache)
        self.controller.set_replica_manager(self.replica_manager)
        self.replica_manager.on_replicas_offline = (
            lambda tps: self.controller.replicas_offline(self.node_id, tps))
        try:
            from .coordinator.group.coordinator import BrokerOffsetsLog, GroupCoordinator
        except ImportError:  # consumer groups not built into this tree yet
            GroupCoordinator = None
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            try:
                await self.controller.startup()
                # registered at once (topic creation counts registered brokers); its endpoints
                # follow once the listeners are bound
                await self.controller.register_broker(self.node_id, (), self.config["broker.rack"])
                await self.log_manager.startup(nursery)
                self._components.append(self.log_manager)
                await self.replica_manager.startup(nursery)
                if GroupCoordinator is not None:
                    self.group_coordinator = GroupCoordinator(
                        self.config, self.metadata_cache,
                        BrokerOffsetsLog(self.metadata_cache, self.replica_manager, self.controller))
                    self.controller.add_topic_deleted_listener(self.group_coordinator.on_topic_deleted)
                    # Single node: startup() leads (loads) every __consumer_offsets partition; with
                    # a controller, its leader/resign events call on_become_leader/on_resign.
                    await self.group_coordinator.startup(nursery)
                    self._components.append(self.group_coordinator)
                from .coordinator.txn.coordinator import TransactionCoordinator, TxnStateLog
                # Single node: loads every __transaction_state partition (transactions left in
                # PrepareCommit/PrepareAbort by a crash are completed from here).
                self.transaction_coordinator = TransactionCoordinator(
                    self.config, TxnStateLog(self.metadata_cache, self.replica_manager, self.controller),
                    self.replica_manager, self.replica_manager.producer_ids, self.group_coordinator)
                await self.transaction_coordinator.startup(nursery)
                self._components.append(self.transaction_coordinator)
                bound = []
                for li in self.listeners:
                    bound.append(await nursery.start(serve_listener, self, li))
                self.advertised = self._advertised(bound)
                self.bound = bound
                await self.controller.register_broker(
                    self.node_id, tuple(Endpoint(a.name, a.host, a.port) for a in self.advertised),
                    self.config["broker.rack"])
                log.info("pykbroker node %d (cluster %s) ready, listening on %s",
                         self.node_id, self.cluster_id, ", ".join(str(b) for b in bound))
                self.ready.set()
                task_status.started(self)
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    for comp in reversed(self._components):
                        try:
                            await comp.shutdown()
                        except Exception:
                            log.exception("error while shutting down %s", type(comp).__name__)
                    log.info("pykbroker node %d stopped", self.node_id)

    def _advertised(self, bound: list[Listener]) -> list[Listener]:
        text = self.config["advertised.listeners"]
        if text:
            adv = parse_listeners(text)
        else:
            adv = []
            for b in bound:
                host = b.host
                if host in ("", "0.0.0.0", "::"):
                    # Clients need a reachable address; a wildcard bind advertises loopback.
                    host = "127.0.0.1" if host != "::" else "::1"
                adv.append(Listener(b.name, host, b.port))
        # Port 0 (tests) advertises the port actually bound.
        for a, b in zip(adv, bound):
            if a.port == 0:
                a.port = b.port
        return adv
