"""Smoke run of the benchmark harness (compat/bench/bench.py --smoke): one cell, one A/B pair,
2 MB, against a real pykbroker and a real Apache Kafka started by the harness.  It asserts that
the JSON is complete and sane (both brokers measured, every number positive), never anything
about speed: the numbers of a loaded CI machine mean nothing.  Like tests/differential, it needs
Java and Maven (Kafka from Maven Central) and fails without them; ``PYKBROKER_QUICK=1`` skips it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.environ.get("PYKBROKER_QUICK") == "1",
                                reason="PYKBROKER_QUICK=1: the benchmark smoke run (Apache Kafka) runs in CI")


@pytest.mark.timeout(600)
def test_bench_smoke_json_complete(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, str(ROOT / "compat" / "bench" / "bench.py"), "--smoke", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=560)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    data = json.loads((tmp_path / "bench-smoke.json").read_text())
    assert data["mode"] == "smoke"
    assert set(data["targets"]) == {"pykbroker-single", "kafka-single"}
    for t in data["targets"].values():
        assert t["start_seconds"] > 0 and t["processes"] == 1
    assert len(data["cells"]) == 1
    cell = data["cells"][0]
    assert "error" not in cell, cell.get("error")
    for broker in ("pykbroker", "kafka"):
        runs = cell["runs"][broker]
        assert len(runs) == 1
        run = runs[0]
        # the whole budget went through and came back (2 MB of 1 KiB records)
        assert run["produced"] == run["consumed"] == 1953
        for key in ("produce_mb_s", "produce_rec_s", "consume_mb_s", "consume_rec_s", "ack_p50_ms",
                    "ack_p99_ms", "ack_p999_ms", "rss_peak_mb", "fds_peak", "cpu_s_per_gb"):
            assert run[key] > 0, (broker, key, run[key])
        assert run["ack_p50_ms"] <= run["ack_p99_ms"] <= run["ack_p999_ms"]
    summary = cell["summary"]
    for key in ("produce_mb_s", "consume_mb_s", "ack_p99_ms", "rss_peak_mb", "cpu_s_per_gb"):
        s = summary[key]
        assert s["pykbroker"] > 0 and s["kafka"] > 0
        assert s["ratio"]["min"] <= s["ratio"]["median"] <= s["ratio"]["max"]
    # the table names both brokers and the cell
    assert "tput/ck/single/1024B/1p" in r.stdout and "pykbroker" in r.stdout and "kafka" in r.stdout
    # the run's record beside its JSON: the table's rows, this cell's figures among them
    rec = json.loads((tmp_path / "bench-smoke.cells.json").read_text())
    assert rec["mode"] == "smoke" and rec["pairs"] == 1 and rec["summary"] == "bench-smoke.md"
    assert any(r["cell"] == "tput/ck/single/1024B/1p" and r["metric"] == "produce MB/s" and r["pykbroker"] > 0
               for r in rec["rows"])
    # matplotlib is in the test extra: the plots are made
    for name in ("throughput-smoke.png", "ratios-smoke.png"):
        assert (tmp_path / name).stat().st_size > 1000, name


@pytest.mark.timeout(120)
def test_report_names_its_plots_after_the_json(tmp_path):
    """``--report`` redraws a saved run's plots beside its JSON, named after it: redrawing a
    partial run saved as bench-cl.json (mode "full") makes throughput-cl.png and never touches
    the full matrix's throughput-full.png in the same directory."""
    src = ROOT / "tests" / "bench" / "data" / "bench-cluster-sample.json"   # three cells of a cluster run
    data = json.loads(src.read_text())
    assert data["mode"] == "full"
    (tmp_path / "bench-cl.json").write_text(json.dumps(data))
    (tmp_path / "throughput-full.png").write_bytes(b"the full matrix's plot")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, str(ROOT / "compat" / "bench" / "bench.py"), "--report",
                        str(tmp_path / "bench-cl.json")], capture_output=True, text=True, env=env, timeout=110)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "tput/ck/cluster/1024B/1p" in r.stdout   # the table
    for name in ("throughput-cl.png", "ratios-cl.png", "latency-cl.png"):
        assert (tmp_path / name).stat().st_size > 1000, name
    assert (tmp_path / "throughput-full.png").read_bytes() == b"the full matrix's plot"
    assert not (tmp_path / "ratios-full.png").exists()
    # and the run's small record beside it, named after it too (what compat/bench/summary.py reads)
    rec = json.loads((tmp_path / "bench-cl.cells.json").read_text())
    assert rec["summary"] == "bench-cl.md" and rec["mode"] == "full" and rec["started"] == data["started"]
    assert {r["cell"] for r in rec["rows"]} >= {c["id"] for c in data["cells"]}
    assert not (tmp_path / "bench-full.cells.json").exists()
