"""A TCP relay that can drop its connections: network blips between brokers and ZooKeeper.

``TcpRelay(target_host, target_port)`` listens on a free loopback port and copies bytes both
ways between each accepted connection and a new connection to the target.  ``drop()`` closes
every connection it carries (both ends: the client sees its connection reset, the server a
client gone; a ZooKeeper session outlives this until its timeout, as it does a real blip);
``hold(seconds)`` also refuses new connections for that long (accepted, then closed at once),
``blip_every(interval)`` drops everything every ``interval`` seconds in a background thread until
``stop_blips()``.  ``drops`` counts the drops.  ``cut_on_request(ops, applied)`` arms a one-shot
cut aimed at one ZooKeeper request: the next client request whose op code is in ``ops`` (ZooKeeper's
wire protocol: a 4-byte length, then xid and op code; 14 is a multi, 1 a create, 5 a setData) either
never reaches ZooKeeper (``applied=False``) or reaches it with its answer lost (``applied=True``),
and that connection is then dropped: the two sides of a write that fails with ConnectionLoss.  Standard library only; one thread per direction
of a connection (a handful of ZooKeeper sessions).

The fault tools and tests use it to cut ZooKeeper links without touching ZooKeeper or the
brokers (``Cluster(zookeeper_relay=True)``).
"""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable
from typing import Optional, TypeVar

_R = TypeVar("_R", bound="ListeningRelay")


class ListeningRelay:
    """What every relay is made of (this one and the fault tools' delaying relay): a listening
    port on ``host``; a thread accepting on it that connects each admitted connection to
    ``target`` (TCP_NODELAY on both, as Kafka clients and ZooKeeper set it) and hands the pair to
    ``_carry``; ``close()`` stops accepting and drops what is carried.  A subclass sets up its own
    state before calling ``__init__`` (the accept thread starts there) and says what ``_admit``,
    ``_track``, ``_carry`` and ``drop`` do."""

    def __init__(self, target: tuple, host: str, port: int, backlog: int, thread_name: str) -> None:
        self.target = (target[0], int(target[1]))
        self.host = host
        self._lock = threading.Lock()
        self._closed = False
        self.accepted = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(backlog)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, name=thread_name % self.port, daemon=True).start()

    def drop(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.drop()

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _admit(self) -> bool:
        """Whether a new connection is relayed (else it is closed at once)."""
        return True

    def _track(self, client: socket.socket, upstream: socket.socket) -> None:
        """Remember a new pair (under the lock) so ``drop`` can close it."""
        raise NotImplementedError

    def _carry(self, client: socket.socket, upstream: socket.socket) -> None:
        """Start copying bytes both ways."""
        raise NotImplementedError

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._admit():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5.0)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed:
                    _close(client)
                    _close(upstream)
                    return
                self._track(client, upstream)
                self.accepted += 1
            self._carry(client, upstream)


class TcpRelay(ListeningRelay):
    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1", port: int = 0) -> None:
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._held_until = 0.0
        self._blipper: Optional[threading.Thread] = None
        self._blips = threading.Event()
        self.drops = 0
        self._cut: Optional[tuple[frozenset, bool]] = None   # (op codes, applied) of an armed cut
        self.cuts = 0            # armed cuts that struck
        self._deaf: set = set()  # client sockets whose answers are being discarded (an applied cut)
        super().__init__((target_host, target_port), host, port, 64, "relay-accept-%d")

    @property
    def address(self) -> str:
        return "%s:%d" % (self.host, self.port)

    # -- faults
    def drop(self) -> int:
        """Close every carried connection; returns how many were closed."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self.drops += 1
        for a, b in pairs:
            _close(a)
            _close(b)
        return len(pairs)

    def hold(self, seconds: float) -> None:
        """Drop everything and refuse new connections for ``seconds``."""
        with self._lock:
            self._held_until = time.monotonic() + seconds
        self.drop()

    def cut_on_request(self, ops: Iterable[int], applied: bool) -> None:
        """Arm a one-shot cut on the next client request with an op code in ``ops`` (see the
        module docstring); ``cuts`` counts the cuts that struck."""
        with self._lock:
            self._cut = (frozenset(ops), bool(applied))

    def release(self) -> None:
        with self._lock:
            self._held_until = 0.0

    def blip_every(self, interval: float, first: Optional[float] = None) -> None:
        """Drop every connection every ``interval`` s (the first time after ``first`` s,
        default ``interval``), until :meth:`stop_blips`."""
        self.stop_blips()
        self._blips = stop = threading.Event()

        def run() -> None:
            wait = interval if first is None else first
            while not stop.wait(wait):
                self.drop()
                wait = interval
        self._blipper = threading.Thread(target=run, name="relay-blips-%d" % self.port, daemon=True)
        self._blipper.start()

    def stop_blips(self) -> None:
        self._blips.set()
        if self._blipper is not None:
            self._blipper.join()
            self._blipper = None

    def close(self) -> None:
        self.stop_blips()
        super().close()

    # -- plumbing
    def _admit(self) -> bool:
        with self._lock:
            return time.monotonic() >= self._held_until

    def _track(self, client: socket.socket, upstream: socket.socket) -> None:
        self._pairs.append((client, upstream))

    def _carry(self, client: socket.socket, upstream: socket.socket) -> None:
        threading.Thread(target=self._pump_requests, args=(client, upstream), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump_requests(self, src: socket.socket, dst: socket.socket) -> None:
        """Client to server, frame by frame (ZooKeeper's length-prefixed frames) so an armed cut
        strikes at a request boundary; the first frame is the session's ConnectRequest."""
        buf, first = b"", True
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 4:
                    n = int.from_bytes(buf[:4], "big")
                    if len(buf) < 4 + n:
                        break
                    frame, buf = buf[:4 + n], buf[4 + n:]
                    op = None if first or n < 8 else int.from_bytes(frame[8:12], "big", signed=True)
                    first = False
                    with self._lock:
                        cut = self._cut if self._cut is not None and op in self._cut[0] else None
                        if cut is not None:
                            self._cut = None
                            self.cuts += 1
                    if cut is None:
                        dst.sendall(frame)
                        continue
                    if cut[1]:   # applied: ZooKeeper gets it, its answer is discarded
                        with self._lock:
                            self._deaf.add(src)
                        dst.sendall(frame)
                        time.sleep(0.5)   # time for ZooKeeper to apply it (loopback, one request)
                    raise OSError("cut on request op %s" % op)
        except OSError:
            pass
        self._end(src, dst)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    deaf = dst in self._deaf
                if not deaf:
                    dst.sendall(data)
        except OSError:
            pass
        self._end(src, dst)

    def _end(self, src: socket.socket, dst: socket.socket) -> None:
        # one side ended (or was dropped): the whole connection goes
        with self._lock:
            self._pairs = [p for p in self._pairs if src not in p]
            self._deaf.discard(src)
            self._deaf.discard(dst)
        _close(src)
        _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
