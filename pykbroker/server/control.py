"""A small local HTTP control endpoint (JSON) for fault injection, so a test in another
language can drive ``broker.faults`` too.  Off unless asked for (``Broker(control_port=0)``).

- ``GET /faults``: ``{"rules": [...]}``, the rules not yet spent.
- ``POST /faults`` with ``{"action": "fail"|"delay"|"drop_connection", "api": ..., "error": ...,
  "seconds": ..., "topic": ..., "partition": ..., "count": ...}``: adds a rule (201).
- ``DELETE /faults``: clears every rule.

Bad input answers 400 with ``{"error": "..."}``.  ``apply`` is sans-IO; ``serve_control`` is
the trio listener (one request per connection, ``Connection: close``).
"""
from __future__ import annotations

import json

from .faults import DELAY, DROP, ERROR, FaultRule, error_code

_ACTIONS = {"fail": ERROR, "delay": DELAY, "drop_connection": DROP}
_DEFAULT_COUNT = {ERROR: 1, DELAY: None, DROP: 1}


def _rule_json(r: FaultRule) -> dict:
    return {"api_key": r.api_key, "action": r.action, "topic": r.topic, "partition": r.partition,
            "error_code": r.code, "seconds": r.seconds, "remaining": r.remaining}


def apply(plan, method: str, path: str, body: bytes) -> tuple[int, dict]:
    """One control request against ``plan``: (HTTP status, JSON answer)."""
    if path.rstrip("/") != "/faults":
        return 404, {"error": "unknown path %s" % path}
    if method == "GET":
        return 200, {"rules": [_rule_json(r) for r in plan.rules]}
    if method == "DELETE":
        plan.clear()
        return 200, {"rules": []}
    if method != "POST":
        return 405, {"error": "method %s not allowed" % method}
    try:
        req = json.loads(body or b"{}")
        action = _ACTIONS[req.get("action")]
        count = req.get("count", _DEFAULT_COUNT[action])
        rule = FaultRule(req["api"], action, req.get("topic"), req.get("partition"),
                         code=error_code(req["error"]) if action == ERROR else 0,
                         seconds=float(req.get("seconds", 0)) if action == DELAY else 0.0,
                         count=count)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return 400, {"error": "bad fault rule: %r" % (e,)}
    plan.add(rule)
    return 201, _rule_json(rule)


async def _serve_one(stream, broker) -> None:
    import trio

    with trio.move_on_after(10):
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, path, _ = lines[0].split(" ", 2)
        except ValueError:
            return
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        while len(body) < length:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            body += chunk
        status, answer = apply(broker.faults, method, path.split("?", 1)[0], body[:length])
        payload = json.dumps(answer).encode()
        await stream.send_all(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                              b"Connection: close\r\n\r\n" % (status, len(payload)) + payload)


async def serve_control(broker, host: str, port: int, task_status) -> None:
    """Listen on ``host:port`` (0: a free port); ``task_status.started(bound_port)``."""
    import trio

    listeners = await trio.open_tcp_listeners(port, host=host)

    async def handler(stream):
        try:
            await _serve_one(stream, broker)
        except (trio.BrokenResourceError, OSError, ValueError):
            pass
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(listeners[0].socket.getsockname()[1])
