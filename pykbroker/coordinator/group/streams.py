"""KIP-1071 streams groups: StreamsGroupHeartbeat with server-side task assignment.

Model (Apache Kafka 4.4's, simplified where noted):
- The first member's heartbeat (epoch 0) initialises the group's **topology** (subtopologies with
  source topics (regexes are refused: "not supported yet" in Kafka 4.4), repartition source/sink topics, changelog topics, copartition
  groups).  A later join with another topology epoch is INVALID_REQUEST ("Topology updates are
  not supported yet."), as in Kafka 4.4.
- The topology is **configured** against the metadata: missing source topics (or a regex that
  matches nothing) give the status MISSING_SOURCE_TOPICS and the group stays NotReady;
  repartition topics without a fixed partition count take the largest partition count of the
  source topics of the subtopologies writing to them, copartitioned repartition topics the
  count of their group, changelog topics the task count of their subtopology.  Missing internal
  topics are **created by the coordinator** (as Kafka 4.4 does from the heartbeat: the topology's
  replication factor or the broker default, the topology's topic configs), and are reported as
  MISSING_INTERNAL_TOPICS until they exist.  Copartitioned source topics with different counts,
  or an existing internal topic with the wrong count: INCORRECTLY_PARTITIONED_TOPICS.
- A **task** is (subtopology id, partition); a subtopology has as many tasks as its largest
  source topic.  The **group epoch** bumps when membership, the topology or the metadata of its
  topics change; the **target assignment** (assignment epoch) is computed on the next heartbeat
  by a sticky assignor (tasks stay with their owner while it is under the fair share
  ceil(tasks / members); the rest go to the least loaded member).  Besides membership and
  metadata changes, the topology becoming valid (all topics there) bumps the epoch once.  Standby and warm-up tasks are
  not built (``group.streams.num.standby.replicas`` other than 0 is ignored; SKIPPED.md).
- The first assignment of a new group waits ``group.streams.initial.rebalance.delay.ms``
  (default 3 s; status ASSIGNMENT_DELAYED: meanwhile the target is empty at the first join's
  epoch), and later ones come at most once per
  ``group.streams.assignment.interval.ms`` (default 1 s, KIP-1263; the same status), as Kafka 4.4.
- Reconciliation as for KIP-848 consumer groups: a member first revokes the active tasks it owns
  that are not in its target (it keeps its epoch until its heartbeat no longer lists them), then
  moves to the assignment epoch and receives the target tasks no other member still owns.
- Errors (Kafka's texts): unknown group at epoch != 0: GROUP_ID_NOT_FOUND; unknown member:
  UNKNOWN_MEMBER_ID; an epoch above the member's: FENCED_MEMBER_EPOCH, below its previous one too;
  bad requests: INVALID_REQUEST.  Error answers carry member id "" and epoch 0 as Kafka's.
- member_epoch -1 leaves; -2 (static member rejoining later; needs an instance id) is treated as
  a leave.  ShutdownApplication: every member's answers carry SHUTDOWN_APPLICATION from then on.
- Sessions expire after ``group.streams.session.timeout.ms``; members are told
  ``group.streams.heartbeat.interval.ms``, a task offset interval of 60 s and an acceptable
  recovery lag of 10000 (Kafka's defaults).
- States: Empty, NotReady (topology not configured), Assigning, Reconciling, Stable, Dead.

Persistence: Kafka's streams group records (:mod:`.streams_records`) on ``__consumer_offsets``;
each heartbeat appends the records whose value changed (diff against what was last written) and
is answered once they are in the log; a restart replays them (members keep ids, epochs and
tasks; their session timers restart from the load).
"""
from __future__ import annotations

import hashlib
import logging
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from ...protocol.errors import DEFAULT_MESSAGES, ErrorCode as E
from . import offsets as O
from . import streams_records as R
from .modern import ModernGroup, ModernGroupManager, ModernGroupMember, reconciliation_state

if TYPE_CHECKING:
    from .classic import Future
    from .coordinator import GroupCoordinator

log = logging.getLogger("pykbroker.group.streams")

# StreamsGroupHeartbeatResponse status codes (the response schema's comment).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

# Kafka 4.4's defaults of group.streams.task.offset.interval.ms and acceptable.recovery.lag.
TASK_OFFSET_INTERVAL_MS = 60000
ACCEPTABLE_RECOVERY_LAG = 10000


class SMember(ModernGroupMember):
    __slots__ = ("instance_id", "rebalance_timeout_ms", "topology_epoch", "process_id", "user_endpoint",
                 "client_tags", "task_offsets", "task_end_offsets", "revoking")

    def __init__(self, member_id: str) -> None:
        super().__init__(member_id)
        self.instance_id = None
        self.rebalance_timeout_ms = 300000
        self.topology_epoch = 0
        self.process_id = ""
        self.user_endpoint = None
        self.client_tags: list = []
        self.task_offsets: list = []
        self.task_end_offsets: list = []
        self.revoking: set = set()   # like ``assigned``: active tasks (subtopology id, partition)


def _by_sub(tasks: Iterable[tuple[str, int]]) -> dict:
    out: dict = {}
    for sid, p in tasks:
        out.setdefault(sid, set()).add(p)
    return out


def _flat(d: dict) -> set:
    return {(sid, p) for sid, ps in d.items() for p in ps}


class StreamsGroup(ModernGroup[SMember]):
    kind = "streams"
    timer_kind = "sg-hb"

    def __init__(self, group_id: str, now_ms: int) -> None:
        super().__init__(group_id, now_ms)
        self.topology: dict | None = None
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.configured: dict | None = None     # result of configure() for the current metadata
        self.delay_until_ms = 0
        # bumped when a computed assignment moves tasks of members with a user endpoint
        # (Interactive Queries); not persisted (a reload starts again at 0, as a member's does)
        self.endpoint_epoch = 0
        self.shutdown_requested_by = None
        self.replaces_classic = False

    def subscribed_topics(self) -> set:
        """The topics the topology reads (OffsetDelete refuses to delete their offsets)."""
        return set((self.configured or {}).get("topics", ()))

    def summary_state(self) -> str:
        if not self.members:
            return "Empty"
        if self.configured is None or not self.configured["ready"]:
            return "NotReady"
        return self._reconciliation_state()


def java_hash_order(names: Iterable[str]) -> list:
    """``names`` (distinct) in the iteration order of a java.util.HashMap their String keys were
    put into in that order: by bucket (String.hashCode spread, modulo the table's size, which
    doubles from 16 whenever the map passes three quarters full), then in insertion order.
    Kafka 4.4 names the internal topics of a streams topology in this order (InternalTopicManager
    collects them in a HashMap), in the MISSING_INTERNAL_TOPICS status and its CREATE refusal."""
    names = list(names)
    cap = 16
    while len(names) > cap * 3 // 4:
        cap *= 2

    def bucket(name: str) -> int:
        units = name.encode("utf-16-be")   # String.hashCode runs over UTF-16 code units
        h = 0
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)
    return [n for _, _, n in sorted((bucket(n), i, n) for i, n in enumerate(names))]


def summarize_topics(names: list) -> str:
    """Kafka 4.4's InternalTopicManager.summarizeTopics: at most three names, then how many more."""
    if not names:
        return "<none>"
    more = " and %d additional topics" % (len(names) - 3) if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def configure(topology: dict, md: Any) -> dict:   # md: the coordinator's topic metadata
    """The topology against the metadata: partition counts of every subtopology and internal topic,
    the internal topics to create, and the statuses a heartbeat reports (Kafka's InternalTopicManager
    rules, see the module docstring)."""
    out: dict[str, Any] = {"ready": False, "statuses": [], "tasks": {}, "create": {}, "subtopologies": None,
                           "topics": set()}
    subs = topology["subtopologies"]
    counts: dict[str, int] = {}
    missing = []
    sources: dict[str, list] = {}
    for st in subs:
        names = list(st["source_topics"])
        for rx in st["source_topic_regex"]:
            pattern: re.Pattern | None
            try:
                pattern = re.compile(rx)
            except re.error:
                pattern = None
            hits = sorted(t for t in (md.topics if md is not None else ())
                          if pattern is not None and pattern.fullmatch(t))
            if not hits:
                missing.append(rx)
            names += hits
        sources[st["subtopology_id"]] = names
        for t in names:
            info = md.get(t) if md is not None else None
            if info is None:
                if t not in missing:
                    missing.append(t)
            else:
                counts[t] = info.num_partitions
                out["topics"].add(t)
    if missing:
        # Kafka 4.4 collects them in a TreeSet (sorted) and names at most three
        out["statuses"].append((MISSING_SOURCE_TOPICS, "Source topics %s are missing."
                                % summarize_topics(sorted(missing))))
        return out
    # repartition topics: fixed counts, else derived from the writers' source topics (fixpoint)
    rep = {}
    for st in subs:
        for ti in st["repartition_source_topics"]:
            rep[ti["name"]] = ti
            if ti["partitions"] > 0:
                counts[ti["name"]] = ti["partitions"]
    for _ in range(len(rep) + 1):
        changed = False
        for st in subs:
            known = [counts[t] for t in sources[st["subtopology_id"]] if t in counts]
            known += [counts[ti["name"]] for ti in st["repartition_source_topics"] if ti["name"] in counts]
            if not known:
                continue
            for sink in st["repartition_sink_topics"]:
                if sink in rep and rep[sink]["partitions"] <= 0 and counts.get(sink, 0) < max(known):
                    counts[sink] = max(known)
                    changed = True
        if not changed:
            break
    # copartition groups: repartition topics follow the group's source topics
    for st in subs:
        srcs = st["source_topics"]
        reps = st["repartition_source_topics"]
        for cg in st["copartition_groups"]:
            ext = [srcs[i] for i in cg["source_topics"] if i < len(srcs)]
            ext_counts = {counts[t] for t in ext if t in counts}
            if len(ext_counts) > 1:
                out["statuses"].append((INCORRECTLY_PARTITIONED_TOPICS,
                                        "Following topics do not have the same number of partitions: [%s]"
                                        % ", ".join(sorted(ext))))
                return out
            members = [reps[i]["name"] for i in cg["repartition_source_topics"] if i < len(reps)]
            n = max(ext_counts or {counts.get(t, 0) for t in members} or {0})
            for t in members:
                if rep[t]["partitions"] <= 0 and n:
                    counts[t] = n
    unresolved = [t for t in rep if t not in counts]
    if unresolved:
        out["statuses"].append((MISSING_INTERNAL_TOPICS,
                                "Unable to determine the number of partitions of %s." % ", ".join(unresolved)))
        return out
    wanted: dict[str, tuple] = {}
    described = []
    for st in subs:
        sid = st["subtopology_id"]
        n = max([counts[t] for t in sources[sid]] + [counts[ti["name"]] for ti in st["repartition_source_topics"]]
                or [0])
        out["tasks"][sid] = n
        changelogs = []
        for ti in st["state_changelog_topics"]:
            c = ti["partitions"] if ti["partitions"] > 0 else n
            wanted[ti["name"]] = (c, ti["replication_factor"], ti["topic_configs"])
            changelogs.append(dict(ti, partitions=c))
        reps_out = []
        for ti in st["repartition_source_topics"]:
            wanted.setdefault(ti["name"], (counts[ti["name"]], ti["replication_factor"], ti["topic_configs"]))
            reps_out.append(dict(ti, partitions=counts[ti["name"]]))
        described.append({"subtopology_id": sid, "source_topics": sources[sid],
                          "repartition_sink_topics": list(st["repartition_sink_topics"]),
                          "state_changelog_topics": changelogs, "repartition_source_topics": reps_out})
    missing_internal = []
    wrong = []
    # Kafka 4.4 puts the internal topics in a HashMap, subtopology by subtopology in id order,
    # repartition source topics before changelogs, and names them in its iteration order
    by_id = {st["subtopology_id"]: st for st in subs}
    put = [ti["name"] for sid in sorted(by_id) for key in ("repartition_source_topics", "state_changelog_topics")
           for ti in by_id[sid][key]]
    wanted = {name: wanted[name] for name in java_hash_order(dict.fromkeys(put)) if name in wanted}
    for name, (c, rf, cfgs) in wanted.items():
        info = md.get(name) if md is not None else None
        out["topics"].add(name)
        if info is None:
            missing_internal.append(name)
            out["create"][name] = (c, rf, cfgs)
        elif info.num_partitions != c:
            wrong.append(name)
    if wrong:
        # Kafka 4.4 (InternalTopicManager.missingInternalTopics) stops at the first one in its
        # HashSet of the topology's topics (sources, repartition sources, changelogs), and then
        # creates nothing
        required = [t for st in subs for t in st["source_topics"]] + \
            [ti["name"] for st in subs for key in ("repartition_source_topics", "state_changelog_topics")
             for ti in st[key]]
        first = next(t for t in java_hash_order(dict.fromkeys(required)) if t in wrong)
        out["create"] = {}
        out["statuses"].append((INCORRECTLY_PARTITIONED_TOPICS, "Existing topic %s has different number of "
                                "partitions: expected %d, found %d" % (first, wanted[first][0],
                                                                       md.get(first).num_partitions)))
        return out
    if missing_internal:
        out["statuses"].append((MISSING_INTERNAL_TOPICS, "Internal topics are missing: %s"
                                % summarize_topics(missing_internal)))
        return out
    out["ready"] = True
    out["subtopologies"] = described
    return out


def sticky_assign(members: dict, tasks: dict, current: dict) -> dict:
    """Active tasks only: each task stays with its current owner while that member is below the
    fair share; the rest go to the least loaded member (then the smallest member id)."""
    # partition-major order (0-0, 1-0, 0-1, ...): a member keeping a share keeps some tasks of
    # every subtopology, as Kafka's sticky assignor does
    all_tasks = sorted(((sid, p) for sid, n in tasks.items() for p in range(n)), key=lambda t: (t[1], t[0]))
    out: dict[str, set] = {mid: set() for mid in members}
    if not out:
        return out
    cap = -(-len(all_tasks) // len(out))
    free = []
    for t in all_tasks:
        owner = next((mid for mid in sorted(current) if t in current[mid] and mid in out), None)
        if owner is not None and len(out[owner]) < cap:
            out[owner].add(t)
        else:
            free.append(t)
    for t in free:
        mid = min(out, key=lambda m: (len(out[m]), m))
        out[mid].add(t)
    return out


def _hash_topics(md: Any, names: Iterable[str]) -> int:
    h = hashlib.blake2b(digest_size=8)
    for n in sorted(names):
        info = md.get(n) if md is not None else None
        h.update(("%s:%s:%d;" % (n, info.topic_id.hex() if info else "-", info.num_partitions if info else -1)).encode())
    return int.from_bytes(h.digest(), "big", signed=True)


class StreamsGroupManager(ModernGroupManager):
    GROUP_CLASS = StreamsGroup
    CONFIGS = ("group.streams.session.timeout.ms", "group.streams.heartbeat.interval.ms", "group.streams.max.size")
    log = log

    def __init__(self, coordinator: GroupCoordinator) -> None:
        super().__init__(coordinator)
        cfg = coordinator.config
        self.initial_delay_ms = cfg["group.streams.initial.rebalance.delay.ms"]
        self.config = cfg   # group.streams.assignment.interval.ms is dynamic (read at each use)
        self.creating: set = set()
        # internal topic -> (why its creation failed, until when to say so): Kafka 4.4's
        # AutoTopicCreationManager keeps each error for two heartbeat intervals
        self.creation_errors: dict[str, tuple[str, int]] = {}

    # -- helpers -----------------------------------------------------------------------------
    def _session_timeout_ms(self, gid: str) -> int:
        return self.session_timeout_ms   # the broker's: no GROUP config override read here

    def _member_left(self, g: StreamsGroup, mid: str) -> None:
        if not g.members:
            g.shutdown_requested_by = None   # an application started again is not shut down
        super()._member_left(g, mid)

    def _err(self, code: int, message: Optional[str] = None) -> dict:
        return {"error_code": int(code), "error_message": message, "member_id": "", "member_epoch": 0,
                "heartbeat_interval_ms": 0, "acceptable_recovery_lag_legacy": 0, "task_offset_interval_ms": 0,
                "acceptable_recovery_lag": -1, "status": [], "active_tasks": None, "standby_tasks": None,
                "warmup_tasks": None, "topology_description_required": False, "endpoint_information_epoch": 0,
                "partitions_by_user_endpoint": None}

    # -- persistence ---------------------------------------------------------------------------
    def _desired(self, g: StreamsGroup) -> dict:
        gid = g.group_id
        out = {}
        out[R.key(R.SG_METADATA, gid)] = R.value(R.SG_METADATA, {
            "epoch": g.group_epoch, "metadata_hash": g.metadata_hash,
            "validated_topology_epoch": g.validated_topology_epoch})
        if g.topology is not None:
            out[R.key(R.SG_TOPOLOGY, gid)] = R.value(R.SG_TOPOLOGY, g.topology)
        out[R.key(R.SG_TARGET_METADATA, gid)] = R.value(R.SG_TARGET_METADATA, {
            "assignment_epoch": g.assignment_epoch, "assignment_timestamp": g.assignment_ts})
        for mid, m in g.members.items():
            out[R.key(R.SG_MEMBER_METADATA, gid, mid)] = R.value(R.SG_MEMBER_METADATA, {
                "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "topology_epoch": m.topology_epoch, "process_id": m.process_id or "",
                "user_endpoint": m.user_endpoint, "client_tags": m.client_tags})
            out[R.key(R.SG_TARGET_MEMBER, gid, mid)] = R.value(R.SG_TARGET_MEMBER, {
                "active_tasks": R.task_ids(_by_sub(g.target.get(mid, set()))), "standby_tasks": [],
                "warmup_tasks": []})
            epochs = {t: m.epoch for t in m.assigned | m.revoking}
            out[R.key(R.SG_CURRENT_ASSIGNMENT, gid, mid)] = R.value(R.SG_CURRENT_ASSIGNMENT, {
                "member_epoch": m.epoch, "previous_member_epoch": m.prev_epoch, "state": reconciliation_state(g, m),
                "active_tasks": R.task_ids(_by_sub(m.assigned), epochs), "standby_tasks": [], "warmup_tasks": [],
                "active_tasks_pending_revocation": R.task_ids(_by_sub(m.revoking), epochs),
                "standby_tasks_pending_revocation": [], "warmup_tasks_pending_revocation": []})
        return out

    def _records(self, g: StreamsGroup) -> list:
        """Member tombstones first, then the group's changed records (Kafka writes the group
        metadata before the assignments that depend on it)."""
        want = self._desired(g)
        out = []
        if g.replaces_classic:
            out.append((O.group_key(g.group_id), None))
            g.replaces_classic = False
        for k in [k for k in g.written if k not in want]:
            del g.written[k]
            out.append((k, None))
        order = {R.SG_METADATA: 0, R.SG_TOPOLOGY: 1, R.SG_MEMBER_METADATA: 2, R.SG_TARGET_MEMBER: 3,
                 R.SG_TARGET_METADATA: 4, R.SG_CURRENT_ASSIGNMENT: 5}
        for k in sorted(want, key=lambda k: order[int.from_bytes(k[:2], "big")]):
            if g.written.get(k) != want[k]:
                g.written[k] = want[k]
                out.append((k, want[k]))
        return out

    def _rewrite_all(self, g: StreamsGroup) -> None:
        g.written.clear()

    def tombstones(self, g: StreamsGroup) -> list:
        # member records before the group's (Kafka deletes a group's records in that order)
        keys = sorted(g.written, key=lambda k: int.from_bytes(k[:2], "big") not in R.MEMBER_KEYS)
        g.written.clear()
        return [(k, None) for k in keys]

    # -- load ----------------------------------------------------------------------------------
    def replay(self, loading: dict, kind: int, gid: str, mid: Optional[str], key: bytes,
               value: Optional[bytes]) -> None:
        st = loading.setdefault(gid, {"keys": {}, "vals": {}})
        if value is None:
            st["keys"].pop(key, None)
            st["vals"].pop((kind, mid), None)
        elif kind != R.SG_PARTITION_METADATA:
            st["keys"][key] = bytes(value)
            st["vals"][(kind, mid)] = R.parse_value(kind, value)

    def finish_load(self, gid: str, st: dict) -> StreamsGroup | None:
        vals = st["vals"]
        meta = vals.get((R.SG_METADATA, None))
        if meta is None:
            return None
        g = StreamsGroup(gid, self.gc.now_ms())
        g.group_epoch, g.metadata_hash = meta["epoch"], meta["metadata_hash"]
        g.validated_topology_epoch = meta["validated_topology_epoch"]
        topo = vals.get((R.SG_TOPOLOGY, None))
        if topo is not None:
            g.topology = topo
        tm = vals.get((R.SG_TARGET_METADATA, None))
        if tm is not None:
            g.assignment_epoch, g.assignment_ts = tm["assignment_epoch"], tm["assignment_timestamp"]
        for (kind, mid), v in vals.items():
            if kind != R.SG_MEMBER_METADATA:
                continue
            m = SMember(mid)
            m.instance_id, m.rack_id = v["instance_id"], v["rack_id"]
            m.client_id, m.client_host = v["client_id"], v["client_host"]
            m.rebalance_timeout_ms, m.topology_epoch = v["rebalance_timeout_ms"], v["topology_epoch"]
            m.process_id, m.user_endpoint, m.client_tags = v["process_id"], v["user_endpoint"], v["client_tags"]
            cur = vals.get((R.SG_CURRENT_ASSIGNMENT, mid))
            if cur is not None:
                m.epoch, m.prev_epoch = cur["member_epoch"], cur["previous_member_epoch"]
                m.assigned = _flat(R.from_task_ids(cur["active_tasks"]))
                m.revoking = _flat(R.from_task_ids(cur["active_tasks_pending_revocation"]))
            tgt = vals.get((R.SG_TARGET_MEMBER, mid))
            if tgt is not None:
                g.target[mid] = _flat(R.from_task_ids(tgt["active_tasks"]))
            g.members[mid] = m
        g.written = dict(st["keys"])
        if g.topology is not None:
            g.configured = configure(g.topology, self.gc.metadata)
        for m in g.members.values():
            self._schedule(g, m)
        return g

    # -- internal topics -----------------------------------------------------------------------
    def _create_internal_topics(self, g: StreamsGroup) -> None:
        """Kafka 4.4's coordinator creates the missing internal topics itself (asynchronously:
        the heartbeat that finds them missing already answers MISSING_INTERNAL_TOPICS)."""
        creator, spawn = self.gc.topic_creator, self.gc.spawn
        if creator is None or spawn is None:
            return
        assert g.configured is not None     # called right after configure()
        for name, (n, rf, cfgs) in g.configured["create"].items():
            if name in self.creating:
                continue
            self.creating.add(name)

            async def create(name: str = name, n: int = n, rf: int = rf, cfgs: list = cfgs) -> None:
                try:
                    await creator(name, n, rf if rf > 0 else -1, {kv["key"]: kv["value"] for kv in cfgs})
                    log.info("streams group %s: created internal topic %s (%d partitions)", g.group_id, name, n)
                except Exception as e:
                    code = getattr(e, "code", None)
                    if code != E.TOPIC_ALREADY_EXISTS:
                        log.warning("streams group %s: creating internal topic %s failed: %s", g.group_id, name, e)
                        # the CreateTopics answer's message, else the error's default text (Kafka)
                        why = (getattr(e, "message", None) or (DEFAULT_MESSAGES.get(code) if code is not None else None)
                               or str(e))
                        self.creation_errors[name] = (why, self.gc.now_ms() + 2 * self.heartbeat_interval_ms)
                finally:
                    self.creating.discard(name)
            spawn(create)

    # -- StreamsGroupHeartbeat -----------------------------------------------------------------
    def heartbeat(self, req: dict, version: int, client_id: str, client_host: str,
                  refused_creates: Callable[[list], list] | None = None) -> tuple[dict, Future]:
        """``refused_creates(names)``: the internal topics of ``names`` the member's principal may
        not create (the handler's authorization, None: every one may be).  As Kafka 4.4's
        KafkaApis: when any is refused none is created and the MISSING_INTERNAL_TOPICS status says
        "Unauthorized to CREATE on topics a, b."."""
        return self._once_written(req["group_id"], self._heartbeat(req, version, client_id, client_host,
                                                                    refused_creates))

    def _validate(self, req: dict) -> dict | None:
        epoch = req["member_epoch"]
        if not req["member_id"]:
            return self._err(E.INVALID_REQUEST, "MemberId can't be empty.")
        if req["instance_id"] is not None and not req["instance_id"]:
            return self._err(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if req["rack_id"] is not None and not req["rack_id"]:
            return self._err(E.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if req["rebalance_timeout_ms"] == -1:
                return self._err(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req["topology"] is None:
                return self._err(E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
            for f, name in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"),
                            ("warmup_tasks", "WarmupTasks")):
                if req[f] is None or req[f]:
                    return self._err(E.INVALID_REQUEST, "%s must be empty when (re-)joining." % name)
            if any(st["source_topic_regex"] for st in req["topology"]["subtopologies"]):
                return self._err(E.INVALID_REQUEST, "Regular expressions for source topics are not supported yet.")
        elif epoch < -2:
            return self._err(E.INVALID_REQUEST, "MemberEpoch is %d, but must be greater than or equal to -2." % epoch)
        elif epoch == -2 and req["instance_id"] is None:
            return self._err(E.INVALID_REQUEST, "InstanceId can't be null.")
        return None

    def _heartbeat(self, req: dict, version: int, client_id: str, client_host: str,
                   refused_creates: Callable[[list], list] | None = None) -> dict:
        bad = self._validate(req)
        if bad is not None:
            return bad
        gid, mid, epoch = req["group_id"], req["member_id"], req["member_epoch"]
        now = self.gc.now_ms()
        g = self.gc.get_group(gid)
        if g is not None and not isinstance(g, StreamsGroup):
            if g.kind == "classic" and not g.members and epoch == 0:
                g.cancel_timers()
                self.gc.groups.pop(gid, None)
                g = StreamsGroup(gid, now)
                g.replaces_classic = True
                self.gc.groups[gid] = g
            else:
                return self._err(E.GROUP_ID_NOT_FOUND, "Group %s is not a streams group." % gid)
        if g is None:
            if epoch in (-1, -2):
                return self._err(E.GROUP_ID_NOT_FOUND, "Group %s not found." % gid)
            if epoch != 0:
                return self._err(E.GROUP_ID_NOT_FOUND, "Streams group %s not found." % gid)
            g = StreamsGroup(gid, now)
            self.gc.groups[gid] = g
        if epoch in (-1, -2):
            if mid not in g.members:
                return self._err(E.UNKNOWN_MEMBER_ID, "Member %s is not a member of group %s." % (mid, gid))
            self._remove(g, mid)
            r = self._err(0)
            r.update(member_id=mid, member_epoch=epoch, error_message=None)
            return r
        joined = False
        if epoch == 0:
            topo = req["topology"]
            if g.topology is not None and topo["epoch"] != g.topology["epoch"] and g.members:
                return self._err(E.INVALID_REQUEST, "Topology updates are not supported yet.")
            m = g.members.get(mid)
            if m is None:
                if len(g.members) >= self.max_size:
                    return self._err(E.GROUP_MAX_SIZE_REACHED,
                                     "The streams group has reached its maximum capacity of %d members." % self.max_size)
                m = SMember(mid)
                joined = True
            else:
                m.assigned.clear()
                m.revoking.clear()
            if g.topology is None or topo["epoch"] != g.topology["epoch"]:
                g.topology = topo
                g.configured = None
                g.validated_topology_epoch = -1
                if not joined:
                    self._bump(g, "topology initialised")
            first = not g.members and joined
            g.members[mid] = m
            m.epoch = 0
            m.last_sent = None
            m.topology_epoch = topo["epoch"]
        else:
            m = g.members.get(mid)
            if m is None:
                return self._err(E.UNKNOWN_MEMBER_ID, "Member %s is not a member of group %s." % (mid, gid))
            if epoch > m.epoch:
                return self._err(E.FENCED_MEMBER_EPOCH, "The streams group member has a greater member epoch (%d) "
                                 "than the one known by the group coordinator (%d). The member must abandon all its "
                                 "partitions and rejoin." % (epoch, m.epoch))
            if epoch < m.epoch and epoch != m.prev_epoch:
                return self._err(E.FENCED_MEMBER_EPOCH, "The streams group member has a smaller member epoch (%d) "
                                 "than the one known by the group coordinator (%d). The member must abandon all its "
                                 "partitions and rejoin." % (epoch, m.epoch))
        m.client_id, m.client_host = client_id, client_host
        for f in ("instance_id", "rack_id", "process_id", "user_endpoint"):
            if req[f] is not None:
                setattr(m, f, req[f])
        if req["rebalance_timeout_ms"] >= 0:
            m.rebalance_timeout_ms = req["rebalance_timeout_ms"]
        if req["client_tags"] is not None:
            m.client_tags = req["client_tags"]
        if req["task_offsets"] is not None:
            m.task_offsets = req["task_offsets"]
        if req["task_end_offsets"] is not None:
            m.task_end_offsets = req["task_end_offsets"]
        if req["shutdown_application"]:
            g.shutdown_requested_by = mid
        if joined:
            self._bump(g, "member %s joined" % mid)
            if first and self.initial_delay_ms > 0:
                # A new (or emptied) group delays its first assignment (Kafka 4.4): the target is
                # empty at the join's epoch (members reconcile to it: that epoch, no tasks) until
                # group.streams.initial.rebalance.delay.ms has passed.
                g.target = {}
                g.assignment_epoch = g.group_epoch
                g.assignment_ts = now
                g.delay_until_ms = now + self.initial_delay_ms
        if req["active_tasks"] is not None:
            owned = {(t["subtopology_id"], p) for t in req["active_tasks"] for p in t["partitions"]}
            m.revoking &= owned
        self._schedule(g, m)
        refused = self._maybe_configure(g, bumped=joined, refused_creates=refused_creates)
        delayed = None
        if g.delay_until_ms > now:
            delayed = "Assignment delayed due to the configured initial rebalance delay."
        elif g.assignment_epoch < g.group_epoch and g.assignment_ts and \
                now < g.assignment_ts + self.config["group.streams.assignment.interval.ms"]:
            # KIP-1263: at most one assignment per interval; members reconcile towards the
            # current target meanwhile (a joining member gets its epoch and no tasks)
            delayed = "Assignment delayed due to the configured assignment interval."
        else:
            self._maybe_compute_target(g, now)
        self._reconcile(g, m)
        resp = self._err(0)
        resp.update(error_message=None, member_id=mid, member_epoch=m.epoch,
                    heartbeat_interval_ms=self.heartbeat_interval_ms,
                    acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG,
                    task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS, acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG)
        status = []
        if delayed:
            status.append({"status_code": ASSIGNMENT_DELAYED, "status_detail": delayed})
        for code, detail in (g.configured or {}).get("statuses", []):
            status.append({"status_code": code, "status_detail": detail})
        if refused:
            # Kafka 4.4 (KafkaApis) adds the refusal to the first MISSING_INTERNAL_TOPICS status,
            # or adds one; every name, in the status's order (java_hash_order)
            why = "Unauthorized to CREATE on topics %s." % ", ".join(refused)
            shown = next((x for x in status if x["status_code"] == MISSING_INTERNAL_TOPICS), None)
            if shown is not None:
                shown["status_detail"] = "%s; %s" % (shown["status_detail"], why)
            else:
                status.append({"status_code": MISSING_INTERNAL_TOPICS, "status_detail": why})
        else:
            failed = self._creation_failures(g)
            shown = next((x for x in status if x["status_code"] == MISSING_INTERNAL_TOPICS), None)
            if failed and shown is not None:
                # Kafka 4.4 (KafkaApis): at most three, "and N more"
                text = ", ".join("%s (%s)" % kv for kv in failed[:3])
                if len(failed) > 3:
                    text = "%s and %d more" % (text, len(failed) - 3)
                shown["status_detail"] = "%s; Creation failed: %s." % (shown["status_detail"], text)
        if g.shutdown_requested_by is not None:
            status.append({"status_code": SHUTDOWN_APPLICATION,
                           "status_detail": "Streams group member %s encountered a fatal error and requested a "
                                            "shutdown for the entire application." % g.shutdown_requested_by})
        resp["status"] = status
        # tasks are sent when they changed (not for a new epoch alone), and always on a join
        current = frozenset(m.assigned)
        if m.last_sent != current or epoch == 0:
            resp["active_tasks"] = R.task_ids(_by_sub(m.assigned))
            resp["standby_tasks"] = []
            resp["warmup_tasks"] = []
            m.last_sent = current
        resp["endpoint_information_epoch"] = g.endpoint_epoch
        if req["endpoint_information_epoch"] != g.endpoint_epoch or (
                joined and any(x.user_endpoint is not None for x in g.members.values())):
            # a new member gets the map too (Kafka 4.4), even at the same endpoint epoch
            resp["partitions_by_user_endpoint"] = self._endpoints(g)
        return resp

    def _endpoints(self, g: StreamsGroup) -> list:
        topo = {st["subtopology_id"]: st for st in (g.configured or {}).get("subtopologies") or []}
        out: list[dict] = []
        for m in g.members.values():
            if m.user_endpoint is None:
                continue
            by_topic: dict = {}
            for sid, p in m.assigned:
                st = topo.get(sid)
                if st is None:
                    continue
                for t in list(st["source_topics"]) + [ti["name"] for ti in st["repartition_source_topics"]]:
                    by_topic.setdefault(t, set()).add(p)
            out.append({"user_endpoint": m.user_endpoint,
                        "active_partitions": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())],
                        "standby_partitions": []})
        return out

    def _maybe_configure(self, g: StreamsGroup, bumped: bool = False,
                         refused_creates: Callable[[list], list] | None = None) -> list:
        """Configures the topology against the metadata; creates the missing internal topics
        unless the principal may not create one of them: then returns the refused names."""
        if g.topology is None:
            return []
        md = self.gc.metadata
        c = configure(g.topology, md)
        h = _hash_topics(md, c["topics"] | set(c["create"]))
        if h != g.metadata_hash:
            g.metadata_hash = h
            if g.members and not bumped:
                self._bump(g, "topic metadata changed")
        g.configured = c
        if c["ready"] and g.validated_topology_epoch != g.topology["epoch"]:
            # the topology's topics are now valid: a new epoch of its own (as Kafka 4.4)
            g.validated_topology_epoch = g.topology["epoch"]
            if g.members:
                self._bump(g, "topology validated")
        if c["create"]:
            refused = refused_creates(list(c["create"])) if refused_creates is not None else []
            if refused:
                return refused
            self._create_internal_topics(g)
        return []

    def _creation_failures(self, g: StreamsGroup) -> list:
        """``[(topic, why)]``: the group's missing internal topics whose last creation failed
        within the last two heartbeat intervals."""
        now = self.gc.now_ms()
        for name in [n for n, (_, until) in self.creation_errors.items() if until <= now]:
            del self.creation_errors[name]
        return [(n, self.creation_errors[n][0]) for n in (g.configured or {}).get("create", {})
                if n in self.creation_errors]

    def _maybe_compute_target(self, g: StreamsGroup, now: int) -> None:
        if g.assignment_epoch == g.group_epoch:
            return
        tasks: dict = g.configured["tasks"] if g.configured is not None and g.configured["ready"] else {}
        current = {mid: m.assigned | m.revoking for mid, m in g.members.items()}
        g.target = sticky_assign(g.members, tasks, current)
        if any(m.user_endpoint is not None for m in g.members.values()):
            g.endpoint_epoch += 1
        g.assignment_epoch = g.group_epoch
        g.assignment_ts = now

    def _reconcile(self, g: StreamsGroup, m: SMember) -> None:
        if m.epoch > g.assignment_epoch:
            return  # the target is not computed yet (delayed): keep what the member has
        super()._reconcile(g, m)

    # -- describe ------------------------------------------------------------------------------
    def describe(self, g: StreamsGroup, version: int, include_description: bool) -> dict:
        def asg(tasks: Iterable[tuple[str, int]]) -> dict:
            return {"active_tasks": R.task_ids(_by_sub(tasks)), "standby_tasks": [], "warmup_tasks": []}
        members = [{"member_id": m.member_id, "member_epoch": m.epoch, "instance_id": m.instance_id,
                    "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
                    "topology_epoch": m.topology_epoch, "process_id": m.process_id or "",
                    "user_endpoint": m.user_endpoint, "client_tags": m.client_tags, "task_offsets": m.task_offsets,
                    "task_end_offsets": m.task_end_offsets, "assignment": asg(m.assigned),
                    "target_assignment": asg(g.target.get(m.member_id, set())), "is_classic": False}
                   for m in g.members.values()]
        topology = None
        if g.topology is not None:
            c = g.configured
            topology = {"epoch": g.topology["epoch"],
                        "subtopologies": c["subtopologies"] if c is not None and c["ready"] else None}
        return {"error_code": 0, "error_message": None, "group_id": g.group_id, "group_state": g.summary_state(),
                "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "topology": topology,
                "members": members, "topology_description": None,
                # 1 = NOT_STORED: no topology description plugin (the default broker has none)
                "topology_description_status": 1 if include_description else 0, "assignor_name": "sticky"}
