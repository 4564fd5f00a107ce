"""Build the Go client scenarios of compat/go (a Go module: franz-go today) and run them.

``build(out_dir)`` runs ``go build -o out_dir/ ./...`` in compat/go (the module proxy supplies
the dependencies named in go.mod/go.sum on the first build; Go's caches make later builds quick)
and returns the directory of the binaries.  ``go_binary()`` finds the toolchain: ``go`` on PATH,
else /usr/local/go/bin/go; None when there is none (the tests then skip, saying so).
``run(binary, bootstrap, scenario, **flags)`` runs one scenario and returns its JSON report.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "compat" / "go"


def go_binary() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


def build(out_dir: Path) -> Path:
    go = go_binary()
    r = subprocess.run([go, "build", "-o", str(out_dir) + "/", "./..."], cwd=MODULE, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("go build in %s failed:\n%s%s" % (MODULE, r.stdout, r.stderr))
    return out_dir


def run(binary: Path, bootstrap: str, scenario: str, wait: float = 180.0, **flags) -> dict:
    """One scenario; its report (stdout JSON).  A client failure (exit 2) fails the test with
    the scenario's own message and the tail of franz-go's log."""
    args = [str(binary), "-brokers", bootstrap, "-scenario", scenario, "-v"]
    for k, v in flags.items():
        args += ["-%s=%s" % (k.replace("_", "-"), v)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=wait)
    if r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(args), r.returncode,
                                                   r.stderr[-4000:]))
    return json.loads(r.stdout)
