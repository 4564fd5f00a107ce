"""The generated summary table of docs/benchmarks.md (compat/bench/summary.py) and the run
records it is built from (bench-<tag>.cells.json, written by compat/bench/bench.py).  Fast: no
broker, no benchmark; the committed files and synthetic records only."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "compat" / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"

# loaded by path: "bench" is this test package's own name
_spec = importlib.util.spec_from_file_location("pykbroker_bench_summary", ROOT / "compat" / "bench" / "summary.py")
summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summary)
bench = summary._bench()


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))


def test_committed_table_is_what_the_records_give():
    """Fails when docs/benchmarks.md's table was edited by hand, or a record was committed
    without running compat/bench/summary.py."""
    r = subprocess.run([sys.executable, str(ROOT / "compat" / "bench" / "summary.py"), "--check"],
                       capture_output=True, text=True, env=_env(), timeout=60)
    assert r.returncode == 0, r.stderr[-4000:]
    # the newest committed runs are among the rows
    text = DOC.read_text()
    block = text[text.index(summary.BEGIN):text.index(summary.END)]
    records = [json.loads(f.read_text()) for f in RESULTS.glob("*.cells.json")]
    newest = max(records, key=lambda r: r["started"])
    assert newest["summary"] in block and "bench-full.md" in block


def _copy(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for p in RESULTS.glob("bench-*"):
        if p.name.endswith((".md", summary.RECORD_SUFFIX)):
            shutil.copy(p, results / p.name)
    for p in RESULTS.glob("*" + summary.RECORD_SUFFIX):   # a record's summary may have another name
        named = RESULTS / json.loads(p.read_text())["summary"]
        if named.exists():
            shutil.copy(named, results / named.name)
    doc = tmp_path / "docs" / "benchmarks.md"
    doc.parent.mkdir()
    doc.write_text(DOC.read_text())
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    return results, doc


def test_check_fails_on_a_hand_edit_and_on_a_new_record(tmp_path):
    results, doc = _copy(tmp_path)
    readme = tmp_path / "README.md"
    # the links are relative to the document, so the copy's differ from the repository's:
    # written once first
    assert summary.main(["--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 0
    assert summary.main(["--check", "--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 0
    good = doc.read_text()

    # a figure changed by hand in the table
    row = next(line for line in good.splitlines() if line.startswith("| tput/ck/single/100B/1p ") and "produce MB/s" in line)
    cells = row.split("|")
    cells[3] = " 12345.6 "   # pykbroker's figure, whatever the latest run measured
    doc.write_text(good.replace(row, "|".join(cells)))
    assert summary.main(["--check", "--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 1
    doc.write_text(good)

    # a newer run's record committed without regenerating: the check fails, writing fixes it
    rec = {"summary": "bench-later.md", "mode": "full", "started": "2099-01-01T00:00:00+00:00", "pairs": 3,
           "rows": [{"cell": "tput/ck/single/100B/1p", "metric": "produce MB/s", "pykbroker": 50.0, "kafka": 100.0,
                     "ratio": [0.5, 0.4, 0.6], "target": ">= 1x", "verdict": "MISS: 50% less", "met": False}]}
    (results / "bench-later.cells.json").write_text(bench.dump_record(rec))
    (results / "bench-later.md").write_text("# a later run\n")
    assert summary.main(["--check", "--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 1
    assert summary.main(["--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 0
    assert summary.main(["--check", "--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 0
    line = next(line for line in doc.read_text().splitlines()
                if line.startswith("| tput/ck/single/100B/1p ") and "| produce MB/s " in line)
    assert "0.50 (0.40-0.60)" in line and "MISS: 50% less" in line and "[bench-later](" in line
    # the README's headline lists it among the rows not met, with its run
    head = readme.read_text()
    head = head[head.index(summary.HEADLINE_BEGIN):head.index(summary.HEADLINE_END)]
    assert "- `tput/ck/single/100B/1p` produce MB/s: 0.50 (0.40-0.60) (target >= 1x), [bench-later](" in head
    assert "bench-later.md) 2099-01-01 00:00" in line

    # a record whose summary is not committed beside it
    (results / "bench-later.md").unlink()
    assert summary.main(["--check", "--results", str(results), "--doc", str(doc), "--readme", str(readme)]) == 1


def _rec(started, rows, mode="full"):
    return {"summary": "x.md", "mode": mode, "started": started, "pairs": 3, "rows": rows}


def _row(cell, metric, ratio, target=">= 1x"):
    r = {"cell": cell, "metric": metric, "pykbroker": 1.0, "kafka": 1.0, "ratio": [ratio, ratio, ratio]}
    if target:
        r.update(target=target, verdict="ok" if ratio >= 1 else "MISS", met=ratio >= 1)
    return r


def test_latest_run_per_cell_and_metric():
    A = ("bench-a.cells.json", _rec("2026-11-24T10:00:00+00:00", [
        _row("X", "produce MB/s", 1.1), _row("X", "consume MB/s", 1.2), _row("Y", "produce MB/s", 1.3),
        _row("X", "ack p50 ms", 0.5, target=None)]))
    # later, but shows only one of X's metrics: it replaces that row alone
    B = ("bench-b.cells.json", _rec("2026-11-25T09:00:00+00:00", [_row("X", "produce MB/s", 0.9),
                                                                   {"cell": "Y", "error": "RuntimeError: x"}]))
    # a day alone counts from its start: after A, before B
    C = ("bench-c.cells.json", _rec("2026-11-25", [_row("Y", "produce MB/s", 1.4), _row("X", "produce MB/s", 2.0)]))
    # the same start: the later file name wins, whatever the order given
    D = ("bench-d.cells.json", _rec("2026-11-26T00:00:00+00:00", [_row("Z", "produce MB/s", 0.7)]))
    E = ("bench-e.cells.json", _rec("2026-11-26T00:00:00+00:00", [_row("Z", "produce MB/s", 0.8)]))
    # a smoke run (one pair of 2 MB) never stands for a cell, however new
    S = ("bench-s.cells.json", _rec("2099-01-01T00:00:00+00:00", [_row("X", "produce MB/s", 9.0)], mode="smoke"))
    for records in ([A, B, C, D, E, S], [S, E, D, C, B, A]):
        got = {cm: (name, row["ratio"][0]) for cm, (row, name, _) in summary.latest(records).items()}
        assert got == {("X", "produce MB/s"): ("bench-b.cells.json", 0.9),
                       ("X", "consume MB/s"): ("bench-a.cells.json", 1.2),
                       ("Y", "produce MB/s"): ("bench-c.cells.json", 1.4),
                       ("Z", "produce MB/s"): ("bench-e.cells.json", 0.8)}, records[0][0]


def test_the_record_holds_the_table(tmp_path):
    """What bench.py keeps of a run is what its table prints, row for row."""
    data = json.loads((ROOT / "tests" / "bench" / "data" / "bench-cluster-sample.json").read_text())
    src = tmp_path / "bench-cl.json"
    src.write_text(json.dumps(data))
    path = bench.write_record(data, str(src))
    assert path == str(tmp_path / "bench-cl.cells.json")
    rec = json.loads(Path(path).read_text())
    assert rec["summary"] == "bench-cl.md" and rec["started"] == data["started"]
    assert rec["pairs"] == data["settings"]["pairs"] and rec["mode"] == data["mode"]
    printed = bench.table(data).splitlines()
    again = bench.markdown_table([bench.TABLE_HEADER] + [bench.row_text(r) for r in rec["rows"]]).splitlines()
    assert again == printed[:len(again)] and len(again) > 3
    targeted = [r for r in rec["rows"] if r.get("target")]
    assert targeted and all(r["met"] == (r["verdict"] == "ok") for r in targeted)
    # the same run again (--report after a change of the harness) replaces its record; another
    # run's never does (results/ keeps earlier runs' records under their summaries' names)
    assert bench.write_record(data, str(src)) == path
    later = dict(data, started="2099-01-02T03:04:05+00:00")
    other = bench.write_record(later, str(src))
    assert other == str(tmp_path / "bench-cl-20990102T0304.cells.json")
    assert json.loads(Path(path).read_text())["started"] == data["started"]
    assert json.loads(Path(other).read_text())["summary"] == "bench-cl-20990102T0304.md"
