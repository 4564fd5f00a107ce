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
  Stable.  Membership is kept in memory only: after a broker restart members get
  UNKNOWN_MEMBER_ID and rejoin (committed offsets are durable as for classic groups).
"""
from __future__ import annotations

import logging
import re
import time
import uuid

from ...protocol.errors import ErrorCode as E
from .assignors import ASSIGNORS, DEFAULT

log = logging.getLogger("pykbroker.group.consumer")


class CMember:
    __slots__ = ("member_id", "epoch", "prev_epoch", "instance_id", "rack_id", "client_id", "client_host",
                 "rebalance_timeout_ms", "topics", "regex", "assignor", "assigned", "revoking", "last_sent")

    def __init__(self, member_id):
        self.member_id = member_id
        self.epoch = 0
        self.prev_epoch = -1
        self.instance_id = None
        self.rack_id = None
        self.client_id = ""
        self.client_host = ""
        self.rebalance_timeout_ms = 300000
        self.topics: list[str] = []
        self.regex: str | None = None
        self.assignor: str | None = None
        self.assigned: set = set()
        self.revoking: set = set()
        self.last_sent = None


class ConsumerGroup:
    kind = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, CMember] = {}
        self.target: dict[str, set] = {}
        self.topic_sig = ()
        self.dead = False
        self.state_timestamp = int(time.time() * 1000)

    @property
    def state(self) -> str:
        return "Dead" if self.dead else self.summary_state()

    @state.setter
    def state(self, value) -> None:
        self.dead = value == "Dead"

    def cancel_timers(self) -> None:
        pass

    def summary_state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.revoking or m.assigned != self.target.get(m.member_id, set())
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def assignor_name(self) -> str:
        for m in self.members.values():
            if m.assignor:
                return m.assignor
        return DEFAULT

    def subscribed_topics(self) -> set:
        return self._subscribed_names(None)

    def _subscribed_names(self, md) -> set:
        names = set()
        for m in self.members.values():
            names.update(m.topics)
            if m.regex and md is not None:
                rx = re.compile(m.regex)
                names.update(t for t in md.topics if rx.fullmatch(t))
        return names


class ConsumerGroupManager:
    def __init__(self, coordinator):
        self.gc = coordinator
        cfg = coordinator.broker.config

        def get(k, d):
            try:
                return int(cfg[k])
            except Exception:
                return d
        self.session_timeout_ms = get("group.consumer.session.timeout.ms", 45000)
        self.heartbeat_interval_ms = get("group.consumer.heartbeat.interval.ms", 5000)
        self.max_size = get("group.consumer.max.size", 2**31 - 1)

    # -- helpers -----------------------------------------------------------------------------
    def _md(self):
        return self.gc.broker.metadata

    def _member_topics(self, g: ConsumerGroup, m: CMember) -> set:
        names = set(m.topics)
        md = self._md()
        if m.regex and md is not None:
            rx = re.compile(m.regex)
            names.update(t for t in md.topics if rx.fullmatch(t) and not t.startswith("__"))
        return names

    def _topic_meta(self, names) -> dict:
        md = self._md()
        out = {}
        for n in names:
            info = md.get(n) if md is not None else None
            if info is not None:
                out[n] = (info.topic_id, info.num_partitions)
        return out

    def _bump(self, g: ConsumerGroup, why: str) -> None:
        g.group_epoch += 1
        log.info("consumer group %s: epoch %d (%s)", g.group_id, g.group_epoch, why)

    def _expire(self, gid, mid) -> None:
        g = self.gc.groups.get(gid)
        if isinstance(g, ConsumerGroup) and mid in g.members:
            log.info("consumer group %s: member %s session expired", gid, mid)
            self._remove(g, mid)

    def _remove(self, g: ConsumerGroup, mid: str) -> None:
        g.members.pop(mid, None)
        if not g.members:
            g.state_timestamp = int(time.time() * 1000)
        g.target.pop(mid, None)
        self.gc.timer.cancel(("cg-hb", g.group_id, mid))
        self._bump(g, "member %s left" % mid)

    def _schedule(self, g, m) -> None:
        gid, mid = g.group_id, m.member_id
        self.gc.timer.schedule(("cg-hb", gid, mid), self.session_timeout_ms / 1000.0, lambda: self._expire(gid, mid))

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------
    def heartbeat(self, req: dict, version: int, client_id: str, client_host: str) -> dict:
        gid = req["group_id"]
        epoch = req["member_epoch"]
        mid = req["member_id"] or ""
        joined = False
        g = self.gc.get_group(gid)
        if g is not None and g.kind == "classic":
            if g.members:
                # Upgrading a live classic group in place is not built.
                return self._err(E.GROUP_ID_NOT_FOUND, "Group %s is not a consumer group." % gid)
            g.cancel_timers()
            self.gc.groups.pop(gid, None)
            g = None
        if g is None:
            if epoch != 0:
                return self._err(E.UNKNOWN_MEMBER_ID, "Group %s does not exist." % gid)
            g = ConsumerGroup(gid)
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
            if req["server_assignor"] not in ASSIGNORS:
                return self._err(E.UNSUPPORTED_ASSIGNOR, "ServerAssignor %s is not supported. Supported assignors: %s."
                                 % (req["server_assignor"], ", ".join(ASSIGNORS)))
            m.assignor = req["server_assignor"]
        changed = False
        if req["subscribed_topic_names"] is not None and sorted(req["subscribed_topic_names"]) != sorted(m.topics):
            m.topics = list(req["subscribed_topic_names"])
            changed = True
        rx = req["subscribed_topic_regex"]
        if rx is not None and (rx or None) != m.regex:
            try:
                re.compile(rx)
            except re.error as e:
                return self._err(E.INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex %s is invalid: %s" % (rx, e))
            m.regex = rx or None
            changed = True
        if joined:
            self._bump(g, "member %s joined" % mid)
        elif changed:
            self._bump(g, "member %s changed its subscription" % mid)
        # The owned partitions the member reports release what it was asked to revoke.
        if req["topic_partitions"] is not None:
            owned = {(tp["topic_id"], p) for tp in req["topic_partitions"] for p in tp["partitions"]}
            m.revoking &= owned
        self._schedule(g, m)
        self._maybe_compute_target(g)
        self._reconcile(g, m)
        resp = {"error_code": 0, "member_id": mid, "member_epoch": m.epoch,
                "heartbeat_interval_ms": self.heartbeat_interval_ms, "assignment": None}
        current = (m.epoch, frozenset(m.assigned))
        if m.last_sent != current or epoch == 0 or req["topic_partitions"] is not None:
            by_topic: dict = {}
            for tid, p in m.assigned:
                by_topic.setdefault(tid, []).append(p)
            resp["assignment"] = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                                       for t, ps in sorted(by_topic.items())]}
            m.last_sent = current
        return resp

    def _err(self, code, message=None, member_epoch=-1) -> dict:
        return {"error_code": int(code), "error_message": message, "member_id": None, "member_epoch": member_epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _maybe_compute_target(self, g: ConsumerGroup) -> None:
        subs = {mid: self._member_topics(g, m) for mid, m in g.members.items()}
        names = set().union(*subs.values()) if subs else set()
        meta = self._topic_meta(names)
        sig = tuple(sorted((n, t, c) for n, (t, c) in meta.items()))
        if sig != g.topic_sig:
            g.topic_sig = sig
            self._bump(g, "subscribed topic metadata changed")
        if g.assignment_epoch == g.group_epoch:
            return
        current = {mid: m.assigned | m.revoking for mid, m in g.members.items()}
        g.target = ASSIGNORS.get(g.assignor_name(), ASSIGNORS[DEFAULT])(subs, meta, current)
        g.assignment_epoch = g.group_epoch

    def _reconcile(self, g: ConsumerGroup, m: CMember) -> None:
        target = g.target.get(m.member_id, set())
        revoke = m.assigned - target
        if revoke:
            m.assigned -= revoke
            m.revoking |= revoke
        if m.revoking:
            return  # keep the epoch until the member confirms the revocation
        held = set()
        for other in g.members.values():
            if other is not m:
                held |= other.assigned | other.revoking
        m.assigned |= {tp for tp in target - m.assigned if tp not in held}
        if m.epoch != g.assignment_epoch:
            m.prev_epoch, m.epoch = m.epoch, g.assignment_epoch

    # -- offsets / describe ------------------------------------------------------------------
    def validate_commit(self, g: ConsumerGroup, epoch, member_id, instance_id):
        if epoch < 0 and not member_id:
            return 0 if not g.members else E.UNKNOWN_MEMBER_ID
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.epoch and epoch != m.prev_epoch:
            return E.STALE_MEMBER_EPOCH
        return 0

    def validate_fetch(self, g: ConsumerGroup, member_id, epoch):
        m = g.members.get(member_id or "")
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.epoch:
            return E.STALE_MEMBER_EPOCH
        return 0

    def describe(self, g: ConsumerGroup) -> dict:
        self._maybe_compute_target(g)
        md = self._md()

        def asg(tps):
            by: dict = {}
            for tid, p in tps:
                by.setdefault(tid, []).append(p)
            return {"topic_partitions": [{"topic_id": t, "topic_name": (md.name_of(t) if md else None) or "",
                                          "partitions": sorted(ps)} for t, ps in sorted(by.items())]}
        members = [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                    "member_epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": sorted(m.topics), "subscribed_topic_regex": m.regex,
                    "assignment": asg(m.assigned), "target_assignment": asg(g.target.get(m.member_id, set())),
                    "member_type": 1} for m in g.members.values()]
        return {"error_code": 0, "group_id": g.group_id, "group_state": g.summary_state(),
                "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name(), "members": members}
