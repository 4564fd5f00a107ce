"""The partition-state rules themselves (pykbroker/cluster/partition_change.py), pure: states in,
states out, Kafka's error codes.  The same rules seen through each controller:
test_partition_change_contract.py."""
import pytest

from pykbroker.cluster import partition_change as PC
from pykbroker.cluster.metadata_cache import PartitionState
from pykbroker.protocol.errors import ErrorCode, KafkaError

ALL = {1, 2, 3}


def state(leader=1, le=5, pe=7, replicas=(1, 2, 3), isr=(1, 2, 3), offline=()):
    return PartitionState(leader, le, pe, tuple(replicas), tuple(isr), tuple(offline))


def code(fn, *a, **kw):
    with pytest.raises(KafkaError) as e:
        fn(*a, **kw)
    return e.value.code


# ---------------------------------------------------------------------- AlterPartition
def test_isr_shrink_and_expand_bump_only_the_partition_epoch():
    st = state()
    new = PC.alter_partition(st, partition_epoch=7, leader_epoch=5, isr=[1, 3], eligible=ALL)
    assert new == state(pe=8, isr=(1, 3))
    assert PC.alter_partition(new, partition_epoch=8, isr=[1, 3, 2], eligible=ALL) == state(pe=9, isr=(1, 3, 2))
    assert PC.alter_partition(st, partition_epoch=7, isr=[1, 2, 3], eligible=ALL) is None   # no change


@pytest.mark.parametrize("kw,expected", [
    (dict(partition_epoch=6), ErrorCode.INVALID_UPDATE_VERSION),            # a newer state exists
    (dict(partition_epoch=7, leader_epoch=4), ErrorCode.FENCED_LEADER_EPOCH),   # a deposed leader
    (dict(partition_epoch=6, leader_epoch=4), ErrorCode.FENCED_LEADER_EPOCH),   # leader epoch first
    (dict(partition_epoch=8), ErrorCode.NOT_CONTROLLER),                     # our view is behind
    (dict(partition_epoch=7, leader_epoch=6), ErrorCode.NOT_CONTROLLER),
])
def test_stale_or_future_epochs(kw, expected):
    assert code(PC.alter_partition, state(), isr=[1, 2], eligible=ALL, **kw) == expected


@pytest.mark.parametrize("isr", [[1, 4], [1, 1, 2], [2, 3], []])
def test_invalid_isr(isr):
    # not a subset of the replicas, a duplicate, or without the leader
    assert code(PC.alter_partition, state(), partition_epoch=7, isr=isr, eligible=ALL) == ErrorCode.INVALID_REQUEST


def test_only_registered_brokers_enter_or_stay_in_the_isr():
    st = state(isr=(1, 2))
    assert code(PC.alter_partition, st, partition_epoch=7, isr=[1, 2, 3], eligible={1, 2}) == ErrorCode.INELIGIBLE_REPLICA
    # Kafka checks every member, not only those joining
    assert code(PC.alter_partition, st, partition_epoch=7, isr=[1, 2], eligible={1, 3}) == ErrorCode.INELIGIBLE_REPLICA
    assert PC.alter_partition(st, partition_epoch=7, isr=[1], eligible={1, 3}) == state(pe=8, isr=(1,))


def test_controller_leader_change_through_alter_partition():
    st = state()
    assert PC.alter_partition(st, partition_epoch=7, leader=2, eligible=ALL) == state(leader=2, le=6, pe=8)
    assert PC.alter_partition(st, partition_epoch=7, leader=-1, isr=[1], eligible=ALL) == state(-1, 6, 8, isr=(1,))
    assert code(PC.alter_partition, st, partition_epoch=7, leader=4, eligible=ALL) == ErrorCode.INVALID_REQUEST
    assert code(PC.alter_partition, st, partition_epoch=7, leader=2, eligible={1, 3}) == ErrorCode.INELIGIBLE_REPLICA


# ---------------------------------------------------------------------- brokers going and coming
def test_follower_gone_leaves_the_isr_leader_kept():
    assert PC.on_brokers_changed(state(), {1, 2}) == state(pe=8, isr=(1, 2))
    assert PC.on_brokers_changed(state(), ALL) is None


def test_leader_gone_first_live_isr_member_in_replica_order_leads():
    st = state(replicas=(1, 2, 3), isr=(3, 1, 2))
    assert PC.on_brokers_changed(st, {2, 3}) == state(leader=2, le=6, pe=8, isr=(3, 2))


def test_no_live_isr_member_no_leader_isr_kept_then_it_returns():
    st = state(isr=(1, 2))
    gone = PC.on_brokers_changed(st, {3})
    assert gone == state(leader=-1, le=6, pe=8, isr=(1, 2))
    assert PC.on_brokers_changed(gone, {3}) is None       # nothing more to do
    assert PC.on_broker_returned(gone, 3, {3}) is None    # not in the ISR: it may not lead
    back = PC.on_broker_returned(gone, 2, {2, 3})
    assert back == state(leader=2, le=7, pe=9, isr=(2,))


def test_unclean_election_only_when_allowed():
    st = state(isr=(1,))
    assert PC.on_brokers_changed(st, {2, 3}).leader == -1
    unclean = PC.on_brokers_changed(st, {2, 3}, unclean_allowed=True)
    assert unclean == state(leader=2, le=6, pe=8, isr=(2,))


# ---------------------------------------------------------------------- elections
def test_preferred_election():
    st = state(leader=2)
    assert PC.elect_preferred(st, ALL) == (0, state(leader=1, le=6, pe=8))
    assert PC.elect_preferred(state(), ALL) == (ErrorCode.ELECTION_NOT_NEEDED, None)
    assert PC.elect_preferred(st, {2, 3}) == (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None)
    assert PC.elect_preferred(state(leader=2, isr=(2, 3)), ALL) == (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None)
    assert PC.elect_preferred(state(leader=2, offline=(1,)), ALL) == (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None)


def test_unclean_election_request():
    assert PC.elect_unclean(state(), ALL) == (ErrorCode.ELECTION_NOT_NEEDED, None)
    leaderless = state(leader=-1, isr=(1,))
    assert PC.elect_unclean(leaderless, {2, 3}) == (0, state(leader=2, le=6, pe=8, isr=(2,)))
    assert PC.elect_unclean(leaderless, {1, 3}) == (0, state(leader=1, le=6, pe=8, isr=(1,)))   # clean first
    assert PC.elect_unclean(leaderless, set()) == (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)


def test_move_leader():
    assert PC.move_leader(state(), ALL) == state(leader=2, le=6, pe=8)
    assert PC.move_leader(state(), ALL, 3) == state(leader=3, le=6, pe=8)
    with pytest.raises(ValueError):
        PC.move_leader(state(isr=(1, 2)), ALL, 3)
    with pytest.raises(ValueError):
        PC.move_leader(state(isr=(1,)), ALL)


def test_builder_preferred_election_falls_back_to_the_current_leader():
    b = PC.PartitionChangeBuilder(state(leader=2, isr=(2, 3)), ALL).set_election(PC.Election.PREFERRED)
    assert b.build() is None
    b = PC.PartitionChangeBuilder(state(leader=2), ALL).set_election(PC.Election.PREFERRED)
    assert b.build() == state(leader=1, le=6, pe=8)


# ---------------------------------------------------------------------- offline replicas
def test_replica_offline_follower_leaves_the_isr():
    new = PC.replicas_offline(state(), 2, ALL)
    assert new == state(pe=8, isr=(1, 3), offline=(2,))
    assert PC.replicas_offline(new, 2, ALL) is None       # reported twice
    assert PC.replicas_offline(new, 7, ALL) is None       # not a replica


def test_replica_offline_leader_moves_then_back():
    new = PC.replicas_offline(state(), 1, ALL)
    assert new == state(leader=2, le=6, pe=8, isr=(2, 3), offline=(1,))
    back = PC.replicas_online(new, 1, ALL)
    assert back == state(leader=2, le=6, pe=9, isr=(2, 3))   # rejoins the ISR by catching up
    assert PC.replicas_online(back, 1, ALL) is None


def test_single_replica_offline_no_leader_isr_kept_then_back():
    st = state(replicas=(1,), isr=(1,), le=0, pe=0)
    off = PC.replicas_offline(st, 1, {1})
    assert off == PartitionState(-1, 1, 1, (1,), (1,), (1,))
    assert PC.replicas_online(off, 1, {1}) == PartitionState(1, 2, 2, (1,), (1,))


# ---------------------------------------------------------------------- reassignment
def test_reassignment_steps():
    st = state(replicas=(1, 2, 3), isr=(1, 2, 3))
    replicas, adding, removing = PC.reassignment_replicas([1, 2, 3], [4, 2, 3])
    assert (replicas, adding, removing) == ([4, 2, 3, 1], [4], [1])
    live = {1, 2, 3, 4}
    grown = PC.reassign(st, replicas, live)
    assert grown == state(leader=1, le=6, pe=8, replicas=(4, 2, 3, 1), isr=(1, 2, 3))
    assert PC.complete_reassignment(grown, removing, live) is None     # 4 still catching up
    caught_up = PC.alter_partition(grown, partition_epoch=8, isr=[1, 2, 3, 4], eligible=live)
    done = PC.complete_reassignment(caught_up, removing, live)
    # the leader left the replica set: the first live ISR member of the new set leads
    assert done == state(leader=4, le=7, pe=10, replicas=(4, 2, 3), isr=(2, 3, 4))


def test_reassign_to_a_set_without_any_isr_member_keeps_the_isr_and_leaves_no_leader():
    # never an empty ISR; the leader epoch moves with every step
    new = PC.reassign(state(isr=(1,)), [2, 3], ALL)
    assert new.replicas == (2, 3) and new.leader == -1 and new.leader_epoch == 6
