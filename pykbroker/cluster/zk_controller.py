"""``ZkController``: the controller interface (cluster/controller.py) on a real ZooKeeper, in
Kafka's pre-KRaft layout (cluster/zk.py).  Used when ``zookeeper.connect`` is set.

Every broker runs one.  It has three roles:

1. **Metadata listener (every broker).**  ZooKeeper watches on ``/brokers/ids``,
   ``/brokers/topics`` (and each topic's assignment, partition states and config) and
   ``/controller`` feed this broker's ``MetadataCache`` with records, and call the
   ReplicaManager (``make_partitions`` / ``delete_partitions`` / ``on_config_change``) and the
   partition-change listeners (Kafka's LeaderAndIsr: the ReplicaManager becomes leader or
   follower).  This replaces Kafka's controller-to-broker LeaderAndIsr / UpdateMetadata /
   StopReplica requests: each broker reads the facts from ZooKeeper itself, so a stale
   controller can only reach brokers by writing ZooKeeper, which its fenced writes (below)
   prevent.  All events are handled one at a time, in ZooKeeper's order, by one trio task (like
   Kafka's ControllerEventManager), so the cache is only ever changed there (or by this broker's
   own successful writes, applied at once and ignored when their watch arrives).

2. **Admin writer (any broker).**  CreateTopics, CreatePartitions and AlterConfigs write
   ZooKeeper directly (Kafka's AdminZkClient did the same): one multi-op transaction creates the
   assignment, every partition's initial state and the config, so brokers never see half a
   topic.  The request is answered once this broker's cache shows the result.  DeleteTopics
   writes a pending deletion under ``/admin/delete_topics`` that the active controller
   completes; ISR changes by a partition leader (``alter_partition``) are compare-and-set
   writes on the state znode's version (Kafka's leader path before AlterPartition existed).

3. **Active controller (one broker).**  Elected through the ephemeral ``/controller`` znode;
   each new controller bumps ``/controller_epoch``.  When a broker's registration disappears
   (crash, session expiry, controlled shutdown) it elects a new leader for each partition that
   broker led, from the live ISR in replica order, bumping the leader epoch, and removes the
   broker from the ISR of the partitions it followed; with no live ISR member the partition gets
   no leader (-1) unless ``unclean.leader.election.enable`` lets a live out-of-sync replica lead
   (the possible loss is logged).  A returning broker gets back leaderless partitions it is in
   sync for; preferred leaders are restored by ElectLeaders and, with
   ``auto.leader.rebalance.enable``, periodically.  It completes pending topic deletions.
   **Fencing:** every controller write is a ZooKeeper transaction that also checks the
   ``/controller_epoch`` znode's version read at election, so a controller that lost its
   session (another was elected meanwhile) cannot change anything.

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

Broker registration is the ephemeral ``/brokers/ids/<id>``, created once the listeners are
bound.  A broker restarted right after a kill -9 waits for its old session's znode to expire
instead of failing (Kafka exits with "node already exists"), and waits before anything else
(``load``): no partition state read, no log opened, no listener bound until then.
Controlled shutdown deletes the registration first, so the controller moves leadership away,
and waits for it (bounded).

Partition epochs are the state znodes' versions; leader epochs are in the state JSON.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Optional

import trio

from ..config import TOPIC_CONFIGS, ConfigError, validate_topic_configs
from ..protocol.errors import ErrorCode, KafkaError
from . import partition_change as PC
from . import zk as Z
from .controller import Controller, TopicValidator
from .metadata import TopicInfo, is_internal, topic_id_str
from .metadata_cache import (BrokerRegistration, ConfigRecord, ControllerRecord, MetadataCache,
                             PartitionChangeRecord, PartitionRecord, PartitionState,
                             RegisterBrokerRecord, RemoveTopicRecord, TopicRecord,
                             UnregisterBrokerRecord)
from .topic_records import render_configs, topic_records

log = logging.getLogger("pykbroker.controller")

# How long an admin request waits for its own broker to see the change it wrote (Kafka's
# CreateTopics waits up to the request's timeout for the new leaders; clients default to 30 s).
APPLY_TIMEOUT_S = 30.0
# Partition states per controller transaction on a broker change: ~150 bytes each, far below
# ZooKeeper's 1 MiB request limit (jute.maxbuffer), and a short transaction for ZooKeeper.
STATE_WRITE_BATCH = 200


def _log_election(topic: str, p: int, old: PartitionState, new: PartitionState) -> None:
    if new.leader == PC.NO_LEADER:
        log.warning("%s-%d has no live in-sync replica (ISR %s): offline until one returns",
                    topic, p, list(old.isr))
    elif new.leader not in old.isr:
        log.warning("unclean leader election: %d leads %s-%d out of sync (ISR was %s); records "
                    "acknowledged by the old ISR may be lost", new.leader, topic, p, list(old.isr))
    else:
        log.info("electing %d as leader of %s-%d (was %d, ISR %s)", new.leader, topic, p, old.leader, list(old.isr))


class ZkController(Controller):
    def __init__(self, cache: MetadataCache, config, node_id: int):
        super().__init__(cache)
        self.config = config
        self.node_id = node_id
        self.validator = TopicValidator(cache, config)
        session_ms = config["zookeeper.session.timeout.ms"]
        conn_ms = config["zookeeper.connection.timeout.ms"] or session_ms
        self.zk = Z.ZkSession(config["zookeeper.connect"], session_ms, conn_ms)
        self._send, self._recv = trio.open_memory_channel(math.inf)
        self._nursery = None
        # watches
        self._topic_watches: dict[str, list] = {}
        self._state_watches: dict[tuple[str, int], list] = {}
        self._config_watches: dict[str, list] = {}
        # waiters for this broker's cache to reach a condition (admin requests)
        self._changed = trio.Event()
        # the registration we own (re-created after a session loss)
        self._registration: Optional[BrokerRegistration] = None
        self._registered = False
        # the ZooKeeper connection is down (kazoo's SUSPENDED) and the session may still live
        self._suspended = False
        # active controller state
        self.is_active = False
        self.controller_epoch = 0
        self._epoch_zk_version = -1
        self._live: set[int] = set()
        self._shutting_down = False
        # ongoing reassignments, every broker (from the topic znodes): topic -> {p: (adding, removing)}
        self._reassigning: dict[str, dict[int, tuple[list[int], list[int]]]] = {}
        # the full replica sets of those partitions, read from the same topic znode as their
        # adding/removing lists (ListPartitionReassignments answers from this pair, never from a
        # partition state that may not have caught up with the znode yet)
        self._reassign_replicas: dict[str, dict[int, list[int]]] = {}
        # this broker's replicas reported offline (a failed log dir): listed offline in its own
        # view; the ISR and leader consequences are the active controller's (replicas_offline)
        self._offline_here: set[tuple[str, int]] = set()

    # ================================================================== life cycle
    async def connect(self, cluster_id_hint: str) -> str:
        """Connect, create Kafka's persistent paths, and agree on the cluster id (the one in
        ``/cluster/id``; a new cluster takes ``cluster_id_hint``).  Returns it."""
        from kazoo.exceptions import NodeExistsError

        await self.zk.start()
        for p in Z.PERSISTENT_PATHS:
            await self.zk.call("ensure_path", p)
        try:
            await self.zk.call("create", Z.CLUSTER_ID, Z.encode_cluster_id(cluster_id_hint), makepath=True)
            cid = cluster_id_hint
        except NodeExistsError:
            data, _ = await self.zk.call("get", Z.CLUSTER_ID)
            cid = Z.decode_cluster_id(data)
        self.cache.cluster_id = cid
        log.info("connected to ZooKeeper at %s (cluster id %s)", self.zk.connect, cid)
        return cid

    async def load(self) -> None:
        """Read the whole image into the cache (before the logs are opened).

        A broker restarted right after a kill -9 first waits for the registration of its previous
        life to expire.  Kafka's broker acts on nothing before it is registered (its controller
        sends LeaderAndIsr only to registered brokers); this one reads partition states itself,
        so it must not read them, open its logs or bind its listeners while the controller still
        counts the old process as alive and has not yet moved its leaderships away."""
        await self._await_previous_registration_gone()
        records: list = []
        data, _ = await self._get_or_none(Z.CONTROLLER)
        records.append(ControllerRecord(Z.decode_controller(data)))
        for bid in await self.zk.call("get_children", Z.BROKER_IDS):
            reg = await self._read_broker(int(bid))
            if reg is not None:
                records.append(RegisterBrokerRecord(reg))
        for name in sorted(await self.zk.call("get_children", Z.TOPICS)):
            info, states = await self._read_topic(name)
            if info is not None:
                records += topic_records(info, states)
        for entity in ("", str(self.node_id)):   # dynamic broker configs first: logs open with them
            data, _ = await self._get_or_none(Z.broker_config_path(entity))
            self._publish_broker_configs(entity, Z.decode_topic_config(data))
        await self.zk.call("ensure_path", Z.CONFIG_GROUPS)
        for group_id in await self.zk.call("get_children", Z.CONFIG_GROUPS):
            data, _ = await self._get_or_none("%s/%s" % (Z.CONFIG_GROUPS, group_id))
            self._store_group_configs(group_id, Z.decode_topic_config(data))
        self.cache.apply(records)
        log.info("loaded %d topic(s) and %d live broker(s) from ZooKeeper",
                 len(self.cache.topics), len(self.cache.alive_brokers()))

    async def startup(self, nursery=None) -> None:
        """Install the watches and start the event task (after the ReplicaManager started)."""
        self._nursery = nursery
        nursery.start_soon(self._event_loop)
        self.zk.on_state(lambda state: self._post(("session", state)))
        self.zk.children_watch(Z.BROKER_IDS, lambda ch: self._post(("brokers", ch)))
        self.zk.children_watch(Z.TOPICS, lambda ch: self._post(("topics", ch)))
        self.zk.data_watch(Z.CONTROLLER, lambda data, stat: self._post(("controller", data)))
        self.zk.children_watch(Z.DELETE_TOPICS, lambda ch: self._post(("deletions", ch)))
        self.zk.data_watch(Z.PREFERRED_ELECTION, lambda data, stat: self._post(("preferred", data)))
        self.zk.data_watch(Z.REASSIGN_PARTITIONS, lambda data, stat: self._post(("reassign", data)))
        self.zk.children_watch(Z.LOG_DIR_EVENTS, lambda ch: self._post(("log_dir_events", ch)))
        # Dynamic broker configs written by any broker or tool (Kafka's brokers followed the
        # /config/changes notifications; watching the two znodes sees the same changes).
        for entity in ("", str(self.node_id)):
            self.zk.data_watch(Z.broker_config_path(entity),
                               lambda data, stat, e=entity: self._post(("broker_configs", e, data)))
        # Group configs written through any broker (one znode per group under /config/groups)
        await self.zk.call("ensure_path", Z.CONFIG_GROUPS)
        self._group_watches: dict[str, list] = {}
        self.zk.children_watch(Z.CONFIG_GROUPS, lambda ch: self._post(("group_children", ch)))
        for name in list(self.cache.topics):
            self._watch_topic(name)
            await self._watch_states(name, self.cache.get(name).partition_ids())
        nursery.start_soon(self._rebalance_loop)

    async def shutdown(self) -> None:
        self.is_active = False
        await self.zk.stop()

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Kafka's controlled shutdown: give up the registration so the controller moves the
        leadership of our partitions to other in-sync replicas, and wait (bounded) until no
        partition we lead has another live in-sync replica left to take over."""
        from kazoo.exceptions import NoNodeError

        self._shutting_down = True
        if self.is_active:
            await self._resign("controlled shutdown")
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
                await self._wait_changed()
                # the controller moves them in batches: let a burst of state changes land, then
                # look again at the ones still here (not every partition after every change)
                await trio.sleep(0.05)
                remaining = self._leaderships_to_move(remaining)
        if scope.cancelled_caught:
            log.warning("controlled shutdown: leadership of %d partition(s) not moved within %.0f s",
                        len(self._leaderships_to_move()), timeout_s)
        else:
            log.info("controlled shutdown: no partition left to move")

    def _leaderships_to_move(self, among=None) -> list:
        """Partitions we lead that another live in-sync replica could lead (``among``: only
        these (topic, partition) pairs; default every partition)."""
        alive = {b.broker_id for b in self.cache.alive_brokers()}
        if among is None:
            among = [(info.name, p) for info in list(self.cache.topics.values()) for p in info.partition_ids()]
        out = []
        for name, p in among:
            st = self.cache.partition_state(name, p)
            if st is not None and st.leader == self.node_id and any(
                    b != self.node_id and b in alive for b in st.isr):
                out.append((name, p))
        return out

    # ================================================================== plumbing
    def _post(self, event) -> None:
        try:
            self._send.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _notify_changed(self) -> None:
        ev, self._changed = self._changed, trio.Event()
        ev.set()

    async def _wait_changed(self) -> None:
        await self._changed.wait()

    async def _wait_until(self, predicate, what: str) -> None:
        with trio.move_on_after(APPLY_TIMEOUT_S):
            while not predicate():
                await self._wait_changed()
            return
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for %s." % what)

    async def _get_or_none(self, path: str):
        from kazoo.exceptions import NoNodeError
        try:
            return await self.zk.call("get", path)
        except NoNodeError:
            return None, None

    async def _get_many(self, paths) -> list:
        """``get`` of many znodes pipelined in one worker thread (kazoo's async calls): one
        round trip's latency for all of them, not one each; (None, None) for a missing one."""
        from kazoo.exceptions import NoNodeError
        client = self.zk.client

        def run():
            pending = [client.get_async(path) for path in paths]
            out = []
            for a in pending:
                try:
                    out.append(a.get())
                except NoNodeError:
                    out.append((None, None))
            return out
        from kazoo.exceptions import ConnectionLoss
        while paths:
            try:
                return await self.zk.run(run)
            except ConnectionLoss:   # reads: redone once reconnected, as ZkSession.call does
                await trio.sleep(0.1)
        return []

    async def _read_broker(self, broker_id: int) -> Optional[BrokerRegistration]:
        data, _ = await self._get_or_none(Z.broker_path(broker_id))
        if data is None:
            return None
        try:
            return Z.decode_broker(broker_id, data)
        except (ValueError, KeyError) as e:
            log.warning("unreadable registration of broker %d: %s", broker_id, e)
            return None

    async def _read_topic(self, name: str, only=None) -> tuple[Optional[TopicInfo], dict[int, PartitionState]]:
        """A topic's assignment, config and partition states (``only``: these partitions)."""
        data, _ = await self._get_or_none(Z.topic_path(name))
        if data is None:
            return None, {}
        topic_id, assignment = Z.decode_assignment(data)
        if topic_id is None:
            log.warning("topic %s has no topic id in ZooKeeper; ignored", name)
            return None, {}
        self._note_reassignments(name, data)
        cfg_data, _ = await self._get_or_none(Z.config_path(name))
        info = TopicInfo(name=name, topic_id=topic_id, num_partitions=len(assignment),
                         replica_assignment=assignment, configs=self._parse_configs(name, cfg_data),
                         internal=is_internal(name))
        states = {}
        wanted = [(p, r) for p, r in sorted(assignment.items()) if only is None or p in only]
        got = await self._get_many([Z.state_path(name, p) for p, _ in wanted])
        for (p, replicas), (sdata, stat) in zip(wanted, got):
            if sdata is None:
                # assignment written without states (not by pykbroker): the first replica leads
                states[p] = PartitionState.initial(replicas)
            else:
                states[p] = Z.decode_state(sdata, stat.version, replicas)[0]
        return info, states

    @staticmethod
    def _parse_configs(name: str, data) -> dict:
        overrides = {}
        for k, v in Z.decode_topic_config(data).items():
            try:
                overrides.update(validate_topic_configs({k: v}))
            except ConfigError as e:
                log.warning("ignoring stored config of topic %s: %s", name, e)
        return overrides

    # ================================================================== watches
    def _watch_topic(self, name: str) -> None:
        if name in self._topic_watches:
            return
        self._topic_watches[name] = self.zk.data_watch(
            Z.topic_path(name), lambda data, stat: self._post(("topic", name, data)))
        self._config_watches[name] = self.zk.data_watch(
            Z.config_path(name), lambda data, stat: self._post(("config", name, data)))

    async def _watch_states(self, name: str, partitions) -> None:
        """Watch the state znodes of these partitions.  kazoo's DataWatch reads its znode
        synchronously when created: all of them are created in one worker thread, so a topic
        of 1,000 partitions does not block the event loop for 1,000 round trips."""
        ps = [p for p in partitions if (name, p) not in self._state_watches]
        if not ps:
            return

        def handler(p):
            return lambda data, stat: self._post(("state", name, p, data, stat))

        def register():
            return [self.zk.data_watch(Z.state_path(name, p), handler(p)) for p in ps]
        handles = await self.zk.run(register)
        for p, h in zip(ps, handles):
            if name not in self._topic_watches or (name, p) in self._state_watches:
                Z.ZkSession.stop_watch(h)   # unwatched (deleted) or watched again meanwhile
            else:
                self._state_watches[(name, p)] = h

    def _unwatch_topic(self, name: str) -> None:
        for d in (self._topic_watches, self._config_watches):
            h = d.pop(name, None)
            if h is not None:
                Z.ZkSession.stop_watch(h)
        for tp in [tp for tp in self._state_watches if tp[0] == name]:
            Z.ZkSession.stop_watch(self._state_watches.pop(tp))

    # ================================================================== the event task
    async def _event_loop(self) -> None:
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError
        async for event in self._recv:
            kind = event[0]
            try:
                await getattr(self, "_on_" + kind)(*event[1:])
            except (ConnectionLoss, SessionExpiredError) as e:
                # the connection dropped under this event: the reconnection (CONNECTED, always
                # posted after it) re-reads what it was about
                log.info("handling ZooKeeper event %s interrupted (%s); redone on the reconnection",
                         kind, type(e).__name__)
            except Exception:
                log.exception("handling ZooKeeper event %s failed", kind)
            self._notify_changed()

    async def _on_session(self, state: str) -> None:
        """kazoo's session states (see "Connection vs session" above)."""
        if state == "SUSPENDED":
            # the session may well live on: nothing is given up (Kafka's controller ignores a
            # disconnect); writes issued meanwhile wait for the reconnection or fail
            self._suspended = True
            log.info("ZooKeeper connection lost; waiting to reconnect within the session%s",
                     " (still the controller)" if self.is_active else "")
            return
        if state == "LOST":
            # the session expired: our ephemeral znodes (registration, /controller) are gone
            self._suspended = True
            self._registered = False
            if self.is_active:
                await self._resign("ZooKeeper session expired")
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
        await self._resync_listener()
        if self.is_active:
            data, stat = await self._get_or_none(Z.CONTROLLER)
            if self.zk.owns(stat):
                log.info("broker %d reconnected to ZooKeeper within its session: still the controller "
                         "(epoch %d); re-reading what changed meanwhile", self.node_id, self.controller_epoch)
                await self._refresh_all_states()
                await self._catch_up_as_controller()
                return
            await self._resign("/controller is no longer ours after the reconnection (controller %d)"
                               % Z.decode_controller(data))
        await self._try_elect()

    async def _resync_listener(self) -> None:
        """After a reconnection: what an event interrupted by the connection loss may have missed
        (kazoo's watches re-read their znodes on the reconnection, but report only what changed
        since their last read, not what a failed handler never applied): the live brokers and
        topics not yet here."""
        children = await self.zk.call("get_children", Z.BROKER_IDS)
        await self._on_brokers(children, controller=False)
        for name in sorted(await self.zk.call("get_children", Z.TOPICS)):
            if (name not in self.cache.topics and name in self._topic_watches
                    and not self.cache.is_staged(name)):
                await self._create_local(name)

    async def _refresh_all_states(self) -> None:
        """Every partition state read again (one pipelined round): the controller decides on
        fresh states after a reconnection."""
        tps = [(info, p) for info in list(self.cache.topics.values()) for p in info.partition_ids()]
        got = await self._get_many([Z.state_path(info.name, p) for info, p in tps])
        for (info, p), (data, stat) in zip(tps, got):
            old = self.cache.partition_state(info.name, p)
            if (data is not None and old is not None and self.cache.get(info.name) is info
                    and stat.version > old.partition_epoch):
                self._publish_state(info, p, Z.decode_state(data, stat.version, old.replicas)[0])

    async def _on_controller(self, data) -> None:
        # The notification's data may be older than what this broker did since (its own
        # election on this task): the znode is read again, and its owner decides.
        data, stat = await self._get_or_none(Z.CONTROLLER)
        cid = Z.decode_controller(data)
        if self.zk.owns(stat) and cid == self.node_id:
            if not self.is_active and not self._shutting_down:
                # ours, yet not acting: created by an attempt whose answer a connection loss
                # swallowed, or fenced by a stale epoch: a term with a new epoch
                await self._become_active()
            return
        self.cache.apply([ControllerRecord(cid)])
        if self.is_active:
            await self._resign("another controller (%d) was elected" % cid if cid != -1
                               else "the /controller znode is gone")
        if stat is None and not self._shutting_down and self._registered:
            await self._try_elect()

    async def _on_elect(self) -> None:
        await self._try_elect()

    async def _on_brokers(self, children: list, controller: bool = True) -> None:
        ids = {int(c) for c in children}
        known = {b.broker_id for b in self.cache.alive_brokers()}
        records = [UnregisterBrokerRecord(b) for b in sorted(known - ids)]
        for b in sorted(ids - known):
            reg = await self._read_broker(b)
            if reg is not None:
                records.append(RegisterBrokerRecord(reg))
        if records:
            self.cache.apply(records)
            gone = sorted(known - ids)
            new = sorted(ids - known)
            if gone or new:
                log.info("live brokers now %s (gone %s, new %s)", sorted(ids), gone, new)
        if self.is_active and controller:
            await self._on_live_brokers_changed()

    async def _on_topics(self, children: list) -> None:
        names = set(children)
        for name in sorted(set(self.cache.topics) - names):
            await self._remove_topic(name)
        for name in sorted(names - set(self.cache.topics)):
            if not self.cache.is_staged(name):
                self._watch_topic(name)   # its topic event creates it

    async def _on_topic_hint(self, name: str) -> None:
        if name not in self.cache.topics and not self.cache.is_staged(name):
            self._watch_topic(name)

    async def _on_topic(self, name: str, data) -> None:
        if data is None:
            if name in self.cache.topics:
                await self._remove_topic(name)
            return
        topic_id, assignment = Z.decode_assignment(data)
        self._note_reassignments(name, data)
        info = self.cache.get(name)
        if info is not None and topic_id is not None and info.topic_id != topic_id:
            await self._remove_topic(name)   # deleted and re-created while we looked away
            info = None
        if info is None:
            await self._create_local(name)
            return
        new_ids = sorted(set(assignment) - set(info.partition_ids()))
        if new_ids:
            _, states = await self._read_topic(name, only=set(new_ids))
            records = [PartitionRecord(info.topic_id, p, st) for p, st in sorted(states.items())]
            self.cache.stage(records)
            try:
                await self._replica_manager.make_partitions(info, new_ids)
            except BaseException:
                self.cache.discard_staged(records)
                raise
            self.cache.publish_staged(records)
            await self._watch_states(name, new_ids)
            log.info("topic %s now has %d partition(s)", name, info.num_partitions)

    async def _create_local(self, name: str) -> None:
        info, states = await self._read_topic(name)
        if info is None:
            return
        records = topic_records(info, states)
        staged = self.cache.stage(records)
        try:
            await self._replica_manager.make_partitions(staged, staged.partition_ids())
        except BaseException:
            self.cache.discard_staged(records)
            raise
        self.cache.publish_staged(records)
        self._watch_topic(name)
        await self._watch_states(name, info.partition_ids())
        log.info("topic %s (id %s, %d partition(s)) is here", name, topic_id_str(info.topic_id),
                 info.num_partitions)

    def _note_reassignments(self, name: str, data) -> None:
        r = Z.decode_reassignments(data)
        if r:
            self._reassigning[name] = r
            assignment = Z.decode_assignment(data)[1]
            self._reassign_replicas[name] = {p: assignment.get(p, []) for p in r}
        else:
            self._reassigning.pop(name, None)
            self._reassign_replicas.pop(name, None)

    async def _remove_topic(self, name: str) -> None:
        info = self.cache.get(name)
        self._unwatch_topic(name)
        self._reassigning.pop(name, None)
        self._reassign_replicas.pop(name, None)
        if info is None:
            return
        self.cache.apply([RemoveTopicRecord(info.topic_id)])
        with trio.CancelScope(shield=True):
            await self._replica_manager.delete_partitions(info)
        log.info("deleted topic %s (id %s)", name, topic_id_str(info.topic_id))
        self._notify_topic_deleted(name)

    async def _on_state(self, name: str, p: int, data, stat) -> None:
        if data is None:
            return
        info = self.cache.get(name)
        old = self.cache.partition_state(name, p)
        if info is None or old is None or stat.version <= old.partition_epoch:
            return   # not ours yet, or already applied (our own write)
        new, _ = Z.decode_state(data, stat.version, old.replicas)
        self._publish_state(info, p, new)
        if self.is_active and p in self._reassigning.get(name, {}):
            await self._maybe_complete_reassignment(name, p)

    def _publish_state(self, info: TopicInfo, p: int, new: PartitionState) -> None:
        # offline marks are each broker's own knowledge (ZooKeeper stores none)
        offline = (self.node_id,) if (info.name, p) in self._offline_here else ()
        if new.offline_replicas != offline:
            new = PartitionState(new.leader, new.leader_epoch, new.partition_epoch, new.replicas, new.isr, offline)
        self.cache.apply([PartitionChangeRecord(info.topic_id, p, new)])
        self._notify_partition_changed(info.name, p, new)
        self._notify_changed()

    async def _on_config(self, name: str, data) -> None:
        info = self.cache.get(name)
        if info is None:
            return
        new = self._parse_configs(name, data)
        if new == info.configs:
            return
        self.cache.apply([ConfigRecord(name, new)])
        res = self._replica_manager.on_config_change(info)
        if hasattr(res, "__await__"):
            await res
        log.info("topic %s config overrides now %s", name, render_configs(new))

    async def _on_broker_configs(self, entity: str, data) -> None:
        configs = Z.decode_topic_config(data)
        if configs != self.broker_configs(entity):
            self._publish_broker_configs(entity, configs)
            log.info("dynamic broker configs of %s now %s", Z.broker_config_entity(entity), configs)

    async def _on_group_children(self, children: list) -> None:
        for group_id in children:
            if group_id not in self._group_watches:
                self._group_watches[group_id] = self.zk.data_watch(
                    "%s/%s" % (Z.CONFIG_GROUPS, group_id),
                    lambda data, stat, g=group_id: self._post(("group_config", g, data)))
        for group_id in [g for g in self._group_watches if g not in children]:
            self.zk.stop_watch(self._group_watches.pop(group_id))
            self._store_group_configs(group_id, {})

    async def _on_group_config(self, group_id: str, data) -> None:
        self._store_group_configs(group_id, Z.decode_topic_config(data))

    async def _on_deletions(self, children: list) -> None:
        if self.is_active:
            for name in sorted(children):
                await self._complete_deletion(name)

    async def _on_preferred(self, data) -> None:
        if not self.is_active or data is None:
            return
        import json
        try:
            obj = json.loads(data)
            parts = [(e["topic"], int(e["partition"])) for e in obj.get("partitions", [])]
            etype = int(obj.get("election_type", 0))
        except (ValueError, KeyError, TypeError):
            parts, etype = [], 0
        await self._elect(parts, etype)
        from kazoo.exceptions import NoNodeError
        try:
            await self.zk.call("delete", Z.PREFERRED_ELECTION)
        except NoNodeError:
            pass

    # ================================================================== brokers
    async def register_broker(self, broker_id: int, endpoints=(), rack=None) -> None:
        if not endpoints:
            return   # registered once the listeners are bound (clients need the endpoints)
        self._registration = BrokerRegistration(broker_id, tuple(endpoints), rack)
        await self._ensure_registered()
        self.cache.apply([RegisterBrokerRecord(self._registration)])
        # elections run on the event task, in order with the /controller notifications
        self._post(("elect",))

    async def _await_previous_registration_gone(self) -> None:
        path = Z.broker_path(self.node_id)
        # A dead process's session expires one session timeout after its last heartbeat (a
        # ZooKeeper restart re-arms it once).  A registration that outlives three of them plus
        # a margin belongs to a live process: another broker configured with the same id.
        # Kafka refuses to start at once in both cases; this one refuses only in the second.
        limit = 3 * self.config["zookeeper.session.timeout.ms"] / 1000.0 + 10.0
        waited = None
        while True:
            _, stat = await self._get_or_none(path)
            if stat is None or self.zk.owns(stat):
                break
            if waited is not None and trio.current_time() - waited > limit:
                raise RuntimeError(
                    "broker id %d is registered in ZooKeeper (%s) by a live session that did not expire in "
                    "%.0f s: another running broker has the same broker.id (node.id)"
                    % (self.node_id, path, limit))
            if waited is None:
                waited = trio.current_time()
                log.warning("broker id %d is still registered by an older session (a previous process "
                            "that did not shut down cleanly); waiting for it to expire "
                            "(zookeeper.session.timeout.ms) before starting", self.node_id)
            await trio.sleep(0.25)
        if waited is not None:
            log.info("the older registration of broker %d expired after %.1f s; starting",
                     self.node_id, trio.current_time() - waited)

    async def _ensure_registered(self) -> None:
        from kazoo.exceptions import ConnectionLoss, NodeExistsError

        path = Z.broker_path(self.node_id)
        data = Z.encode_broker(self._registration)
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
                _, stat = await self._get_or_none(path)
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

    # ================================================================== election
    async def _try_elect(self) -> None:
        from kazoo.exceptions import NodeExistsError

        if self.is_active or self._shutting_down or not self._registered:
            return
        try:
            await self.zk.call("create", Z.CONTROLLER, Z.encode_controller(self.node_id), ephemeral=True)
        except NodeExistsError:
            data, stat = await self._get_or_none(Z.CONTROLLER)
            cid = Z.decode_controller(data)
            if self.zk.owns(stat) and cid == self.node_id:
                # ours: an earlier create applied whose answer a connection loss swallowed
                await self._become_active()
                return
            self.cache.apply([ControllerRecord(cid)])
            return
        await self._become_active()

    async def _bump_controller_epoch(self) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError
        while True:
            data, stat = await self._get_or_none(Z.CONTROLLER_EPOCH)
            if data is None:
                try:
                    await self.zk.call("create", Z.CONTROLLER_EPOCH, b"1")
                    self.controller_epoch, self._epoch_zk_version = 1, 0
                    return
                except NodeExistsError:
                    continue
            epoch = int(data) + 1
            try:
                st = await self.zk.call("set", Z.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
            except BadVersionError:
                continue
            self.controller_epoch, self._epoch_zk_version = epoch, st.version
            return

    async def _become_active(self) -> None:
        await self._bump_controller_epoch()
        self.is_active = True
        self.cache.apply([ControllerRecord(self.node_id)])
        log.info("broker %d is the controller (epoch %d)", self.node_id, self.controller_epoch)
        await self._catch_up_as_controller()

    async def _catch_up_as_controller(self) -> None:
        """Kafka's onControllerFailover, also run after a reconnection within the session: fresh
        view of the live brokers, then elections for whatever changed while no controller acted,
        then pending deletions and reassignments."""
        self._live = set()
        ids = {int(c) for c in await self.zk.call("get_children", Z.BROKER_IDS)}
        await self._on_brokers([str(i) for i in ids])
        for name in sorted(await self.zk.call("get_children", Z.DELETE_TOPICS)):
            await self._complete_deletion(name)
        await self._on_log_dir_events(await self.zk.call("get_children", Z.LOG_DIR_EVENTS))
        for name, parts in sorted(self._reassigning.items()):
            for p in sorted(parts):
                await self._maybe_complete_reassignment(name, p)
        data, _ = await self._get_or_none(Z.REASSIGN_PARTITIONS)
        if data is not None:
            await self._on_reassign(data)

    async def _resign(self, why: str) -> None:
        if self.is_active:
            self.is_active = False
            log.warning("broker %d stops acting as controller: %s", self.node_id, why)

    def _fenced_txn(self):
        """A ZooKeeper transaction that only commits while our controller epoch is current."""
        t = self.zk.client.transaction()
        t.check(Z.CONTROLLER_EPOCH, self._epoch_zk_version)
        return t

    async def _commit(self, t) -> list:
        results = await self.zk.run(t.commit)
        from kazoo.exceptions import BadVersionError, RolledBackError
        if results and isinstance(results[0], BadVersionError):
            await self._resign("controller epoch moved on (fenced)")
            self._post(("controller", None))   # whose /controller is it now?
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is no longer the controller.")
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise r
        return results

    async def _write_state_as_controller(self, info: TopicInfo, p: int, old: PartitionState,
                                         new: PartitionState) -> bool:
        """CAS-write a partition state; False if it changed meanwhile (re-evaluated later)."""
        from kazoo.exceptions import BadVersionError
        t = self._fenced_txn()
        t.set_data(Z.state_path(info.name, p), Z.encode_state(new, self.controller_epoch),
                   version=old.partition_epoch)
        try:
            results = await self._commit(t)
        except BadVersionError:
            return False
        stat = results[1]
        new = PartitionState(new.leader, new.leader_epoch, stat.version, new.replicas, new.isr,
                             new.offline_replicas)
        if (self.cache.partition_state(info.name, p) or old).partition_epoch < stat.version:
            self._publish_state(info, p, new)
        return True

    def _unclean_allowed(self, topic: str) -> bool:
        return bool(self.cache.effective_config(topic).get("unclean.leader.election.enable"))

    async def _on_live_brokers_changed(self) -> None:
        """Kafka's onBrokerFailure / onBrokerStartup, for every partition of the image."""
        live = {b.broker_id for b in self.cache.alive_brokers()}
        self._live = live
        changes = []
        for info in list(self.cache.topics.values()):
            for p in info.partition_ids():
                st = self.cache.partition_state(info.name, p)
                new = self._elect_for_liveness(info.name, p, st, live) if st is not None else None
                if new is not None:
                    changes.append((info, p, st, new))
        # One fenced multi-op transaction per STATE_WRITE_BATCH partitions (a broker leading
        # hundreds of partitions fails over in a few round trips, not one per partition); a
        # batch that loses a compare-and-set race is redone one partition at a time.
        for i in range(0, len(changes), STATE_WRITE_BATCH):
            batch = changes[i:i + STATE_WRITE_BATCH]
            if len(batch) > 1 and await self._write_states_as_controller(batch):
                continue
            for info, p, _, _ in batch:
                for _attempt in range(5):
                    st = self.cache.partition_state(info.name, p)
                    if st is None:
                        break
                    new = self._elect_for_liveness(info.name, p, st, live)
                    if new is None or await self._write_state_as_controller(info, p, st, new):
                        break
                    await self._refresh_state(info, p)

    async def _write_states_as_controller(self, batch) -> bool:
        """CAS-write several partition states ``[(info, p, old, new)]`` in one fenced
        transaction; False (nothing written) if any changed meanwhile."""
        from kazoo.exceptions import BadVersionError, NoNodeError
        t = self._fenced_txn()
        for info, p, old, new in batch:
            t.set_data(Z.state_path(info.name, p), Z.encode_state(new, self.controller_epoch),
                       version=old.partition_epoch)
        try:
            results = await self._commit(t)
        except (BadVersionError, NoNodeError):   # (a topic being deleted)
            return False
        for (info, p, old, new), stat in zip(batch, results[1:]):
            new = PartitionState(new.leader, new.leader_epoch, stat.version, new.replicas, new.isr,
                                 new.offline_replicas)
            if (self.cache.partition_state(info.name, p) or old).partition_epoch < stat.version:
                self._publish_state(info, p, new)
        return True

    async def _refresh_state(self, info: TopicInfo, p: int) -> None:
        data, stat = await self._get_or_none(Z.state_path(info.name, p))
        old = self.cache.partition_state(info.name, p)
        if data is not None and old is not None and stat.version > old.partition_epoch:
            self._publish_state(info, p, Z.decode_state(data, stat.version, old.replicas)[0])

    def _alive(self) -> set[int]:
        return {b.broker_id for b in self.cache.alive_brokers()}

    def _elect_for_liveness(self, topic: str, p: int, st: PartitionState, live: set[int]) -> Optional[PartitionState]:
        new = PC.on_brokers_changed(st, live, self._unclean_allowed(topic))
        if new is not None and new.leader != st.leader:
            _log_election(topic, p, st, new)
        return new

    async def _elect(self, partitions, election_type: int = 0) -> dict:
        """Kafka's ElectLeaders on the controller: ``election_type`` 0 moves leadership to the
        preferred (first) replica if it is live and in sync; 1 (unclean) elects the first live
        replica of a partition that has no leader.  Returns {(topic, p): error code}."""
        out = {}
        live = self._alive()
        for topic, p in partitions:
            info = self.cache.get(topic)
            st = self.cache.partition_state(topic, p) if info is not None else None
            if st is None:
                out[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            code, new = (PC.elect_unclean if election_type == 1 else PC.elect_preferred)(st, live)
            if code:
                out[(topic, p)] = code
                continue
            _log_election(topic, p, st, new)
            ok = await self._write_state_as_controller(info, p, st, new)
            out[(topic, p)] = 0 if ok else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        return out

    async def _elect_preferred(self, partitions) -> dict:
        return await self._elect(partitions, 0)

    async def elect_leaders(self, partitions, election_type: int = 0, timeout_s: float = APPLY_TIMEOUT_S) -> dict:
        """ElectLeaders.  On the controller: done here; elsewhere the request goes through
        ``/admin/preferred_replica_election`` (with pykbroker's ``election_type`` field) and this
        waits for the controller to take it, then reads the outcome from the cache."""
        if self.is_active:
            return await self._elect(partitions, election_type)
        import json
        from kazoo.exceptions import NodeExistsError
        body = json.dumps({"version": 1, "election_type": election_type,
                           "partitions": [{"topic": t, "partition": p} for t, p in partitions]})
        before = {tp: self.cache.partition_state(*tp) for tp in partitions}
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    await self.zk.call("create", Z.PREFERRED_ELECTION, body.encode())
                    break
                except NodeExistsError:
                    await trio.sleep(0.1)   # one election at a time, as in Kafka
            while (await self._get_or_none(Z.PREFERRED_ELECTION))[0] is not None:
                await trio.sleep(0.05)
            await trio.sleep(0.05)   # the resulting state watches
        out = {}
        live = {b.broker_id for b in self.cache.alive_brokers()}
        for tp in partitions:
            st, old = self.cache.partition_state(*tp), before[tp]
            if st is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif old is not None and st.leader_epoch > old.leader_epoch:
                out[tp] = 0
            elif election_type == 0:
                out[tp] = (ErrorCode.ELECTION_NOT_NEEDED if st.replicas and st.leader == st.replicas[0]
                           else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
            else:
                out[tp] = (ErrorCode.ELECTION_NOT_NEEDED if st.leader in live
                           else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return out

    async def _rebalance_loop(self) -> None:
        """``auto.leader.rebalance.enable``: the controller moves leadership back to preferred
        replicas when a broker leads less than its share (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        if not self.config["auto.leader.rebalance.enable"]:
            return
        interval = self.config["leader.imbalance.check.interval.seconds"]
        ratio = self.config["leader.imbalance.per.broker.percentage"] / 100.0
        while True:
            await trio.sleep(interval)
            if not self.is_active:
                continue
            live = {b.broker_id for b in self.cache.alive_brokers()}
            by_preferred: dict[int, list] = {}
            for info in list(self.cache.topics.values()):
                for p in info.partition_ids():
                    st = self.cache.partition_state(info.name, p)
                    if st is not None and st.replicas:
                        by_preferred.setdefault(st.replicas[0], []).append((info.name, p, st))
            for broker, parts in by_preferred.items():
                if broker not in live:
                    continue
                wrong = [(t, p) for t, p, st in parts if st.leader != broker]
                if parts and len(wrong) / len(parts) > ratio:
                    log.info("leader imbalance of broker %d is %.0f%%: preferred election of %d partition(s)",
                             broker, 100.0 * len(wrong) / len(parts), len(wrong))
                    await self._elect_preferred(wrong)

    # ================================================================== reassignments
    def reassignments(self, wanted=None) -> dict:
        """Ongoing reassignments: {(topic, p): (replicas, adding, removing)}; ``wanted``: a set
        of (topic, p) to restrict to, or None for all."""
        out = {}
        for name, parts in self._reassigning.items():
            for p, (adding, removing) in parts.items():
                if wanted is not None and (name, p) not in wanted:
                    continue
                st = self.cache.partition_state(name, p)
                if st is not None:
                    full = self._reassign_replicas.get(name, {}).get(p) or st.replicas
                    out[(name, p)] = (list(full), list(adding), list(removing))
        return out

    def _check_target(self, topic: str, p: int, target, allow_rf_change: bool):
        """(code, message) for a requested reassignment, 0 when valid (Kafka's checks)."""
        info = self.cache.get(topic)
        st = self.cache.partition_state(topic, p) if info is not None else None
        if st is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        if target is None:
            if p not in self._reassigning.get(topic, {}):
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No ongoing reassignment for %s-%d." % (topic, p)
            return 0, None
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica list is empty."
        if len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica ids in partition %d reassignment replica list: %s" % (p, list(target))
        if any(b < 0 for b in target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Invalid broker id in replica assignment: %s" % list(target)
        registered = {b.broker_id for b in self.cache.alive_brokers()}
        missing = [b for b in target if b not in registered]
        if missing:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The proposed assignment contains non-live brokers: %s" % missing
        original = self._original_replicas(topic, p, st)
        if not allow_rf_change and len(target) != len(original):
            return ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from %d to %d" % (len(original), len(target))
        return 0, None

    def _original_replicas(self, topic: str, p: int, st: PartitionState) -> list[int]:
        adding, _ = self._reassigning.get(topic, {}).get(p, ([], []))
        return [b for b in st.replicas if b not in adding]

    async def alter_reassignments(self, items, allow_rf_change: bool = True,
                                  timeout_s: float = APPLY_TIMEOUT_S) -> dict:
        """AlterPartitionReassignments: ``items`` [(topic, p, target replicas or None to
        cancel)] -> {(topic, p): (code, message)}.  Checked here; carried out by the active
        controller (through ``/admin/reassign_partitions`` from other brokers).  The answer
        comes once the reassignment started (replicas extended), not when it completes."""
        import json
        from kazoo.exceptions import NodeExistsError
        out, valid = {}, []
        for topic, p, target in items:
            code, msg = self._check_target(topic, p, target, allow_rf_change)
            out[(topic, p)] = (code, msg)
            if not code:
                valid.append((topic, p, None if target is None else list(target)))
        if not valid:
            return out
        if self.is_active:
            for topic, p, target in valid:
                out[(topic, p)] = await self._reassign(topic, p, target)
            return out
        body = json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                        for t, p, r in valid]}).encode()
        with trio.move_on_after(timeout_s) as scope:
            while True:
                try:
                    await self.zk.call("create", Z.REASSIGN_PARTITIONS, body)
                    break
                except NodeExistsError:
                    await trio.sleep(0.1)   # one batch at a time, as in Kafka
            while (await self._get_or_none(Z.REASSIGN_PARTITIONS))[0] is not None:
                await trio.sleep(0.05)
        if scope.cancelled_caught:
            for t, p, _ in valid:
                out[(t, p)] = (ErrorCode.REQUEST_TIMED_OUT, "The controller did not take the reassignment in time.")
        return out

    async def _on_reassign(self, data) -> None:
        if not self.is_active or data is None:
            return
        import json
        from kazoo.exceptions import NoNodeError
        try:
            items = [(e["topic"], int(e["partition"]), e.get("replicas"))
                     for e in json.loads(data).get("partitions", [])]
        except (ValueError, KeyError, TypeError):
            items = []
        for topic, p, target in items:
            code, msg = self._check_target(topic, p, target, True)
            if code:
                log.warning("reassignment of %s-%d refused: %s", topic, p, msg)
                continue
            await self._reassign(topic, p, target)
        try:
            await self.zk.call("delete", Z.REASSIGN_PARTITIONS)
        except NoNodeError:
            pass

    async def _write_reassignment(self, topic: str, p: int, st: PartitionState, new: PartitionState,
                                  change: Optional[tuple[list[int], list[int]]]) -> bool:
        """One fenced transaction: the topic znode (assignment and adding/removing lists) and
        the partition's state.  ``change`` None: the reassignment of ``p`` is over."""
        from kazoo.exceptions import BadVersionError
        data, stat = await self._get_or_none(Z.topic_path(topic))
        info = self.cache.get(topic)
        if data is None or info is None:
            return False
        topic_id, assignment = Z.decode_assignment(data)
        ongoing = Z.decode_reassignments(data)
        assignment[p] = list(new.replicas)
        if change is None:
            ongoing.pop(p, None)
        else:
            ongoing[p] = change
        t = self._fenced_txn()
        t.set_data(Z.topic_path(topic), Z.encode_assignment(info.topic_id, assignment, ongoing), version=stat.version)
        t.set_data(Z.state_path(topic, p), Z.encode_state(new, self.controller_epoch), version=st.partition_epoch)
        try:
            results = await self._commit(t)
        except BadVersionError:
            return False
        if ongoing:
            self._reassigning[topic] = ongoing
            self._reassign_replicas[topic] = {q: list(assignment.get(q, [])) for q in ongoing}
        else:
            self._reassigning.pop(topic, None)
            self._reassign_replicas.pop(topic, None)
        new = PartitionState(new.leader, new.leader_epoch, results[2].version, new.replicas, new.isr)
        cur = self.cache.partition_state(topic, p)
        if cur is not None and cur.partition_epoch < new.partition_epoch:
            self._publish_state(info, p, new)
        return True

    async def _reassign(self, topic: str, p: int, target) -> tuple:
        """Start (or cancel, ``target`` None) the reassignment of one partition (Kafka's
        KIP-455 phases): the replica set becomes target + the original replicas not in it, the
        new replicas catch up as followers, and once all of them are in the ISR the set shrinks
        to the target (``_maybe_complete_reassignment``).  Each step bumps the leader epoch."""
        for _attempt in range(5):
            st = self.cache.partition_state(topic, p)
            if st is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            original = self._original_replicas(topic, p, st)
            if target is None or list(target) == original:
                # cancelled (the replicas being added are dropped), or nothing to move
                replicas, change = original, None
            else:
                replicas, adding, removing = PC.reassignment_replicas(original, list(target))
                change = (adding, removing)
            new = PC.reassign(st, replicas, self._alive())
            if await self._write_reassignment(topic, p, st, new, change):
                log.info("reassignment of %s-%d: replicas %s -> %s%s", topic, p, list(st.replicas),
                         replicas, " (cancelled)" if target is None else "")
                if change is not None:
                    await self._maybe_complete_reassignment(topic, p)
                return 0, None
            await self._refresh_state(self.cache.get(topic), p)
        return ErrorCode.REQUEST_TIMED_OUT, "The partition changed concurrently; retry."

    async def _maybe_complete_reassignment(self, topic: str, p: int) -> None:
        ongoing = self._reassigning.get(topic, {}).get(p)
        st = self.cache.partition_state(topic, p)
        if ongoing is None or st is None:
            return
        adding, removing = ongoing
        new = PC.complete_reassignment(st, removing, self._alive())
        if new is None:
            return   # new replicas still catching up
        if await self._write_reassignment(topic, p, st, new, None):
            log.info("reassignment of %s-%d complete: replicas %s", topic, p, list(new.replicas))

    # ================================================================== deletions
    async def _complete_deletion(self, name: str) -> None:
        """Remove a topic's znodes (leaf first) and its deletion marker, fenced."""
        from kazoo.exceptions import NoNodeError
        info = self.cache.get(name)
        t = self._fenced_txn()
        if info is not None and (await self._get_or_none(Z.topic_path(name)))[0] is not None:
            children = []
            try:
                children = await self.zk.call("get_children", Z.partitions_path(name))
            except NoNodeError:
                pass
            for c in children:
                if (await self._get_or_none(Z.state_path(name, int(c))))[1] is not None:
                    t.delete(Z.state_path(name, int(c)))
                t.delete(Z.partition_path(name, int(c)))
            if children or (await self._get_or_none(Z.partitions_path(name)))[1] is not None:
                t.delete(Z.partitions_path(name))
            t.delete(Z.topic_path(name))
            if (await self._get_or_none(Z.config_path(name)))[1] is not None:
                t.delete(Z.config_path(name))
        t.delete(Z.delete_marker_path(name))
        try:
            await self._commit(t)
            log.info("controller: deletion of topic %s completed", name)
        except KafkaError:
            raise
        except Exception as e:
            log.warning("controller: deleting topic %s failed (%s); retried on the next change", name, e)

    # ================================================================== admin operations
    async def create_topic(self, name, num_partitions, replication_factor, configs=None,
                           assignments=None, validate_only=False, internal=False) -> TopicInfo:
        from kazoo.exceptions import NodeExistsError

        info = self.validator.new_topic(name, num_partitions, replication_factor, configs or {},
                                        assignments, internal)
        overrides, placement = info.configs, info.replica_assignment
        if validate_only:
            return info
        if (await self._get_or_none(Z.delete_marker_path(name)))[1] is not None:
            # Kafka: a topic marked for deletion still exists until the deletion completes
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' is marked for deletion." % name)
        t = self.zk.client.transaction()
        t.create(Z.topic_path(name), Z.encode_assignment(info.topic_id, placement))
        t.create(Z.partitions_path(name), b"")
        for p, replicas in sorted(placement.items()):
            t.create(Z.partition_path(name, p), b"")
            t.create(Z.state_path(name, p),
                     Z.encode_state(PartitionState.initial(replicas), self.controller_epoch))
        await self._write_config_ops(t, name, overrides, create=True)
        results = await self.zk.run(t.commit)
        if any(isinstance(r, NodeExistsError) for r in results):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)
        self._raise_first(results)
        self._post(("topic_hint", name))   # no need to wait for the /brokers/topics watch
        await self._wait_until(lambda: (self.cache.get(name) is not None
                                        and self.cache.get(name).topic_id == info.topic_id),
                               "topic %s to be created" % name)
        info = self.cache.get(name)
        log.info("created topic %s (id %s, %d partition(s), RF %d, configs %s)", name,
                 topic_id_str(info.topic_id), info.num_partitions, info.replication_factor, render_configs(overrides))
        return info

    @staticmethod
    def _raise_first(results) -> None:
        from kazoo.exceptions import RolledBackError
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "ZooKeeper: %r" % (r,))

    async def _write_config_ops(self, t, name: str, overrides: dict, create: bool) -> None:
        data = Z.encode_topic_config(render_configs(overrides))
        if create:
            if (await self._get_or_none(Z.config_path(name)))[1] is not None:
                t.set_data(Z.config_path(name), data)   # left by an older incarnation
            else:
                t.create(Z.config_path(name), data)
        else:
            t.set_data(Z.config_path(name), data)
            # Kafka's change notification (brokers of that era watched these; ours watch the
            # config znode itself, the notification is kept for tools that read it)
            import json
            t.create(Z.CONFIG_CHANGE_PREFIX,
                     json.dumps({"version": 2, "entity_path": "topics/%s" % name}).encode(), sequence=True)

    async def delete_topic(self, name: str) -> TopicInfo:
        from kazoo.exceptions import NodeExistsError
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            await self.zk.call("create", Z.delete_marker_path(name), b"")
        except NodeExistsError:
            pass   # already pending
        await self._wait_until(lambda: (self.cache.get(name) is None
                                        or self.cache.get(name).topic_id != info.topic_id),
                               "topic %s to be deleted" % name)
        return info

    async def create_partitions(self, name, new_total, assignments=None, validate_only=False) -> TopicInfo:
        from kazoo.exceptions import BadVersionError
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        data, stat = await self._get_or_none(Z.topic_path(name))
        if data is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topic_id, assignment = Z.decode_assignment(data)
        current = TopicInfo(name, info.topic_id, len(assignment), assignment, info.configs, info.internal)
        placed = self.validator.plan_partitions(current, new_total, assignments)
        if validate_only:
            return info
        t = self.zk.client.transaction()
        t.set_data(Z.topic_path(name), Z.encode_assignment(info.topic_id, {**assignment, **placed}),
                   version=stat.version)
        for p, replicas in sorted(placed.items()):
            t.create(Z.partition_path(name, p), b"")
            t.create(Z.state_path(name, p), Z.encode_state(PartitionState.initial(replicas), self.controller_epoch))
        results = await self.zk.run(t.commit)
        if results and isinstance(results[0], BadVersionError):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic %s was changed concurrently; retry." % name)
        self._raise_first(results)
        await self._wait_until(lambda: (self.cache.get(name) is not None
                                        and self.cache.get(name).num_partitions >= new_total),
                               "partitions of %s to be created" % name)
        return self.cache.get(name)

    def _creation_in_flight(self, name: str) -> bool:
        return False   # a creation by another broker is not staged here: ask, and wait below

    async def _created_elsewhere(self, name: str) -> Optional[TopicInfo]:
        with trio.move_on_after(APPLY_TIMEOUT_S):
            while name not in self.cache.topics:
                await self._wait_changed()
        return self.cache.get(name)

    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        t = self.zk.client.transaction()
        await self._write_config_ops(t, name, dict(new_overrides), create=False)
        self._raise_first(await self.zk.run(t.commit))
        await self._on_config(name, Z.encode_topic_config(render_configs(dict(new_overrides))))
        return info

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """``/config/brokers/<id|<default>>`` and Kafka's change notification in one multi-op;
        applied here at once (the watch sees the same data later and finds nothing new)."""
        import json
        path = Z.broker_config_path(entity)
        data = Z.encode_topic_config(configs)
        t = self.zk.client.transaction()
        if (await self._get_or_none(path))[1] is None:
            t.create(path, data)
        else:
            t.set_data(path, data)
        t.create(Z.CONFIG_CHANGE_PREFIX, json.dumps(
            {"version": 2, "entity_path": "brokers/%s" % Z.broker_config_entity(entity)}).encode(), sequence=True)
        self._raise_first(await self.zk.run(t.commit))
        await self._on_broker_configs(entity, data)

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """``/config/groups/<group>`` and Kafka's change notification in one multi-op; applied
        here at once, the other brokers follow through their watches."""
        import json
        path = "%s/%s" % (Z.CONFIG_GROUPS, group_id)
        await self.zk.call("ensure_path", Z.CONFIG_GROUPS)
        exists = (await self._get_or_none(path))[1] is not None
        t = self.zk.client.transaction()
        if not configs:
            if exists:
                t.delete(path)
        elif exists:
            t.set_data(path, Z.encode_topic_config(configs))
        else:
            t.create(path, Z.encode_topic_config(configs))
        t.create(Z.CONFIG_CHANGE_PREFIX, json.dumps(
            {"version": 2, "entity_path": "groups/%s" % group_id}).encode(), sequence=True)
        self._raise_first(await self.zk.run(t.commit))
        self._store_group_configs(group_id, configs)

    # ================================================================== partitions
    async def alter_partition(self, topic: str, partition: int, partition_epoch: int,
                              leader: Optional[int] = None, isr: Optional[list[int]] = None,
                              leader_epoch: Optional[int] = None) -> PartitionState:
        """A leader's ISR change (or the controller's leader change): checked by
        cluster/partition_change.py, then a compare-and-set on the state znode's version
        (= ``partition_epoch``)."""
        from kazoo.exceptions import BadVersionError, NoNodeError
        info = self.cache.get(topic)
        st = self.cache.partition_state(topic, partition) if info is not None else None
        if st is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if leader is not None and leader != st.leader and not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "Only the controller elects leaders.")
        new = PC.alter_partition(st, partition_epoch=partition_epoch, eligible=self._alive(), isr=isr,
                                 leader=leader, leader_epoch=leader_epoch, where="%s-%d" % (topic, partition))
        if new is None:
            return st
        new_isr = new.isr
        try:
            stat = await self.zk.call("set", Z.state_path(topic, partition),
                                      Z.encode_state(new, self.controller_epoch), version=st.partition_epoch)
        except BadVersionError:
            raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION) from None
        except NoNodeError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        except Exception as e:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "ZooKeeper unavailable: %s" % e) from None
        new = PartitionState(new.leader, new.leader_epoch, stat.version, new.replicas, new.isr)
        cur = self.cache.partition_state(topic, partition)
        if cur is not None and cur.partition_epoch < stat.version and self.cache.get(topic) is info:
            self._publish_state(info, partition, new)
        log.info("%s-%d: ISR %s -> %s (partition epoch %d)", topic, partition, list(st.isr),
                 list(new_isr), stat.version)
        return new

    async def allocate_producer_id_block(self, broker_id: int) -> int:
        """The start of a block of producer ids no broker got before, claimed by compare-and-set
        on ``/latest_producer_id_block`` (Kafka's ZooKeeper-mode ProducerIdManager): ids are
        unique across the cluster and never reused after restarts."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        from .producer_ids import BLOCK_SIZE
        while True:
            try:
                data, stat = await self.zk.call("get", Z.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    await self.zk.call("create", Z.PRODUCER_ID_BLOCK,
                                       Z.encode_producer_id_block(broker_id, 0, BLOCK_SIZE - 1))
                    return 0
                except NodeExistsError:
                    continue
            last = Z.decode_producer_id_block(data)
            start = (last[1] + 1) if last else 0
            try:
                await self.zk.call("set", Z.PRODUCER_ID_BLOCK,
                                   Z.encode_producer_id_block(broker_id, start, start + BLOCK_SIZE - 1),
                                   version=stat.version)
                return start
            except BadVersionError:
                continue

    def replicas_offline(self, broker_id: int, partitions) -> None:
        """A failed log dir: this broker lists the replicas offline in its own view at once
        (KAFKA_STORAGE_ERROR, Metadata), and reports them to the active controller through
        Kafka's ``/log_dir_event_notification``; the controller applies Kafka's rule
        (cluster/partition_change.py: out of the ISR, leadership moved)."""
        tps = [(t, p) for t, p in partitions if self.cache.partition_state(t, p) is not None]
        if broker_id == self.node_id:
            for t, p in tps:
                self._offline_here.add((t, p))
                self._publish_state(self.cache.get(t), p, self.cache.partition_state(t, p))
        if tps:
            self._post(("offline_report", broker_id, tps))

    async def _on_offline_report(self, broker_id: int, tps) -> None:
        if self.is_active:
            await self._apply_offline(broker_id, tps)
            return
        try:
            await self.zk.call("create", Z.LOG_DIR_EVENT_PREFIX, Z.encode_log_dir_event(broker_id, tps),
                               sequence=True, makepath=True)
        except Exception as e:
            log.warning("cannot report offline replicas %s to the controller: %s", tps, e)

    async def _on_log_dir_events(self, children: list) -> None:
        """The active controller takes the brokers' offline reports, oldest first."""
        from kazoo.exceptions import NoNodeError
        if not self.is_active:
            return
        for child in sorted(children):
            path = "%s/%s" % (Z.LOG_DIR_EVENTS, child)
            data, _ = await self._get_or_none(path)
            if data is not None:
                try:
                    broker_id, tps = Z.decode_log_dir_event(data)
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("unreadable log dir event %s: %s", path, e)
                else:
                    await self._apply_offline(broker_id, tps)
            try:
                await self.zk.call("delete", path)
            except NoNodeError:
                pass

    async def _apply_offline(self, broker_id: int, tps) -> None:
        for topic, p in tps:
            for _attempt in range(5):
                info = self.cache.get(topic)
                st = self.cache.partition_state(topic, p) if info is not None else None
                if st is None:
                    break
                # the rule applies to the state as ZooKeeper stores it (no offline marks)
                stored = PartitionState(st.leader, st.leader_epoch, st.partition_epoch, st.replicas, st.isr)
                new = PC.replicas_offline(stored, broker_id, self._alive())
                if new is None:
                    break
                if new.leader != st.leader:
                    _log_election(topic, p, st, new)
                if await self._write_state_as_controller(info, p, st, new):
                    log.info("%s-%d: replica of broker %d offline, ISR now %s", topic, p, broker_id, list(new.isr))
                    break
                await self._refresh_state(info, p)
