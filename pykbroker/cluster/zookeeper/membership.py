"""``Membership``: this broker in the cluster: its registration, its ZooKeeper session's states,
its candidacy for ``/controller``, and its controlled shutdown.

**Registration** is the ephemeral ``/brokers/ids/<id>``, created once the listeners are bound.
A broker restarted right after a kill -9 waits for its old session's znode to expire instead of
failing (Kafka exits with "node already exists"), and waits before anything else (``load``): no
partition state read, no log opened, no listener bound until then.  Controlled shutdown deletes
the registration first, so the controller moves leadership away, and waits for it (bounded).

**Connection vs session (Kafka's ZooKeeper-era controller).**  A lost connection within a live
session (kazoo's SUSPENDED: a network blip, a server of the ensemble restarting) changes nothing:
the ephemeral ``/controller`` and ``/brokers/ids/<id>`` znodes still belong to the session, so
the controller stays the controller (nobody else can take over while its znode lives) and its
writes wait for the reconnection or fail and are redone after it.  On the reconnection within
the session it checks ``/controller`` is still its own and re-reads what may have changed
meanwhile (live brokers, partition states, pending deletions and reassignments) before acting on
it.  Only the session's expiry (LOST) or a ``/controller`` that is no longer its own ends its
term; after an expiry the broker registers again and takes part in the next election.  The
``/controller`` watch's data is only a hint: the znode is read again (its owner session
compared with ours) before a controller resigns or a broker runs for election, so a
notification older than this broker's own election cannot depose it (Kafka's maybeResign reads
the znode too).  Elections run on the event task only, never beside it.

Owns: the registration (what it says, whether it is in place), whether the connection is
down, whether this broker is shutting down.  The term itself (``is_active``, the epoch) is
cluster/zookeeper/active.py's; this module starts and ends it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable, Optional

import trio

from .. import zk as Z
from ..metadata_cache import BrokerRegistration, Endpoint, RegisterBrokerRecord
from .active import ActiveController
from .events import EventTask
from .listener import MetadataListener
from .znodes import ZnodeRole, ZnodeStore

if TYPE_CHECKING:
    from ...config import BrokerConfig

log = logging.getLogger("pykbroker.controller")


class Membership(ZnodeRole):
    def __init__(self, listener: MetadataListener, active: ActiveController, store: ZnodeStore,
                 events: EventTask, config: BrokerConfig, node_id: int) -> None:
        super().__init__(listener.cache, store, events)
        self.listener = listener
        self.active = active
        self.config = config
        self.node_id = node_id
        # the registration we own (re-created after a session loss)
        self._registration: Optional[BrokerRegistration] = None
        self._registered = False
        # the ZooKeeper connection is down (kazoo's SUSPENDED) and the session may still live
        self._suspended = False
        self._shutting_down = False

    # ================================================================== joining
    async def connect(self, cluster_id_hint: str) -> str:
        """Connect, create Kafka's persistent paths, and agree on the cluster id (the one in
        ``/cluster/id``; a new cluster takes ``cluster_id_hint``).  Returns it."""
        from kazoo.exceptions import ConnectionLoss, NodeExistsError

        await self.zk.start()
        for p in Z.PERSISTENT_PATHS:
            await self.zk.call("ensure_path", p)
        while True:
            try:
                await self.zk.call("create", Z.CLUSTER_ID, Z.encode_cluster_id(cluster_id_hint), makepath=True)
                cid = cluster_id_hint
            except ConnectionLoss:
                # a blip while starting (a broker restarted while its ZooKeeper link drops):
                # the create may or may not have been applied, so try again -- a second create
                # of an applied one finds the znode and reads the id back, which is then ours
                await trio.sleep(0.1)
                continue
            except NodeExistsError:
                data, _ = await self.zk.call("get", Z.CLUSTER_ID)
                cid = Z.decode_cluster_id(data)
            break
        self.cache.cluster_id = cid
        log.info("connected to ZooKeeper at %s (cluster id %s)", self.zk.connect, cid)
        return cid

    # ================================================================== registration
    async def register_broker(self, broker_id: int, endpoints: Iterable[Endpoint] = (),
                              rack: Optional[str] = None) -> None:
        if not endpoints:
            return   # registered once the listeners are bound (clients need the endpoints)
        self._registration = BrokerRegistration(broker_id, tuple(endpoints), rack)
        await self._ensure_registered()
        self.cache.apply([RegisterBrokerRecord(self._registration)])
        # elections run on the event task, in order with the /controller notifications
        self.events.post(("elect",))

    async def await_previous_registration_gone(self) -> None:
        path = Z.broker_path(self.node_id)
        # A dead process's session expires one session timeout after its last heartbeat (a
        # ZooKeeper restart re-arms it once).  A registration that outlives three of them plus
        # a margin belongs to a live process: another broker configured with the same id.
        # Kafka refuses to start at once in both cases (KafkaZkClient.registerBroker: NODEEXISTS
        # unless its own session owns the znode); this one refuses only in the second.
        session_s = self.config["zookeeper.session.timeout.ms"] / 1000.0
        limit = 3 * session_s + 10.0
        waited = None
        while True:
            # exists() with a watch reads the znode's owner and arms a one-shot notification of
            # its deletion: the start goes on as soon as ZooKeeper expires the old session, not
            # at the next poll.  The znode is read again after every wake, so a notification
            # only ends a wait: what decides is the owner read here (never two registrations).
            gone = trio.Event()
            stat = await self.zk.call("exists", path, watch=lambda _event: self.zk.post(gone.set))
            if stat is None or self.zk.owns(stat):
                break
            now = trio.current_time()
            if waited is not None and now - waited > limit:
                raise RuntimeError(
                    "broker id %d is registered in ZooKeeper (%s) by a live session that did not expire in "
                    "%.0f s: another running broker has the same broker.id (node.id)"
                    % (self.node_id, path, limit))
            if waited is None:
                waited = now
                log.warning("broker id %d is still registered by an older session (a previous process "
                            "that did not shut down cleanly); waiting for it to expire "
                            "(zookeeper.session.timeout.ms) before starting", self.node_id)
            # bounded: a watch is lost with our own session (LOST), and the limit must be checked
            with trio.move_on_after(min(session_s, max(0.25, waited + limit - now + 0.25))):
                await gone.wait()
        if waited is not None:
            log.info("the older registration of broker %d expired after %.1f s; starting",
                     self.node_id, trio.current_time() - waited)

    async def _ensure_registered(self) -> None:
        from kazoo.exceptions import ConnectionLoss, NodeExistsError

        path = Z.broker_path(self.node_id)
        # each listener's security protocol, as Kafka's registration carries it
        from ...config import parse_protocol_map
        assert self._registration is not None   # both callers set or checked it
        data = Z.encode_broker(self._registration, parse_protocol_map(self.config["listener.security.protocol.map"]))
        waited = False
        created = True
        while True:
            try:
                await self.zk.call("create", path, data, ephemeral=True)
                break
            except ConnectionLoss:
                # a blip: the create may have been applied (then the next try finds it ours)
                await trio.sleep(0.2)
                continue
            except NodeExistsError:
                _, stat = await self.store.get_or_none(path)
                if self.zk.owns(stat):
                    created = False
                    break   # ours already (a reconnect within the session)
                if not waited:
                    # the registration of a previous life of this broker (kill -9) lives until
                    # its ZooKeeper session expires
                    log.warning("broker id %d is still registered by an older session; waiting for "
                                "it to expire (zookeeper.session.timeout.ms)", self.node_id)
                    waited = True
                await trio.sleep(0.5)
        self._registered = True
        if created:
            log.info("registered broker %d at %s", self.node_id, Z.broker_path(self.node_id))

    # ================================================================== the session
    async def on_session(self, state: str) -> None:
        """kazoo's session states (see "Connection vs session" above)."""
        if state == "SUSPENDED":
            # the session may well live on: nothing is given up (Kafka's controller ignores a
            # disconnect); writes issued meanwhile wait for the reconnection or fail
            self._suspended = True
            log.info("ZooKeeper connection lost; waiting to reconnect within the session%s",
                     " (still the controller)" if self.active.is_active else "")
            return
        if state == "LOST":
            # the session expired: our ephemeral znodes (registration, /controller) are gone
            self._suspended = True
            self._registered = False
            if self.active.is_active:
                await self.active.resign("ZooKeeper session expired")
            else:
                log.warning("ZooKeeper session of broker %d expired", self.node_id)
            return
        if state != "CONNECTED":
            return
        self._suspended = False
        if self._registration is None or self._shutting_down:
            return
        # within the session (after SUSPENDED) the registration is still ours; after an expiry
        # it is created again
        await self._ensure_registered()
        await self.listener.resync()
        if self.active.is_active:
            data, stat = await self.store.get_or_none(Z.CONTROLLER)
            if self.zk.owns(stat):
                log.info("broker %d reconnected to ZooKeeper within its session: still the controller "
                         "(epoch %d); re-reading what changed meanwhile", self.node_id, self.active.controller_epoch)
                await self.listener.refresh_all_states()
                await self.active.catch_up()
                return
            await self.active.resign("/controller is no longer ours after the reconnection (controller %d)"
                                     % Z.decode_controller(data))
        await self._try_elect()

    # ================================================================== the /controller race
    async def on_controller(self, data: Optional[bytes]) -> None:
        # The notification's data may be older than what this broker did since (its own
        # election on this task): the znode is read again, and its owner decides.
        data, stat = await self.store.get_or_none(Z.CONTROLLER)
        cid = Z.decode_controller(data)
        if self.zk.owns(stat) and cid == self.node_id:
            if not self.active.is_active and not self._shutting_down:
                # ours, yet not acting: created by an attempt whose answer a connection loss
                # swallowed, or fenced by a stale epoch: a term with a new epoch
                await self.active.become_active()
            return
        self.listener.publish_controller(cid)
        if self.active.is_active:
            await self.active.resign("another controller (%d) was elected" % cid if cid != -1
                                     else "the /controller znode is gone")
        if stat is None and not self._shutting_down and self._registered:
            await self._try_elect()

    async def on_elect(self) -> None:
        await self._try_elect()

    async def _try_elect(self) -> None:
        from kazoo.exceptions import NodeExistsError

        if self.active.is_active or self._shutting_down or not self._registered:
            return
        try:
            await self.zk.call("create", Z.CONTROLLER, Z.encode_controller(self.node_id), ephemeral=True)
        except NodeExistsError:
            data, stat = await self.store.get_or_none(Z.CONTROLLER)
            cid = Z.decode_controller(data)
            if self.zk.owns(stat) and cid == self.node_id:
                # ours: an earlier create applied whose answer a connection loss swallowed
                await self.active.become_active()
                return
            self.listener.publish_controller(cid)
            return
        await self.active.become_active()

    # ================================================================== leaving
    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Kafka's controlled shutdown: give up the registration so the controller moves the
        leadership of our partitions to other in-sync replicas, and wait (bounded) until no
        partition we lead has another live in-sync replica left to take over."""
        from kazoo.exceptions import NoNodeError

        self._shutting_down = True
        if self.active.is_active:
            await self.active.resign("controlled shutdown")
            try:
                await self.zk.call("delete", Z.CONTROLLER)
            except NoNodeError:
                pass
        try:
            await self.zk.call("delete", Z.broker_path(self.node_id))
        except NoNodeError:
            pass
        except Exception as e:
            log.warning("controlled shutdown: cannot remove the registration: %s", e)
            return
        with trio.move_on_after(timeout_s) as scope:
            remaining = self._leaderships_to_move()
            while remaining:
                await self.events.wait_changed()
                # the controller moves them in batches: let a burst of state changes land, then
                # look again at the ones still here (not every partition after every change)
                await trio.sleep(0.05)
                remaining = self._leaderships_to_move(remaining)
        if scope.cancelled_caught:
            log.warning("controlled shutdown: leadership of %d partition(s) not moved within %.0f s",
                        len(self._leaderships_to_move()), timeout_s)
        else:
            log.info("controlled shutdown: no partition left to move")

    def _leaderships_to_move(self, among: Optional[Iterable[tuple[str, int]]] = None) -> list[tuple[str, int]]:
        """Partitions we lead that another live in-sync replica could lead (``among``: only
        these (topic, partition) pairs; default every partition)."""
        alive = {b.broker_id for b in self.cache.alive_brokers()}
        if among is None:
            among = [(info.name, p) for info in list(self.cache.topics.values()) for p in info.partition_ids()]
        out: list[tuple[str, int]] = []
        for name, p in among:
            st = self.cache.partition_state(name, p)
            if st is not None and st.leader == self.node_id and any(
                    b != self.node_id and b in alive for b in st.isr):
                out.append((name, p))
        return out
