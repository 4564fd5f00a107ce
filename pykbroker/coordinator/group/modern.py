"""What the managers of Kafka's modern groups share: consumer (KIP-848, ``consumer.py``), share
(KIP-932, ``share.py``) and streams (KIP-1071, ``streams.py``) groups, as Kafka's ModernGroup.

Their members heartbeat; a member whose session timer runs out is removed and the group epoch
bumped; a heartbeat is answered once the records it changed are in ``__consumer_offsets``; and a
failed write makes the next one rewrite the whole group.  Consumer and streams members also
revoke before they are assigned what another member still holds (Kafka's
CurrentAssignmentBuilder: :meth:`ModernGroupManager._reconcile`) and commit and fetch offsets
at their member epoch.  What differs per group type (records, assignor, heartbeat fields) stays
in its own module.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Generic, Iterable, TypeVar

from ...protocol.errors import ErrorCode as E
from .classic import Future

if TYPE_CHECKING:
    from ...cluster.metadata_cache import MetadataCache
    from .coordinator import GroupCoordinator


def _by_topic(tps: Iterable[tuple[bytes, int]]) -> list[tuple[bytes, list[int]]]:
    """An assignment's (topic id, partition) pairs as [(topic id, sorted partitions)] by topic id."""
    by: dict[bytes, list[int]] = {}
    for tid, p in tps:
        by.setdefault(tid, []).append(p)
    return [(t, sorted(ps)) for t, ps in sorted(by.items())]


def heartbeat_assignment(tps: Iterable[tuple[bytes, int]]) -> dict[str, Any]:
    """The ``assignment`` of a consumer or share group heartbeat response."""
    return {"topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in _by_topic(tps)]}


def described_assignment(tps: Iterable[tuple[bytes, int]], metadata: MetadataCache | None) -> dict[str, Any]:
    """An assignment as the describe APIs show it: each topic also by name ("" when unknown)."""
    return {"topic_partitions": [{"topic_id": t, "topic_name": (metadata.name_of(t) if metadata else None) or "",
                                  "partitions": ps} for t, ps in _by_topic(tps)]}


# Kafka's MemberState codes as the consumer and streams records store them (UNREVOKED_PARTITIONS /
# UNREVOKED_TASKS 1, UNRELEASED_PARTITIONS / UNRELEASED_TASKS 2)
STATE_STABLE, STATE_UNREVOKED, STATE_UNRELEASED = 0, 1, 2


def reconciliation_state(g: ModernGroup[Any], m: Any) -> int:
    """Where a consumer or streams member stands (Kafka's MemberState): still revoking what it
    held; at the assignment epoch but not yet holding its target (another member has not
    released it); else stable.  ``m`` is a consumer or streams member (they have ``revoking``;
    the base member class has not)."""
    if m.revoking:
        return STATE_UNREVOKED
    if m.epoch == g.assignment_epoch and m.assigned != g.target.get(m.member_id, set()):
        return STATE_UNRELEASED
    return STATE_STABLE


class ModernGroupMember:
    """Base of a modern group's member (Kafka's ModernGroupMember): its id, epochs, client, and
    the assignment it holds."""

    __slots__ = ("member_id", "epoch", "prev_epoch", "rack_id", "client_id", "client_host", "assigned",
                 "last_sent")

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.prev_epoch = -1
        self.rack_id = None
        self.client_id = ""
        self.client_host = ""
        self.assigned: set = set()
        self.last_sent = None   # the assignment last sent in a heartbeat response (None: send it again)


# the member class of a group type (ConsumerGroup's CMember, ...)
M = TypeVar("M", bound="ModernGroupMember")


class ModernGroup(Generic[M]):
    """Base of a modern group's state (Kafka's ModernGroup): epochs, members and their target
    assignment, and what was last handed to the writer."""

    kind = ""            # Kafka's group type: "consumer", "share", "streams"
    timer_kind = ""      # the first element of its members' session timer keys in the coordinator's Timer

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, M] = {}        # member id -> member
        self.target: dict[str, set] = {}       # member id -> its target assignment
        self.assignment_ts = 0
        self.dead = False
        self.state_timestamp = now_ms          # the broker's clock (pykbroker/clock.py)
        self.written: dict[bytes, bytes] = {}  # key -> value last handed to the writer
        self.last_write: Future | None = None

    @property
    def protocol_type(self) -> str:
        return self.kind     # a modern group's protocol type is its type's name (ListGroups shows it)

    @property
    def state(self) -> str:
        return "Dead" if self.dead else self.summary_state()

    @state.setter
    def state(self, value: str) -> None:
        self.dead = value == "Dead"

    def cancel_timers(self) -> None:
        pass   # the members' session timers are the manager's (timer_kind keys), not the group's

    def summary_state(self) -> str:
        raise NotImplementedError

    def _reconciliation_state(self) -> str:
        """The state of a consumer or streams group with members (Kafka's ASSIGNING /
        RECONCILING / STABLE): its target is behind the group epoch, a member is not at its
        target yet (epoch, partitions to revoke or to take), or every member is."""
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        members: dict[str, Any] = self.members   # consumer or streams members: they have ``revoking``
        if any(m.epoch != self.assignment_epoch or m.revoking or m.assigned != self.target.get(m.member_id, set())
               for m in members.values()):
            return "Reconciling"
        return "Stable"


class ModernGroupManager:
    """Base of a group type's manager.  A subclass names its group class, broker configs,
    session timer and logger, and builds its records (``_records``), heartbeat and assignment."""

    GROUP_CLASS: type[ModernGroup] = ModernGroup
    # the broker configs of the group type: session timeout, heartbeat interval, maximum size
    # (every key and its Kafka default is declared in pykbroker/config/broker.py)
    CONFIGS = ("", "", "")
    log = logging.getLogger("pykbroker.group")

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.gc = coordinator
        cfg = coordinator.config
        self.session_timeout_ms, self.heartbeat_interval_ms, self.max_size = (cfg[k] for k in self.CONFIGS)

    # -- configs and metadata ------------------------------------------------------------------
    def _group_value(self, gid: str, name: str) -> int:
        """The group's config (a GROUP config resource) or the broker's value."""
        default = self.session_timeout_ms if name.endswith("session.timeout.ms") else self.heartbeat_interval_ms
        gcfg = self.gc.group_configs
        return default if gcfg is None else gcfg.override(gid, name, default)

    def _session_timeout_ms(self, gid: str) -> int:
        return self._group_value(gid, self.GROUP_CLASS.kind + ".session.timeout.ms")

    def _topic_meta(self, names: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """name -> (topic id, partition count) of the named topics that exist."""
        md = self.gc.metadata
        out: dict[str, tuple[bytes, int]] = {}
        for n in names:
            info = md.get(n) if md is not None else None
            if info is not None:
                out[n] = (info.topic_id, info.num_partitions)
        return out

    # -- membership ----------------------------------------------------------------------------
    def _bump(self, g: ModernGroup[Any], why: str) -> None:
        g.group_epoch += 1
        self.log.info("%s group %s: epoch %d (%s)", self.GROUP_CLASS.kind, g.group_id, g.group_epoch, why)

    def _schedule(self, g: ModernGroup[Any], m: ModernGroupMember) -> None:
        """(Re)start the member's session timer: it expires unless the member heartbeats first."""
        gid, mid = g.group_id, m.member_id
        self.gc.timer.schedule((self.GROUP_CLASS.timer_kind, gid, mid), self._session_timeout_ms(gid) / 1000.0,
                               lambda: self._expire(gid, mid))

    def _expire(self, gid: str, mid: str) -> None:
        g = self.gc.groups.get(gid)
        if isinstance(g, self.GROUP_CLASS) and mid in g.members:
            self.log.info("%s group %s: member %s session expired", self.GROUP_CLASS.kind, gid, mid)
            self._remove(g, mid)
            self.persist(g)

    def _remove(self, g: ModernGroup[Any], mid: str) -> None:
        g.members.pop(mid, None)
        g.target.pop(mid, None)
        if not g.members:
            g.state_timestamp = self.gc.now_ms()
        self.gc.timer.cancel((self.GROUP_CLASS.timer_kind, g.group_id, mid))
        self._member_left(g, mid)

    def _member_left(self, g: Any, mid: str) -> None:  # g: the subclass's GROUP_CLASS
        """After a member left or expired: a new group epoch (the target is recomputed)."""
        self._bump(g, "member %s left" % mid)

    # -- persistence ---------------------------------------------------------------------------
    def _records(self, g: Any) -> list:  # g: the subclass's GROUP_CLASS
        """The (key, value or None) records that bring the log to the group's state."""
        raise NotImplementedError

    def _rewrite_all(self, g: Any) -> None:  # g: the subclass's GROUP_CLASS
        """After a failed write: the next write rewrites every record of the group."""
        raise NotImplementedError

    def persist(self, g: ModernGroup[Any]) -> Future:
        """Hand the group's changes to the coordinator's writer; the future resolves with 0 or
        the append's error once they (and every earlier write of the group) are in the log."""
        if not self.gc._topic_ready:
            return Future(0, done=True)  # no offsets topic (unit tests without a log): keep it all dirty
        recs = self._records(g)
        if not recs:
            if g.last_write is not None and not g.last_write.done():
                return g.last_write
            return Future(0, done=True)
        fut = Future()

        def on_complete(code: int) -> None:
            if code:
                self._rewrite_all(g)
                for m in g.members.values():
                    m.last_sent = None  # and send assignments again: the answers were errors
        self.gc._enqueue(self.gc.partition_for(g.group_id), recs, fut, None, on_complete)
        g.last_write = fut
        return fut

    def _once_written(self, group_id: str, resp: dict) -> tuple[dict, Future]:
        """A heartbeat's (response, Future): send the response once the future resolves with 0
        (the heartbeat's records are in the log); otherwise answer the append error."""
        g = self.gc.groups.get(group_id)
        if not isinstance(g, self.GROUP_CLASS) or g.dead:
            return resp, Future(0, done=True)
        return resp, self.persist(g)

    # -- consumer and streams members: revocation and offsets ------------------------------------
    def _reconcile(self, g: Any, m: Any) -> None:  # a consumer or streams group and member
        """Move the member toward its target: revoke first what it must give up (it keeps its
        epoch until it confirms), then take what no other member still holds, at the group's
        assignment epoch."""
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
        m.assigned |= {t for t in target - m.assigned if t not in held}
        if m.epoch != g.assignment_epoch:
            m.prev_epoch, m.epoch = m.epoch, g.assignment_epoch

    def validate_commit(self, g: ModernGroup[Any], epoch: int, member_id: str | None, instance_id: str | None) -> int:
        """OffsetCommit / TxnOffsetCommit by a member (Kafka's validateOffsetCommit): a negative
        epoch while the group has no member is an admin or assign() commit, taken whatever member
        id it names (Kafka 4.4 answers 0, checked by tests/differential/
        test_txn_offset_commit_members.py); else a known member (UNKNOWN_MEMBER_ID, also for an
        empty id) at its current or previous epoch."""
        if epoch < 0 and not g.members:
            return 0
        m = g.members.get(member_id)  # type: ignore[arg-type]  # a None id finds no member
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.epoch and epoch != m.prev_epoch:
            return E.STALE_MEMBER_EPOCH
        return 0

    def validate_fetch(self, g: ModernGroup[Any], member_id: str | None, epoch: int) -> int:
        """OffsetFetch by a member (Kafka's validateOffsetFetch): a known member at its epoch."""
        m = g.members.get(member_id or "")
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.epoch:
            return E.STALE_MEMBER_EPOCH
        return 0
