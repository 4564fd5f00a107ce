"""The connection loop's schedule points (server/connection.py ``Connection._serve``).

Between two reads the loop yields to trio with its cancel-shielded schedule point, the cheap
one, and with a full checkpoint only every 16th read.  A cancellation (the broker's shutdown,
idle expiry, room made for another listener's connection) must still reach a connection whose
client keeps the socket full, so that it never reaches ``wait_readable``: this client pipelines
ApiVersions requests faster than they are answered and reads every answer, and the
connection's scope is cancelled while it does."""
import struct
import time
import types

import trio

from pykbroker.config import BrokerConfig
from pykbroker.handlers import k18_api_versions
from pykbroker.protocol.codec import APIS
from pykbroker.server.connection import Connection


def _api_versions(corr):
    """An ApiVersions v0 request padded to 1 KB (a reader ignores bytes after the last field):
    64 requests per read of the connection loop."""
    hdr = struct.pack(">hhi", 18, 0, corr) + struct.pack(">h", 4) + b"test"
    body = hdr + APIS[18].encode_bytes("request", 0, {})
    body += b"\x00" * (1020 - len(body))
    return struct.pack(">i", len(body)) + body


def _small_api_versions():
    """ApiVersions with an empty answer, 0.2 ms late: the answers stay far smaller than the
    requests, so the broker's writes never wait (a wait would be a cancellation point of its
    own), and the connection is slower than its client, so its socket never runs dry (nor
    does the loop reach wait_readable, another cancellation point)."""
    clone = types.SimpleNamespace(**{k: getattr(k18_api_versions, k) for k in dir(k18_api_versions)
                                     if not k.startswith("__")})

    async def handle(ctx, request):
        time.sleep(0.0002)   # blocking on purpose: the connection is the bottleneck
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}

    clone.handle = handle
    return clone


def test_a_connection_whose_socket_never_runs_dry_is_still_cancelled():
    config = BrokerConfig({})
    handlers = {18: _small_api_versions()}
    broker = types.SimpleNamespace(config=config, handlers=handlers,
                                   services=types.SimpleNamespace(config=config, handlers=handlers))
    chunk = b"".join(_api_versions(i) for i in range(256))   # 256 KB of requests per send
    seen = {"answers": 0, "ended": None}

    async def main():
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        scopes = []

        async def serve_one(stream):
            with trio.CancelScope() as scope:
                scopes.append(scope)
                await Connection(broker, stream, "PLAINTEXT").run()
            seen["ended"] = time.monotonic()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: trio.serve_listeners(serve_one, listeners))
            client = await trio.open_tcp_stream("127.0.0.1", port)

            async def send_forever():
                try:
                    while True:
                        await client.send_all(chunk)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return   # the broker closed the connection (cancelled, as it should)

            async def read_forever():
                try:
                    while True:
                        data = await client.receive_some(1 << 20)
                        if not data:
                            return
                        seen["answers"] += len(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

            nursery.start_soon(send_forever)
            nursery.start_soon(read_forever)
            while not scopes or seen["answers"] < 2000:   # the connection is busy
                await trio.sleep(0.01)
            cancelled_at = time.monotonic()
            scopes[0].cancel()
            with trio.move_on_after(10):
                while seen["ended"] is None:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        assert seen["ended"] is not None, "the cancelled connection kept serving"
        assert seen["ended"] - cancelled_at < 5

    trio.run(main)
