"""tests/full_matrix.py's entries name tests that exist: a renamed test or parameter would
otherwise leave its entry matching nothing, and the variant it meant to leave to
``PYKBROKER_FULL_MATRIX=1`` would quietly run on every run again (or an entry would be read as
a proof moved that was never there)."""
import os
import subprocess
import sys
from pathlib import Path

from tests import full_matrix

ROOT = Path(__file__).resolve().parents[2]


def test_every_full_matrix_entry_names_a_collected_test():
    files = sorted({key.split("::", 1)[0] for key in full_matrix.FULL_MATRIX_ONLY})
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q"]
                       + ["tests/" + f for f in files],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, full_matrix.FLAG: "1"})
    collected = {line.strip()[len("tests/"):] for line in r.stdout.splitlines() if line.startswith("tests/")}
    # a module skipped at collection (no Go toolchain outside CI) lists no test of its file
    present = {c.split("::", 1)[0] for c in collected}
    stale = [key for key in full_matrix.FULL_MATRIX_ONLY
             if key.split("::", 1)[0] in present and key not in collected]
    assert not stale, "tests/full_matrix.py names tests that are not collected: %s" % stale
    assert present, r.stdout[-3000:] + r.stderr[-3000:]


def test_the_default_run_skips_them_naming_the_flag(monkeypatch):
    monkeypatch.setattr(full_matrix, "FULL", False)
    for key, why in full_matrix.FULL_MATRIX_ONLY.items():
        assert "[cluster" in key or "on_cluster.py::" in key, key   # only cluster repeats of client scenarios
        assert full_matrix.skip_reason(key) == "PYKBROKER_FULL_MATRIX=1: " + why
    monkeypatch.setattr(full_matrix, "FULL", True)
    assert all(full_matrix.skip_reason(key) is None for key in full_matrix.FULL_MATRIX_ONLY)
