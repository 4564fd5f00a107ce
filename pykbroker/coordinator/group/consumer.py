"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignment.

Model (Kafka's, simplified where noted):
- the **group epoch** bumps whenever membership, a subscription or the subscribed topics'
  metadata change; the **assignment epoch** is the group epoch the target assignment was
  computed for (computed lazily on the next heartbeat, with the group's server assignor:
  "uniform" by default, or "range").
- each member has a **member epoch**.  A member moves to the assignment epoch once it has
  revoked every partition it owns that is no longer in its target: until then it is told to
  keep only the partitions it may keep (and stays at its epoch); partitions still owned by
  another member are given only after that member revoked them (they are reported as released
  when the owner's heartbeat no longer lists them).
- errors: unknown member: UNKNOWN_MEMBER_ID; an epoch that is neither the member's current nor
  previous epoch: FENCED_MEMBER_EPOCH; unknown server assignor: UNSUPPORTED_ASSIGNOR; a bad
  regex: INVALID_REGULAR_EXPRESSION; joining without subscription: INVALID_REQUEST.
- member_epoch -1 leaves; -2 (static member leaving temporarily) is treated as a leave (the
  instance's partitions are not held for its return: simplification).
- sessions expire after group.consumer.session.timeout.ms (default 45 s) on trio's clock;
  members are told group.consumer.heartbeat.interval.ms (default 5 s).
- group state: Empty, Assigning (target not computed), Reconciling (members converging),
  Stable.

Persistence (as Kafka's coordinator does it): every change of group, member or assignment state
becomes records on ``__consumer_offsets`` (layout in :mod:`.consumer_records`).  The records a
heartbeat produces are computed as a diff against what was last written for the group (the
group epoch and metadata hash, the changed members' subscription and current assignment, every
member's target when the target was recomputed) and appended as one batch by the coordinator's
single writer; the heartbeat is answered only once that batch is in the log, so a member never
holds an epoch the log could lose.  A heartbeat that changed nothing still waits for the group's
last pending write.  Members that leave or expire get tombstones; a deleted group gets
tombstones for every key it has.  At start-up the records are replayed (``replay`` /
``finish_load``): members keep their ids, epochs and assignments across a clean restart or
``kill -9``, and their session timers start again from the load, so members that do not come
back expire as usual.  A failed append is answered with the mapped append error and the next
write rewrites the whole group (in-memory state is not rolled back: simplification).
"""
from __future__ import annotations

import logging
import re
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from ...protocol.errors import ErrorCode as E
from . import consumer_records as R
from . import offsets as O
from .assignors import ASSIGNORS, DEFAULT
from .modern import (ModernGroup, ModernGroupManager, ModernGroupMember, described_assignment, heartbeat_assignment,
                     reconciliation_state)

if TYPE_CHECKING:
    from .classic import Future

log = logging.getLogger("pykbroker.group.consumer")


class CMember(ModernGroupMember):
    __slots__ = ("instance_id", "rebalance_timeout_ms", "topics", "regex", "assignor", "revoking")

    def __init__(self, member_id: str) -> None:
        super().__init__(member_id)
        self.instance_id = None
        self.rebalance_timeout_ms = 300000
        self.topics: list[str] = []
        self.regex: str | None = None
        self.assignor: str | None = None
        self.revoking: set = set()


class ConsumerGroup(ModernGroup[CMember]):
    kind = "consumer"
    timer_kind = "cg-hb"   # its members' session timers (cancelled when the group is unloaded)

    def __init__(self, group_id: str, now_ms: int) -> None:
        super().__init__(group_id, now_ms)
        self.metadata_hash = 0  # of the subscribed topics the target was computed for
        # persistence: what changed since the last write
        self.dirty: set[str] = set()
        self.gone: set[str] = set()
        self.target_dirty = False
        self.resync = False
        self.replaces_classic = False
        # regex -> the DESCRIBE check its matches pass (None: no authorizer), as Kafka's
        # resolved regexes: the principal of the heartbeat that last subscribed to a regex new
        # to the group, which resolves all of the group's regexes (see _heartbeat)
        self.regex_filters: dict[str, Callable[[str], bool] | None] = {}

    def summary_state(self) -> str:
        return "Empty" if not self.members else self._reconciliation_state()

    def assignor_name(self) -> str:
        for m in self.members.values():
            if m.assignor:
                return m.assignor
        return DEFAULT

    def subscribed_topics(self) -> set:
        return self._subscribed_names(None)

    def _subscribed_names(self, md: Any) -> set:   # md: the coordinator's topic metadata, or None
        names = set()
        for m in self.members.values():
            names.update(m.topics)
            if m.regex and md is not None:
                rx = re.compile(m.regex)
                ok = self.regex_filters.get(m.regex)
                names.update(t for t in md.topics if rx.fullmatch(t) and (ok is None or ok(t)))
        return names


class ConsumerGroupManager(ModernGroupManager):
    GROUP_CLASS = ConsumerGroup
    CONFIGS = ("group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", "group.consumer.max.size")
    log = log

    # -- helpers -----------------------------------------------------------------------------
    def _md(self) -> Any:
        return self.gc.metadata

    def _member_topics(self, g: ConsumerGroup, m: CMember) -> set:
        names = set(m.topics)
        md = self._md()
        if m.regex and md is not None:
            rx = re.compile(m.regex)
            ok = g.regex_filters.get(m.regex)
            names.update(t for t in md.topics if rx.fullmatch(t) and not t.startswith("__") and (ok is None or ok(t)))
        return names

    def _member_left(self, g: ConsumerGroup, mid: str) -> None:
        g.dirty.discard(mid)
        g.gone.add(mid)   # its records get tombstones on the next write
        super()._member_left(g, mid)

    # -- persistence ---------------------------------------------------------------------------
    def _records(self, g: ConsumerGroup) -> list:
        """The records that bring the log to the group's in-memory state (in Kafka's order:
        departed members, subscriptions, group epoch, target assignment, current assignments)."""
        out: list = []
        w = g.written
        gid = g.group_id

        def put(k: bytes, v: Optional[bytes]) -> None:
            if v is None:
                if w.pop(k, None) is not None:
                    out.append((k, None))
            elif w.get(k) != v:
                w[k] = v
                out.append((k, v))
        if g.replaces_classic:
            out.append((O.group_key(gid), None))  # the empty classic group this one replaced
            g.replaces_classic = False
        for mid in sorted(g.gone):
            for kind in (R.CG_CURRENT_ASSIGNMENT, R.CG_TARGET_MEMBER, R.CG_MEMBER_METADATA):
                put(R.key(kind, gid, mid), None)
        g.gone.clear()
        if g.resync:
            touched = list(g.members.values())
        else:
            touched = [g.members[mid] for mid in sorted(g.dirty) if mid in g.members]
        for m in touched:
            put(R.key(R.CG_MEMBER_METADATA, gid, m.member_id), R.member_metadata_value(m))
        put(R.key(R.CG_METADATA, gid), R.group_metadata_value(g.group_epoch, g.metadata_hash))
        if g.target_dirty or g.resync:
            for mid in g.members:
                put(R.key(R.CG_TARGET_MEMBER, gid, mid), R.target_member_value(g.target.get(mid, set())))
            put(R.key(R.CG_TARGET_METADATA, gid), R.target_metadata_value(g.assignment_epoch, g.assignment_ts))
        for m in touched:
            put(R.key(R.CG_CURRENT_ASSIGNMENT, gid, m.member_id),
                R.current_assignment_value(m.epoch, m.prev_epoch, reconciliation_state(g, m), m.assigned, m.revoking))
        g.dirty.clear()
        g.target_dirty = g.resync = False
        return out

    def _rewrite_all(self, g: ConsumerGroup) -> None:
        g.resync = True

    def tombstones(self, g: ConsumerGroup) -> list:
        """Tombstones for every key the group has in the log (group deletion / conversion)."""
        gid = g.group_id
        # parse_key gives a member id (never None) for these member record kinds.
        mids: set[str] = set()
        for k in g.written:
            kind = int.from_bytes(k[:2], "big")
            if kind in (R.CG_CURRENT_ASSIGNMENT, R.CG_TARGET_MEMBER, R.CG_MEMBER_METADATA):
                mids.add(R.parse_key(kind, k)[2])  # type: ignore[arg-type]
        out = []
        for mid in sorted(mids):
            for kind in (R.CG_CURRENT_ASSIGNMENT, R.CG_TARGET_MEMBER, R.CG_MEMBER_METADATA):
                k = R.key(kind, gid, mid)
                if k in g.written:
                    out.append((k, None))
        for kind in (R.CG_TARGET_METADATA, R.CG_PARTITION_METADATA, R.CG_METADATA):
            k = R.key(kind, gid)
            if k in g.written:
                out.append((k, None))
        g.written.clear()
        return out

    def drop(self, g: ConsumerGroup) -> None:
        """An empty consumer group replaced by a classic one (JoinGroup): gone, with its records."""
        self.gc.groups.pop(g.group_id, None)
        g.dead = True
        recs = self.tombstones(g)
        if recs and self.gc._topic_ready:
            self.gc._enqueue(self.gc.partition_for(g.group_id), recs, None, None)

    # -- load ----------------------------------------------------------------------------------
    def replay(self, loading: dict, kind: int, gid: str, mid: Optional[str], key: bytes,
               value: Optional[bytes]) -> None:
        """One KIP-848 record read back from the log, into ``loading`` (group id -> raw state)."""
        st = loading.setdefault(gid, {"keys": {}, "epoch": None, "hash": 0, "topics": None, "members": {},
                                      "target_epoch": 0, "target_ts": 0, "target": {}, "current": {}})
        if value is None:
            st["keys"].pop(key, None)
        else:
            st["keys"][key] = bytes(value)
        if kind == R.CG_METADATA:
            st["epoch"], st["hash"] = (None, 0) if value is None else R.parse_group_metadata_value(value)
        elif kind == R.CG_PARTITION_METADATA:
            st["topics"] = None if value is None else R.parse_partition_metadata_value(value)
        elif kind == R.CG_TARGET_METADATA:
            st["target_epoch"], st["target_ts"] = (0, 0) if value is None else R.parse_target_metadata_value(value)
        elif kind == R.CG_MEMBER_METADATA:
            if value is None:
                st["members"].pop(mid, None)
            else:
                st["members"][mid] = R.parse_member_metadata_value(value)
        elif kind == R.CG_TARGET_MEMBER:
            if value is None:
                st["target"].pop(mid, None)
            else:
                st["target"][mid] = R.parse_target_member_value(value)
        elif kind == R.CG_CURRENT_ASSIGNMENT:
            if value is None:
                st["current"].pop(mid, None)
            else:
                st["current"][mid] = R.parse_current_assignment_value(value)

    def finish_load(self, gid: str, st: dict) -> ConsumerGroup | None:
        """Build a group from its replayed records (None if it was deleted) and start its
        members' session timers, as Kafka does when a coordinator loads a partition."""
        if st["epoch"] is None:
            return None
        g = ConsumerGroup(gid, self.gc.now_ms())
        g.group_epoch = st["epoch"]
        g.metadata_hash = st["hash"]
        if not g.metadata_hash and st["topics"]:
            g.metadata_hash = R.metadata_hash(st["topics"])  # written by Kafka < 4.1
        g.assignment_epoch = st["target_epoch"]
        g.assignment_ts = st["target_ts"]
        for mid, md in st["members"].items():
            m = CMember(mid)
            m.instance_id, m.rack_id = md["instance_id"], md["rack_id"]
            m.client_id, m.client_host = md["client_id"], md["client_host"]
            m.topics, m.regex = md["topics"], md["regex"]
            if md["rebalance_timeout_ms"] >= 0:
                m.rebalance_timeout_ms = md["rebalance_timeout_ms"]
            m.assignor = md["assignor"]
            cur = st["current"].get(mid)
            if cur is not None:
                m.epoch, m.prev_epoch = cur["epoch"], cur["prev_epoch"]
                m.assigned, m.revoking = set(cur["assigned"]), set(cur["revoking"])
            g.members[mid] = m
        g.target = {mid: set(tps) for mid, tps in st["target"].items() if mid in g.members}
        g.written = dict(st["keys"])
        for m in g.members.values():
            self._schedule(g, m)
        return g

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------
    def heartbeat(self, req: dict, version: int, client_id: str, client_host: str,
                  describable: Callable[[str], bool] | None = None) -> tuple[dict, Future]:
        """Returns (response, Future): send the response once the future resolves with 0
        (the records of this heartbeat are in the log); otherwise answer the append error.
        ``describable(topic)``: whether the heartbeat's principal may DESCRIBE a topic (None: no
        authorizer): when this heartbeat subscribes to a regex new to the group, the filter of
        every regex of the group (Kafka 4.4 resolves them all with the context of the heartbeat
        that triggers it; its TopicRegexResolver keeps only the topics that context may
        describe)."""
        return self._once_written(req["group_id"], self._heartbeat(req, version, client_id, client_host,
                                                                    describable))

    def _heartbeat(self, req: dict, version: int, client_id: str, client_host: str,
                   describable: Callable[[str], bool] | None = None) -> dict:
        gid = req["group_id"]
        # Request-level validation first, so a refused heartbeat changes nothing.
        if req["server_assignor"] is not None and req["server_assignor"] not in ASSIGNORS:
            return self._err(E.UNSUPPORTED_ASSIGNOR, "ServerAssignor %s is not supported. Supported assignors: %s."
                             % (req["server_assignor"], ", ".join(ASSIGNORS)))
        rx = req["subscribed_topic_regex"]
        if rx:
            try:
                re.compile(rx)
            except re.error as e:
                return self._err(E.INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex %s is invalid: %s" % (rx, e))
        epoch = req["member_epoch"]
        mid = req["member_id"] or ""
        joined = False
        g = self.gc.get_group(gid)
        if g is not None and g.kind not in ("classic", "consumer"):
            return self._err(E.GROUP_ID_NOT_FOUND, "Group %s is not a consumer group." % gid)
        if g is not None and g.kind == "classic":
            if g.members:
                # Upgrading a live classic group in place is not built.
                return self._err(E.GROUP_ID_NOT_FOUND, "Group %s is not a consumer group." % gid)
            if epoch != 0:
                return self._err(E.UNKNOWN_MEMBER_ID, "Group %s does not exist." % gid)
            g.cancel_timers()
            self.gc.groups.pop(gid, None)
            g = ConsumerGroup(gid, self.gc.now_ms())
            g.replaces_classic = True
            self.gc.groups[gid] = g
        if g is None:
            if epoch != 0:
                return self._err(E.UNKNOWN_MEMBER_ID, "Group %s does not exist." % gid)
            g = ConsumerGroup(gid, self.gc.now_ms())
            self.gc.groups[gid] = g
        if epoch in (-1, -2):
            m = g.members.get(mid)
            if m is None:
                return self._err(E.UNKNOWN_MEMBER_ID)
            self._remove(g, mid)
            return {"error_code": 0, "member_id": mid, "member_epoch": epoch,
                    "heartbeat_interval_ms": 0, "assignment": None}
        if epoch == 0:
            if not mid:
                if version >= 1:
                    return self._err(E.INVALID_REQUEST, "MemberId can't be empty.")
                mid = str(uuid.uuid4())
            if req["subscribed_topic_names"] is None and req["subscribed_topic_regex"] is None:
                return self._err(E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
            m = g.members.get(mid)
            if m is None:
                if len(g.members) >= self.max_size:
                    return self._err(E.GROUP_MAX_SIZE_REACHED)
                m = CMember(mid)
                g.members[mid] = m
                joined = True
            else:
                # Rejoin after fencing: start over from epoch 0 without owned partitions.
                m.assigned.clear()
                m.revoking.clear()
            m.epoch = 0
            m.last_sent = None
        else:
            m = g.members.get(mid)
            if m is None:
                return self._err(E.UNKNOWN_MEMBER_ID, "Member %s is not a member of group %s." % (mid, gid))
            if epoch not in (m.epoch, m.prev_epoch) or epoch > m.epoch:
                return self._err(E.FENCED_MEMBER_EPOCH, "The consumer group member has a smaller member epoch "
                                 "(%d) than the one known by the group coordinator (%d)." % (epoch, m.epoch))
        m.client_id, m.client_host = client_id, client_host
        if req["instance_id"] is not None:
            m.instance_id = req["instance_id"]
        if req["rack_id"] is not None:
            m.rack_id = req["rack_id"]
        if req["rebalance_timeout_ms"] >= 0:
            m.rebalance_timeout_ms = req["rebalance_timeout_ms"]
        if req["server_assignor"] is not None:
            m.assignor = req["server_assignor"]
        changed = False
        if req["subscribed_topic_names"] is not None and sorted(req["subscribed_topic_names"]) != sorted(m.topics):
            m.topics = list(req["subscribed_topic_names"])
            changed = True
        if rx is not None and (rx or None) != m.regex:
            m.regex = rx or None
            changed = True
            if m.regex is not None and not any(o.regex == m.regex for o in g.members.values() if o is not m):
                # a regex new to the group: Kafka resolves all of the group's regexes again, with
                # the context of the heartbeat that triggers it (maybeUpdateRegularExpressions;
                # a regex some member already subscribes to keeps its resolution)
                for k in g.regex_filters:
                    g.regex_filters[k] = describable
                g.regex_filters[m.regex] = describable
        if m.regex is not None and m.regex not in g.regex_filters:
            # a group loaded from the log: the first heartbeat of a subscriber resolves it
            g.regex_filters[m.regex] = describable
        if joined:
            self._bump(g, "member %s joined" % mid)
        elif changed:
            self._bump(g, "member %s changed its subscription" % mid)
        # The owned partitions the member reports release what it was asked to revoke.
        if req["topic_partitions"] is not None:
            owned = {(tp["topic_id"], p) for tp in req["topic_partitions"] for p in tp["partitions"]}
            m.revoking &= owned
        self._schedule(g, m)
        g.dirty.add(mid)
        self._maybe_compute_target(g)
        self._reconcile(g, m)
        resp = {"error_code": 0, "member_id": mid, "member_epoch": m.epoch,
                "heartbeat_interval_ms": self._group_value(g.group_id, "consumer.heartbeat.interval.ms"),
                "assignment": None}
        current = (m.epoch, frozenset(m.assigned))
        if m.last_sent != current or epoch == 0 or req["topic_partitions"] is not None:
            resp["assignment"] = heartbeat_assignment(m.assigned)
            m.last_sent = current
        return resp

    def _err(self, code: int, message: Optional[str] = None, member_epoch: int = -1) -> dict:
        return {"error_code": int(code), "error_message": message, "member_id": None, "member_epoch": member_epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _maybe_compute_target(self, g: ConsumerGroup) -> None:
        subs = {mid: self._member_topics(g, m) for mid, m in g.members.items()}
        names = set().union(*subs.values()) if subs else set()
        meta = self._topic_meta(names)
        h = R.metadata_hash((n, t, c) for n, (t, c) in meta.items())
        if h != g.metadata_hash:
            g.metadata_hash = h
            self._bump(g, "subscribed topic metadata changed")
        if g.assignment_epoch == g.group_epoch:
            return
        current = {mid: m.assigned | m.revoking for mid, m in g.members.items()}
        g.target = ASSIGNORS.get(g.assignor_name(), ASSIGNORS[DEFAULT])(subs, meta, current)
        g.assignment_epoch = g.group_epoch
        g.assignment_ts = self.gc.now_ms()
        g.target_dirty = True

    # -- describe ------------------------------------------------------------------------------
    def describe(self, g: ConsumerGroup) -> dict:
        self._maybe_compute_target(g)
        self.persist(g)  # a recomputed target is state like any other
        md = self._md()

        def asg(tps: Iterable[tuple[bytes, int]]) -> dict:
            return described_assignment(tps, md)
        members = [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                    "member_epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": sorted(m.topics), "subscribed_topic_regex": m.regex,
                    "assignment": asg(m.assigned), "target_assignment": asg(g.target.get(m.member_id, set())),
                    "member_type": 1} for m in g.members.values()]
        return {"error_code": 0, "group_id": g.group_id, "group_state": g.summary_state(),
                "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name(), "members": members}
