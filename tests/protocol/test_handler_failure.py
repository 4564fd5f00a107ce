"""A handler that raises still answers: the client gets the request's error code per item (or
UNKNOWN_SERVER_ERROR for a bug), the connection stays usable, and nothing hangs.

The server layer (``Connection``) is exercised over a real loopback socket with the real
handler modules; only the handler's ``handle`` function is swapped for one that fails."""
import struct
import types

import trio

from pykbroker.config import BrokerConfig
from pykbroker.handlers import k03_metadata, k18_api_versions
from pykbroker.protocol.codec import APIS
from pykbroker.protocol.errors import ErrorCode, KafkaError
from pykbroker.server.connection import Connection


def _failing(module, exc):
    clone = types.SimpleNamespace(**{k: getattr(module, k) for k in dir(module) if not k.startswith("__")})

    async def handle(ctx, request):
        raise exc

    clone.handle = handle
    return clone


def _request(api_key, version, corr, msg):
    api = APIS[api_key]
    hdr = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", 4) + b"test"
    if version >= api.flexible_from:
        hdr += b"\x00"
    body = hdr + api.encode_bytes("request", version, msg)
    return struct.pack(">i", len(body)) + body


async def _exchange(handlers, frames, n_responses):
    config = BrokerConfig({})
    broker = types.SimpleNamespace(config=config, handlers=handlers,
                                   services=types.SimpleNamespace(config=config, handlers=handlers))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    out = []
    async with trio.open_nursery() as nursery:
        async def serve_one(stream):
            await Connection(broker, stream, "PLAINTEXT").run()
        nursery.start_soon(lambda: trio.serve_listeners(serve_one, listeners))
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(b"".join(frames))
        buf = b""
        with trio.fail_after(10):  # a hang is the failure this test exists to catch
            while len(out) < n_responses:
                buf += await client.receive_some(65536)
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    n = struct.unpack_from(">i", buf)[0]
                    out.append(buf[4:4 + n])
                    buf = buf[4 + n:]
        await client.aclose()
        nursery.cancel_scope.cancel()
    return out


def test_kafka_error_from_handler_is_answered_per_topic():
    handlers = {3: _failing(k03_metadata, KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
                18: k18_api_versions}
    req = _request(3, 9, 11, {"topics": [{"name": "a"}, {"name": "b"}]})
    follow = _request(18, 0, 12, {})
    frames = trio.run(_exchange, handlers, [req, follow], 2)
    assert struct.unpack_from(">i", frames[0])[0] == 11
    body = APIS[3].decode("response", 9, frames[0][5:])  # v9: flexible header (tagged byte)
    assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("a", 3), ("b", 3)]
    # the connection still serves the next request
    assert struct.unpack_from(">i", frames[1])[0] == 12


def test_handler_bug_is_answered_with_unknown_server_error():
    handlers = {3: _failing(k03_metadata, RuntimeError("boom")),
                18: _failing(k18_api_versions, ZeroDivisionError())}
    frames = trio.run(_exchange, handlers,
                      [_request(3, 1, 21, {"topics": [{"name": "x"}]}), _request(18, 1, 22, {})], 2)
    meta = APIS[3].decode("response", 1, frames[0][4:])
    assert meta["topics"][0]["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    api = APIS[18].decode("response", 1, frames[1][4:])  # generic fallback: top-level code
    assert api["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR


def test_config_handlers_answer_every_resource():
    """AlterConfigs and IncrementalAlterConfigs take their error_response from
    support/config_resources (a module attribute, looked up by the dispatcher): a failing handler
    still answers each resource with the code, not an empty list."""
    from pykbroker.handlers import k33_alter_configs, k44_incremental_alter_configs
    resources = [{"resource_type": 2, "resource_name": name, "configs": []} for name in ("a", "b")]
    handlers = {33: _failing(k33_alter_configs, KafkaError(ErrorCode.POLICY_VIOLATION)),
                44: _failing(k44_incremental_alter_configs, KafkaError(ErrorCode.POLICY_VIOLATION))}
    frames = trio.run(_exchange, handlers, [_request(33, 0, 31, {"resources": resources, "validate_only": False}),
                                            _request(44, 0, 32, {"resources": resources, "validate_only": False})], 2)
    for api_key, frame in zip((33, 44), frames):
        body = APIS[api_key].decode("response", 0, frame[4:])
        assert [(r["resource_name"], r["error_code"]) for r in body["responses"]] == \
            [("a", ErrorCode.POLICY_VIOLATION), ("b", ErrorCode.POLICY_VIOLATION)], body
