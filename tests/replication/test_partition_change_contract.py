"""docs/replication-contract.md, held against every controller: the single-node
``LocalController``, the ``ZkController`` on a real ZooKeeper, and the in-memory cluster the
replication tests run on.  Each runs in-process here with fake ReplicaManagers (no logs, no
sockets to clients): what is checked is the partition state each controller makes durable and
publishes, for the same proposals and the same broker failures.

Three brokers (1, 2, 3) are registered and a topic ``c`` has one partition on replicas
[1, 2, 3] (1 leads).  A case a controller has no way to express is skipped with the reason:
a single node has no other broker to fail over to.
"""
from __future__ import annotations

import itertools

import pytest

from tests import needs
import trio

from pykbroker.cluster.metadata_cache import (Endpoint, MetadataCache, PartitionState,
                                              UnregisterBrokerRecord)
from pykbroker.config import BrokerConfig
from pykbroker.protocol.errors import ErrorCode, KafkaError

TOPIC = "c"
BROKERS = (1, 2, 3)
PATIENCE_S = 30.0
_chroots = itertools.count()


class FakeReplicaManager:
    def __init__(self):
        self.changes = []

    async def make_partitions(self, info, ids):
        await trio.lowlevel.checkpoint()

    async def delete_partitions(self, info):
        pass

    def on_config_change(self, info):
        pass


def _config(node_id: int, **extra) -> BrokerConfig:
    return BrokerConfig({"node.id": str(node_id), "auto.leader.rebalance.enable": "false", **extra})


def _endpoint(b: int):
    return (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b),)


class Harness:
    """What a test does to a cluster, whatever its controller."""
    fails_over = True

    def __init__(self, nursery, tmp_path):
        self.nursery = nursery
        self.tmp_path = tmp_path
        self.ctls = {}
        self.caches = {}
        self.changes = {}

    def _listen(self, b, ctl):
        self.changes[b] = []
        ctl.add_partition_change_listener(lambda t, p, st, b=b: self.changes[b].append(st))

    def ctl(self, b: int):
        return self.ctls[b]

    async def active(self):
        return self.ctls[min(self.ctls)]

    async def create(self):
        await self.ctls[1].create_topic(TOPIC, -1, -1, assignments=[(0, [1, 2, 3])])
        await self.until(lambda: all(c.partition_state(TOPIC, 0) is not None for c in self.caches.values()))

    async def until(self, pred, what="condition"):
        with trio.move_on_after(PATIENCE_S):
            while True:
                got = pred()
                if hasattr(got, "__await__"):
                    got = await got
                if got:
                    return
                await trio.sleep(0.05)
        raise AssertionError("timed out waiting for %s" % what)

    async def settled(self):
        """Every live broker's view equals the durable state (offline marks aside: with
        ZooKeeper each broker lists only its own)."""
        def durable(st):
            return (st.leader, st.leader_epoch, st.partition_epoch, st.replicas, st.isr) if st else None

        async def same():
            st = durable(await self.state())
            return all(durable(c.partition_state(TOPIC, 0)) == st for c in self.caches.values())
        await self.until(same, "every broker to see the same state")
        return await self.state()


class MemoryHarness(Harness):
    async def start(self):
        from pykbroker.testing.memory_cluster import MemoryCluster
        self.cluster = MemoryCluster()
        for b in BROKERS:
            await self.register(b)

    async def register(self, b):
        config = _config(b)
        cache = MetadataCache(b, "cid", config.effective_topic_config)
        ctl = self.cluster.controller_factory(cache, config, b)
        ctl.set_replica_manager(FakeReplicaManager())
        self._listen(b, ctl)
        await ctl.load()
        await ctl.register_broker(b, _endpoint(b))
        self.ctls[b], self.caches[b] = ctl, cache

    async def unregister(self, b):
        self.ctls.pop(b)
        self.caches.pop(b)
        self.cluster.fail_broker(b)

    async def state(self):
        return self.cluster.state(TOPIC, 0)


class LocalHarness(Harness):
    fails_over = False

    async def start(self):
        from pykbroker.cluster.local_controller import LocalController
        config = _config(1)
        cache = MetadataCache(1, "cid", config.effective_topic_config)
        ctl = LocalController(cache, config, 1, str(self.tmp_path))
        ctl.set_replica_manager(FakeReplicaManager())
        self._listen(1, ctl)
        await ctl.load()
        for b in BROKERS:   # the other brokers only as registrations (placement, eligibility)
            await ctl.register_broker(b, _endpoint(b))
        await ctl.startup(self.nursery)
        self.local = ctl
        self.ctls = {b: ctl for b in BROKERS}
        self.caches = {1: cache}

    async def unregister(self, b):
        self.caches[1].apply([UnregisterBrokerRecord(b)])

    async def state(self):
        return self.caches[1].partition_state(TOPIC, 0)


class ZkHarness(Harness):
    async def start(self):
        self.connect = "%s/contract-%d" % (ZK_SERVER.connect_string, next(_chroots))
        for b in BROKERS:
            await self.register(b)

    async def register(self, b):
        from pykbroker.cluster.zk_controller import ZkController
        config = _config(b, **{"zookeeper.connect": self.connect, "zookeeper.session.timeout.ms": "3000"})
        cache = MetadataCache(b, "cid", config.effective_topic_config)
        ctl = ZkController(cache, config, b)
        ctl.set_replica_manager(FakeReplicaManager())
        self._listen(b, ctl)
        await ctl.connect("cid")
        await ctl.load()
        await ctl.startup(self.nursery)
        await ctl.register_broker(b, _endpoint(b))
        self.ctls[b], self.caches[b] = ctl, cache
        await self.until(lambda: all(len(c.alive_brokers()) == len(self.ctls) for c in self.caches.values()),
                         "every broker to see %d registrations" % len(self.ctls))

    async def active(self):
        await self.until(lambda: any(c.is_active for c in self.ctls.values()), "an active controller")
        return next(c for c in self.ctls.values() if c.is_active)

    async def unregister(self, b):
        ctl = self.ctls.pop(b)
        self.caches.pop(b)
        await ctl.shutdown()   # the session closes: its registration (ephemeral) goes at once
        await self.until(lambda: all(b not in {r.broker_id for r in c.alive_brokers()}
                                     for c in self.caches.values()), "broker %d unregistered" % b)

    async def state(self):
        from pykbroker.cluster import zk as Z
        ctl = self.ctls[min(self.ctls)]
        data, stat = await ctl.zk.call("get", Z.state_path(TOPIC, 0))
        return Z.decode_state(data, stat.version, BROKERS)[0]


HARNESSES = {"memory": MemoryHarness, "local": LocalHarness, "zookeeper": ZkHarness}
ZK_SERVER = None


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory):
    global ZK_SERVER
    from pykbroker.local import zookeeper
    needs.require_zookeeper()
    with zookeeper.ZooKeeperServer(str(tmp_path_factory.mktemp("contract-zk")), tick_time=500) as server:
        ZK_SERVER = server
        yield server
    ZK_SERVER = None


@pytest.fixture(params=sorted(HARNESSES))
def kind(request):
    if request.param == "zookeeper":
        needs.module("kazoo")
        request.getfixturevalue("zk_server")
    return request.param


def run(kind, tmp_path, body, needs_failover=False):
    cls = HARNESSES[kind]
    if needs_failover and not cls.fails_over:
        pytest.skip("a single node has no other broker to fail over to")

    async def main():
        async with trio.open_nursery() as nursery:
            h = cls(nursery, tmp_path)
            try:
                await h.start()
                await h.create()
                await body(h)
            finally:
                with trio.CancelScope(shield=True):
                    for ctl in set(h.ctls.values()):
                        await ctl.shutdown()
                nursery.cancel_scope.cancel()
    trio.run(main)


async def refused(coro) -> int:
    with pytest.raises(KafkaError) as e:
        await coro
    return e.value.code


# ---------------------------------------------------------------------- AlterPartition
def test_new_partition_state(kind, tmp_path):
    async def body(h):
        assert await h.settled() == PartitionState(1, 0, 0, (1, 2, 3), (1, 2, 3))
    run(kind, tmp_path, body)


def test_isr_shrink_and_expand(kind, tmp_path):
    """The leader's AlterPartition: the partition epoch moves, the leader epoch does not; the
    new state is durable, and told to the proposer's partition-change listeners."""
    async def body(h):
        new = await h.ctl(1).alter_partition(TOPIC, 0, 0, isr=[1, 2], leader_epoch=0)
        assert new == PartitionState(1, 0, 1, (1, 2, 3), (1, 2))
        assert await h.settled() == new and h.changes[1][-1] == new
        new = await h.ctl(1).alter_partition(TOPIC, 0, 1, isr=[1, 2, 3], leader_epoch=0)
        assert new == PartitionState(1, 0, 2, (1, 2, 3), (1, 2, 3))
        assert await h.settled() == new
    run(kind, tmp_path, body)


def test_stale_and_invalid_proposals(kind, tmp_path):
    async def body(h):
        ctl = h.ctl(1)
        await ctl.alter_partition(TOPIC, 0, 0, isr=[1, 2])
        await h.settled()
        # a proposal made on an older state: INVALID_UPDATE_VERSION
        assert await refused(ctl.alter_partition(TOPIC, 0, 0, isr=[1])) == ErrorCode.INVALID_UPDATE_VERSION
        # not a subset of the replicas / without the leader / a duplicate: INVALID_REQUEST
        for isr in ([1, 2, 4], [2, 3], [1, 1]):
            assert await refused(ctl.alter_partition(TOPIC, 0, 1, isr=isr)) == ErrorCode.INVALID_REQUEST, isr
        # the controller moves leadership: the old leader's epoch is fenced
        st = await (await h.active()).alter_partition(TOPIC, 0, 1, leader=2)
        assert (st.leader, st.leader_epoch, st.partition_epoch) == (2, 1, 2)
        await h.settled()
        assert await refused(ctl.alter_partition(TOPIC, 0, 2, isr=[2], leader_epoch=0)) == ErrorCode.FENCED_LEADER_EPOCH
        assert await h.state() == st
    run(kind, tmp_path, body)


def test_unregistered_broker_is_ineligible(kind, tmp_path):
    async def body(h):
        await h.unregister(3)
        st = await h.settled()
        code = await refused(h.ctl(1).alter_partition(TOPIC, 0, st.partition_epoch, isr=[1, 2, 3]))
        assert code == ErrorCode.INELIGIBLE_REPLICA
        assert await h.state() == st
    run(kind, tmp_path, body)


# ---------------------------------------------------------------------- brokers going and coming
def test_leader_failure_elects_the_next_isr_member(kind, tmp_path):
    async def body(h):
        await h.unregister(1)
        await h.until(lambda: (lambda st: st.leader == 2)(h.caches[2].partition_state(TOPIC, 0)), "a new leader")
        st = await h.settled()
        assert (st.leader, st.leader_epoch, st.isr) == (2, 1, (2, 3))
    run(kind, tmp_path, body, needs_failover=True)


def test_last_isr_member_gone_then_back(kind, tmp_path):
    """No live in-sync replica: no leader, the ISR keeps its last member; it leads again when it
    returns (no unclean election unless the topic allows it)."""
    async def body(h):
        await h.ctl(1).alter_partition(TOPIC, 0, 0, isr=[1])
        await h.settled()
        await h.unregister(1)
        await h.until(lambda: h.caches[2].partition_state(TOPIC, 0).leader == -1, "no leader")
        st = await h.settled()
        assert (st.leader, st.leader_epoch, st.isr) == (-1, 1, (1,))
        await h.register(1)
        await h.until(lambda: h.caches[2].partition_state(TOPIC, 0).leader == 1, "the old leader back")
        st = await h.settled()
        assert (st.leader, st.leader_epoch, st.isr) == (1, 2, (1,))
    run(kind, tmp_path, body, needs_failover=True)


# ---------------------------------------------------------------------- offline replicas
def test_offline_replica_of_the_leader(kind, tmp_path):
    """A broker reports its replica offline (a failed log dir): out of the ISR, leadership to
    the next in-sync replica, listed offline by the broker that reported it."""
    async def body(h):
        h.ctl(1).replicas_offline(1, [(TOPIC, 0)])
        await h.until(lambda: h.caches[min(h.caches)].partition_state(TOPIC, 0).leader == 2, "a new leader")
        st = await h.settled()
        assert (st.leader, st.leader_epoch, st.partition_epoch, st.isr) == (2, 1, 1, (2, 3))
        assert 1 in h.caches[1].partition_state(TOPIC, 0).offline_replicas
    run(kind, tmp_path, body)
