"""replica.socket.receive.buffer.bytes (cluster/replica_fetcher.py, interbroker.open_channel): a
follower's connection to its leader gets Kafka's SO_RCVBUF, 64 KiB by default (the kernel
reports double what is asked), the configured size otherwise, the OS's autotuned one at -1."""
import os
import socket

import pytest

from tests import needs

from pykbroker.local.broker_process import wait_until
from pykbroker.testing.memory_cluster import ClusterRunner

from .conftest import CLUSTER_CONFIG
from .helpers import wait_isr


def _fetcher_buffers(runner: ClusterRunner, fds=None) -> dict[int, int]:
    """SO_RCVBUF of every connection of this process (of ``fds``: those only) from an ephemeral
    port to a broker's listener, by fd: the followers' fetch connections while no client has
    connected."""
    ports = {int(runner.address(b).rsplit(":", 1)[1]) for b in runner.brokers}
    sizes = {}
    for name in fds if fds is not None else os.listdir("/proc/self/fd"):
        try:
            if not os.readlink("/proc/self/fd/%s" % name).startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if s.family != socket.AF_INET or s.type != socket.SOCK_STREAM:
                continue
            local, peer = s.getsockname()[1], s.getpeername()[1]
            if peer in ports and local not in ports:
                sizes[int(name)] = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        except OSError:
            pass   # a listener has no peer
        finally:
            s.close()
    return sizes


@pytest.mark.parametrize("setting,expected", [(None, 2 * 65536), ("32768", 2 * 32768), ("-1", None)])
def test_follower_socket_receive_buffer(tmp_path, setting, expected):
    config = dict(CLUSTER_CONFIG)
    if setting is not None:
        config["replica.socket.receive.buffer.bytes"] = setting
    confluent_kafka = needs.module("confluent_kafka")
    with ClusterRunner(str(tmp_path), 2, config) as runner:
        runner.create_topic("buf", 2, 2)
        wait_isr(runner, "buf", 0, {1, 2})
        wait_isr(runner, "buf", 1, {1, 2})
        # one fetch connection from each broker to the other
        wait_until(lambda: len(_fetcher_buffers(runner)) >= 2, 20, "the followers' fetch connections")
        fetchers = list(_fetcher_buffers(runner))
        # 8 MiB replicated: an autotuned buffer grows with it, a set one stays where it was set
        # (the kernel's default starting size, tcp_rmem's middle value, is itself 128 KiB on
        # many machines, so only the growth tells -1 from the 64 KiB default)
        p = confluent_kafka.Producer({"bootstrap.servers": runner.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(8 * 64):
            p.produce("buf", value=os.urandom(16 << 10), partition=i % 2)
            p.poll(0)
        assert p.flush(60) == 0
        sizes = list(_fetcher_buffers(runner, fetchers).values())
        assert len(sizes) == len(fetchers)   # the same connections, still open
        if expected is not None:
            assert sizes and set(sizes) == {expected}, sizes
        else:
            rmem = [int(x) for x in open("/proc/sys/net/ipv4/tcp_rmem").read().split()]
            assert sizes and max(sizes) > rmem[1], (sizes, rmem)
