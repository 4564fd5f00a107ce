#!/usr/bin/env python3
"""The summary table of docs/benchmarks.md, generated from the committed run records.

    python compat/bench/summary.py           # rewrite the table (and the README's headline)
    python compat/bench/summary.py --check   # exit 1 if either is not what it would write

Every run of bench.py (and ``bench.py --report bench-<tag>.json``) writes bench-<tag>.cells.json
beside its JSON: the rows of its table as figures.  The repository keeps these records with the
runs' markdown summaries (compat/bench/results/README.md), so the table in the docs is built
from them instead of being copied by hand, and cannot silently fall behind the runs: tests/bench/
test_summary.py runs ``--check``.

For each cell and metric that has a target, the table shows the latest run that measured it:
by the run's start ("started"; a record that knows only the day counts from the start of that
day), ties by file name, the later name winning.  Rows, not whole cells: a run whose summary
shows only some of a cell's metrics (several older summaries do) replaces only those.  Each row
links the summary of its run, which has the command and the conditions (the load on a shared
machine moves these ratios by 2x from run to run: read a row with its run).

The README carries the headline of the same rows between its own markers: how many meet their
target, and every one that does not, with its run.
"""
from __future__ import annotations

import argparse
import datetime
import difflib
import importlib.util
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
BEGIN = "<!-- bench-summary:begin -->"
END = "<!-- bench-summary:end -->"
HEADLINE_BEGIN = "<!-- bench-headline:begin -->"
HEADLINE_END = "<!-- bench-headline:end -->"
RECORD_SUFFIX = ".cells.json"


def _bench():
    """bench.py, for its table's row format and formatter (one table format for both) and its
    matrix's order.  Loaded by path under its own name: tests/bench is a package called
    ``bench`` too."""
    name = "pykbroker_bench_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "bench.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def load_records(directory: Path) -> list:
    """(file name, record) for every bench-*.cells.json in ``directory``, by file name."""
    return [(p.name, json.loads(p.read_text())) for p in sorted(Path(directory).glob("bench-*" + RECORD_SUFFIX))]


def started_at(rec: dict) -> datetime.datetime:
    t = datetime.datetime.fromisoformat(rec["started"])
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def latest(records: list) -> dict:
    """{(cell, metric): (row, file name, record)}: for each row with a target, the one of the
    latest run (by start, ties by file name) among ``records`` [(file name, record)]."""
    out = {}
    for name, rec in sorted(records, key=lambda nr: (started_at(nr[1]), nr[0])):
        if rec.get("mode") == "smoke":   # one pair of 2 MB: checks the harness, says nothing of speed
            continue
        for row in rec["rows"]:
            if row.get("target"):
                out[(row["cell"], row["metric"])] = (row, name, rec)
    return out


def _order(bench):
    """Sort key of a (cell, metric): the cells in the full matrix's order, one outside it (a
    --quick cell) after the last matrix cell of its kind, generator and topology; each cell's
    metrics in bench.METRICS's order, an authorizer on/off row after its metric."""
    full = [c["id"] for c in bench.matrix("full")]
    metrics = {("%s %s" % (label, unit)).strip(): i for i, (label, unit, _) in enumerate(bench.METRICS.values())}

    def cell_rank(cell):
        if cell in full:
            return (full.index(cell), 0)
        prefix = "/".join(cell.split("/")[:3]) + "/"
        same = [i for i, c in enumerate(full) if c.startswith(prefix)]
        return (same[-1] if same else len(full), 1)

    def key(cm):
        cell, metric = cm
        base, _, rest = metric.partition(",")
        return (cell_rank(cell), cell, metrics.get(base, len(metrics)), rest, metric)
    return key


def render(chosen: dict, results: Path, doc: Path) -> str:
    """The block between the markers: one sentence and the table."""
    bench = _bench()
    rel = Path(os.path.relpath(results, doc.parent)).as_posix()
    header = ("cell", "metric", "pykbroker", "kafka", "pyk/kafka (min-max)", "target", "met?", "run")
    rows = [header]
    for cm in sorted(chosen, key=_order(bench)):
        row, name, rec = chosen[cm]
        when = rec["started"][:16].replace("T", " ")
        run = "[%s](%s/%s) %s" % (name[:-len(RECORD_SUFFIX)], rel, rec["summary"], when)
        text = bench.row_text(row)
        rows.append(text[:5] + (row["target"], text[5], run))
    return "\n".join([
        "Generated by `python compat/bench/summary.py` from the run records in "
        "[compat/bench/results/](%s/README.md), not edited by hand (`--check` fails when it is "
        "stale): for each cell and metric with a target, the latest run that measured it, "
        "linked to its summary and conditions." % rel,
        "",
        bench.markdown_table(rows),
    ])


def render_headline(chosen: dict, results: Path, doc: Path, table_doc: Path) -> str:
    """The README's block: the count of rows meeting their target, and the rows that do not."""
    bench = _bench()
    rel = Path(os.path.relpath(results, doc.parent)).as_posix()
    table = Path(os.path.relpath(table_doc, doc.parent)).as_posix()
    rows = [chosen[cm] for cm in sorted(chosen, key=_order(bench))]
    met = [r for r in rows if r[0].get("met")]
    misses = [r for r in rows if r[0].get("met") is False]
    lines = ["Against Apache Kafka 4.4 on the same machine, **%d of %d** measured figures with a target "
             "meet it, each from the latest run that measured it ([the whole table](%s#benchmarks-against-apache-kafka); "
             "generated by `python compat/bench/summary.py`)." % (len(met), len(met) + len(misses), table)]
    if misses:
        lines.append("Not met:")
        lines.append("")
        for row, name, rec in misses:
            text = bench.row_text(row)
            lines.append("- `%s` %s: %s (target %s), [%s](%s/%s) %s" % (
                row["cell"], row["metric"], text[4].strip(), row["target"], name[:-len(RECORD_SUFFIX)], rel,
                rec["summary"], rec["started"][:10]))
    return "\n".join(lines)


def splice(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with what lies between the markers replaced by ``block``."""
    a, b = text.find(begin), text.find(end)
    if a < 0 or b < a:
        raise ValueError("no %s ... %s in the document" % (begin, end))
    return text[:a + len(begin)] + "\n" + block + "\n" + text[b:]


def problems(records: list, results: Path) -> list:
    """What makes the records unusable: a record whose summary is not committed beside it."""
    return ["%s: its summary %s is not in %s" % (name, rec.get("summary"), results)
            for name, rec in records if not (Path(results) / str(rec.get("summary"))).is_file()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 if a document's block is not what this writes")
    ap.add_argument("--results", type=Path, default=RESULTS, help="directory of the run records")
    ap.add_argument("--doc", type=Path, default=DOC, help="the document with the table's markers")
    ap.add_argument("--readme", type=Path, default=README, help="the document with the headline's markers")
    args = ap.parse_args(argv)
    records = load_records(args.results)
    bad = problems(records, args.results)
    for p in bad:
        print(p, file=sys.stderr)
    chosen = latest(records)
    results = args.results.resolve()
    blocks = [(args.doc, render(chosen, results, args.doc.resolve()), BEGIN, END),
              (args.readme, render_headline(chosen, results, args.readme.resolve(), args.doc.resolve()),
               HEADLINE_BEGIN, HEADLINE_END)]
    stale = False
    for path, block, begin, end in blocks:
        text = path.read_text()
        new = splice(text, block, begin, end)
        if new == text:
            continue
        if args.check:
            diff = list(difflib.unified_diff(text.splitlines(True), new.splitlines(True), str(path),
                                             "generated", n=0))
            sys.stderr.writelines(diff[:40] + (["...\n"] if len(diff) > 40 else []))
            print("%s: the generated block is not what compat/bench/summary.py writes from %s; run it"
                  % (path, args.results), file=sys.stderr)
            stale = True
        else:
            path.write_text(new)
            print("wrote %s" % path)
    return 1 if stale or bad else 0


if __name__ == "__main__":
    sys.exit(main())
