"""``AdminWriter``: the ZooKeeper writes that clients request through any broker.

CreateTopics, CreatePartitions and AlterConfigs (topics, brokers, groups) write ZooKeeper
directly (Kafka's AdminZkClient did the same): one multi-op transaction creates the assignment,
every partition's initial state and the config, so brokers never see half a topic.  The request
is answered once this broker's cache shows the result (the listener applies it), or
REQUEST_TIMED_OUT when its ``timeout_ms`` passes first or is <= 0 (Kafka's ZooKeeper-era rule;
the listener goes on, so the change appears later).  DeleteTopics
writes a pending deletion under ``/admin/delete_topics`` that the active controller completes;
ElectLeaders and AlterPartitionReassignments go to the active controller at once when this
broker is it, through ``/admin/preferred_replica_election`` and ``/admin/reassign_partitions``
otherwise.  ISR changes by a partition leader (``alter_partition``) are compare-and-set writes
on the state znode's version (Kafka's leader path before AlterPartition existed); producer id
blocks are claimed by compare-and-set on ``/latest_producer_id_block``.

Owns no state: what it writes is ZooKeeper's, what it waits for is the listener's.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterable, Optional

import trio

from ...protocol.errors import ErrorCode, KafkaError
from .. import partition_change as PC
from .. import zk as Z
from ..controller import Controller
from ..topic_validator import TopicValidator
from ..metadata import TopicInfo, topic_id_str
from ..metadata_cache import PartitionState
from ..topic_records import render_configs
from .active import ActiveController
from .events import APPLY_TIMEOUT_S, EventTask
from .listener import MetadataListener
from .znodes import ZnodeRole, ZnodeStore

log = logging.getLogger("pykbroker.controller")


class AdminWriter(ZnodeRole):
    def __init__(self, owner: Controller, listener: MetadataListener, active: ActiveController,
                 store: ZnodeStore, events: EventTask, validator: TopicValidator) -> None:
        super().__init__(owner.cache, store, events)
        self.owner = owner          # the Controller: its group config store
        self.listener = listener
        self.active = active
        self.validator = validator

    # ================================================================== topics
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, Optional[str]] | None = None,
                           assignments: Optional[Iterable[tuple[int, list[int]]]] = None, validate_only: bool = False,
                           internal: bool = False, timeout_s: Optional[float] = None) -> TopicInfo:
        from kazoo.exceptions import NodeExistsError

        info = self.validator.new_topic(name, num_partitions, replication_factor, configs or {},
                                        assignments, internal)
        overrides, placement = info.configs, info.replica_assignment
        if validate_only:
            return info
        if await self.store.exists(Z.delete_marker_path(name)):
            # Kafka: a topic marked for deletion still exists until the deletion completes
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' is marked for deletion." % name)
        async def attempt() -> Any:
            t = self.zk.client.transaction()
            t.create(Z.topic_path(name), Z.encode_assignment(info.topic_id, placement))
            t.create(Z.partitions_path(name), b"")
            for p, replicas in sorted(placement.items()):
                t.create(Z.partition_path(name, p), b"")
                t.create(Z.state_path(name, p),
                         Z.encode_state(PartitionState.initial(replicas), self.active.controller_epoch))
            await self._write_config_ops(t, name, overrides, create=True)
            return await self.zk.run(t.commit)
        results = await self.zk.until_connected(attempt, "creating topic %s" % name)
        if any(isinstance(r, NodeExistsError) for r in results):
            # after a lost connection the first attempt may be the one that created it: the
            # topic id written says whose it is
            data, _ = await self.store.get_or_none(Z.topic_path(name))
            if data is None or Z.decode_assignment(data)[0] != info.topic_id:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)
            log.info("topic %s: created by an attempt whose answer was lost with the ZooKeeper connection", name)
        else:
            self._raise_first(results)
        self.events.post(("topic_hint", name))   # no need to wait for the /brokers/topics watch
        await self._await_applied(lambda: (self.cache.get(name) is not None
                                           and self.cache.get(name).topic_id == info.topic_id),  # type: ignore[union-attr]
                                  "topic %s to be created" % name, timeout_s)
        created = self.cache.get(name)
        assert created is not None      # wait_until has just seen it (no await since)
        log.info("created topic %s (id %s, %d partition(s), RF %d, configs %s)", name,
                 topic_id_str(created.topic_id), created.num_partitions, created.replication_factor,
                 render_configs(overrides))
        return created

    async def created_elsewhere(self, name: str) -> Optional[TopicInfo]:
        """Auto-creation lost the race to another broker: wait (bounded) for its topic here."""
        with trio.move_on_after(APPLY_TIMEOUT_S):
            while name not in self.cache.topics:
                await self.events.wait_changed()
        return self.cache.get(name)

    async def _await_applied(self, predicate: Callable[[], bool], what: str, timeout_s: Optional[float]) -> None:
        """Wait for this broker to show a change written to ZooKeeper.  ``timeout_s`` is the
        request's ``timeout_ms``: Kafka's ZooKeeper-era brokers (3.9 in ZooKeeper mode, measured)
        answer REQUEST_TIMED_OUT (message null) for a written topic when it passes first, and at
        once when it is <= 0; the change is in ZooKeeper, so every broker goes on making it (the
        listener's event task, which no request cancels) and it appears later.  None (an
        internal caller): up to APPLY_TIMEOUT_S."""
        if timeout_s is None:
            await self.events.wait_until(predicate, what)
            return
        if timeout_s > 0:
            with trio.move_on_after(timeout_s):
                while not predicate():
                    await self.events.wait_changed()
                return
        log.info("the request's timeout passed before %s; it goes on", what)
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT)

    @staticmethod
    def _raise_first(results: list) -> None:
        from kazoo.exceptions import RolledBackError
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "ZooKeeper: %r" % (r,))

    async def _write_config_ops(self, t: Any, name: str, overrides: dict, create: bool) -> None:
        data = Z.encode_topic_config(render_configs(overrides))
        if create:
            if await self.store.exists(Z.config_path(name)):
                t.set_data(Z.config_path(name), data)   # left by an older incarnation
            else:
                t.create(Z.config_path(name), data)
        else:
            t.set_data(Z.config_path(name), data)
            # Kafka's change notification (brokers of that era watched these; ours watch the
            # config znode itself, the notification is kept for tools that read it)
            t.create(Z.CONFIG_CHANGE_PREFIX,
                     json.dumps({"version": 2, "entity_path": "topics/%s" % name}).encode(), sequence=True)

    async def delete_topic(self, name: str) -> TopicInfo:
        from kazoo.exceptions import NodeExistsError
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            await self.zk.until_connected(lambda: self.zk.call("create", Z.delete_marker_path(name), b""),
                                          "marking topic %s for deletion" % name)
        except NodeExistsError:
            pass   # already pending (or marked by an attempt whose answer was lost)
        await self.events.wait_until(lambda: (self.cache.get(name) is None
                                              or self.cache.get(name).topic_id != info.topic_id),  # type: ignore[union-attr]
                                     "topic %s to be deleted" % name)
        return info

    async def create_partitions(self, name: str, new_total: int, assignments: Optional[list[list[int]]] = None,
                                validate_only: bool = False, timeout_s: Optional[float] = None) -> TopicInfo:
        from kazoo.exceptions import BadVersionError
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        data, stat = await self.store.get_or_none(Z.topic_path(name))
        if data is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topic_id, assignment = Z.decode_assignment(data)
        current = TopicInfo(name, info.topic_id, len(assignment), assignment, info.configs, info.internal)
        placed = self.validator.plan_partitions(current, new_total, assignments)
        if validate_only:
            return info
        wanted = Z.encode_assignment(info.topic_id, {**assignment, **placed})

        async def attempt() -> Any:
            t = self.zk.client.transaction()
            t.set_data(Z.topic_path(name), wanted, version=stat.version)
            for p, replicas in sorted(placed.items()):
                t.create(Z.partition_path(name, p), b"")
                t.create(Z.state_path(name, p), Z.encode_state(PartitionState.initial(replicas),
                                                               self.active.controller_epoch))
            return await self.zk.run(t.commit)
        results = await self.zk.until_connected(attempt, "adding partitions to %s" % name)
        if results and isinstance(results[0], BadVersionError):
            # a lost connection's first attempt may have written exactly this assignment
            now, _ = await self.store.get_or_none(Z.topic_path(name))
            if now is None or Z.decode_assignment(now) != Z.decode_assignment(wanted):
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic %s was changed concurrently; retry." % name)
        else:
            self._raise_first(results)
        await self._await_applied(lambda: (self.cache.get(name) is not None
                                           and self.cache.get(name).num_partitions >= new_total),  # type: ignore[union-attr]
                                  "partitions of %s to be created" % name, timeout_s)
        grown = self.cache.get(name)
        assert grown is not None        # wait_until has just seen it (no await since)
        return grown

    # ================================================================== configs
    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        info = self.cache.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        async def attempt() -> Any:
            t = self.zk.client.transaction()
            await self._write_config_ops(t, name, dict(new_overrides), create=False)
            return await self.zk.run(t.commit)
        self._raise_first(await self.zk.until_connected(attempt, "altering the configs of topic %s" % name))
        await self.listener.on_config(name, Z.encode_topic_config(render_configs(dict(new_overrides))))
        return info

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """``/config/brokers/<id|<default>>`` and Kafka's change notification in one multi-op;
        applied here at once (the watch sees the same data later and finds nothing new)."""
        path = Z.broker_config_path(entity)
        data = Z.encode_topic_config(configs)
        async def attempt() -> Any:
            # built afresh each time: a first attempt lost with the connection may have created it
            t = self.zk.client.transaction()
            if not await self.store.exists(path):
                t.create(path, data)
            else:
                t.set_data(path, data)
            t.create(Z.CONFIG_CHANGE_PREFIX, json.dumps(
                {"version": 2, "entity_path": "brokers/%s" % Z.broker_config_entity(entity)}).encode(), sequence=True)
            return await self.zk.run(t.commit)
        self._raise_first(await self.zk.until_connected(attempt, "altering broker configs (%s)" % entity))
        await self.listener.on_broker_configs(entity, data)

    async def read_group_configs(self, group_id: str) -> dict[str, str]:
        """``/config/groups/<group>`` read now, and stored here as the watch would store it: a
        share partition's first fetch decides its start offset from share.auto.offset.reset, and
        the watch can still be behind an IncrementalAlterConfigs answered by another broker."""
        data, _ = await self.store.get_or_none("%s/%s" % (Z.CONFIG_GROUPS, group_id))
        configs = Z.decode_topic_config(data) if data is not None else {}
        self.owner._store_group_configs(group_id, configs)
        return configs

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """``/config/groups/<group>`` and Kafka's change notification in one multi-op; applied
        here at once, the other brokers follow through their watches."""
        path = "%s/%s" % (Z.CONFIG_GROUPS, group_id)
        await self.zk.call("ensure_path", Z.CONFIG_GROUPS)
        async def attempt() -> Any:
            # built afresh each time: a first attempt lost with the connection may have applied
            exists = await self.store.exists(path)
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
            return await self.zk.run(t.commit)
        self._raise_first(await self.zk.until_connected(attempt, "altering the configs of group %s" % group_id))
        self.owner._store_group_configs(group_id, configs)

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
        if info is None or st is None:      # (st is None whenever info is)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if leader is not None and leader != st.leader and not self.active.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "Only the controller elects leaders.")
        new = PC.alter_partition(st, partition_epoch=partition_epoch, eligible=self.active.alive(), isr=isr,
                                 leader=leader, leader_epoch=leader_epoch, where="%s-%d" % (topic, partition))
        if new is None:
            return st
        new_isr = new.isr
        try:
            stat = await self.zk.call("set", Z.state_path(topic, partition),
                                      Z.encode_state(new, self.active.controller_epoch), version=st.partition_epoch)
        except BadVersionError:
            raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION) from None
        except NoNodeError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        except Exception as e:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "ZooKeeper unavailable: %s" % e) from None
        new = PartitionState(new.leader, new.leader_epoch, stat.version, new.replicas, new.isr)
        cur = self.cache.partition_state(topic, partition)
        if cur is not None and cur.partition_epoch < stat.version and self.cache.get(topic) is info:
            self.listener.publish_state(info, partition, new)
        log.info("%s-%d: ISR %s -> %s (partition epoch %d)", topic, partition, list(st.isr),
                 list(new_isr), stat.version)
        if self.active.is_active and partition in self.listener.ongoing(topic):
            # the controller wrote (and published) this ISR itself, so no state event reaches
            # its reassignment check: a reassignment waiting for this ISR completes here
            # (the answer stays this ISR change: the leader takes the completion from the cache)
            await self.active._maybe_complete_reassignment(topic, partition)
        return new

    async def _hand_to_controller(self, path: str, body: bytes, what: str) -> None:
        """A request for the active controller from another broker, as Kafka's admin znodes:
        ``path`` created with ``body`` once the previous request there is gone (one at a time,
        as in Kafka), then waited for until the controller took it (deleted the znode).  The
        caller bounds the wait."""
        from kazoo.exceptions import NodeExistsError
        while True:
            try:
                await self.zk.until_connected(lambda: self.zk.call("create", path, body), what)
                break
            except NodeExistsError:
                await trio.sleep(0.1)
        while (await self.store.get_or_none(path))[0] is not None:
            await trio.sleep(0.05)

    async def elect_leaders(self, partitions: Iterable[tuple[str, int]], election_type: int = 0, timeout_s: float = APPLY_TIMEOUT_S) -> dict:
        """ElectLeaders.  On the controller: done there; elsewhere the request goes through
        ``/admin/preferred_replica_election`` (with pykbroker's ``election_type`` field) and this
        waits for the controller to take it, then reads the outcome from the cache."""
        if self.active.is_active:
            return await self.active.elect(partitions, election_type)
        body = json.dumps({"version": 1, "election_type": election_type,
                           "partitions": [{"topic": t, "partition": p} for t, p in partitions]})
        before = {tp: self.cache.partition_state(*tp) for tp in partitions}
        with trio.move_on_after(timeout_s):
            await self._hand_to_controller(Z.PREFERRED_ELECTION, body.encode(), "requesting a leader election")
            await trio.sleep(0.05)   # the resulting state watches
        out: dict[tuple[str, int], int] = {}
        live = self.active.alive()
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

    async def _caught_up(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Wait until this broker's view holds every partition of ``partitions`` that ZooKeeper
        already holds.  In Kafka the controller, whose view is authoritative, checks a
        reassignment; here the receiving broker does, and its view follows ZooKeeper's watches a
        moment behind: a topic just created through another broker must not be answered
        "Unable to find a topic named" while its znodes exist (seen under load)."""
        for topic, p in partitions:
            if self.cache.partition_state(topic, p) is not None:
                continue
            if not await self.store.exists(Z.state_path(topic, p)):
                continue   # really unknown: answered as such at once
            while self.cache.partition_state(topic, p) is None:
                await trio.sleep(0.02)

    async def alter_reassignments(self, items: Iterable[tuple[str, int, Optional[list[int]]]], allow_rf_change: bool = True,
                                  timeout_s: float = APPLY_TIMEOUT_S) -> dict:
        """AlterPartitionReassignments: ``items`` [(topic, p, target replicas or None to
        cancel)] -> {(topic, p): (code, message)}.  Checked here; carried out by the active
        controller (through ``/admin/reassign_partitions`` from other brokers).  The answer
        comes once the reassignment started (replicas extended), not when it completes."""
        out, valid = {}, []
        items = list(items)
        with trio.move_on_after(timeout_s):
            await self._caught_up([(t, p) for t, p, _ in items])
        for topic, p, target in items:
            code, msg = self.active.check_target(topic, p, target, allow_rf_change)
            out[(topic, p)] = (code, msg)
            if not code:
                valid.append((topic, p, None if target is None else list(target)))
        if not valid:
            return out
        if self.active.is_active:
            for topic, p, target in valid:
                out[(topic, p)] = await self.active.reassign(topic, p, target)
            return out
        body = json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                        for t, p, r in valid]}).encode()
        with trio.move_on_after(timeout_s) as scope:
            await self._hand_to_controller(Z.REASSIGN_PARTITIONS, body, "requesting a reassignment")
        if scope.cancelled_caught:
            for t, p, _ in valid:
                out[(t, p)] = (ErrorCode.REQUEST_TIMED_OUT, "The controller did not take the reassignment in time.")
        return out

    async def allocate_producer_id_block(self, broker_id: int) -> int:
        """The start of a block of producer ids no broker got before, claimed by compare-and-set
        on ``/latest_producer_id_block`` (Kafka's ZooKeeper-mode ProducerIdManager): ids are
        unique across the cluster and never reused after restarts."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        from ..producer_ids import BLOCK_SIZE
        while True:
            try:
                data, stat = await self.zk.call("get", Z.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    # lost connections: a create that was applied finds the znode and claims the
                    # next block instead (ids skipped, never reused)
                    await self.zk.until_connected(lambda: self.zk.call(
                        "create", Z.PRODUCER_ID_BLOCK, Z.encode_producer_id_block(broker_id, 0, BLOCK_SIZE - 1)),
                        "claiming a producer id block")
                    return 0
                except NodeExistsError:
                    continue
            last = Z.decode_producer_id_block(data)
            start = (last[1] + 1) if last else 0
            try:
                await self.zk.until_connected(lambda: self.zk.call(
                    "set", Z.PRODUCER_ID_BLOCK, Z.encode_producer_id_block(broker_id, start, start + BLOCK_SIZE - 1),
                    version=stat.version), "claiming a producer id block")
                return start
            except BadVersionError:
                continue
