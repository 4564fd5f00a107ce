"""compat/chaos/netns.py: namespaces on a bridge, links cut with iptables and healed, the
test process (root namespace) never cut; and a ZooKeeper + 3-broker cluster living in them."""
from __future__ import annotations

import subprocess
import sys

import pytest

from compat.chaos import netns

pytestmark = pytest.mark.skipif(netns.unavailable() is not None, reason="%s" % netns.unavailable())

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000)); s.listen(16); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""

PROBE = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], 7000), timeout=1.5); print(c.recv(2).decode())
except OSError as e:
    print("cut")
"""


def reach(net, src, dst) -> bool:
    """Can node src (None: the root namespace) open a TCP connection to node dst?"""
    cmd = [sys.executable, "-c", PROBE, net.addr(dst)]
    if src is not None:
        cmd = [*net.launcher(src), *cmd]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=20).stdout.strip()
    return out == "hi"


def test_cut_and_heal_between_namespaces():
    with netns.Net(["a", "b", "c"]) as net:
        servers = net.start_in_each(sys.executable, "-c", SERVER)
        try:
            assert reach(net, "a", "b") and reach(net, "b", "a") and reach(net, None, "a")
            net.isolate("a", ["b"])
            assert net.describe_cuts() == "a|b"
            # both directions dropped; a still reaches c, and the clients (root) reach everyone
            assert not reach(net, "a", "b") and not reach(net, "b", "a")
            assert reach(net, "a", "c") and reach(net, "c", "b")
            assert reach(net, None, "a") and reach(net, None, "b")
            net.partition([["a"], ["b", "c"]])
            assert not reach(net, "c", "a") and reach(net, "b", "c")
            net.heal()
            assert reach(net, "a", "b") and reach(net, "c", "a")
        finally:
            for s in servers:
                s.kill()
                s.wait()
    names = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    assert net.ns("a") not in names   # removed on close


def cluster_cut_run(data_dir, _run=None):
    """ZooKeeper + 3 brokers in namespaces, b2 cut from ZooKeeper until its registration is
    dropped, then healed until it is back; about 11 s, mostly the 4 s session's expiry and the
    re-registration: tests/chaos/conftest.py starts it with the package."""
    from pykbroker.local.zookeeper import available
    if available() is not None:
        pytest.skip(available())
    c = netns.cluster(3, str(data_dir), overrides={"zookeeper.session.timeout.ms": "4000"})
    try:
        c.start()
        assert c.wait_registered() == {1, 2, 3}
        assert [b.host for b in c.brokers] == [c.net.addr("b%d" % i) for i in (1, 2, 3)]
        c.net.cut("b2", "zk")
        # its session expires: ZooKeeper drops its registration
        c.wait_registered({1, 3}, timeout=30)
        c.net.heal()
        c.wait_registered({1, 2, 3}, timeout=60)
    finally:
        c.close()


def test_cluster_in_namespaces_sees_a_broker_cut_from_zookeeper(netns_cluster_cut):
    """The run's assertions and waits (cluster_cut_run) fail it from there: its result re-raises."""
    netns_cluster_cut.result()
