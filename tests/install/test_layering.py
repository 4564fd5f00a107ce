"""The installed package's layering, read from the source with ``ast`` (nothing is imported).

Every ``import`` and ``from ... import`` in ``pykbroker/`` counts, at module level or inside a
function (a lazy import is still a dependency), except those under ``if TYPE_CHECKING:``, which
never run.  ``from pkg import name`` is an import of ``pkg.name`` when that is a module, else
of ``pkg``.  The rules:

- no import cycle between two modules, nor between two parts of the package (a part is a
  subpackage such as ``pykbroker.cluster``, or a top-level module such as ``pykbroker.cli``):
  every part can be read, tested and replaced from the ones below it;
- ``pykbroker/`` never imports ``tests`` or ``compat`` (they are not installed), by name or by
  file path;
- the low layers (``server``, ``protocol``, ``storage``) never import the front ends and test
  helpers built on them (``run``, ``local``, ``cli``, ``embedded``, ``testing``);
- nothing in the package but ``pykbroker.testing`` imports ``pykbroker.testing``: it is what a
  user's tests import, the top of the house.
"""
from __future__ import annotations

import ast
import os

from compat.chaos.checker import strongly_connected

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = "pykbroker"

LOW = ("pykbroker.server", "pykbroker.protocol", "pykbroker.storage")
HIGH = ("pykbroker.run", "pykbroker.runner", "pykbroker.local", "pykbroker.cli", "pykbroker.embedded",
        "pykbroker.testing")


def _modules(root: str | None = None) -> dict[str, str]:
    """Dotted module name -> file, for every .py file of the package (``pkg/__init__.py`` is
    ``pkg``)."""
    root = root or ROOT
    out = {}
    for d, dirs, files in os.walk(os.path.join(root, PKG)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not os.path.islink(os.path.join(d, x)))
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                out[".".join(rel)] = os.path.join(d, f)
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (typing only, never run)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    skip.update(id(n) for n in ast.walk(sub))
    return skip


def imports_of(name: str, path: str, modules) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file ``path`` of module ``name``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    skip = _type_checking_only(tree)
    is_pkg = os.path.basename(path) == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = "%s.%s" % (mod, a.name)
                out.append((sub if sub in modules else mod, node.lineno))
    return out


def import_graph(root: str | None = None) -> tuple[dict[str, set[str]], dict[tuple[str, str], int], dict[str, list]]:
    """(edges between package modules, line of each edge, every import of each module)."""
    modules = _modules(root)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    lines: dict[tuple[str, str], int] = {}
    every: dict[str, list] = {}
    for m, path in modules.items():
        every[m] = imports_of(m, path, modules)
        for target, line in every[m]:
            if target in modules and target != m:
                edges[m].add(target)
                lines.setdefault((m, target), line)
    return edges, lines, every


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node."""
    return strongly_connected(edges, edges)


def part(module: str) -> str:
    """``pykbroker.cluster.zookeeper.active`` -> ``pykbroker.cluster``; ``pykbroker`` itself."""
    return ".".join(module.split(".")[:2])


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _explain(comps, lines, edges) -> str:
    rows = []
    for comp in comps:
        rows.append("cycle: " + ", ".join(comp))
        for a in comp:
            for b in sorted(edges[a]):
                if b in comp:
                    rows.append("    %s -> %s (line %s)" % (a, b, lines.get((a, b), "?")))
    return "\n".join(rows)


def test_no_import_cycle_between_modules():
    edges, lines, _ = import_graph()
    found = cycles(edges)
    assert not found, "modules that import each other:\n" + _explain(found, lines, edges)


def test_no_import_cycle_between_parts():
    edges, lines, _ = import_graph()
    parts: dict[str, set[str]] = {}
    why: dict[tuple[str, str], int] = {}
    for a, targets in edges.items():
        for b in targets:
            pa, pb = part(a), part(b)
            parts.setdefault(pa, set())
            parts.setdefault(pb, set())
            if pa != pb:
                parts[pa].add(pb)
                why.setdefault((pa, pb), "%s -> %s line %s" % (a, b, lines[(a, b)]))
    found = cycles(parts)
    rows = []
    for comp in found:
        rows.append("parts that import each other: " + ", ".join(comp))
        rows += ["    " + why[(a, b)] for a in comp for b in sorted(parts[a]) if b in comp]
    assert not found, "\n".join(rows)


def test_package_never_imports_tests_or_compat():
    modules = _modules()
    bad = []
    for m, path in modules.items():
        for target, line in imports_of(m, path, modules):
            if target.split(".")[0] in ("tests", "compat"):
                bad.append("%s line %d imports %s" % (m, line, target))
        # loading a file of the checkout by path (importlib.util.spec_from_file_location) reaches
        # what an installed package does not have
        with open(path, encoding="utf-8") as fh:
            for node in ast.walk(ast.parse(fh.read(), path)):
                if isinstance(node, ast.Attribute) and node.attr == "spec_from_file_location":
                    bad.append("%s line %d loads a module by file path" % (m, node.lineno))
    assert not bad, "\n".join(bad)


def test_low_layers_never_import_front_ends():
    edges, lines, _ = import_graph()
    bad = ["%s -> %s (line %d)" % (a, b, lines[(a, b)])
           for a in sorted(edges) if _within(a, LOW)
           for b in sorted(edges[a]) if _within(b, HIGH)]
    assert not bad, "server/protocol/storage import a layer above them:\n" + "\n".join(bad)


def test_only_testing_imports_testing():
    edges, lines, _ = import_graph()
    bad = ["%s -> %s (line %d)" % (a, b, lines[(a, b)])
           for a in sorted(edges) if not _within(a, ("pykbroker.testing",))
           for b in sorted(edges[a]) if _within(b, ("pykbroker.testing",))]
    assert not bad, "the package imports its test helpers:\n" + "\n".join(bad)


def test_the_checks_see_a_cycle_and_a_layer_break(tmp_path):
    """The graph reader itself: a planted cycle (lazy import inside a function, relative
    imports) and a planted upward import are found."""
    pkg = tmp_path / PKG
    (pkg / "server").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "server" / "__init__.py").write_text("")
    (pkg / "server" / "a.py").write_text("from . import b\n")
    (pkg / "server" / "b.py").write_text("def f():\n    from .a import x\n    from ..cli import main\n")
    (pkg / "cli.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .server import a\n")
    edges, _, _ = import_graph(str(tmp_path))
    assert cycles(edges) == [["pykbroker.server.a", "pykbroker.server.b"]]
    assert edges["pykbroker.server.b"] == {"pykbroker.server.a", "pykbroker.cli"}
    assert edges["pykbroker.cli"] == set()   # TYPE_CHECKING imports never run
