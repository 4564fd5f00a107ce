"""A small local HTTP control endpoint (JSON) so a test in any language can inject faults, move
the broker's clock, crash and restart the broker and take partitions offline.  Off unless asked
for (``Broker(control_port=0)``, ``pykbroker serve --control 127.0.0.1:PORT``); it has no
authentication, so it binds where it is told (loopback by default).

Faults (``server/faults.py``):

- ``GET /faults``: ``{"rules": [...], "offline": [[topic, partition], ...]}``.
- ``POST /faults`` with ``{"action": "fail"|"delay"|"drop_connection"|"drop_response", "api": ..., "error": ...,
  "seconds": ..., "topic": ..., "partition": ..., "count": ...}``: adds a rule (201).
- ``DELETE /faults``: clears every rule (offline partitions come back online).
- ``POST /partitions/offline`` / ``POST /partitions/online`` with ``{"topic": ..., "partition":
  ...}``: a partition offline (KAFKA_STORAGE_ERROR, no leader in Metadata) or back.

Clock (``pykbroker/clock.py``):

- ``GET /clock``: ``{"time_ms": ..., "offset_ms": ..., "frozen": ..., "drives_trio": ...}``.
- ``POST /clock`` with any of ``{"freeze": true|false, "advance_ms": N}`` (freeze first).

Broker life (``pykbroker/run/runner.py``):

- ``GET /broker``: ``{"running": ..., "incarnation": ..., "listeners": ...}``.
- ``POST /broker/crash``: stop without a clean shutdown (as ``kill -9``); it stays down.
- ``POST /broker/start``: start again from the data dir, on the same ports.
- ``POST /broker/restart`` with ``{"clean": true|false}`` (default true): stop, then start.

Bad input answers 400 with ``{"error": "..."}``; a crash/start/restart while another one is
under way 409.  ``handle`` holds the logic (no sockets);
``serve_control`` is the trio listener (one request per connection, ``Connection: close``).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..server.faults import DELAY, DROP, DROP_RESPONSE, ERROR, FaultRule, error_code

if TYPE_CHECKING:
    import trio

    from .runner import BrokerRunner

# keyed by the request's "action", which may be missing (None): a miss is a 400
_ACTIONS: dict[str | None, str] = {"fail": ERROR, "delay": DELAY, "drop_connection": DROP,
                                   "drop_response": DROP_RESPONSE}
_DEFAULT_COUNT = {ERROR: 1, DELAY: None, DROP: 1, DROP_RESPONSE: 1}


def _rule_json(r: FaultRule) -> dict:
    return {"api_key": r.api_key, "action": r.action, "topic": r.topic, "partition": r.partition,
            "error_code": r.code, "seconds": r.seconds, "remaining": r.remaining}


def _faults(runner: BrokerRunner) -> dict:
    return {"rules": [_rule_json(r) for r in runner.faults.rules if r.tag is None],
            "offline": [list(tp) for tp in runner.faults.offline]}


def _clock(runner: BrokerRunner) -> dict:
    return dict(runner.clock.state(), drives_trio=runner.drives_trio)


def _broker(runner: BrokerRunner) -> dict:
    return {"running": runner.running, "incarnation": runner.incarnation,
            "listeners": runner.config["listeners"]}


class BadRequest(Exception):
    pass


def _json(body: bytes) -> dict:
    try:
        req = json.loads(body or b"{}")
    except ValueError as e:
        raise BadRequest("body is not JSON: %s" % e) from None
    if not isinstance(req, dict):
        raise BadRequest("body must be a JSON object")
    return req


_ROUTES = {
    "/faults": ("GET", "POST", "DELETE"), "/partitions/offline": ("POST",),
    "/partitions/online": ("POST",), "/clock": ("GET", "POST"), "/broker": ("GET",),
    "/broker/crash": ("POST",), "/broker/start": ("POST",), "/broker/restart": ("POST",),
}
_LIFE = ("/broker/crash", "/broker/start", "/broker/restart")


async def handle(runner: BrokerRunner, method: str, path: str, body: bytes) -> tuple[int, dict]:
    """One control request against ``runner`` (a BrokerRunner): (HTTP status, JSON answer)."""
    path = path.rstrip("/") or "/"
    if path not in _ROUTES:
        return 404, {"error": "unknown path %s" % path}
    if method not in _ROUTES[path]:
        return 405, {"error": "method %s not allowed on %s" % (method, path)}
    try:
        req = _json(body) if method == "POST" else {}
    except BadRequest as e:
        return 400, {"error": str(e)}
    if path not in _LIFE:
        return handle_sync(runner, method, path, req)
    from .runner import BrokerBusy

    try:
        if path == "/broker/crash":
            await runner.crash()
        elif path == "/broker/start":
            await runner.start()
        else:
            await runner.restart(clean=bool(req.get("clean", True)))
    except BrokerBusy as e:   # another client's crash/start/restart is under way
        return 409, {"error": str(e)}
    return 200, _broker(runner)


def handle_sync(runner: BrokerRunner, method: str, path: str, req: dict) -> tuple[int, dict]:
    """Every request but the broker's life (crash/start/restart), on the runner's loop; ``req``
    the decoded JSON body.  The embedded Broker's ``faults`` and ``clock`` call this too, so
    Python and HTTP share one behaviour."""
    try:
        if path == "/faults":
            if method == "GET":
                return 200, _faults(runner)
            if method == "DELETE":
                runner.clear_faults()
                return 200, _faults(runner)
            try:
                action = _ACTIONS[req.get("action")]
                count = req.get("count", _DEFAULT_COUNT[action])
                rule = FaultRule(req["api"], action, req.get("topic"), req.get("partition"),
                                 code=error_code(req["error"]) if action == ERROR else 0,
                                 seconds=float(req.get("seconds", 0)) if action == DELAY else 0.0,
                                 count=count)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise BadRequest("bad fault rule: %r" % (e,)) from None
            runner.faults.add(rule)
            return 201, _rule_json(rule)
        if path.startswith("/partitions/"):
            try:
                topic, partition = str(req["topic"]), int(req["partition"])
            except (KeyError, TypeError, ValueError):
                raise BadRequest("expected {\"topic\": ..., \"partition\": ...}") from None
            try:
                changed = runner.set_partition_offline(topic, partition, path.endswith("offline"))
            except KeyError as e:
                return 404, {"error": str(e.args[0])}
            return 200, dict(_faults(runner), changed=changed)
        if path == "/clock":
            if method == "POST":
                unknown = set(req) - {"freeze", "advance_ms"}
                if unknown:
                    raise BadRequest("unknown clock field(s) %s" % sorted(unknown))
                try:
                    if "freeze" in req:
                        runner.clock.freeze() if req["freeze"] else runner.clock.unfreeze()
                    if "advance_ms" in req:
                        runner.clock.advance(float(req["advance_ms"]) / 1000.0)
                except (TypeError, ValueError) as e:
                    raise BadRequest(str(e)) from None
            return 200, _clock(runner)
        if path == "/broker":
            return 200, _broker(runner)
        return 404, {"error": "unknown path %s" % path}
    except BadRequest as e:
        return 400, {"error": str(e)}


async def _serve_one(stream: trio.SocketStream, runner: BrokerRunner) -> None:
    import trio

    # not a clock deadline: the broker clock may be frozen (the control endpoint unfreezes it)
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
    status, answer = await handle(runner, method.upper(), path.split("?", 1)[0], body[:length])
    payload = json.dumps(answer).encode()
    with trio.CancelScope(shield=True):
        await stream.send_all(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                              b"Connection: close\r\n\r\n" % (status, _REASONS.get(status, b"X"), len(payload))
                              + payload)


_REASONS = {200: b"OK", 201: b"Created", 400: b"Bad Request", 404: b"Not Found",
            405: b"Method Not Allowed", 409: b"Conflict"}


async def serve_control(runner: BrokerRunner, host: str, port: int, task_status: trio.TaskStatus[int]) -> None:
    """Listen on ``host:port`` (0: a free port); ``task_status.started(bound_port)``."""
    import trio

    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as e:
        raise OSError(e.errno, "cannot listen on %s:%d (control endpoint): %s" % (host, port, e.strerror or e)) from None

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await _serve_one(stream, runner)
        except (trio.BrokenResourceError, OSError, ValueError):
            pass
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(listeners[0].socket.getsockname()[1])
