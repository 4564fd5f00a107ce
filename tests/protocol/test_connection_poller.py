"""The connection poller (server/poller.py) in process: a request whose handler has a
``handle_now`` is carried out by the poller while the connection's task is parked; the task's
cancellation (idle expiry, the connection limits, shutdown) still ends a parked connection and
unregisters its socket first; the poller's end hands its connections back to their tasks, which
go on answering.  The handler is a stand-in ApiVersions that records who answered."""
import socket
import struct
import time
import types

import trio

from pykbroker.config import BrokerConfig
from pykbroker.handlers import k18_api_versions
from pykbroker.protocol.codec import APIS
from pykbroker.server.connection import Connection
from pykbroker.server.poller import Poller

ANSWER = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}


def _handler(seen):
    clone = types.SimpleNamespace(**{k: getattr(k18_api_versions, k) for k in dir(k18_api_versions)
                                     if not k.startswith("__")})

    async def handle(ctx, request):
        seen.append(("task", ctx.correlation_id))
        return ANSWER

    def handle_now(ctx, request):
        seen.append(("poller", ctx.correlation_id))
        return ANSWER

    clone.handle = handle
    clone.handle_now = handle_now
    return clone


def _request(corr):
    body = struct.pack(">hhi", 18, 0, corr) + struct.pack(">h", 4) + b"test" + APIS[18].encode_bytes("request", 0, {})
    return struct.pack(">i", len(body)) + body


def _answer_corr(sock):
    head = b""
    while len(head) < 4:
        got = sock.recv(4 - len(head))
        if not got:
            return None
        head += got
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return struct.unpack_from(">i", body)[0]


def _setup():
    seen = []
    config = BrokerConfig({})
    handlers = {18: _handler(seen)}
    broker = types.SimpleNamespace(config=config, handlers=handlers,
                                   services=types.SimpleNamespace(config=config, handlers=handlers))
    return broker, seen


async def _listen():
    """A loopback listener, its port and a fresh poller (each test's set-up)."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    return listeners, listeners[0].socket.getsockname()[1], Poller()


async def _closed_loop(sock, corrs):
    """Requests one at a time, each answer awaited (in a thread: the client blocks), after a
    pause in which the connection's task finds its socket empty and parks."""
    def run():
        out = []
        for c in corrs:
            time.sleep(0.003)
            sock.sendall(_request(c))
            out.append(_answer_corr(sock))
        return out
    return await trio.to_thread.run_sync(run)


def test_poller_answers_while_the_task_is_parked_and_a_cancelled_connection_ends():
    broker, seen = _setup()
    state = {}

    async def main():
        listeners, port, poller = await _listen()
        scopes, ended = [], trio.Event()

        async def serve_one(stream):
            with trio.CancelScope() as scope:
                scopes.append(scope)
                await Connection(broker, stream, "PLAINTEXT", poller).run()
            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poller.run)
            nursery.start_soon(lambda: trio.serve_listeners(serve_one, listeners))
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            state["answers"] = await _closed_loop(sock, range(1, 41))
            await trio.sleep(0.05)
            state["parked"] = len(poller._parked)   # the connection's task waits on the poller
            scopes[0].cancel()
            with trio.fail_after(5):
                await ended.wait()
            state["parked_after"] = len(poller._parked)
            state["eof"] = await trio.to_thread.run_sync(lambda: sock.recv(1))
            sock.close()
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert state["answers"] == list(range(1, 41))   # every answer, in order
    assert [c for _, c in seen] == list(range(1, 41))   # each carried out once, in order
    # the first request by the task (then it parks), the later ones by the poller (a request
    # the task reads before it parks is its own: all of them on an idle machine)
    assert seen[0] == ("task", 1)
    assert sum(who == "poller" for who, _ in seen) >= 20, seen
    assert state["parked"] == 1 and state["parked_after"] == 0
    assert state["eof"] == b""   # the cancelled connection closed its socket


def test_the_pollers_end_hands_its_connections_back_to_their_tasks():
    broker, seen = _setup()
    state = {}

    async def main():
        listeners, port, poller = await _listen()
        async with trio.open_nursery() as nursery:
            poller_scope = trio.CancelScope()

            async def run_poller():
                with poller_scope:
                    await poller.run()

            nursery.start_soon(run_poller)
            nursery.start_soon(lambda: trio.serve_listeners(
                lambda stream: Connection(broker, stream, "PLAINTEXT", poller).run(), listeners))
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            first = await _closed_loop(sock, range(1, 11))
            await trio.sleep(0.05)
            state["parked"] = len(poller._parked)
            poller_scope.cancel()   # the listener's poller ends: its connection goes on in its task
            await trio.sleep(0.05)
            state["closed"] = poller.closed
            state["answers"] = first + await _closed_loop(sock, range(11, 21))
            sock.close()
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert state["parked"] == 1 and state["closed"]
    assert state["answers"] == list(range(1, 21))
    assert seen[-10:] == [("task", c) for c in range(11, 21)]   # after the poller's end, the task


class _Observer:
    """An observer installed while the connection is parked: the poller must hand its next
    requests to the task (which reports them here), buffered bytes included."""

    def __init__(self):
        self.done = []

    def connection_opened(self, conn):
        pass

    def connection_closed(self, conn):
        pass

    def request_context(self, conn, ctx, spec):
        import contextlib
        return contextlib.nullcontext()

    def request_done(self, conn, event, response, sent, error, t0, t1, t2):
        self.done.append(event.ctx.correlation_id)


def test_an_observer_installed_while_parked_gets_the_requests_the_poller_read():
    broker, seen = _setup()
    state = {}

    async def main():
        listeners, port, poller = await _listen()
        conns = []

        async def serve_one(stream):
            conn = Connection(broker, stream, "PLAINTEXT", poller)
            conns.append(conn)
            await conn.run()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poller.run)
            nursery.start_soon(lambda: trio.serve_listeners(serve_one, listeners))
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            first = await _closed_loop(sock, range(1, 6))
            await trio.sleep(0.05)
            state["parked"] = len(poller._parked)
            obs = conns[0].observer = _Observer()
            # three requests in one write: the poller reads them all, then finds the observer
            with trio.fail_after(5):
                rest = await trio.to_thread.run_sync(
                    lambda: (sock.sendall(b"".join(_request(c) for c in (6, 7, 8))),
                             [_answer_corr(sock) for _ in range(3)])[1])
            state["answers"] = first + rest
            state["observed"] = obs.done
            sock.close()
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert state["parked"] == 1
    assert state["answers"] == list(range(1, 9))
    assert state["observed"] == [6, 7, 8]   # carried out by the task, reported to the observer
    assert [who for who, c in seen if c >= 6] == ["task"] * 3
