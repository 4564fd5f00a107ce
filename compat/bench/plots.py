"""PNG plots of a benchmark result (matplotlib, the ``bench`` extra; bench.py skips the plots
with a note when it is missing).

* ``throughput-<mode>.png``: produce and consume MB/s per throughput cell, pykbroker beside Kafka
  (bars = median of the runs, whiskers = min and max of the runs).
* ``latency-<mode>.png``: latency CDFs (produce-ack and end-to-end) of the cells whose generator
  kept quantiles (the confluent-kafka generator), first pair, log-scaled milliseconds; for the
  Java tools' cells, their p50/p99/p99.9 points.
* ``ratios-<mode>.png``: pykbroker/Kafka per cell and metric, median of per-pair ratios with
  min-max whiskers, oriented so that right of 1.0 is better for pykbroker.
"""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"pykbroker": "#2a7ab0", "kafka": "#d9822b"}


def _ok(c):
    return not c.get("error") and c.get("summary")


def _ok_cells(result) -> list:
    """The cells that ran and have a summary."""
    return [c for c in result["cells"] if _ok(c)]


def _save(plt, fig, path) -> bool:
    """Lay ``fig`` out, write it to ``path`` and free it; True (the plot was written)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_throughput(result, path) -> bool:
    cells = [c for c in _ok_cells(result) if c["kind"] in ("tput", "conns-idle")]
    panels = [(key, label) for key, label in (("produce_mb_s", "produce"), ("consume_mb_s", "consume"))
              if any(key in c["summary"] for c in cells)]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 0.42 * len(cells) + 1.6),
                             squeeze=False, sharey=True)
    w = 0.4
    for ax, (key, label) in zip(axes[0], panels):
        vals_all = []
        labelled = set()
        for i, c in enumerate(cells):
            if key not in c["summary"]:
                continue
            for j, b in enumerate(("pykbroker", "kafka")):
                vals = [r[key] for r in c["runs"][b] if r.get(key) is not None]
                med = c["summary"][key][b]
                vals_all += vals
                ax.barh(i + (j - 0.5) * w, med, w, color=COLORS[b], label=None if b in labelled else b,
                        xerr=[[med - min(vals)], [max(vals) - med]], capsize=2)
                labelled.add(b)
        if vals_all and max(vals_all) / max(min(vals_all), 1e-9) > 50:
            ax.set_xscale("log")
        ax.set_title("%s MB/s" % label)
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_yticks(range(len(cells)))
    axes[0][0].set_yticklabels([c["id"] for c in cells], fontsize=7)
    axes[0][0].invert_yaxis()
    fig.suptitle("Throughput, pykbroker vs Apache Kafka %s (%s mode; bars: median of runs, whiskers: min-max)"
                 % (result["kafka_version"], result["mode"]), fontsize=9)
    return _save(plt, fig, path)


def plot_latency(result, path) -> bool:
    series = []
    for c in _ok_cells(result):
        for fam in ("ack", "e2e"):
            if c["kind"] == "tput" and fam == "ack":
                continue   # flat-out producers: the ack latency is queueing, not the broker
            for b in ("pykbroker", "kafka"):
                runs = c["runs"][b]
                if not runs:
                    continue
                r = runs[0]
                cdf = r.get(fam + "_cdf")
                pts = None
                if cdf:
                    pts = [(v, q) for q, v in cdf]
                elif r.get(fam + "_p50_ms") is not None:
                    pts = [(r[fam + "_p50_ms"], 0.5), (r[fam + "_p99_ms"], 0.99), (r[fam + "_p999_ms"], 0.999)]
                if pts:
                    series.append(("%s %s" % (c["id"], fam), b, pts, bool(cdf)))
    if not series:
        return False
    groups = sorted({s[0] for s in series})
    fig, axes = plt.subplots(len(groups), 1, figsize=(7, 2.6 * len(groups)), squeeze=False)
    for ax, g in zip(axes[:, 0], groups):
        for name, b, pts, full in series:
            if name != g:
                continue
            xs = [max(p[0], 1e-3) for p in pts]
            ys = [p[1] for p in pts]
            ax.plot(xs, ys, "-" if full else "o--", color=COLORS[b], label=b)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.0)
        ax.set_title(g, fontsize=8)
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def plot_ratios(result, path) -> bool:
    rows = []
    for c in _ok_cells(result):
        for key, s in c["summary"].items():
            r = s.get("ratio")
            # the targets only: throughput and p99 latency (costs are in the table)
            wanted = ("produce_mb_s", "consume_mb_s", "ack_p99_ms", "e2e_p99_ms")
            if c["kind"] == "latency":
                wanted = ("ack_p99_ms",)
            elif c["kind"] == "conns-active":
                wanted = ("produce_rec_s", "ack_p99_ms")
            if not r or key not in wanted:
                continue
            # right of 1.0 = pykbroker better: throughput as is, costs and latencies inverted
            if s["better"] == "higher":
                med, lo, hi = r["median"], r["min"], r["max"]
            else:
                med, lo, hi = 1 / r["median"], 1 / r["max"], 1 / r["min"]
            rows.append(("%s  %s" % (c["id"], key), med, lo, hi))
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, (label, med, lo, hi) in zip(ys, rows):
        ax.errorbar([med], [y], xerr=[[med - lo], [hi - med]], fmt="o",
                    color="#2a7ab0" if med >= 1 else "#c0392b", capsize=2)
    ax.axvline(1.0, color="grey", lw=1)
    ax.set_xscale("log")
    lo_all = min(r[2] for r in rows)
    hi_all = max(r[3] for r in rows)
    ticks = [t for t in (1 / 64, 1 / 32, 1 / 16, 1 / 8, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)
             if lo_all / 2 <= t <= hi_all * 2]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["%g" % t for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(ys)
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.set_xlabel("pykbroker advantage, x (>1: pykbroker better; latency: Kafka/pykbroker)", fontsize=8)
    ax.set_title("Per-pair ratios: median, whiskers min-max (%s mode)" % result["mode"], fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return _save(plt, fig, path)


def plot_all(result, out, tag=None) -> list:
    """The three plots of ``result`` in ``out``, named ``<plot>-<tag>.png`` (tag: the run's
    mode, or the name its JSON was saved under, see ``bench.py --report``)."""
    done = []
    m = tag or result["mode"]
    for fn, name in ((plot_throughput, "throughput"), (plot_latency, "latency"), (plot_ratios, "ratios")):
        p = os.path.join(out, "%s-%s.png" % (name, m))
        if fn(result, p):
            done.append(p)
    return done
