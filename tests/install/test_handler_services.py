"""Handlers reach the broker only through their typed services, read from the source with ``ast``.

A request handler (``pykbroker/handlers/``, its ``support/`` and the group handlers' helpers in
``coordinator/group/api.py``) gets the broker's components from ``ctx.services``
(handlers/support/services.py: ``BrokerServices``) and the connection's facts from attributes
``Connection`` declares (server/connection.py).  So, in those modules:

- no ``ctx.broker``: the whole broker is not a handler's to read;
- no ``getattr``/``hasattr`` on the request context, the services, the connection or the
  controller: whatever a handler uses is declared, and what only a cluster's controller does
  has a default in the ``Controller`` interface (cluster/controller.py), so nothing probes.

``getattr`` on other things (a decoded request, a handler module's optional constant) is fine.
"""
from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HANDLERS = os.path.join(ROOT, "pykbroker", "handlers")
HELPERS = [os.path.join(ROOT, "pykbroker", "coordinator", "group", "api.py")]

# names that stand for the context, the services, the connection or the controller
COLLABORATORS = {"ctx", "services", "connection", "conn", "controller", "broker"}


def handler_files() -> list[str]:
    out = []
    for d, dirs, files in os.walk(HANDLERS):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
    return out + HELPERS


def _names(node: ast.AST) -> set[str]:
    """The names and attribute names an expression is built from (``ctx.services.controller``:
    ctx, services, controller)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def violations(source: str, path: str = "<source>") -> list[str]:
    """Each ``ctx.broker`` and each probe of a collaborator in ``source``, as 'path:line: what',
    in line order."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, path)):
        if (isinstance(node, ast.Attribute) and node.attr == "broker"
                and isinstance(node.value, ast.Name) and node.value.id == "ctx"):
            out.append((node.lineno, "ctx.broker"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr") and node.args):
            probed = _names(node.args[0]) & COLLABORATORS
            if probed:
                out.append((node.lineno, "%s probes %s" % (node.func.id, ", ".join(sorted(probed)))))
    return ["%s:%d: %s" % (path, line, what) for line, what in sorted(out)]


def test_handlers_use_typed_services_and_never_probe():
    found = []
    for path in handler_files():
        with open(path, encoding="utf-8") as fh:
            found += violations(fh.read(), os.path.relpath(path, ROOT))
    assert found == [], "\n".join(found)


def test_the_check_sees_what_it_forbids():
    """The rule itself: each forbidden shape is reported, the allowed ones are not."""
    bad = '''
async def handle(ctx, request):
    broker = ctx.broker
    tm = getattr(ctx.broker, "token_manager", None)
    name = getattr(ctx.connection, "listener_name", "PLAINTEXT")
    elect = getattr(ctx.services.controller, "elect_leaders", None)
    ok = hasattr(services, "share_partition_manager")
    auth = getattr(conn, "authenticator", None)
'''
    assert violations(bad) == [
        "<source>:3: ctx.broker", "<source>:4: ctx.broker", "<source>:4: getattr probes broker, ctx",
        "<source>:5: getattr probes connection, ctx", "<source>:6: getattr probes controller, ctx, services",
        "<source>:7: hasattr probes services", "<source>:8: getattr probes conn"]
    good = '''
async def handle(ctx, request):
    md = ctx.services.metadata_cache
    leader = md.broker(1)
    floor = getattr(handler, "ADVERTISED_MIN_VERSION", handler.MIN_VERSION)
    field = getattr(request, "topic_id", None)
'''
    assert violations(good) == []
