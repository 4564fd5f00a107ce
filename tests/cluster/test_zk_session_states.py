"""The ZooKeeper controller (cluster/zk_controller.py) across ZooKeeper connection blips and
session expiries, in process: three ``ZkController`` (brokers 1-3, no logs: a replica manager
that only records) on a real ZooKeeper 3.8, each reaching it through its own ``TcpRelay`` so a
test cuts one broker's link at a chosen moment.  Apache Kafka's ZooKeeper-era controller is the
rule: a lost connection within the session changes nothing (still the controller, elections
still happen), only the session's expiry ends a term; the broker then registers again and
another broker is the controller.

A broker "dies" here by closing its ZooKeeper session (its ephemeral znodes go at once, as after
the session timeout of a killed process), so each step is deterministic and takes no session
timeout.
"""
from __future__ import annotations

import json
import uuid

import pytest

from tests import needs
import trio

from .helpers import requires_zookeeper

pytestmark = requires_zookeeper

kazoo_client = needs.module("kazoo.client")

from pykbroker.cluster.metadata_cache import Endpoint, MetadataCache  # noqa: E402
from pykbroker.cluster.zk_controller import ZkController  # noqa: E402
from pykbroker.local.zookeeper import ZooKeeperServer  # noqa: E402
from pykbroker.config import BrokerConfig  # noqa: E402
from pykbroker.local.relay import TcpRelay  # noqa: E402

SESSION_MS = 4000
TOPIC = "blips"
# each broker leads one partition (the first replica), every broker follows the two others
ASSIGNMENT = [(0, [1, 2, 3]), (1, [2, 3, 1]), (2, [3, 1, 2])]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    with ZooKeeperServer(str(tmp_path_factory.mktemp("zk")), tick_time=500) as zk:
        yield zk


@pytest.fixture
def chroot():
    return "/t-" + uuid.uuid4().hex[:8]


@pytest.fixture
def zk_reader(zookeeper, chroot):
    """A kazoo client straight to ZooKeeper (no relay), inside the test's chroot."""
    root = kazoo_client.KazooClient(hosts=zookeeper.connect_string)
    root.start(timeout=15)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    k = kazoo_client.KazooClient(hosts=zookeeper.connect_string + chroot)
    k.start(timeout=15)
    yield k
    k.stop()
    k.close()


class RecordingReplicaManager:
    """What the controller calls on the ReplicaManager; nothing to host here."""

    async def make_partitions(self, info, ids):
        pass

    async def delete_partitions(self, info):
        pass

    def on_config_change(self, info):
        pass


class Node:
    def __init__(self, bid, relay, chroot, log_dir):
        self.bid = bid
        self.relay = relay
        cfg = BrokerConfig({"broker.id": bid, "log.dirs": str(log_dir),
                            "zookeeper.connect": relay.address + chroot,
                            "zookeeper.session.timeout.ms": SESSION_MS})
        self.cache = MetadataCache(bid, "", cfg.effective_topic_config)
        self.ctl = ZkController(self.cache, cfg, bid)
        self.ctl.set_replica_manager(RecordingReplicaManager())

    async def start(self, nursery):
        await self.ctl.connect("zk-session-states")
        await self.ctl.load()
        await self.ctl.startup(nursery)
        await self.ctl.register_broker(self.bid, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + self.bid),), None)

    async def die(self):
        """Close its session: its registration (and /controller, if it held it) go at once."""
        await self.ctl.shutdown()


async def wait_for(pred, timeout=15.0, what="condition"):
    with trio.move_on_after(timeout):
        while True:
            v = pred()
            if v:
                return v
            await trio.sleep(0.05)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def state(zk, p):
    return json.loads(zk.get("/brokers/topics/%s/partitions/%d/state" % (TOPIC, p))[0])


def controller_znode(zk):
    data, stat = zk.get("/controller")
    return json.loads(data)["brokerid"], stat.ephemeralOwner


def controller_epoch(zk):
    return int(zk.get("/controller_epoch")[0])


def run_cluster(zookeeper, chroot, tmp_path, scenario):
    """Three nodes started, the topic created, then ``scenario(nodes, controller, others)``."""
    relays = [TcpRelay("127.0.0.1", zookeeper.port) for _ in range(3)]
    nodes = [Node(i + 1, relays[i], chroot, tmp_path / ("b%d" % (i + 1))) for i in range(3)]

    async def main():
        async with trio.open_nursery() as nursery:
            try:
                for n in nodes:
                    await n.start(nursery)
                active = await wait_for(lambda: [n for n in nodes if n.ctl.is_active], what="a controller")
                assert len(active) == 1
                await wait_for(lambda: all(len(n.cache.alive_brokers()) == 3 for n in nodes),
                               what="every broker seeing three")
                await nodes[0].ctl.create_topic(TOPIC, -1, -1, {}, assignments=ASSIGNMENT)
                await wait_for(lambda: all(n.cache.get(TOPIC) is not None for n in nodes), what="the topic")
                controller = active[0]
                await scenario(nodes, controller, [n for n in nodes if n is not controller])
            finally:
                for n in nodes:
                    with trio.CancelScope(shield=True):
                        await n.ctl.shutdown()
                nursery.cancel_scope.cancel()
    try:
        trio.run(main)
    finally:
        for r in relays:
            r.close()


def led_by(zk, bid):
    return [p for p, _ in ASSIGNMENT if state(zk, p)["leader"] == bid]


@pytest.mark.timeout(120)
def test_a_blip_keeps_the_controller_and_it_still_elects(zookeeper, chroot, zk_reader, tmp_path):
    zk = zk_reader

    async def scenario(nodes, c, others):
        a, b = others
        epoch = controller_epoch(zk)
        _, owner = controller_znode(zk)
        # the controller's link is down for 1.5 s (its session, 4 s, lives on) and a broker
        # dies meanwhile: the controller hears of it only once reconnected
        c.relay.hold(1.5)
        await wait_for(lambda: suspended(c), what="the controller to notice the lost connection")
        a_led = led_by(zk, a.bid)
        assert a_led
        await a.die()
        await wait_for(lambda: not suspended(c), what="the reconnection")
        # still the controller: same /controller znode (same session), no new epoch, and it
        # elected new leaders for what the dead broker led, from the ISR
        await trio.to_thread.run_sync(lambda: wait_sync(
            lambda: all(state(zk, p)["leader"] not in (a.bid, -1) and a.bid not in state(zk, p)["isr"]
                        for p in a_led), "new leaders for %s" % a_led))
        assert c.ctl.is_active
        assert controller_znode(zk) == (c.bid, owner)
        assert controller_epoch(zk) == epoch == c.ctl.controller_epoch
        for p in a_led:
            assert state(zk, p)["controller_epoch"] == epoch
        # more blips (reconnecting at once), then another broker dies: still elected
        for _ in range(3):
            c.relay.drop()
            await wait_for(lambda: suspended(c), what="a blip")
            await wait_for(lambda: not suspended(c), what="the reconnection")
        await b.die()
        await trio.to_thread.run_sync(lambda: wait_sync(
            lambda: all(state(zk, p)["leader"] == c.bid and state(zk, p)["isr"] == [c.bid]
                        for p, _ in ASSIGNMENT), "every partition led by the controller"))
        assert c.ctl.is_active and controller_epoch(zk) == epoch
        assert c.cache.controller_id == c.bid

    run_cluster(zookeeper, chroot, tmp_path, scenario)


@pytest.mark.timeout(120)
def test_an_expired_session_ends_the_term_and_another_broker_takes_over(zookeeper, chroot, zk_reader, tmp_path):
    zk = zk_reader

    async def scenario(nodes, c, others):
        epoch = controller_epoch(zk)
        session = c.ctl.zk.client.client_id
        c.relay.hold(3600)   # cut off until released
        await wait_for(lambda: suspended(c), what="the controller to notice the lost connection")
        # the session expires (ZooKeeper closes it: what its timeout does, without the wait)
        await trio.to_thread.run_sync(expire_session, zookeeper, session)
        new = await wait_for(lambda: [n for n in others if n.ctl.is_active], what="another controller")
        assert len(new) == 1
        new = new[0]
        assert controller_znode(zk)[0] == new.bid
        assert controller_epoch(zk) == epoch + 1 == new.ctl.controller_epoch
        # the old controller comes back: its session is gone, so it resigns, registers again
        # (a new session) and is an ordinary broker
        c.relay.release()
        await wait_for(lambda: not c.ctl.is_active, what="the old controller to resign")
        await wait_for(lambda: zk.exists("/brokers/ids/%d" % c.bid) is not None, what="its new registration")
        assert zk.exists("/brokers/ids/%d" % c.bid).ephemeralOwner == c.ctl.zk.session_id() != session[0]
        await wait_for(lambda: c.cache.controller_id == new.bid, what="it to know the new controller")
        assert [n for n in nodes if n.ctl.is_active] == [new]
        # the new controller elects: the third broker dies, its partitions move
        third = [n for n in others if n is not new][0]
        gone = led_by(zk, third.bid)
        assert gone
        await third.die()
        await trio.to_thread.run_sync(lambda: wait_sync(
            lambda: all(state(zk, p)["leader"] in (c.bid, new.bid) for p in gone),
            "new leaders for %s" % gone))
        assert controller_epoch(zk) == epoch + 1

    run_cluster(zookeeper, chroot, tmp_path, scenario)


@pytest.mark.timeout(120)
def test_a_stale_controller_notification_does_not_depose_the_controller(zookeeper, chroot, zk_reader, tmp_path):
    """The election race: the /controller watch's first read (no controller yet) reaches the
    event task after the broker's own election; it must not end the term it predates."""
    zk = zk_reader

    async def scenario(nodes, c, others):
        epoch = controller_epoch(zk)
        c.ctl._post(("controller", None))   # what the watch reported before the election
        await trio.sleep(0.5)
        assert c.ctl.is_active and controller_znode(zk)[0] == c.bid and controller_epoch(zk) == epoch
        # and it still elects
        a = others[0]
        gone = led_by(zk, a.bid)
        await a.die()
        await trio.to_thread.run_sync(lambda: wait_sync(
            lambda: all(state(zk, p)["leader"] not in (a.bid, -1) for p in gone), "new leaders"))

    run_cluster(zookeeper, chroot, tmp_path, scenario)


def suspended(node):
    """kazoo's view of the node's connection (SUSPENDED: lost, the session may live on)."""
    return node.ctl.zk.client.state != "CONNECTED"


def wait_sync(pred, what, timeout=15.0):
    import time
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(0.05)


def expire_session(zookeeper, session):
    """ZooKeeper's way to end a session on purpose: a second client attaches to it (same id and
    password), then closes it."""
    k = kazoo_client.KazooClient(hosts=zookeeper.connect_string, client_id=session)
    k.start(timeout=15)
    k.stop()
    k.close()
