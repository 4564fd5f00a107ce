"""Classic consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as a table-driven state machine.

States and the transitions allowed between them are Kafka's (ClassicGroupState)::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲   │ (no member left)                                 │ leader's SyncGroup
      └──────────────────┼───┘                                                  ▼
                         └──────────── member joins/leaves/expires ◀──────── Stable
    any state ──group deleted / offsets expired──▶ Dead

``VALID_PREVIOUS`` is the transition table (a transition not in it is a bug and raises), and each
request kind dispatches on the current state through a per-state table of small methods.  The
group is owned by the coordinator task: every method here is synchronous (no await), so a
request's effect on the group is atomic; requests that must wait (JoinGroup until the rebalance
completes, SyncGroup until the leader's assignment arrives) get a :class:`Future` that a later
event resolves.  Timeouts (session, rebalance, pending-sync, initial delay) run on the
coordinator's :class:`~.timer.Timer`, i.e. on trio's clock.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import trio

from ...protocol.errors import ErrorCode as E

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator
    from .timer import Timer

log = logging.getLogger("pykbroker.group")

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# target state -> states it may be entered from (Kafka's ClassicGroupState.validPreviousStates)
VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}

# A new member (first JoinGroup with a fresh id) is given this long to complete its join
# before its session starts counting (Kafka's newMemberJoinTimeoutMs, 5 minutes).
NEW_MEMBER_JOIN_TIMEOUT_S = 300.0


class Future:
    """A one-shot result slot a request handler awaits; resolving twice keeps the first value."""

    __slots__ = ("_event", "value")

    def __init__(self, value: Any = None, done: bool = False) -> None:
        self._event = trio.Event()
        self.value = value
        if done:
            self._event.set()

    def set(self, value: Any) -> None:
        if not self._event.is_set():
            self.value = value
            self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    async def get(self) -> Any:
        await self._event.wait()
        return self.value


def _resolved(value: Any) -> Future:
    return Future(value, done=True)


class Member:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_waiter",
                 "sync_waiter", "is_new", "join_version")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str | None,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols: list[tuple[str, bytes]] = protocols
        self.assignment = b""
        self.join_waiter: Future | None = None
        self.sync_waiter: Future | None = None
        self.is_new = False
        self.join_version = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)


class JoinRequest:
    """The version-independent content of a JoinGroup request."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "session_timeout_ms",
                 "rebalance_timeout_ms", "protocol_type", "protocols", "version", "reason")

    def __init__(self, member_id: str = "", group_instance_id: str | None = None, client_id: str = "",
                 client_host: str = "", session_timeout_ms: int = 10000, rebalance_timeout_ms: int = -1,
                 protocol_type: str = "consumer",
                 protocols: Iterable[tuple[str, bytes | bytearray | memoryview]] = (), version: int = 9,
                 reason: str | None = None) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = session_timeout_ms if rebalance_timeout_ms < 0 else rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = [(n, bytes(m)) for n, m in protocols]
        self.version = version
        self.reason = reason


def join_error(code: int, member_id: str = "") -> dict[str, Any]:
    return {"error_code": int(code), "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": [], "skip_assignment": False}


class ClassicGroup:
    """One classic group.  ``coordinator`` supplies ``timer``, ``initial_rebalance_delay_ms``
    and ``persist_group(group)`` (append the group's metadata record)."""

    kind = "classic"

    def __init__(self, coordinator: GroupCoordinator, group_id: str) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.state = EMPTY
        self.state_timestamp = coordinator.now_ms()
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static: dict[str, str] = {}       # group.instance.id -> member id
        self.pending: set[str] = set()         # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()    # joined this generation, SyncGroup not seen yet
        self.new_member_added = False           # for the initial delayed join
        self._initial_remaining_ms = 0
        self._initial_delay = False

    # -- transitions -------------------------------------------------------------------------
    def transition(self, target: str) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise AssertionError("group %s: illegal transition %s -> %s" % (self.group_id, self.state, target))
        log.debug("group %s: %s -> %s (generation %d)", self.group_id, self.state, target, self.generation)
        self.state = target
        self.state_timestamp = self.coordinator.now_ms()

    @property
    def timer(self) -> Timer:
        return self.coordinator.timer

    def _tkey(self, kind: str, member_id: str | None = None) -> tuple[str, str, str | None]:
        return (kind, self.group_id, member_id)

    def is_empty(self) -> bool:
        return not self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader == member_id

    def summary_state(self) -> str:
        return self.state

    # -- protocol bookkeeping ----------------------------------------------------------------
    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty type and protocol list;
        otherwise the type must match and one protocol must be supported by every member."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        common = self._common_protocols()
        return bool(names & common)

    def _common_protocols(self, exclude: str | None = None) -> set:
        common = None
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            names = {n for n, _ in m.protocols}
            common = names if common is None else common & names
        return common or set()

    def select_protocol(self) -> str:
        candidates = self._common_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    if name not in order:
                        order.append(name)
                    break
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None when not decodable."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            t = parse_subscription_topics(m.metadata(self.protocol_name))
            if t is None:
                return None
            topics |= t
        return topics

    # -- JoinGroup ---------------------------------------------------------------------------
    def join(self, req: JoinRequest) -> Future:
        if self.state == DEAD:
            # The group was deleted or unloaded while the request was on its way.
            return _resolved(join_error(E.COORDINATOR_NOT_AVAILABLE, req.member_id))
        if not self.supports(req.protocol_type, req.protocols):
            return _resolved(join_error(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        if not req.member_id:
            return self._join_new_member(req)
        return self._join_existing_member(req)

    def _join_new_member(self, req: JoinRequest) -> Future:
        max_size = self.coordinator.group_max_size
        if len(self.members) + len(self.pending) >= max_size and not (
                req.group_instance_id and req.group_instance_id in self.static):
            return _resolved(join_error(E.GROUP_MAX_SIZE_REACHED, req.member_id))
        new_id = "%s-%s" % (req.group_instance_id or req.client_id, uuid.uuid4())
        if req.group_instance_id is not None:
            old_id = self.static.get(req.group_instance_id)
            if old_id is not None and old_id in self.members:
                return self._replace_static_member(old_id, new_id, req)
            return self._add_member_and_rebalance(new_id, req)
        if req.version >= 4:
            # KIP-394: hand out the id first; the member must come back with it (bounded by the
            # session timeout) before it counts towards the rebalance.
            self.pending.add(new_id)
            self.timer.schedule(self._tkey("pending", new_id), req.session_timeout_ms / 1000.0,
                                lambda: self._expire_pending(new_id))
            return _resolved(join_error(E.MEMBER_ID_REQUIRED, new_id))
        return self._add_member_and_rebalance(new_id, req)

    def _join_existing_member(self, req: JoinRequest) -> Future:
        mid = req.member_id
        if mid in self.pending:
            self.pending.discard(mid)
            self.timer.cancel(self._tkey("pending", mid))
            return self._add_member_and_rebalance(mid, req)
        err = self._validate_member(mid, req.group_instance_id)
        if err:
            return _resolved(join_error(err, mid))
        member = self.members[mid]
        return _JOIN_EXISTING[self.state](self, member, req)

    def _validate_member(self, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            known = self.static.get(instance_id)
            if known is None:
                return E.UNKNOWN_MEMBER_ID
            if known != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return E.UNKNOWN_MEMBER_ID
        return 0

    def _join_existing_preparing(self, member: Member, req: JoinRequest) -> Future:
        return self._update_member_and_rebalance(member, req)

    def _join_existing_completing(self, member: Member, req: JoinRequest) -> Future:
        if member.matches(req.protocols):
            # A retried JoinGroup for this generation: answer with the current result.
            return _resolved(self._join_result(member, req.version))
        return self._update_member_and_rebalance(member, req)

    def _join_existing_stable(self, member: Member, req: JoinRequest) -> Future:
        if self.is_leader(member.member_id) or not member.matches(req.protocols):
            # The leader rejoining (it may want to reassign) or changed metadata: rebalance.
            return self._update_member_and_rebalance(member, req)
        return _resolved(self._join_result(member, req.version))

    def _join_existing_empty(self, member: Member, req: JoinRequest) -> Future:
        return _resolved(join_error(E.UNKNOWN_MEMBER_ID, member.member_id))

    def _join_result(self, member: Member, version: int, skip_assignment: bool = False) -> dict:
        leader = self.is_leader(member.member_id)
        members = []
        if leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]
        return {"error_code": 0, "generation_id": self.generation, "protocol_type": self.protocol_type,
                "protocol_name": self.protocol_name, "leader": self.leader or "",
                "member_id": member.member_id, "members": members, "skip_assignment": skip_assignment}

    def _add_member_and_rebalance(self, member_id: str, req: JoinRequest) -> Future:
        m = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                   req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols)
        m.is_new = True
        m.join_version = req.version
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = m
        if req.group_instance_id is not None:
            self.static[req.group_instance_id] = member_id
        if self.leader is None:
            self.leader = member_id
        m.join_waiter = Future()
        if self._initial_delay:
            self.new_member_added = True
        self._schedule_heartbeat(m, NEW_MEMBER_JOIN_TIMEOUT_S)
        waiter = m.join_waiter
        self._maybe_prepare_rebalance("member %s joined" % member_id)
        self._maybe_complete_join()
        return waiter

    def _update_member_and_rebalance(self, member: Member, req: JoinRequest) -> Future:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_version = req.version
        if member.join_waiter is not None:
            # A duplicate JoinGroup from the same member: the newer request wins.
            member.join_waiter.set(join_error(E.UNKNOWN_MEMBER_ID, member.member_id))
        member.join_waiter = Future()
        waiter = member.join_waiter
        self._maybe_prepare_rebalance("member %s rejoined" % member.member_id)
        self._maybe_complete_join()
        return waiter

    def _replace_static_member(self, old_id: str, new_id: str, req: JoinRequest) -> Future:
        """KIP-345: a known group.instance.id with a fresh member id takes over the old member."""
        old = self.members.pop(old_id)
        self.timer.cancel(self._tkey("hb", old_id))
        self.pending_sync.discard(old_id)
        for w in (old.join_waiter, old.sync_waiter):
            if w is not None:
                w.set(join_error(E.FENCED_INSTANCE_ID, old_id) if w is old.join_waiter
                      else {"error_code": int(E.FENCED_INSTANCE_ID), "assignment": b""})
        old.join_waiter = old.sync_waiter = None
        old.member_id = new_id
        old.client_id, old.client_host = req.client_id, req.client_host
        old.session_timeout_ms, old.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        old.join_version = req.version
        self.members[new_id] = old
        self.static[req.group_instance_id] = new_id  # type: ignore[index]  # static members only
        if self.leader == old_id:
            self.leader = new_id
        member = old
        if self.state == STABLE:
            if member.matches(req.protocols):
                # Same subscription: no rebalance (the point of static membership).  A v9 leader
                # gets the member list with skip_assignment so it does not recompute.
                self._schedule_heartbeat(member)
                self.coordinator.persist_group(self)
                skip = req.version >= 9 and self.is_leader(new_id)
                res = self._join_result(member, req.version, skip_assignment=skip)
                if not skip:
                    res["members"] = []
                return _resolved(res)
            return self._update_member_and_rebalance(member, req)
        if self.state == COMPLETING_REBALANCE:
            return self._update_member_and_rebalance(member, req)
        # PreparingRebalance: join the rebalance in progress.
        return self._update_member_and_rebalance(member, req)

    # -- rebalance ---------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, reason: str) -> None:
        if self.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self._prepare_rebalance(reason)

    def _prepare_rebalance(self, reason: str) -> None:
        log.info("group %s: preparing to rebalance (generation %d): %s", self.group_id, self.generation, reason)
        if self.state == COMPLETING_REBALANCE:
            # Members waiting for the leader's assignment must rejoin.
            self._reset_and_propagate_assignment_error(E.REBALANCE_IN_PROGRESS)
        self.timer.cancel(self._tkey("sync"))
        self.pending_sync.clear()
        if self.state == EMPTY:
            delay = self.coordinator.initial_rebalance_delay_ms
            self._initial_delay = True
            self._initial_remaining_ms = max(self._max_rebalance_timeout_ms() - delay, 0)
            self.new_member_added = False
            self.transition(PREPARING_REBALANCE)
            self.timer.schedule(self._tkey("join"), delay / 1000.0, lambda: self._initial_join_expired(delay))
        else:
            self._initial_delay = False
            self.transition(PREPARING_REBALANCE)
            self.timer.schedule(self._tkey("join"), self._max_rebalance_timeout_ms() / 1000.0,
                                self._complete_join)

    def _initial_join_expired(self, delay_ms: int) -> None:
        """group.initial.rebalance.delay.ms: wait for more members before the first generation,
        extending while new members keep arriving, up to the rebalance timeout."""
        if self.state != PREPARING_REBALANCE:
            return
        if self.new_member_added and self._initial_remaining_ms > 0:
            self.new_member_added = False
            step = min(delay_ms, self._initial_remaining_ms)
            self._initial_remaining_ms -= step
            self.timer.schedule(self._tkey("join"), step / 1000.0, lambda: self._initial_join_expired(delay_ms))
            return
        self._initial_delay = False
        self._complete_join()

    def _max_rebalance_timeout_ms(self) -> int:
        return max([m.rebalance_timeout_ms for m in self.members.values()] or [0])

    def _has_all_members_joined(self) -> bool:
        return (not self.pending and bool(self.members)
                and all(m.join_waiter is not None for m in self.members.values()))

    def _maybe_complete_join(self) -> None:
        if self.state == PREPARING_REBALANCE and not self._initial_delay and (
                self._has_all_members_joined() or (not self.members and not self.pending)):
            self._complete_join()

    def _complete_join(self) -> None:
        if self.state != PREPARING_REBALANCE:
            return
        self.timer.cancel(self._tkey("join"))
        self._initial_delay = False
        # Members that did not rejoin within the rebalance timeout are out.
        for m in [m for m in self.members.values() if m.join_waiter is None]:
            log.info("group %s: member %s did not rejoin in time; removing it", self.group_id, m.member_id)
            self._remove_member(m)
        self.generation += 1
        if not self.members:
            self.protocol_name = None
            self.transition(EMPTY)
            log.info("group %s: generation %d is empty", self.group_id, self.generation)
            self.coordinator.persist_group(self)
            self.coordinator.group_became_empty(self)
            return
        self.protocol_name = self.select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.transition(COMPLETING_REBALANCE)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", self.group_id,
                 self.generation, len(self.members), self.protocol_name, self.leader)
        self.pending_sync = set(self.members)
        for m in self.members.values():
            res = self._join_result(m, m.join_version)
            w, m.join_waiter = m.join_waiter, None
            assert w is not None    # members without a join waiter were removed above
            m.is_new = False
            w.set(res)
            self._schedule_heartbeat(m)
        # KAFKA-13766-style guard: members that never send SyncGroup are dropped after the
        # rebalance timeout so the group cannot stall in CompletingRebalance.
        self.timer.schedule(self._tkey("sync"), self._max_rebalance_timeout_ms() / 1000.0,
                            self._expire_pending_sync)

    def _expire_pending_sync(self) -> None:
        if self.state not in (COMPLETING_REBALANCE, STABLE) or not self.pending_sync:
            return
        log.info("group %s: members %s did not sync within the rebalance timeout", self.group_id,
                 sorted(self.pending_sync))
        for mid in list(self.pending_sync):
            m = self.members.get(mid)
            if m is not None:
                self._remove_member_and_update(m, "pending sync expired")
        self.pending_sync.clear()

    def _reset_and_propagate_assignment_error(self, code: int) -> None:
        for m in self.members.values():
            m.assignment = b""
            if m.sync_waiter is not None:
                m.sync_waiter.set({"error_code": int(code), "assignment": b""})
                m.sync_waiter = None
                # As Kafka's propagateAssignment: a fresh session from the answer on.  While
                # parked the member's expiry was only deferred, so its timer may be due any
                # moment; it must get a whole session to rejoin.
                self._schedule_heartbeat(m)

    # -- SyncGroup ---------------------------------------------------------------------------
    def sync(self, member_id: str, instance_id: str | None, generation: int, protocol_type: str | None,
             protocol_name: str | None, assignments: Mapping[str, bytes | bytearray | memoryview]) -> Future:
        if self.state == DEAD:
            return _resolved({"error_code": int(E.COORDINATOR_NOT_AVAILABLE), "assignment": b""})
        err = self._validate_member(member_id, instance_id)
        if err:
            return _resolved({"error_code": int(err), "assignment": b""})
        if generation != self.generation:
            return _resolved({"error_code": int(E.ILLEGAL_GENERATION), "assignment": b""})
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
                protocol_name is not None and protocol_name != self.protocol_name):
            return _resolved({"error_code": int(E.INCONSISTENT_GROUP_PROTOCOL), "assignment": b""})
        return _SYNC[self.state](self, self.members[member_id], assignments)

    def _sync_rebalancing(self, member: Member, assignments: Mapping[str, bytes | bytearray | memoryview]) -> Future:
        return _resolved({"error_code": int(E.REBALANCE_IN_PROGRESS), "assignment": b""})

    def _sync_empty(self, member: Member, assignments: Mapping[str, bytes | bytearray | memoryview]) -> Future:
        return _resolved({"error_code": int(E.UNKNOWN_MEMBER_ID), "assignment": b""})

    def _sync_completing(self, member: Member, assignments: Mapping[str, bytes | bytearray | memoryview]) -> Future:
        if member.sync_waiter is not None:
            member.sync_waiter.set({"error_code": int(E.UNKNOWN_MEMBER_ID), "assignment": b""})
        member.sync_waiter = Future()
        waiter = member.sync_waiter
        self.pending_sync.discard(member.member_id)
        self._schedule_heartbeat(member)
        if self.is_leader(member.member_id):
            # The leader's assignment is relayed verbatim; members it left out get empty bytes.
            # As in Kafka, it is first written to __consumer_offsets (group metadata record) and
            # only applied and answered once that append is done: a member never works with an
            # assignment a coordinator crash could forget.
            assignment = {m.member_id: bytes(assignments.get(m.member_id, b"")) for m in self.members.values()}
            generation = self.generation
            self.coordinator.persist_group(self, assignment,
                                           lambda code: self._assignment_stored(generation, assignment, code))
        if not self.pending_sync:
            self.timer.cancel(self._tkey("sync"))
        return waiter

    def _assignment_stored(self, generation: int, assignment: dict, code: int) -> None:
        """The leader's assignment is in the log (code 0) or failed to get there."""
        if self.state != COMPLETING_REBALANCE or self.generation != generation:
            # Someone joined or left while the record was being written: that rebalance
            # already answered the waiting members (REBALANCE_IN_PROGRESS).
            return
        if code:
            log.warning("group %s: storing the assignment of generation %d failed (error %d)",
                        self.group_id, generation, code)
            self._reset_and_propagate_assignment_error(code)
            self._prepare_rebalance("error %d when storing the group assignment" % code)
            return
        for m in self.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self.transition(STABLE)
        for m in self.members.values():
            if m.sync_waiter is not None:
                m.sync_waiter.set(self._sync_result(m))
                m.sync_waiter = None
                self._schedule_heartbeat(m)  # a whole session from the answer (Kafka does the same)

    def _sync_stable(self, member: Member, assignments: Mapping[str, bytes | bytearray | memoryview]) -> Future:
        self.pending_sync.discard(member.member_id)
        if not self.pending_sync:
            self.timer.cancel(self._tkey("sync"))
        self._schedule_heartbeat(member)
        return _resolved(self._sync_result(member))

    def _sync_result(self, m: Member) -> dict:
        return {"error_code": 0, "protocol_type": self.protocol_type, "protocol_name": self.protocol_name,
                "assignment": m.assignment}

    # -- Heartbeat ---------------------------------------------------------------------------
    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> int:
        if self.state == DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        err = self._validate_member(member_id, instance_id)
        if err:
            return err
        if generation != self.generation:
            return E.ILLEGAL_GENERATION
        return _HEARTBEAT[self.state](self, self.members[member_id])

    def _heartbeat_ok(self, member: Member) -> int:
        self._schedule_heartbeat(member)
        return E.NONE

    def _heartbeat_rebalancing(self, member: Member) -> int:
        # The member stays alive but must rejoin: this is how clients learn of a rebalance.
        self._schedule_heartbeat(member)
        return E.REBALANCE_IN_PROGRESS

    def _heartbeat_empty(self, member: Member) -> int:
        return E.UNKNOWN_MEMBER_ID

    # -- LeaveGroup --------------------------------------------------------------------------
    def leave(self, member_id: str, instance_id: str | None) -> int:
        if self.state == DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if instance_id is not None:
            known = self.static.get(instance_id)
            if known is None:
                return E.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return E.FENCED_INSTANCE_ID
            member_id = known
        elif member_id in self.pending:
            self.pending.discard(member_id)
            self.timer.cancel(self._tkey("pending", member_id))
            self._maybe_complete_join()
            return E.NONE
        m = self.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        self._remove_member_and_update(m, "member left the group")
        return E.NONE

    # -- membership changes ------------------------------------------------------------------
    def _schedule_heartbeat(self, m: Member, timeout_s: float | None = None) -> None:
        t = m.session_timeout_ms / 1000.0 if timeout_s is None else timeout_s
        mid = m.member_id
        self.timer.schedule(self._tkey("hb", mid), t, lambda: self._expire_member(mid))

    def _expire_member(self, member_id: str) -> None:
        m = self.members.get(member_id)
        if m is None:
            return
        if (m.join_waiter is not None and not m.is_new) or m.sync_waiter is not None:
            # Waiting on the group, not silent: the rebalance / pending-sync timers bound this.
            self._schedule_heartbeat(m)
            return
        log.info("group %s: member %s session expired", self.group_id, member_id)
        self._remove_member_and_update(m, "session timeout")

    def _expire_pending(self, member_id: str) -> None:
        if member_id in self.pending:
            self.pending.discard(member_id)
            self._maybe_complete_join()

    @staticmethod
    def _answer_waiters(m: Member, code: int) -> None:
        """Answer the member's parked JoinGroup/SyncGroup with ``code``."""
        if m.join_waiter is not None:
            m.join_waiter.set(join_error(code, m.member_id))
            m.join_waiter = None
        if m.sync_waiter is not None:
            m.sync_waiter.set({"error_code": int(code), "assignment": b""})
            m.sync_waiter = None

    def _remove_member(self, m: Member) -> None:
        self._answer_waiters(m, E.UNKNOWN_MEMBER_ID)
        self.timer.cancel(self._tkey("hb", m.member_id))
        self.members.pop(m.member_id, None)
        self.pending_sync.discard(m.member_id)
        if m.group_instance_id is not None and self.static.get(m.group_instance_id) == m.member_id:
            del self.static[m.group_instance_id]
        if self.leader == m.member_id:
            self.leader = next(iter(self.members), None)

    def _remove_member_and_update(self, m: Member, reason: str) -> None:
        self._remove_member(m)
        if self.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance("removing member %s: %s" % (m.member_id, reason))
        elif self.state == PREPARING_REBALANCE:
            self._maybe_complete_join()

    def remove_all_members(self) -> None:
        for m in list(self.members.values()):
            self._remove_member(m)
        self.pending.clear()

    def unload(self) -> None:
        """This broker stopped coordinating the group (Kafka's onUnloaded): members waiting in
        JoinGroup/SyncGroup learn NOT_COORDINATOR (they look the coordinator up again), timers
        stop, and the object is Dead, so a late append callback changes nothing."""
        for m in self.members.values():
            self._answer_waiters(m, E.NOT_COORDINATOR)
        self.cancel_timers()
        self.state = DEAD

    def cancel_timers(self) -> None:
        for m in list(self.members):
            self.timer.cancel(self._tkey("hb", m))
        for p in list(self.pending):
            self.timer.cancel(self._tkey("pending", p))
        self.timer.cancel(self._tkey("join"))
        self.timer.cancel(self._tkey("sync"))


# Per-state dispatch tables (the "table-driven" part): which method answers a request kind.
_JOIN_EXISTING: dict[str, Callable] = {
    PREPARING_REBALANCE: ClassicGroup._join_existing_preparing,
    COMPLETING_REBALANCE: ClassicGroup._join_existing_completing,
    STABLE: ClassicGroup._join_existing_stable,
    EMPTY: ClassicGroup._join_existing_empty,
}
_SYNC: dict[str, Callable] = {
    EMPTY: ClassicGroup._sync_empty,
    PREPARING_REBALANCE: ClassicGroup._sync_rebalancing,
    COMPLETING_REBALANCE: ClassicGroup._sync_completing,
    STABLE: ClassicGroup._sync_stable,
}
_HEARTBEAT: dict[str, Callable] = {
    EMPTY: ClassicGroup._heartbeat_empty,
    PREPARING_REBALANCE: ClassicGroup._heartbeat_rebalancing,
    # Members may heartbeat between their JoinGroup and SyncGroup responses: that is normal.
    COMPLETING_REBALANCE: ClassicGroup._heartbeat_ok,
    STABLE: ClassicGroup._heartbeat_ok,
}


def parse_subscription_topics(meta: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: the topic list always comes first
    after the int16 version).  None if the bytes are not a consumer subscription."""
    try:
        mv = memoryview(meta)
        if len(mv) < 6:
            return None
        n = int.from_bytes(mv[2:6], "big", signed=True)
        pos = 6
        topics = set()
        for _ in range(max(n, 0)):
            ln = int.from_bytes(mv[pos:pos + 2], "big", signed=True)
            pos += 2
            if ln < 0 or pos + ln > len(mv):
                return None
            topics.add(bytes(mv[pos:pos + ln]).decode("utf-8"))
            pos += ln
        return topics
    except (ValueError, UnicodeDecodeError):
        return None
