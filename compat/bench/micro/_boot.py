"""Puts compat/bench (brokers.py, procstat.py, loadgen.py) and the repository root (pykbroker)
on ``sys.path`` for the micro benchmarks that use them: each is run as a script, so only this
folder is on the path (``import _boot`` first).  ``BENCH`` and ``ROOT`` are those folders."""
from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parents[1]
for _p in (str(BENCH), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)
