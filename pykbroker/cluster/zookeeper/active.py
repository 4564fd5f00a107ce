"""``ActiveController``: the duties of the one broker elected through ``/controller``.

Each new term bumps ``/controller_epoch`` (``become_active``) and then catches up (Kafka's
onControllerFailover): fresh view of the live brokers, elections for whatever changed while no
controller acted, pending deletions, offline reports and reassignments.  When a broker's
registration disappears (crash, session expiry, controlled shutdown) it elects a new leader for
each partition that broker led, from the live ISR in replica order, bumping the leader epoch, and
removes the broker from the ISR of the partitions it followed; with no live ISR member the
partition gets no leader (-1) unless ``unclean.leader.election.enable`` lets a live out-of-sync
replica lead (the possible loss is logged).  A returning broker gets back leaderless partitions
it is in sync for; preferred leaders are restored by ElectLeaders and, with
``auto.leader.rebalance.enable``, periodically.  It completes pending topic deletions, carries
out reassignments (KIP-455 phases) and applies the brokers' offline-replica reports.  Every rule
is computed by cluster/partition_change.py; this module only stores and publishes.

**Fencing:** every controller write is a ZooKeeper transaction that also checks the
``/controller_epoch`` znode's version read at election, so a controller that lost its session
(another was elected meanwhile) cannot change anything; a fenced write ends the term.

Owns the term: ``is_active``, ``controller_epoch`` and the epoch znode's version.  Who runs for
``/controller`` and when a term ends on the session's account is decided by
cluster/zookeeper/membership.py; the ``brokers`` and ``state`` events reach the listener first
(``on_brokers``, ``on_state`` here pass them on), then these duties.
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Iterable, Optional

import trio

from ...protocol.errors import ErrorCode, KafkaError
from .. import partition_change as PC
from .. import zk as Z
from ..metadata import TopicInfo
from ..metadata_cache import ControllerRecord, PartitionState
from .events import EventTask
from .listener import MetadataListener
from .znodes import ZnodeRole, ZnodeStore

if TYPE_CHECKING:
    from ...config.broker import BrokerConfig

log = logging.getLogger("pykbroker.controller")

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


# Kafka's ZooKeeper controller runs its first automatic preferred-leader check this long after
# it takes over (onControllerFailover's scheduleAutoLeaderRebalanceTask(delay = 5 s))
FIRST_IMBALANCE_CHECK_S = 5.0


class ActiveController(ZnodeRole):
    def __init__(self, listener: MetadataListener, store: ZnodeStore, events: EventTask, config: BrokerConfig,
                 node_id: int) -> None:
        super().__init__(listener.cache, store, events)
        self.listener = listener
        self.config = config
        self.node_id = node_id
        self.is_active = False
        self.controller_epoch = 0
        self._epoch_zk_version = -1
        # set when a term begins: rebalance_loop's first imbalance check comes 5 s into each term
        self._term_began = trio.Event()

    # ================================================================== the term
    async def _bump_controller_epoch(self) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError
        while True:
            data, stat = await self.store.get_or_none(Z.CONTROLLER_EPOCH)
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

    async def become_active(self) -> None:
        await self._bump_controller_epoch()
        self.is_active = True
        self.cache.apply([ControllerRecord(self.node_id)])
        log.info("broker %d is the controller (epoch %d)", self.node_id, self.controller_epoch)
        try:
            await self.catch_up()
        finally:
            self._term_began.set()

    async def catch_up(self) -> None:
        """Kafka's onControllerFailover, also run after a reconnection within the session: fresh
        view of the live brokers, then elections for whatever changed while no controller acted,
        then pending deletions and reassignments."""
        ids = {int(c) for c in await self.zk.call("get_children", Z.BROKER_IDS)}
        await self.on_brokers([str(i) for i in ids])
        for name in sorted(await self.zk.call("get_children", Z.DELETE_TOPICS)):
            await self._complete_deletion(name)
        await self.on_log_dir_events(await self.zk.call("get_children", Z.LOG_DIR_EVENTS))
        for name, p in self.listener.reassigning_partitions():
            await self._maybe_complete_reassignment(name, p)
        data, _ = await self.store.get_or_none(Z.REASSIGN_PARTITIONS)
        if data is not None:
            await self.on_reassign(data)

    async def resign(self, why: str) -> None:
        if self.is_active:
            self.is_active = False
            log.warning("broker %d stops acting as controller: %s", self.node_id, why)

    def stop(self) -> None:
        self.is_active = False

    # ================================================================== fenced writes
    def _fenced_txn(self) -> Any:
        """A ZooKeeper transaction that only commits while our controller epoch is current."""
        t = self.zk.client.transaction()
        t.check(Z.CONTROLLER_EPOCH, self._epoch_zk_version)
        return t

    async def _commit(self, t: Any) -> list:
        results = await self.zk.run(t.commit)
        from kazoo.exceptions import BadVersionError, RolledBackError
        if results and isinstance(results[0], BadVersionError):
            await self.resign("controller epoch moved on (fenced)")
            self.events.post(("controller", None))   # whose /controller is it now?
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is no longer the controller.")
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise r
        return results

    async def _write_state(self, info: TopicInfo, p: int, old: PartitionState,
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
            self.listener.publish_state(info, p, new)
        return True

    async def _write_states(self, batch: list[tuple[TopicInfo, int, PartitionState, PartitionState]]) -> bool:
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
                self.listener.publish_state(info, p, new)
        return True

    # ================================================================== brokers and elections
    async def on_brokers(self, children: list) -> None:
        """The ``brokers`` event: the listener's view, then (on the controller) elections."""
        await self.listener.on_brokers(children)
        if self.is_active:
            await self._on_live_brokers_changed()

    async def on_state(self, name: str, p: int, data: Optional[bytes], stat: Any) -> None:
        """The ``state`` event: the listener publishes it, then (on the controller) a
        reassignment waiting for that partition's ISR may complete."""
        if await self.listener.on_state(name, p, data, stat):
            if self.is_active and p in self.listener.ongoing(name):
                await self._maybe_complete_reassignment(name, p)

    def _unclean_allowed(self, topic: str) -> bool:
        return bool(self.cache.effective_config(topic).get("unclean.leader.election.enable"))

    def alive(self) -> set[int]:
        return {b.broker_id for b in self.cache.alive_brokers()}

    async def _on_live_brokers_changed(self) -> None:
        """Kafka's onBrokerFailure / onBrokerStartup, for every partition of the image."""
        live = self.alive()
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
            # the old state is never None: a new state is elected only from one
            if len(batch) > 1 and await self._write_states(batch):  # type: ignore[arg-type]
                continue
            for info, p, _, _ in batch:
                for _attempt in range(5):
                    st = self.cache.partition_state(info.name, p)
                    if st is None:
                        break
                    new = self._elect_for_liveness(info.name, p, st, live)
                    if new is None or await self._write_state(info, p, st, new):
                        break
                    await self.listener.refresh_state(info, p)

    def _elect_for_liveness(self, topic: str, p: int, st: PartitionState, live: set[int]) -> Optional[PartitionState]:
        new = PC.on_brokers_changed(st, live, self._unclean_allowed(topic))
        if new is not None and new.leader != st.leader:
            _log_election(topic, p, st, new)
        return new

    async def elect(self, partitions: Iterable[tuple[str, int]], election_type: int = 0) -> dict:
        """Kafka's ElectLeaders on the controller: ``election_type`` 0 moves leadership to the
        preferred (first) replica if it is live and in sync; 1 (unclean) elects the first live
        replica of a partition that has no leader.  Returns {(topic, p): error code}."""
        out: dict[tuple[str, int], int] = {}
        live = self.alive()
        for topic, p in partitions:
            info = self.cache.get(topic)
            st = self.cache.partition_state(topic, p) if info is not None else None
            if info is None or st is None:      # (st is None whenever info is)
                out[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            code, new = (PC.elect_unclean if election_type == 1 else PC.elect_preferred)(st, live)
            if code:
                out[(topic, p)] = code
                continue
            assert new is not None      # code 0 comes with the new state
            _log_election(topic, p, st, new)
            ok = await self._write_state(info, p, st, new)
            out[(topic, p)] = 0 if ok else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        return out

    async def on_preferred(self, data: Optional[bytes]) -> None:
        """``/admin/preferred_replica_election`` written by another broker (ElectLeaders)."""
        if not self.is_active or data is None:
            return
        try:
            obj = json.loads(data)
            parts = [(e["topic"], int(e["partition"])) for e in obj.get("partitions", [])]
            etype = int(obj.get("election_type", 0))
        except (ValueError, KeyError, TypeError):
            parts, etype = [], 0
        await self.elect(parts, etype)
        from kazoo.exceptions import NoNodeError
        try:
            await self.zk.call("delete", Z.PREFERRED_ELECTION)
        except NoNodeError:
            pass

    async def rebalance_loop(self) -> None:
        """``auto.leader.rebalance.enable``'s timer: it posts the check (``on_auto_rebalance``) to
        the event task, which runs it between the other controller events and survives a
        ZooKeeper error under it, as Kafka's controller queues AutoPreferredReplicaLeaderElection.
        As Kafka's ZooKeeper controller schedules it (onControllerFailover), the first check of a
        term comes 5 s after the term's catch-up, then one every
        ``leader.imbalance.check.interval.seconds``: a new controller puts back the leaders a
        failover moved within seconds rather than up to the interval (300 s by default) later."""
        if not self.config["auto.leader.rebalance.enable"]:
            return
        interval = self.config["leader.imbalance.check.interval.seconds"]
        delay: Optional[float] = None   # None: no term to check for yet
        while True:
            with trio.move_on_after(delay if delay is not None else float("inf")):
                await self._term_began.wait()
            if self._term_began.is_set():   # a new term (set again by the next become_active)
                self._term_began = trio.Event()
                delay = FIRST_IMBALANCE_CHECK_S
                continue
            if not self.is_active:
                delay = None
                continue
            self.events.post(("auto_rebalance",))
            delay = interval

    async def on_auto_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: a preferred election of the partitions of
        every live broker that leads less than its share (``leader.imbalance.per.broker.percentage``)."""
        if not self.is_active:   # the term ended after the timer posted this
            return
        ratio = self.config["leader.imbalance.per.broker.percentage"] / 100.0
        live = self.alive()
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
                await self.elect(wrong, 0)

    # ================================================================== reassignments
    def check_target(self, topic: str, p: int, target: Optional[list[int]], allow_rf_change: bool) -> tuple[int, Optional[str]]:
        """(code, message) for a requested reassignment, 0 when valid: Kafka 4.4's checks and
        texts (ReplicationControlManager), in its order: the topic, the partition, nothing to
        cancel (no text), the replica list, then the replication factor.  A broker is
        "registered" here while its ZooKeeper registration lives (a dead broker's is gone; a
        KRaft controller still knows a fenced one: SKIPPED.md)."""
        info = self.cache.get(topic)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named %s." % topic
        st = self.cache.partition_state(topic, p)
        if st is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition %s:%d." % (topic, p)
        if target is None:
            if p not in self.listener.ongoing(topic):
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            return 0, None
        error = PC.manual_assignment_error(list(target), self.alive())
        if error is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, error
        original = self.listener.original_replicas(topic, p, st)
        if not allow_rf_change and len(target) != len(original):
            return ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from %d to %d" % (len(original), len(target))
        return 0, None

    async def on_reassign(self, data: Optional[bytes]) -> None:
        """``/admin/reassign_partitions`` written by another broker (AlterPartitionReassignments)."""
        if not self.is_active or data is None:
            return
        from kazoo.exceptions import NoNodeError
        try:
            items = [(e["topic"], int(e["partition"]), e.get("replicas"))
                     for e in json.loads(data).get("partitions", [])]
        except (ValueError, KeyError, TypeError):
            items = []
        for topic, p, target in items:
            code, msg = self.check_target(topic, p, target, True)
            if code:
                log.warning("reassignment of %s-%d refused: %s", topic, p, msg)
                continue
            await self.reassign(topic, p, target)
        try:
            await self.zk.call("delete", Z.REASSIGN_PARTITIONS)
        except NoNodeError:
            pass

    async def _write_reassignment(self, topic: str, p: int, st: PartitionState, new: PartitionState,
                                  change: Optional[tuple[list[int], list[int]]]) -> bool:
        """One fenced transaction: the topic znode (assignment and adding/removing lists) and
        the partition's state.  ``change`` None: the reassignment of ``p`` is over."""
        from kazoo.exceptions import BadVersionError
        data, stat = await self.store.get_or_none(Z.topic_path(topic))
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
        self.listener.set_reassignments(topic, ongoing, {q: list(assignment.get(q, [])) for q in ongoing})
        new = PartitionState(new.leader, new.leader_epoch, results[2].version, new.replicas, new.isr)
        cur = self.cache.partition_state(topic, p)
        if cur is not None and cur.partition_epoch < new.partition_epoch:
            self.listener.publish_state(info, p, new)
        return True

    async def reassign(self, topic: str, p: int, target: Optional[list[int]]) -> tuple:
        """Start (or cancel, ``target`` None) the reassignment of one partition (Kafka's
        KIP-455 phases): the replica set becomes target + the original replicas not in it, the
        new replicas catch up as followers, and once all of them are in the ISR the set shrinks
        to the target (``_maybe_complete_reassignment``).  Each step bumps the leader epoch."""
        for _attempt in range(5):
            st = self.cache.partition_state(topic, p)
            if st is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            original = self.listener.original_replicas(topic, p, st)
            if target is not None and list(target) == list(st.replicas) and p not in self.listener.ongoing(topic):
                return 0, None   # already there: Kafka records no change (no epoch bump either)
            if target is None or list(target) == original:
                # cancelled (the replicas being added are dropped), or nothing to move
                replicas, change = original, None
            else:
                replicas, adding, removing = PC.reassignment_replicas(original, list(target))
                change = (adding, removing)
            new = PC.reassign(st, replicas, self.alive())
            if await self._write_reassignment(topic, p, st, new, change):
                log.info("reassignment of %s-%d: replicas %s -> %s%s", topic, p, list(st.replicas),
                         replicas, " (cancelled)" if target is None else "")
                if change is not None:
                    await self._maybe_complete_reassignment(topic, p)
                return 0, None
            # (None only if the topic was deleted during the write)
            await self.listener.refresh_state(self.cache.get(topic), p)  # type: ignore[arg-type]
        return ErrorCode.REQUEST_TIMED_OUT, "The partition changed concurrently; retry."

    async def _maybe_complete_reassignment(self, topic: str, p: int) -> None:
        ongoing = self.listener.ongoing(topic).get(p)
        st = self.cache.partition_state(topic, p)
        if ongoing is None or st is None:
            return
        adding, removing = ongoing
        new = PC.complete_reassignment(st, removing, self.alive())
        if new is None:
            return   # new replicas still catching up
        if await self._write_reassignment(topic, p, st, new, None):
            log.info("reassignment of %s-%d complete: replicas %s", topic, p, list(new.replicas))

    # ================================================================== deletions
    async def on_deletions(self, children: list) -> None:
        if self.is_active:
            for name in sorted(children):
                await self._complete_deletion(name)

    async def _complete_deletion(self, name: str) -> None:
        """Remove a topic's znodes (leaf first) and its deletion marker, fenced."""
        info = self.cache.get(name)
        t = self._fenced_txn()
        if info is not None and (await self.store.get_or_none(Z.topic_path(name)))[0] is not None:
            for path in await self.store.topic_znodes_leaf_first(name):
                t.delete(path)
        t.delete(Z.delete_marker_path(name))
        try:
            await self._commit(t)
            log.info("controller: deletion of topic %s completed", name)
        except KafkaError:
            raise
        except Exception as e:
            log.warning("controller: deleting topic %s failed (%s); retried on the next change", name, e)

    # ================================================================== offline replicas
    async def on_offline_report(self, broker_id: int, tps: Iterable[tuple[str, int]]) -> None:
        """A broker's offline replicas (a failed log dir): applied here on the controller, or
        reported to it through Kafka's ``/log_dir_event_notification``."""
        if self.is_active:
            await self._apply_offline(broker_id, tps)
            return
        try:
            await self.zk.call("create", Z.LOG_DIR_EVENT_PREFIX, Z.encode_log_dir_event(broker_id, tps),
                               sequence=True, makepath=True)
        except Exception as e:
            log.warning("cannot report offline replicas %s to the controller: %s", tps, e)

    async def on_log_dir_events(self, children: list) -> None:
        """The active controller takes the brokers' offline reports, oldest first."""
        from kazoo.exceptions import NoNodeError
        if not self.is_active:
            return
        for child in sorted(children):
            path = "%s/%s" % (Z.LOG_DIR_EVENTS, child)
            data, _ = await self.store.get_or_none(path)
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

    async def _apply_offline(self, broker_id: int, tps: Iterable[tuple[str, int]]) -> None:
        for topic, p in tps:
            for _attempt in range(5):
                info = self.cache.get(topic)
                st = self.cache.partition_state(topic, p) if info is not None else None
                if info is None or st is None:      # (st is None whenever info is)
                    break
                # the rule applies to the state as ZooKeeper stores it (no offline marks)
                stored = PartitionState(st.leader, st.leader_epoch, st.partition_epoch, st.replicas, st.isr)
                new = PC.replicas_offline(stored, broker_id, self.alive())
                if new is None:
                    break
                if new.leader != st.leader:
                    _log_election(topic, p, st, new)
                if await self._write_state(info, p, st, new):
                    log.info("%s-%d: replica of broker %d offline, ISR now %s", topic, p, broker_id, list(new.isr))
                    break
                await self.listener.refresh_state(info, p)
