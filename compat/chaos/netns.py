"""Real network partitions on one machine: each server of a test cluster in its own Linux network
namespace, on a bridge this module creates, and iptables DROP rules inside the namespaces.

``Net(["zk", "b1", "b2", "b3"])`` (a context manager) creates

- a bridge ``kb<N>`` in the root namespace with address ``10.213.<N>.1/24``: the test process
  (Jepsen's control node: clients, checks) reaches every namespace through it and is never cut;
- per node a namespace ``kb<N>-<node>`` with loopback up and a veth pair: ``eth0`` inside with
  ``10.213.<N>.<10+i>/24``, its peer on the bridge.

``10.213.0.0/16`` is used only inside these namespaces and on the bridge; ``N`` is picked so that
concurrent runs on one machine do not collide (a bridge of that name already existing moves to
the next).  ``launcher(node)`` is the ``ip netns exec`` prefix a server is started with.

The nemesis side: ``cut(a, b)`` drops every packet between two nodes (an INPUT DROP rule in each
namespace for the other's address: both directions, so established TCP connections hang as
they do on a real network, with no reset); ``partition([["b1"], ["zk", "b2", "b3"]])`` cuts
every pair across groups (nodes in no group keep their links); ``heal()`` flushes the rules.
Only the links between namespaces are cut: the root namespace (the clients) keeps reaching all.

Linux only, as root, with iproute2 and iptables (Debian's ``iproute2`` and ``iptables``,
installed by ``tools/test.sh``).  :func:`unavailable` says why not, for pytest skips.

Degraded links: ``lossy(a, b, p)`` drops a random share ``p`` of the packets between two nodes
(iptables' ``statistic`` match: the kernel drops them, TCP retransmits); ``heal()`` ends it too.
The kernel here has no ``netem`` queueing discipline, so slow links go through a userspace relay
instead (:mod:`compat.chaos.relay`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Iterable, Optional

PREFIX = "10.213"


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise NetError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p


class NetError(RuntimeError):
    pass


_why: Optional[str] = None
_next = 0   # successive Nets of one process take successive subnets
_checked = False


def unavailable() -> Optional[str]:
    """None when namespaces, a bridge and iptables rules can be made here; else why not."""
    global _why, _checked
    if _checked:
        return _why
    _checked = True
    if not os.path.exists("/proc/self/ns/net"):
        _why = "no Linux network namespaces here"
    elif os.geteuid() != 0:
        _why = "network namespaces need root (running as uid %d)" % os.geteuid()
    elif not shutil.which("ip"):
        _why = "no 'ip' command (apt-get install iproute2)"
    elif not shutil.which("iptables"):
        _why = "no 'iptables' command (apt-get install iptables)"
    else:
        # really try: a container may be root without CAP_NET_ADMIN / CAP_SYS_ADMIN
        name = "kbprobe%d" % os.getpid()
        try:
            _run("ip", "netns", "add", name)
            try:
                _run("ip", "netns", "exec", name, "iptables", "-A", "INPUT", "-s", PREFIX + ".0.99", "-j", "DROP")
            finally:
                _run("ip", "netns", "del", name, check=False)
        except NetError as e:
            _why = "cannot make a network namespace with an iptables rule here: %s" % e
    return _why


class Net:
    """A bridge and one namespace per node; see the module docstring."""

    def __init__(self, nodes: Iterable[str], subnet: Optional[int] = None):
        self.nodes = list(nodes)
        if len(self.nodes) > 200:
            raise ValueError("at most 200 nodes on one bridge")
        self._subnet = subnet
        self.n: Optional[int] = None
        self._made_ns: list[str] = []
        self._bridge_made = False
        self.cuts: set = set()   # frozenset({a, b}) pairs currently cut

    # -- names -----------------------------------------------------------------------------
    @property
    def bridge(self) -> str:
        return "kb%d" % self.n

    @property
    def gateway(self) -> str:
        """The bridge's (the clients') address."""
        return "%s.%d.1" % (PREFIX, self.n)

    def ns(self, node: str) -> str:
        return "kb%d-%s" % (self.n, node)

    def addr(self, node: str) -> str:
        return "%s.%d.%d" % (PREFIX, self.n, 10 + self.nodes.index(node))

    def launcher(self, node: str) -> tuple:
        return ("ip", "netns", "exec", self.ns(node))

    def exec(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run(*self.launcher(node), *cmd, check=check)

    def start_in_each(self, *cmd: str) -> list:
        """``cmd`` followed by the node's address, started in every node's namespace (its stdout a
        text pipe), each waited for until its first line says "ready"; the caller kills them."""
        procs = [subprocess.Popen([*self.launcher(n), *cmd, self.addr(n)], stdout=subprocess.PIPE, text=True)
                 for n in self.nodes]
        try:
            for p in procs:
                if p.stdout.readline().strip() != "ready":
                    raise NetError("%s did not start in a namespace" % (cmd,))
        except BaseException:
            for p in procs:
                p.kill()
                p.wait()
            raise
        return procs

    # -- life cycle --------------------------------------------------------------------------
    def create(self) -> "Net":
        why = unavailable()
        if why:
            raise NetError(why)
        global _next
        # every link name, e.g. "kb7:" and "kb7v0@if2:" (a namespace's veth lingers a moment
        # after the namespace is deleted: the kernel frees it asynchronously)
        existing = {w.split("@")[0].rstrip(":") for w in _run("ip", "-o", "link", "show").stdout.split()}
        _next += 1
        candidates = [self._subnet] if self._subnet is not None else \
            [(os.getpid() + _next + i) % 250 + 1 for i in range(250)]
        for n in candidates:
            if any(x == "kb%d" % n or x.startswith("kb%dv" % n) for x in existing):
                continue
            self.n = n
            try:
                _run("ip", "link", "add", self.bridge, "type", "bridge")
            except NetError:
                continue   # taken meanwhile by a concurrent run
            self._bridge_made = True
            break
        else:
            raise NetError("no free bridge name kb1..kb250")
        try:
            _run("ip", "addr", "add", self.gateway + "/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for i, node in enumerate(self.nodes):
                ns = self.ns(node)
                _run("ip", "netns", "add", ns)
                self._made_ns.append(ns)
                veth = "kb%dv%d" % (self.n, i)
                _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _run("ip", "link", "set", veth, "master", self.bridge)
                _run("ip", "link", "set", veth, "up")
                self.exec(node, "ip", "addr", "add", self.addr(node) + "/24", "dev", "eth0")
                self.exec(node, "ip", "link", "set", "eth0", "up")
                self.exec(node, "ip", "link", "set", "lo", "up")
                # replies to the clients go back through the bridge
                self.exec(node, "ip", "route", "add", "default", "via", self.gateway)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Remove the namespaces (their veth pairs go with them) and the bridge.  Processes still
        running inside keep their namespace alive but unnamed: stop them first."""
        for i, ns in enumerate(self._made_ns):
            # the veth pair first (deleting one end deletes both): a namespace's own teardown is
            # deferred by the kernel, and its links could outlive this call
            _run("ip", "link", "del", "kb%dv%d" % (self.n, i), check=False)
            _run("ip", "netns", "del", ns, check=False)
        self._made_ns = []
        if self._bridge_made:
            _run("ip", "link", "del", self.bridge, check=False)
            self._bridge_made = False
        self.cuts = set()

    def __enter__(self) -> "Net":
        return self.create()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- faults ------------------------------------------------------------------------------
    def cut(self, a: str, b: str) -> None:
        """Drop everything between nodes a and b, both directions."""
        if a == b or frozenset((a, b)) in self.cuts:
            return
        self.exec(a, "iptables", "-w", "-A", "INPUT", "-s", self.addr(b), "-j", "DROP")
        self.exec(b, "iptables", "-w", "-A", "INPUT", "-s", self.addr(a), "-j", "DROP")
        self.cuts.add(frozenset((a, b)))

    def lossy(self, a: str, b: str, loss: float) -> None:
        """Drop a random share ``loss`` (0..1) of the packets between nodes a and b, each
        direction on its own (a rule in each namespace), until :meth:`heal`."""
        if not 0.0 <= loss <= 1.0:
            raise ValueError("loss is a probability, got %r" % loss)
        for x, y in ((a, b), (b, a)):
            self.exec(x, "iptables", "-w", "-A", "INPUT", "-s", self.addr(y), "-m", "statistic", "--mode", "random",
                      "--probability", "%.4f" % loss, "-j", "DROP")

    def dropped(self, node: str) -> int:
        """Packets the DROP rules of ``node``'s namespace dropped since they were added."""
        out = self.exec(node, "iptables", "-w", "-L", "INPUT", "-v", "-x", "-n").stdout
        return sum(int(line.split()[0]) for line in out.splitlines()[2:] if "DROP" in line)

    def partition(self, groups: list) -> None:
        """Cut every pair of nodes that are in different groups."""
        for i, g in enumerate(groups):
            for h in groups[i + 1:]:
                for a in g:
                    for b in h:
                        self.cut(a, b)

    def isolate(self, node: str, from_nodes: Optional[Iterable[str]] = None) -> None:
        """Cut ``node`` from ``from_nodes`` (default: every other node)."""
        for other in (from_nodes if from_nodes is not None else self.nodes):
            if other != node:
                self.cut(node, other)

    def heal(self) -> None:
        for node in self.nodes:
            self.exec(node, "iptables", "-w", "-F", "INPUT")
        self.cuts = set()

    def describe_cuts(self) -> str:
        return ", ".join(sorted("%s|%s" % tuple(sorted(c)) for c in self.cuts)) or "none"


# ZooKeeper and the brokers each own a network stack: the well-known ports, no clashes
ZK_PORT = 2181
BROKER_PORT = 9092


def cluster(n_brokers: int = 3, data_dir: Optional[str] = None, overrides: Optional[dict] = None,
            zk_tick_time: int = 500, **kw):
    """A :class:`pykbroker.local.cluster.Cluster` whose ZooKeeper (node ``zk``) and brokers
    (nodes ``b1``..``bN``, broker ids 1..N) run in namespaces of a new :class:`Net`, listening
    on (and advertising) their namespace's address.  The Net is ``cluster.net``; ``close()``
    stops the servers, then removes the namespaces.  Start it with ``start()`` or ``with``."""
    from pykbroker.local.cluster import Cluster

    net = Net(["zk"] + ["b%d" % i for i in range(1, n_brokers + 1)]).create()
    try:
        c = Cluster(n_brokers, data_dir, overrides=overrides, zk_tick_time=zk_tick_time, **kw)
        zk = c.zookeeper
        zk.host, zk.launcher, zk.port = net.addr("zk"), net.launcher("zk"), ZK_PORT
        for b in c.brokers:
            node = "b%d" % b.broker_id
            b.host, b.launcher, b.port = net.addr(node), net.launcher(node), BROKER_PORT
    except BaseException:
        net.close()
        raise
    c.net = net
    close = c.close

    def close_all():
        try:
            close()
        finally:
            net.close()
    c.close = close_all
    return c
