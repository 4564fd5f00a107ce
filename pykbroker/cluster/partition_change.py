"""Partition-state rules, written once: what a controller may change in a partition's leader,
ISR and replica set, and how (Kafka's ``PartitionChangeBuilder`` and the checks its
``ReplicationControlManager`` makes before using it).

Pure: a function takes the current ``PartitionState`` and the facts it needs (which brokers
are alive, whether unclean election is allowed) and returns the new state, or None when nothing
changes, or raises ``KafkaError`` with Kafka's code.  No I/O, no clock, no trio.  Every
controller calls these and keeps only its transport and storage: ``LocalController`` (a JSON
file), ``ZkController`` (compare-and-set writes of state znodes) and the in-memory test
cluster (pykbroker/testing/memory_cluster.py).  docs/replication-contract.md states the contract
and tests/replication/test_partition_change_contract.py holds every controller to it.

The rules every change obeys (``PartitionChangeBuilder.build``):
- the partition epoch grows by one with every change (the compare-and-set version);
- the leader epoch grows by one when the leader changes (to -1 too), and at every reassignment
  step, never on an ISR change alone (Kafka since 3.6; the leader's own AlterPartition);
- the ISR is a subset of the replicas and holds the leader (unless there is none);
- a leader is chosen among the replicas that are in the ISR, alive and not offline, the current
  leader first, else in replica order; only an unclean election picks a live replica out of the
  ISR, and the ISR is then that replica alone (acknowledged records may be lost);
- an ISR is never emptied: when its last member goes, it stays (Kafka does not write an empty
  ISR), so the replica with the latest records is the one that leads again when it returns.
"""
from __future__ import annotations

import enum
from typing import Collection, Iterable, Optional

from ..protocol.errors import ErrorCode, KafkaError
from .metadata_cache import PartitionState

__all__ = ["NO_LEADER", "Election", "PartitionChangeBuilder", "alter_partition", "on_brokers_changed",
           "on_broker_returned", "elect_preferred", "elect_unclean", "move_leader", "replicas_offline",
           "replicas_online", "reassignment_replicas", "reassign", "complete_reassignment"]

NO_LEADER = -1


class Election(enum.Enum):
    """How ``build`` chooses a leader (Kafka's PartitionChangeBuilder.Election)."""
    PREFERRED = "preferred"   # the first replica if it can lead, else as ONLINE
    ONLINE = "online"         # the current leader if it can still lead, else the first that can
    UNCLEAN = "unclean"       # as ONLINE; failing that, the first live replica, out of sync


class PartitionChangeBuilder:
    """One change of one partition: set the targets, then ``build()``.

    ``eligible``: the brokers that may lead or be in the ISR (registered and alive).
    ``unclean_allowed``: the topic's ``unclean.leader.election.enable`` (an ONLINE election
    that finds no in-sync leader then becomes an unclean one, as in Kafka's controller)."""

    def __init__(self, state: PartitionState, eligible: Collection[int], unclean_allowed: bool = False) -> None:
        self.state = state
        self.eligible = frozenset(eligible)
        self.unclean_allowed = unclean_allowed
        self.target_isr = list(state.isr)
        self.target_replicas = list(state.replicas)
        self.offline = list(state.offline_replicas)
        self.election = Election.ONLINE
        self.leader: Optional[int] = None     # an explicit leader (validated by the caller)
        self.bump_leader_epoch = False
        self.unclean = False                  # set by build(): the leader was elected out of sync

    def set_target_isr(self, isr: Iterable[int]) -> "PartitionChangeBuilder":
        self.target_isr = list(isr)
        return self

    def set_target_replicas(self, replicas: Iterable[int]) -> "PartitionChangeBuilder":
        self.target_replicas = list(replicas)
        return self

    def set_election(self, election: Election) -> "PartitionChangeBuilder":
        self.election = election
        return self

    def set_leader(self, leader: int) -> "PartitionChangeBuilder":
        self.leader = leader
        return self

    def set_offline(self, broker_id: int, offline: bool = True) -> "PartitionChangeBuilder":
        if offline and broker_id not in self.offline:
            self.offline.append(broker_id)
        elif not offline and broker_id in self.offline:
            self.offline.remove(broker_id)
        return self

    def force_leader_epoch_bump(self) -> "PartitionChangeBuilder":
        """Reassignment steps bump the leader epoch so every replica learns the new set."""
        self.bump_leader_epoch = True
        return self

    def can_lead(self, broker_id: int, isr: Collection[int]) -> bool:
        return broker_id in isr and broker_id in self.eligible and broker_id not in self.offline

    def _elect(self, isr: list[int]) -> tuple[int, list[int]]:
        replicas = self.target_replicas
        if self.election is Election.PREFERRED and replicas and self.can_lead(replicas[0], isr):
            return replicas[0], isr
        current = self.state.leader
        if current != NO_LEADER and current in replicas and self.can_lead(current, isr):
            return current, isr
        for b in replicas:
            if self.can_lead(b, isr):
                return b, isr
        if self.election is Election.UNCLEAN or self.unclean_allowed:
            for b in replicas:
                if b in self.eligible and b not in self.offline:
                    self.unclean = True
                    return b, [b]
        return NO_LEADER, isr

    def build(self) -> Optional[PartitionState]:
        st = self.state
        replicas = tuple(self.target_replicas)
        isr = [b for b in self.target_isr if b in replicas]
        if self.leader is not None:
            leader = self.leader
        else:
            leader, isr = self._elect(isr)
        if not isr:
            # never an empty ISR: its last members stay (they hold the latest records)
            isr = [b for b in st.isr if b in replicas] or list(isr)
        bump = leader != st.leader or self.bump_leader_epoch
        new = PartitionState(leader=leader, leader_epoch=st.leader_epoch + bump,
                             partition_epoch=st.partition_epoch, replicas=replicas, isr=tuple(isr),
                             offline_replicas=tuple(self.offline))
        if new == st:
            return None
        return PartitionState(new.leader, new.leader_epoch, st.partition_epoch + 1, new.replicas,
                              new.isr, new.offline_replicas)


# ---------------------------------------------------------------------- AlterPartition
def alter_partition(st: PartitionState, *, partition_epoch: int, eligible: Collection[int],
                    isr: Optional[Iterable[int]] = None, leader: Optional[int] = None,
                    leader_epoch: Optional[int] = None, where: str = "") -> Optional[PartitionState]:
    """A partition leader's ISR change (Kafka's AlterPartition), or the controller's own leader
    change (``leader``; -1 for none).  Checked in the order of Kafka's
    ``validateAlterPartitionData``; returns None when nothing changes.

    ``partition_epoch`` / ``leader_epoch`` (None: not checked): what the proposer saw.  Newer
    than ours: NOT_CONTROLLER (our view is behind; the proposer asks again).  Older leader epoch:
    FENCED_LEADER_EPOCH (a deposed leader); older partition epoch: INVALID_UPDATE_VERSION (a
    newer state is on its way to it).  ``where``: "topic-p" for the messages."""
    where = where or "the partition"
    if leader_epoch is not None and leader_epoch > st.leader_epoch:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "Leader epoch %d of %s is newer than the controller's %d."
                         % (leader_epoch, where, st.leader_epoch))
    if partition_epoch > st.partition_epoch:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "Partition epoch %d of %s is newer than the controller's %d."
                         % (partition_epoch, where, st.partition_epoch))
    if leader_epoch is not None and leader_epoch < st.leader_epoch:
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, "Leader epoch %d of %s is older than the current %d."
                         % (leader_epoch, where, st.leader_epoch))
    if partition_epoch < st.partition_epoch:
        raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION, "Partition epoch %d of %s is older than the current %d."
                         % (partition_epoch, where, st.partition_epoch))
    new_leader = st.leader if leader is None else leader
    new_isr = list(st.isr if isr is None else isr)
    if len(set(new_isr)) != len(new_isr) or any(b not in st.replicas for b in new_isr):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid ISR %s for %s (replicas %s)."
                         % (new_isr, where, list(st.replicas)))
    if new_leader != NO_LEADER and new_leader not in st.replicas:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker %d is not a replica of %s." % (new_leader, where))
    if new_leader != NO_LEADER and new_leader not in new_isr:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid ISR %s for %s: it does not hold the leader %d."
                         % (new_isr, where, new_leader))
    # Kafka admits only registered, live brokers into an ISR (a broker in controlled shutdown has
    # dropped its registration and may still be fetching for a moment) and as leader
    ineligible = sorted({b for b in new_isr + ([new_leader] if new_leader != NO_LEADER else [])
                         if b not in eligible})
    if ineligible:
        raise KafkaError(ErrorCode.INELIGIBLE_REPLICA, "Broker(s) %s of the new ISR %s of %s are not "
                         "registered." % (ineligible, new_isr, where))
    return PartitionChangeBuilder(st, eligible).set_target_isr(new_isr).set_leader(new_leader).build()


# ---------------------------------------------------------------------- brokers going and coming
def on_brokers_changed(st: PartitionState, live: Collection[int], unclean_allowed: bool = False) -> Optional[PartitionState]:
    """The set of live brokers changed (Kafka's onBrokerFailure / onBrokerStartup): members
    that are gone leave the ISR; a leader that is gone (or none) is replaced by the first live
    ISR member in replica order; with none, no leader (-1) and the ISR kept, unless
    ``unclean_allowed`` lets a live out-of-sync replica lead."""
    live_isr = [b for b in st.isr if b in live]
    return PartitionChangeBuilder(st, live, unclean_allowed).set_target_isr(live_isr).build()


def on_broker_returned(st: PartitionState, broker_id: int, live: Collection[int],
                       unclean_allowed: bool = False) -> Optional[PartitionState]:
    """A broker (re-)registered: a partition left without a leader whose ISR holds it gets a
    leader again (Kafka's handleBrokerUnfenced); nothing else moves."""
    if st.leader != NO_LEADER or broker_id not in st.isr:
        return None
    return on_brokers_changed(st, live, unclean_allowed)


# ---------------------------------------------------------------------- elections
def elect_preferred(st: PartitionState, live: Collection[int]) -> tuple[int, Optional[PartitionState]]:
    """ElectLeaders PREFERRED: (error code, new state).  The first replica leads if it is live,
    in sync and online; ELECTION_NOT_NEEDED if it leads already."""
    preferred = st.replicas[0] if st.replicas else NO_LEADER
    if st.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    b = PartitionChangeBuilder(st, live)
    if preferred == NO_LEADER or not b.can_lead(preferred, st.isr):
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
    return 0, b.set_leader(preferred).build()


def elect_unclean(st: PartitionState, live: Collection[int]) -> tuple[int, Optional[PartitionState]]:
    """ElectLeaders UNCLEAN: (error code, new state) for a partition without a live leader: the
    first live ISR member, else the first live replica out of sync (ISR = it alone)."""
    if st.leader != NO_LEADER and st.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    b = PartitionChangeBuilder(st, live).set_election(Election.UNCLEAN)
    new = b.set_target_isr([r for r in st.isr if r in live]).build()
    if new is None or new.leader == NO_LEADER:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return 0, new


def move_leader(st: PartitionState, eligible: Collection[int], leader: Optional[int] = None) -> Optional[PartitionState]:
    """A controlled election: leadership to ``leader`` (default: the next eligible ISR member in
    replica order).  ValueError when it cannot lead."""
    b = PartitionChangeBuilder(st, eligible)
    if leader is None:
        leader = next((r for r in st.replicas if r != st.leader and b.can_lead(r, st.isr)), None)
        if leader is None:
            raise ValueError("no other eligible ISR member (ISR %s)" % (list(st.isr),))
    if not b.can_lead(leader, st.isr):
        raise ValueError("%d cannot lead: not an eligible, online ISR member (ISR %s)" % (leader, list(st.isr)))
    return b.set_leader(leader).build()


# ---------------------------------------------------------------------- offline replicas
def replicas_offline(st: PartitionState, broker_id: int, live: Collection[int]) -> Optional[PartitionState]:
    """``broker_id`` reports its replica offline (a failed log dir; Kafka's
    handleDirectoriesOffline): listed in ``offline_replicas``, out of the ISR (unless it is the
    last member), and if it led, the next live ISR member leads, else none (-1)."""
    if broker_id not in st.replicas or broker_id in st.offline_replicas:
        return None
    return (PartitionChangeBuilder(st, live).set_offline(broker_id)
            .set_target_isr([b for b in st.isr if b != broker_id]).build())


def replicas_online(st: PartitionState, broker_id: int, live: Collection[int]) -> Optional[PartitionState]:
    """The replica of ``broker_id`` is back (its log dir again): no longer offline; a partition
    left without a leader whose ISR holds it is led by it again.  It rejoins the ISR of a live
    leader the usual way, by catching up."""
    if broker_id not in st.offline_replicas:
        return None
    return PartitionChangeBuilder(st, live).set_offline(broker_id, False).build()


# ---------------------------------------------------------------------- manual assignments
def manual_assignment_error(brokers: list[int], registered: Collection[int]) -> Optional[str]:
    """Kafka's validateManualPartitionAssignment for a replica list (CreateTopics and
    CreatePartitions assignments, a reassignment's target): the INVALID_REPLICA_ASSIGNMENT
    message, or None when valid.  Brokers are checked in ascending order, so the first problem
    Kafka names is the one named here (``[2, 2, 9]`` is a duplicate, not an unknown broker)."""
    if not brokers:
        return "The manual partition assignment includes an empty replica list."
    prev = None
    for b in sorted(brokers):
        if b not in registered:
            return "The manual partition assignment includes broker %d, but no such broker is registered." % b
        if b == prev:
            return "The manual partition assignment includes the broker %d more than once." % b
        prev = b
    return None


# ---------------------------------------------------------------------- reassignment
def reassignment_replicas(original: list[int], target: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Kafka's KIP-455 first step: (replicas, adding, removing) — the target first, then the
    original replicas leaving it (they serve until the new ones are in sync)."""
    replicas = list(target) + [b for b in original if b not in target]
    adding = [b for b in target if b not in original]
    removing = [b for b in original if b not in target]
    return replicas, adding, removing


def reassign(st: PartitionState, replicas: Iterable[int], live: Collection[int]) -> PartitionState:
    """One reassignment step to a new replica set: the ISR keeps its members still in it; a
    leader outside it (or none) hands over to the first live ISR member; the leader epoch is
    bumped (every replica learns the new set)."""
    replicas = list(replicas)
    new = (PartitionChangeBuilder(st, live).set_target_replicas(replicas)
           .set_target_isr([b for b in st.isr if b in replicas]).force_leader_epoch_bump().build())
    return new if new is not None else st


def complete_reassignment(st: PartitionState, removing: Collection[int], live: Collection[int]) -> Optional[PartitionState]:
    """The last step, once every target replica is in the ISR: the removed replicas go.  None
    while the new replicas are still catching up."""
    target = [b for b in st.replicas if b not in removing]
    if not all(b in st.isr for b in target):
        return None
    return reassign(st, target, live)
