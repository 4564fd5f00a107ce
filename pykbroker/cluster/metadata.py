"""Topic metadata of this broker: names, stable topic ids, partition counts, assignments and
per-topic config overrides.  ``MetadataImage`` is the single owner of that state.

Persistence
-----------
The whole image lives in one small JSON file, ``<first log dir>/__pykbroker_metadata.json``::

    {"version": 1, "topics": [{"name": "t", "topic_id": "<22-char url-safe base64>",
      "num_partitions": 3, "replica_assignment": {"0": [1], ...},
      "configs": {"retention.ms": "1000"}, "internal": false}, ...]}

Every change rewrites it atomically: write ``.tmp`` → fsync → rename over the old file →
fsync the directory.  A crash (kill -9, power loss) therefore leaves either the old or the new
image, never a torn one.  Topic metadata changes are rare (admin operations), so a full rewrite
is simpler than an append-only log and costs well under a millisecond for thousands of topics.
Config overrides are stored as the strings Kafka would show and re-parsed on load.

Ordering against the partition logs (owned by the ReplicaManager):
- create: the topic is persisted first, then ``replica_manager.make_partitions`` creates its
  logs.  A crash in between leaves a persisted topic whose logs the ReplicaManager creates at
  its next start-up (it opens every partition of every topic in this image).
- delete: the removal is persisted first, then ``replica_manager.delete_partitions`` removes the
  logs, so a deleted topic never comes back after a crash (left-over directories are the
  ReplicaManager's to clean).

Concurrency: state changes happen between awaits; a name being created or deleted is reserved
(``_pending`` / ``_deleting``) so a concurrent request sees it.  Writes are group-committed: a
change bumps a generation number and waits until a write covering that generation is durable;
at most one write runs at a time, without holding a lock across the await.

Error codes and messages follow Apache Kafka's KRaft controller (ReplicationControlManager,
ControllerApis, Topic.validate), so admin clients show the same texts.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

import trio

from ..config import TOPIC_CONFIGS, ConfigError, validate_topic_configs
from ..protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("pykbroker.metadata")

METADATA_FILE = "__pykbroker_metadata.json"
ZERO_UUID = bytes(16)
# Kafka's internal topics (Topic.isInternal); both are created by the coordinators.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# KRaft's own metadata log is never a user topic.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
# Kafka refuses a single CreateTopics/CreatePartitions asking for more partitions than this
# (QuorumController MAX_RECORDS_PER_USER_OP guard), with POLICY_VIOLATION.
MAX_PARTITIONS_PER_REQUEST = 10000


@dataclass
class TopicInfo:
    name: str
    topic_id: bytes
    num_partitions: int
    replica_assignment: dict[int, list[int]]
    configs: dict[str, Any] = field(default_factory=dict)  # overrides only, parsed values
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        first = self.replica_assignment.get(0)
        return len(first) if first else 1

    def partition_ids(self) -> list[int]:
        return list(range(self.num_partitions))


def topic_id_str(tid: bytes) -> str:
    """Kafka's Uuid.toString: url-safe base64 without padding."""
    return base64.urlsafe_b64encode(tid).decode().rstrip("=")


def topic_id_from_str(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def new_topic_id() -> bytes:
    # Kafka's Uuid.randomUuid never returns the zero id, the metadata topic's id (1) nor an id
    # whose string form starts with '-' (it would look like a command-line flag).
    while True:
        tid = os.urandom(16)
        if tid == ZERO_UUID or tid == bytes(15) + b"\x01" or topic_id_str(tid).startswith("-"):
            continue
        return tid


def validate_topic_name(name) -> None:
    """Kafka's Topic.validate, with Apache Kafka 4.4's messages."""
    if name is None or name == "":
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '%s' is not allowed" % name)
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         "Topic name is invalid: the length of '%s' is longer than the max allowed length %d"
                         % (name, MAX_NAME_LENGTH))
    if not _LEGAL.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         "Topic name is invalid: '%s' contains one or more characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'" % name)


def is_valid_topic_name(name) -> bool:
    try:
        validate_topic_name(name)
        return True
    except KafkaError:
        return False


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def _unify(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses topics differing only by them.
    return name.replace(".", "_")


class MetadataImage:
    def __init__(self, broker):
        self.broker = broker
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[bytes, TopicInfo] = {}
        self._pending: dict[str, TopicInfo] = {}        # being created (persisted, logs not yet made)
        self._deleting: dict[str, trio.Event] = {}     # being deleted (logs not yet removed)
        self._gen = 0
        self._durable_gen = 0
        self._writing = False
        self._written = trio.Event()
        self.path = os.path.join(broker.log_dirs[0], METADATA_FILE)

    # ------------------------------------------------------------------ persistence
    async def load(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            os.unlink(self.path + ".tmp")  # a write interrupted by a crash
        except FileNotFoundError:
            pass
        try:
            with open(self.path, "rb") as fh:
                data = json.loads(fh.read())
        except FileNotFoundError:
            return
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
            self.topics[info.name] = info
            self.by_id[info.topic_id] = info
        log.info("loaded metadata of %d topic(s) from %s", len(self.topics), self.path)

    def _snapshot(self) -> bytes:
        topics = []
        for info in sorted(list(self.topics.values()) + list(self._pending.values()), key=lambda t: t.name):
            topics.append({
                "name": info.name, "topic_id": topic_id_str(info.topic_id),
                "num_partitions": info.num_partitions,
                "replica_assignment": {str(p): r for p, r in sorted(info.replica_assignment.items())},
                "configs": {k: TOPIC_CONFIGS[k].render(v) for k, v in sorted(info.configs.items())},
                "internal": info.internal,
            })
        return json.dumps({"version": 1, "topics": topics}, indent=1).encode()

    def _write_file(self, data: bytes) -> None:
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    async def _persist(self) -> None:
        """Make the current in-memory image durable (group commit, one writer at a time)."""
        self._gen += 1
        mine = self._gen
        while self._durable_gen < mine:
            if self._writing:
                await self._written.wait()
                continue
            self._writing = True
            gen = self._gen
            data = self._snapshot()
            try:
                # Not cancellable: once started, the write completes (the state is already changed).
                await trio.to_thread.run_sync(self._write_file, data)
                self._durable_gen = max(self._durable_gen, gen)
            finally:
                self._writing = False
                done, self._written = self._written, trio.Event()
                done.set()

    # ------------------------------------------------------------------ queries
    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def name_of(self, topic_id: bytes) -> str | None:
        info = self.by_id.get(topic_id)
        return info.name if info else None

    def effective_config(self, name: str) -> dict:
        info = self.topics.get(name) or self._pending.get(name)
        overrides = info.configs if info else {}
        return self.broker.config.effective_topic_config(overrides)

    def _num_brokers(self) -> int:
        return 1  # a single broker until the ZooKeeper controller lands

    def _registered_brokers(self) -> set[int]:
        return {self.broker.node_id}

    # ------------------------------------------------------------------ validation helpers
    def _check_new_name(self, name: str) -> None:
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Creation of internal topic %s is prohibited." % CLUSTER_METADATA_TOPIC)
        if name in self.topics or name in self._pending:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)
        if "." in name or "_" in name:
            u = _unify(name)
            for other in list(self.topics) + list(self._pending):
                if other != name and _unify(other) == u:
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     "Topic '%s' collides with existing topic: %s" % (name, other))

    def _validate_manual_assignment(self, brokers: list[int], expected_rf: int | None) -> None:
        """Kafka's validateManualPartitionAssignment (brokers checked in ascending order)."""
        if not brokers:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
        registered = self._registered_brokers()
        prev = None
        for b in sorted(brokers):
            if b not in registered:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes broker %d, but no such "
                                 "broker is registered." % b)
            if b == prev:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes the broker %d more than once." % b)
            prev = b
        if expected_rf is not None and len(brokers) != expected_rf:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes a partition with %d replica(s), but "
                             "this is not consistent with previous partitions, which have %d replica(s)."
                             % (len(brokers), expected_rf))

    def _place(self, start: int, count: int, rf: int) -> dict[int, list[int]]:
        if rf > self._num_brokers():
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Unable to replicate the partition %d time(s): The target replication factor "
                             "of %d cannot be reached because only %d broker(s) are registered or some "
                             "brokers have all their log directories cordoned." % (rf, rf, self._num_brokers()))
        brokers = sorted(self._registered_brokers())
        return {p: [brokers[(p + i) % len(brokers)] for i in range(rf)] for p in range(start, start + count)}

    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: dict[str, str | None], assignments=None) -> tuple[dict, dict[int, list[int]]]:
        """Validate a new topic as Kafka's controller does (in its order) and return the parsed
        config overrides and the replica assignment.  Raises KafkaError."""
        self._check_new_name(name)
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
                self._validate_manual_assignment(list(brokers), rf)
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
        n = self.broker.config["num.partitions"] if num_partitions == -1 else num_partitions
        rf = self.broker.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        return overrides, self._place(0, n, rf)

    # ------------------------------------------------------------------ mutations
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str | None] | None = None, assignments=None,
                           validate_only: bool = False, internal: bool = False) -> TopicInfo:
        """Create a topic (or only validate it).  ``assignments``: iterable of
        ``(partition_index, [broker ids])``.  Raises KafkaError with Kafka's code and message."""
        while name in self._deleting:  # the old incarnation's logs are still being removed
            await self._deleting[name].wait()
        overrides, placement = self.plan_topic(name, num_partitions, replication_factor,
                                               configs or {}, assignments)
        info = TopicInfo(name=name, topic_id=new_topic_id(), num_partitions=len(placement),
                         replica_assignment=placement, configs=overrides,
                         internal=internal or is_internal(name))
        if validate_only:
            return info
        self._pending[name] = info
        try:
            await self._persist()
            await self.broker.replica_manager.make_partitions(info, info.partition_ids())
        except BaseException:
            # Roll back: the topic never became visible.
            self._pending.pop(name, None)
            with trio.CancelScope(shield=True):
                await self._persist()
            log.exception("creating topic %s failed", name)
            raise
        self._pending.pop(name, None)
        self.topics[name] = info
        self.by_id[info.topic_id] = info
        log.info("created topic %s (id %s, %d partition(s), configs %s)", name, topic_id_str(info.topic_id),
                 info.num_partitions, {k: TOPIC_CONFIGS[k].render(v) for k, v in overrides.items()})
        return info

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        del self.topics[name]
        self.by_id.pop(info.topic_id, None)
        done = self._deleting[name] = trio.Event()
        try:
            with trio.CancelScope(shield=True):  # a half-done delete must still finish
                await self._persist()
                await self.broker.replica_manager.delete_partitions(info)
        finally:
            self._deleting.pop(name, None)
            done.set()
        log.info("deleted topic %s (id %s)", name, topic_id_str(info.topic_id))
        # Committed offsets of the deleted partitions go too (Kafka's onPartitionsDeleted).
        hook = getattr(getattr(self.broker, "group_coordinator", None), "on_topic_deleted", None)
        if hook is not None:
            try:
                hook(name)
            except Exception:
                log.exception("removing the committed offsets of deleted topic %s failed", name)
        return info

    async def create_partitions(self, name: str, new_total: int, assignments=None,
                                validate_only: bool = False) -> TopicInfo:
        """Kafka's createPartitions rules; ``assignments`` is a list of broker-id lists for the
        new partitions, or None."""
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = info.num_partitions
        if new_total == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic already has %d partition(s)." % current)
        if new_total < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "The topic %s currently has %d partition(s); %d would not be an increase."
                             % (name, current, new_total))
        additional = new_total - current
        if assignments is not None:
            if len(assignments) != additional:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Attempted to add %d additional partition(s), but only %d assignment(s) "
                                 "were specified." % (additional, len(assignments)))
            rf = info.replication_factor
            placed = {}
            for i, brokers in enumerate(assignments):
                self._validate_manual_assignment(list(brokers), rf)
                placed[current + i] = list(brokers)
        else:
            placed = self._place(current, additional, info.replication_factor)
        if validate_only:
            return info
        if self.topics.get(name) is not info or info.num_partitions != current:
            # Another request changed the topic meanwhile (cannot happen without an await above,
            # kept as a guard should validation ever become asynchronous).
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic %s changed concurrently." % name)
        new_ids = list(range(current, new_total))
        info.replica_assignment.update(placed)
        info.num_partitions = new_total
        try:
            await self._persist()
            await self.broker.replica_manager.make_partitions(info, new_ids)
        except BaseException:
            for p in new_ids:
                info.replica_assignment.pop(p, None)
            info.num_partitions = current
            with trio.CancelScope(shield=True):
                await self._persist()
            log.exception("adding partitions to %s failed", name)
            raise
        log.info("topic %s now has %d partition(s)", name, new_total)
        return info

    async def auto_create(self, name: str) -> TopicInfo | None:
        """Auto-creation on Metadata/Produce: returns the topic, or None when disabled or the
        name is invalid.  Uses num.partitions and default.replication.factor, as Kafka does."""
        if not self.broker.config["auto.create.topics.enable"] or not is_valid_topic_name(name):
            return None
        if name in self.topics:
            return self.topics[name]
        if name in self._pending:
            return None  # in flight (Kafka answers UNKNOWN_TOPIC_OR_PARTITION meanwhile)
        try:
            return await self.create_topic(name, -1, -1, {})
        except KafkaError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return self.topics.get(name)
            log.warning("auto-creation of topic %s failed: %s", name, e)
            return None

    async def alter_topic_configs(self, name: str, new_overrides: dict[str, Any]) -> TopicInfo:
        """Replace the topic's overrides (parsed values) with ``new_overrides``."""
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        old = info.configs
        info.configs = dict(new_overrides)
        try:
            await self._persist()
        except BaseException:
            info.configs = old
            raise
        hook = getattr(self.broker.replica_manager, "on_config_change", None)
        if hook is not None:
            res = hook(info)
            if hasattr(res, "__await__"):
                await res
        log.info("topic %s config overrides now %s", name,
                 {k: TOPIC_CONFIGS[k].render(v) for k, v in info.configs.items()})
        return info
