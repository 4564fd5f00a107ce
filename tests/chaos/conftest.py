"""The chaos package's fixtures."""
from __future__ import annotations

import functools

import pytest

from tests import background


@pytest.fixture(scope="package", autouse=True)
def lossy_link(request):
    """test_relay.py's lossy-link transfers, started with the package: about 20 s of TCP
    retransmission timers on two network namespaces of their own (their own bridge and subnet,
    netns.Net), light on the CPU, overlapped with the package's first modules instead of run
    after them.  Its test checks the outcome."""
    from compat.chaos import netns
    if netns.unavailable() is not None:
        yield None
        return
    from tests.chaos.test_relay import lossy_link_run
    yield from background.ahead(request, "test_relay.py::test_lossy_link_drops_packets_tcp_still_delivers",
                                lossy_link_run, "lossy-link")


@pytest.fixture(scope="package", autouse=True)
def netns_cluster_cut(request, tmp_path_factory):
    """test_netns.py's cluster run (ZooKeeper + 3 brokers in namespaces of their own, a broker cut
    from ZooKeeper and healed; no timing bound but its 30 s and 60 s waits), started with the
    package and overlapped with its first modules (about 11 s saved).  Its test checks it."""
    from compat.chaos import netns
    if netns.unavailable() is not None:
        yield None
        return
    from tests.chaos.test_netns import cluster_cut_run
    yield from background.ahead(request, "test_netns.py::test_cluster_in_namespaces_sees_a_broker_cut_from_zookeeper",
                                functools.partial(cluster_cut_run, tmp_path_factory.mktemp("netns-cluster")),
                                "netns-cluster")
