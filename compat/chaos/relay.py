"""Slow links for the partition runs: a userspace TCP relay that holds every chunk it carries for
a while before passing it on, placed between network namespaces by iptables DNAT rules.

The kernel of the test machines has no ``netem`` queueing discipline, so latency cannot be added
to a veth link.  Instead, :class:`DelayRelay` listens on the bridge's address (the root
namespace, which reaches every namespace) and copies bytes both ways between each accepted
connection and a new connection to its target, each direction through a queue: a chunk read at
``t`` is written at ``t + d`` (``d`` drawn in ``[delay_lo, delay_hi]`` per chunk, never before the
chunk ahead of it: order kept, as TCP keeps it).  ``stall`` (a probability per chunk) adds a
retransmission's worth of waiting to a chunk (200 ms, Linux's minimum RTO, doubling while
stalls follow each other), which is what a lossy link looks like from above TCP; ``reset`` (a
probability per chunk) closes the connection instead, both ends.  ``carried`` counts the bytes.

:func:`slow_links` routes a node's links through such relays: inside the node's namespace an
``OUTPUT`` DNAT rule sends its new TCP connections to each peer's port through the relay for that
peer, and inside each peer's namespace one sends their new connections to the node's port through
the relay for the node; connections already open between them are destroyed (``ss -K``) so that
the next ones, which the brokers and ZooKeeper's clients open at once, take the relays.  Only the
links between namespaces go through them: the clients (root namespace) keep direct links.
``SlowLinks.close()`` removes the rules, destroys the relayed connections (they reconnect
directly) and stops the relays.

Lossy links need no relay: the kernel's iptables ``statistic`` match drops a random share of the
packets on a link (:meth:`compat.chaos.netns.Net.lossy`), so TCP retransmits as on a real lossy
network.
"""
from __future__ import annotations

import collections
import random
import threading
import time
from typing import Optional

from pykbroker.local.relay import ListeningRelay, _close  # _close: both ends shut down, then closed, errors ignored


class DelayRelay(ListeningRelay):
    """One listening port on ``host`` relaying to ``target``; see the module docstring."""

    RTO_MIN = 0.2   # Linux's TCP_RTO_MIN: the least a lost segment costs before it is resent

    def __init__(self, target: tuple, host: str = "127.0.0.1", port: int = 0, delay: tuple = (0.0, 0.0),
                 stall: float = 0.0, reset: float = 0.0, seed: Optional[int] = None):
        self.delay_lo, self.delay_hi = float(delay[0]), float(delay[1])
        if not 0 <= self.delay_lo <= self.delay_hi:
            raise ValueError("delay must be (lo, hi) with 0 <= lo <= hi, got %r" % (delay,))
        self.stall = float(stall)
        self.reset = float(reset)
        self._rnd = random.Random(seed)
        self._socks: list = []
        self.carried = 0
        self.resets = 0
        self.stalls = 0
        super().__init__(target, host, port, 128, "delay-relay-%d")

    @property
    def address(self) -> tuple:
        return (self.host, self.port)

    def drop(self) -> int:
        """Close every carried connection (both ends); how many sockets were closed."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            _close(s)
        return len(socks)

    # -- plumbing ------------------------------------------------------------------------
    def _draw(self) -> tuple:
        with self._lock:
            d = self._rnd.uniform(self.delay_lo, self.delay_hi)
            stalled = self.stall > 0 and self._rnd.random() < self.stall
            reset = self.reset > 0 and self._rnd.random() < self.reset
        return d, stalled, reset

    def _track(self, client, upstream) -> None:
        self._socks += [client, upstream]

    def _carry(self, client, upstream) -> None:
        for src, dst in ((client, upstream), (upstream, client)):
            q: collections.deque = collections.deque()
            cv = threading.Condition()
            threading.Thread(target=self._reader, args=(src, dst, q, cv), daemon=True).start()
            threading.Thread(target=self._writer, args=(src, dst, q, cv), daemon=True).start()

    def _reader(self, src, dst, q, cv) -> None:
        """Reads chunks and queues them with the time each may be written."""
        due_last = 0.0
        backoff = self.RTO_MIN
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                d, stalled, reset = self._draw()
                if reset:
                    with self._lock:
                        self.resets += 1
                    break
                due = time.monotonic() + d
                if stalled:
                    with self._lock:
                        self.stalls += 1
                    due += backoff
                    backoff = min(backoff * 2, 3.0)
                else:
                    backoff = self.RTO_MIN
                due = max(due, due_last)   # a byte stream: never ahead of the chunk before
                due_last = due
                with cv:
                    q.append((due, data))
                    cv.notify()
        except OSError:
            pass
        with cv:
            q.append((None, None))   # end of stream: the writer closes both ends once it is due
            cv.notify()

    def _writer(self, src, dst, q, cv) -> None:
        try:
            while True:
                with cv:
                    while not q:
                        cv.wait()
                    due, data = q.popleft()
                if data is None:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
                with self._lock:
                    self.carried += len(data)
        except OSError:
            pass
        with self._lock:
            self._socks = [s for s in self._socks if s is not src and s is not dst]
        _close(src)
        _close(dst)


class SlowLinks:
    """The relays and rules :func:`slow_links` set up; ``close()`` undoes them."""

    def __init__(self, net, node: str, relays: dict, rules: list):
        self.net = net
        self.node = node
        self.relays = relays      # (peer node, port) -> DelayRelay towards that node's port
        self.rules = rules        # (namespace node, iptables args) as added

    @property
    def carried(self) -> int:
        return sum(r.carried for r in self.relays.values())

    def close(self) -> None:
        # closing a relay closes both ends of what it carries: the brokers reconnect, directly
        # once the rules are gone.  The relays first: with the DNAT rule deleted, the relay's
        # FIN is no longer mapped back to the connection in the namespace, which would then wait
        # for an answer until its own timeout (30 s for a replica fetcher)
        for r in self.relays.values():
            r.close()
        self.relays = {}
        time.sleep(0.2)
        for node, args in reversed(self.rules):
            self.net.exec(node, "iptables", "-w", "-t", "nat", "-D", *args, check=False)
        self.rules = []


def _kill_between(net, node: str, peers: list) -> None:
    """Destroy the TCP connections between ``node`` and ``peers`` (both ends: each namespace has
    its own sockets), not the clients' (their far end is the bridge's address)."""
    for p in peers:
        net.exec(node, "ss", "-K", "dst", net.addr(p), check=False)
        net.exec(p, "ss", "-K", "dst", net.addr(node), check=False)


def slow_links(net, node: str, ports: dict, delay: tuple = (0.1, 0.5), stall: float = 0.0,
               reset: float = 0.0, peers: Optional[list] = None, seed: Optional[int] = None) -> SlowLinks:
    """Every TCP link between ``node`` and ``peers`` (default: every other node of ``net``)
    through a :class:`DelayRelay` in the root namespace.  ``ports`` maps a node to the port it
    serves on (``{"zk": 2181, "b1": 9092, ...}``)."""
    peers = [p for p in (peers if peers is not None else net.nodes) if p != node]
    relays: dict = {}
    rules: list = []
    rnd = random.Random(seed)
    try:
        for src, dst in [(node, p) for p in peers] + [(p, node) for p in peers]:
            if dst not in ports:
                continue   # serves nothing (a node that only connects out)
            key = (dst, ports[dst])
            if key not in relays:
                relays[key] = DelayRelay((net.addr(dst), ports[dst]), host=net.gateway, delay=delay, stall=stall,
                                         reset=reset, seed=rnd.randrange(1 << 30))
            r = relays[key]
            args = ["OUTPUT", "-p", "tcp", "-d", net.addr(dst), "--dport", str(ports[dst]),
                    "-j", "DNAT", "--to-destination", "%s:%d" % r.address]
            net.exec(src, "iptables", "-w", "-t", "nat", "-A", *args)
            rules.append((src, args))
    except BaseException:
        SlowLinks(net, node, relays, rules).close()
        raise
    _kill_between(net, node, peers)
    return SlowLinks(net, node, relays, rules)
