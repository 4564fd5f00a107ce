#!/usr/bin/env python3
"""pykbroker side by side with Apache Kafka: one command, a table, JSON and PNG plots.

    python compat/bench/bench.py --quick          # a few representative cells (< 5 min idle)
    python compat/bench/bench.py --full           # the whole matrix (long: an hour and more)
    python compat/bench/bench.py --full --cells 'part|acks'   # matrix cells whose id matches
    python compat/bench/bench.py --smoke          # seconds: one cell, one pair (CI smoke test)
    python compat/bench/bench.py --list --full    # print the cells and exit
    python compat/bench/bench.py --report compat/bench/results/bench-quick.json   # table again

Brokers (fresh data directories, started once per topology in the same run, both running
while the other is measured): pykbroker single node and the 3-broker cluster (compat/bench/
brokers.py), Apache Kafka 4.x single node and 3 nodes with production JVM flags; for the
``scaleout`` cells, one pykbroker broker per core (RF 1) against one Kafka broker; for the
``secure`` cells one node of each with SSL and SASL_SSL (SCRAM-SHA-512) listeners on the same
certificate, and for the ``acl`` cells one node of each with the StandardAuthorizer and 10,000
bindings, plus pykbroker without the authorizer (the "authorizer on/off" rows).  Load
generators, the same for both: Kafka's ProducerPerformance / ConsumerPerformance /
EndToEndLatency (javatools.py) and a multi-process confluent-kafka generator (loadgen.py).
The confluent-kafka catch-up consumer runs with ``fetch.queue.backoff.ms=10`` against both
brokers: with librdkafka's default (1 s, taken whenever 100,000 records wait in its queue) the
small-record cells measured how many 1 s client sleeps a run drew, not the broker
(results/consume-backoff-2026-11-28.md).

Method for a noisy machine: every cell runs as interleaved pairs A B, B A, A B, ... (A =
pykbroker, B = Kafka; ``--pairs``, 3 by default), each run on a fresh topic; the table shows each
broker's median and the median of the per-pair ratios pykbroker/Kafka with their min and max.
With 4+ cores the brokers are pinned to one half and the load generators to the other
(``--pin``).  One warm-up run per broker before the first cell (the JIT warms Kafka), and one
unrecorded run of the first cell of each other kind.

Output: the table on stdout, ``<out>/bench-<mode>.json`` and, with matplotlib (the ``bench``
extra), ``<out>/throughput-<mode>.png``, ``latency-<mode>.png``, ``ratios-<mode>.png``.  The
JSON and plots are not committed (several MB per run; .gitignore): a run's markdown summary is
(compat/bench/results/README.md), and ``--report bench-<tag>.json`` redraws a saved run's plots.
Beside the JSON (on a run and on ``--report``), ``bench-<tag>.cells.json``: the table's figures,
small enough to commit with the summary ``bench-<tag>.md``; compat/bench/summary.py builds the
table of docs/benchmarks.md from these records.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(HERE), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

import brokers as B  # noqa: E402
import javatools as J  # noqa: E402

LOADGEN = str(HERE / "loadgen.py")
BROKERS = ("pykbroker", "kafka")
TOPOLOGIES = ("single", "cluster", "scaleout", "secure", "acl")

# Metrics: key -> (label, unit, better).  "higher": throughput; "lower": latency and cost.
METRICS = {
    "produce_mb_s": ("produce", "MB/s", "higher"),
    "produce_rec_s": ("produce", "rec/s", "higher"),
    "consume_mb_s": ("consume", "MB/s", "higher"),
    "consume_rec_s": ("consume", "rec/s", "higher"),
    "ack_p50_ms": ("ack p50", "ms", "lower"),
    "ack_p99_ms": ("ack p99", "ms", "lower"),
    "ack_p999_ms": ("ack p99.9", "ms", "lower"),
    "e2e_p50_ms": ("e2e p50", "ms", "lower"),
    "e2e_p99_ms": ("e2e p99", "ms", "lower"),
    "e2e_p999_ms": ("e2e p99.9", "ms", "lower"),
    "rss_peak_mb": ("peak RSS", "MB", "lower"),
    "cpu_s_per_gb": ("CPU/GB", "s", "lower"),
    "fds_peak": ("open fds", "", "lower"),
    # no target: what the closed-loop connection cells spend (see run_conns_active)
    "broker_us_per_req": ("broker CPU/request", "us", "lower"),
    "broker_cores": ("broker cores busy", "", "lower"),
    "client_us_per_req": ("load gen CPU/request", "us", "lower"),
    # connection set-up (the ``connect`` cells): connections opened one after the other, each to
    # its first answered request; the broker's CPU per connection beside it
    "conn_s": ("connections", "/s", "higher"),
    "setup_p50_ms": ("set-up p50", "ms", "lower"),
    "setup_p99_ms": ("set-up p99", "ms", "lower"),
    "broker_ms_per_conn": ("broker CPU/connection", "ms", "lower"),
}
# What the table shows per kind of cell (the JSON has every metric of every run).
HEADLINE = {
    "tput": ["produce_mb_s", "consume_mb_s", "ack_p99_ms", "rss_peak_mb", "cpu_s_per_gb"],
    "latency": ["produce_rec_s", "ack_p50_ms", "ack_p99_ms", "ack_p999_ms"],
    "e2e": ["e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms"],
    "conns-idle": ["produce_mb_s", "rss_peak_mb", "fds_peak"],
    "conns-active": ["produce_rec_s", "ack_p99_ms", "rss_peak_mb", "fds_peak", "broker_us_per_req",
                     "broker_cores", "client_us_per_req"],
    "connect": ["conn_s", "setup_p50_ms", "setup_p99_ms", "broker_ms_per_conn"],
}
# The authorizer cells (topology "acl") also run pykbroker without the authorizer: issue 26's
# target is >= 0.95x of it (and >= Kafka's with the same bindings, the usual ratio).
NOAUTH = "pykbroker-noauth"
NOAUTH_TARGET = 0.95
# ... and an A/A control: a second, identical broker without the authorizer.  The ratio of the two
# (same code, same settings) is what the machine's noise alone does to an on/off ratio in the same
# run; an on/off miss within that spread is not the authorizer's (one quiet run measured 1.13x
# between two identical brokers while the authorizer's own cost was about 3 us a request).
NOAUTH_B = "pykbroker-noauth-b"


def brokers_of(topology: str) -> tuple:
    return BROKERS + (NOAUTH, NOAUTH_B) if topology == "acl" else BROKERS


# The ``acl`` cells' orders, one per pair in turn: a 4x4 Latin square (each broker runs first,
# second, third and fourth once in four pairs) whose rows are also reversed in the next four, so
# that the brokers follow each other equally often.  A run right after Kafka's shares the machine
# with what Kafka leaves behind (its 200 MB of dirty pages written back, its topic's deletion a
# minute later), so neither pykbroker side may follow Kafka more often than the other.
_ACL_SQUARE = (("kafka", "pykbroker", NOAUTH, NOAUTH_B), ("pykbroker", NOAUTH_B, "kafka", NOAUTH),
               (NOAUTH, "kafka", NOAUTH_B, "pykbroker"), (NOAUTH_B, NOAUTH, "pykbroker", "kafka"))
_ACL_ORDERS = _ACL_SQUARE + tuple(o[::-1] for o in _ACL_SQUARE)


def run_order(topology: str, i: int) -> tuple:
    """The order of pair ``i``'s runs: the brokers' order, reversed every other pair; the
    ``acl`` cells' three brokers go through :data:`_ACL_ORDERS`."""
    if topology == "acl":
        return _ACL_ORDERS[i % len(_ACL_ORDERS)]
    return brokers_of(topology) if i % 2 == 0 else brokers_of(topology)[::-1]


# -- the matrix ------------------------------------------------------------------------------

def cell(kind, gen, **kw) -> dict:
    c = {"kind": kind, "gen": gen, "topology": "single", "size": 1024, "partitions": 1, "producers": 1,
         "acks": "1", "compression": "none", "rate_pct": None, "connections": 0, "sec": None}
    c.update(kw)
    parts = [kind, gen, c["topology"]] + ([c["sec"]] if c["sec"] else []) + \
        ["%dB" % c["size"], "%dp" % c["partitions"]]
    if c["producers"] != 1:
        parts.append("%dprod" % c["producers"])
    if c["acks"] != "1":
        parts.append("acks=%s" % c["acks"])
    if c["compression"] != "none":
        parts.append(c["compression"])
    if c["rate_pct"]:
        parts.append("%d%%" % c["rate_pct"])
    if c["connections"]:
        parts.append("%dconn" % c["connections"])
    c["id"] = "/".join(parts)
    return c


def matrix(mode: str) -> list:
    if mode == "smoke":
        return [cell("tput", "ck", size=1024)]
    if mode == "quick":
        return [cell("tput", "java", size=1024),
                cell("tput", "ck", size=100),
                cell("latency", "ck", size=100, rate_pct=50),
                cell("e2e", "java", size=100),
                cell("conns-active", "ck", size=100, connections=100, partitions=4),
                # the most telling security cell: every request over TLS with SCRAM
                cell("tput", "ck", topology="secure", sec="SASL_SSL")]
    cells = []
    for gen in ("java", "ck"):
        # one factor at a time around the baseline (1 KiB, 1 partition, 1 producer, acks=1,
        # no compression, linger 5 ms): the full cross product would take days on 2 cores
        for size in (100, 1024, 10240):
            cells.append(cell("tput", gen, size=size))
        for parts in (64, 1000):
            cells.append(cell("tput", gen, partitions=parts))
        cells.append(cell("tput", gen, producers=4, partitions=4))
        for comp in ("lz4", "zstd"):
            cells.append(cell("tput", gen, compression=comp))
        for pct in (10, 50, 80):
            cells.append(cell("latency", gen, rate_pct=pct))
        cells.append(cell("e2e", gen, size=100))
    for n in (1, 100, 1000):
        cells.append(cell("conns-idle", "ck", connections=n))
        cells.append(cell("conns-active", "ck", size=100, connections=n, partitions=4))
    for gen in ("java", "ck"):
        for acks in ("1", "all"):
            cells.append(cell("tput", gen, topology="cluster", acks=acks))
        cells.append(cell("latency", gen, topology="cluster", acks="all", rate_pct=50))
        cells.append(cell("e2e", gen, topology="cluster", acks="all", size=100))
    # multi-core scale-out: pykbroker as one broker per core (RF 1, partitions spread by the
    # controller) against one Kafka broker on every core; 4 producers over 8 partitions
    for gen in ("java", "ck"):
        for size in (100, 1024):
            cells.append(cell("tput", gen, topology="scaleout", size=size, producers=4, partitions=8))
        # the latency of the scale-out deployment at half the slower broker's maximum: a flat-out
        # run's ack p99 is mostly the time records wait in the client's queue, which depends on
        # how far the load generator gets ahead of the broker (results/scaleout-produce-2026-11-28.md)
        cells.append(cell("latency", gen, topology="scaleout", size=1024, producers=4, partitions=8, rate_pct=50))
    # security: produce and consume over TLS and over TLS + SCRAM-SHA-512 (the same certificate
    # on both brokers), the cost of setting up a TLS + SCRAM connection, and the authorizer on
    # with 10,000 bindings (brokers.py: the secure and acl topologies)
    for sec in ("SSL", "SASL_SSL"):
        for size in (100, 1024):
            cells.append(cell("tput", "ck", topology="secure", sec=sec, size=size))
    cells.append(cell("connect", "wire", topology="secure", sec="SASL_SSL", connections=200))
    for size in (100, 1024):
        cells.append(cell("tput", "ck", topology="acl", size=size))
    return cells


def base_of(c: dict) -> dict:
    """The throughput cell whose max rate a latency cell's fixed rate is a share of."""
    kw = {k: c[k] for k in ("topology", "size", "partitions", "producers", "acks", "compression")}
    return cell("tput", c["gen"], **kw)


# -- running one cell on one broker ----------------------------------------------------------

class Runner:
    def __init__(self, args, client_prefix):
        self.args = args
        self.prefix = client_prefix   # ["taskset", "-c", ...] or []
        self.seq = 0
        self._admins = {}

    def admin(self, bootstrap):
        from confluent_kafka.admin import AdminClient
        if bootstrap not in self._admins:
            self._admins[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
        return self._admins[bootstrap]

    def close_admins(self) -> None:
        import gc
        self._admins.clear()
        gc.collect()   # an AdminClient has no close(): dropping the last reference destroys it

    def create_topic(self, target, partitions: int) -> str:
        from confluent_kafka.admin import NewTopic
        self.seq += 1
        name = "bench-%d-%d" % (os.getpid(), self.seq)
        rf = 3 if target.topology == "cluster" else 1
        a = self.admin(target.bootstrap)
        for f in a.create_topics([NewTopic(name, partitions, rf)], operation_timeout=120,
                                 request_timeout=180).values():
            f.result()
        deadline = time.monotonic() + 120
        while True:   # every partition has a leader in the metadata a client sees
            md = a.list_topics(name, timeout=30).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions and \
                    all(p.leader >= 0 for p in md.partitions.values()):
                return name
            if time.monotonic() > deadline:
                raise RuntimeError("topic %s not ready on %s" % (name, target.name))
            time.sleep(0.2)

    def delete_topic(self, target, name: str) -> None:
        try:
            for f in self.admin(target.bootstrap).delete_topics([name], operation_timeout=60).values():
                f.result()
        except Exception as e:   # not fatal: the next run has its own topic
            print("  (delete %s on %s: %s)" % (name, target.name, e), file=sys.stderr)

    def _run(self, cmd, timeout=900) -> str:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("%s exited %d:\n%s\n%s" % (" ".join(cmd[:8]), r.returncode,
                                                         r.stdout[-2000:], r.stderr[-3000:]))
        return r.stdout

    def _parallel(self, cmds, timeout=900) -> list:
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
        outs = []
        for p, c in zip(procs, cmds):
            out, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError("%s exited %d:\n%s\n%s" % (" ".join(c[:8]), p.returncode, out[-2000:], err[-3000:]))
            outs.append(out)
        return outs

    def _lg(self, *args) -> list:
        return self.prefix + [sys.executable, LOADGEN] + [str(a) for a in args]

    def records_for(self, c) -> int:
        return max(100, int(self.args.budget_mb * 1e6 / c["size"]))

    def run(self, c: dict, target, rate: float | None = None) -> dict:
        topic = self.create_topic(target, c["partitions"])
        sampler = B.Sampler(target.pids())
        try:
            try:
                m = getattr(self, "run_" + c["kind"].replace("-", "_"))(c, target, topic, rate)
            finally:
                broker = sampler.finish()
        finally:
            self.delete_topic(target, topic)   # 1,000 leftover partitions would skew later cells
        moved = m.pop("_bytes", 0)
        m["rss_peak_mb"] = broker["rss_peak_mb"]
        m["fds_peak"] = broker["fds_peak"]
        m["cpu_seconds"] = broker["cpu_seconds"]
        if moved:
            m["cpu_s_per_gb"] = broker["cpu_seconds"] / (moved / 1e9)
        return m

    # throughput: producers flat out (linger 5 ms), then a catch-up consumer over the backlog
    def run_tput(self, c, target, topic, rate):
        n = self.records_for(c)
        per = max(1, n // c["producers"])
        bs = target.bootstrap
        sec = []
        if c.get("sec"):   # the data over the TLS listener; topics made over PLAINTEXT
            bs = target.secure_bootstrap(c["sec"])
            sec = ["--config", json.dumps(target.client_config(c["sec"]))]
        if c["gen"] == "java":
            outs = self._parallel([J.producer_perf_cmd(bs, topic, per, c["size"], c["acks"], c["compression"],
                                                       5, rate or -1, prefix=self.prefix)
                                   for _ in range(c["producers"])])
            ps = [J.parse_producer_perf(o, c["size"]) for o in outs]
        else:
            outs = self._parallel([self._lg("produce", "--bootstrap", bs, "--topic", topic, "--records", per,
                                            "--size", c["size"], "--acks", c["acks"], "--compression",
                                            c["compression"], "--linger-ms", 5, "--rate", rate or 0, *sec)
                                   for _ in range(c["producers"])])
            ps = [json.loads(o.strip().splitlines()[-1]) for o in outs]
        total = sum(p["records"] for p in ps)
        m = {"produce_rec_s": sum(p["rec_s"] for p in ps), "produce_mb_s": sum(p["mb_s"] for p in ps),
             # several producers: the worst of their percentiles (the same rule for both brokers)
             "ack_p50_ms": max(p["ack"]["p50_ms"] for p in ps), "ack_p99_ms": max(p["ack"]["p99_ms"] for p in ps),
             "ack_p999_ms": max(p["ack"]["p999_ms"] for p in ps), "produced": total}
        if ps[0]["ack"].get("cdf"):
            m["ack_cdf"] = ps[0]["ack"]["cdf"]
        m["_bytes"] = total * c["size"]
        if c["kind"] != "tput":
            return m
        if c["gen"] == "java":
            cons = J.parse_consumer_perf(self._run(J.consumer_perf_cmd(bs, topic, total, prefix=self.prefix)))
        else:
            cons = json.loads(self._run(self._lg("consume", "--bootstrap", bs, "--topic", topic,
                                                 "--records", total, *sec)).strip().splitlines()[-1])
        if cons["records"] < total:
            raise RuntimeError("%s consumed %d of %d records" % (target.name, cons["records"], total))
        m.update(consume_rec_s=cons["rec_s"], consume_mb_s=cons["mb_s"], consumed=cons["records"])
        m["_bytes"] += total * c["size"]
        return m

    # latency mode: the same producers at a fixed rate (a share of the slower broker's max)
    def run_latency(self, c, target, topic, rate):
        return self.run_tput(c, target, topic, rate)

    # tailing consumer: end-to-end latency, one partition
    def run_e2e(self, c, target, topic, rate):
        if c["gen"] == "java":
            out = self._run(J.e2e_cmd(target.bootstrap, topic, self.args.e2e_records, c["acks"], c["size"],
                                      prefix=self.prefix))
            e = J.parse_e2e(out)["e2e"]
            m = {"e2e_p50_ms": e["p50_ms"], "e2e_p99_ms": e["p99_ms"], "e2e_p999_ms": e["p999_ms"]}
            m["_bytes"] = 2 * self.args.e2e_records * c["size"]
            return m
        secs = self.args.seconds
        r = json.loads(self._run(self._lg("tail", "--bootstrap", target.bootstrap, "--topic", topic,
                                          "--seconds", secs, "--rate", self.args.tail_rate, "--size", c["size"],
                                          "--acks", c["acks"])).strip().splitlines()[-1])
        e = r["e2e"]
        if r["records"] < r["sent"]:
            raise RuntimeError("%s: tail consumer saw %d of %d" % (target.name, r["records"], r["sent"]))
        return {"e2e_p50_ms": e["p50_ms"], "e2e_p99_ms": e["p99_ms"], "e2e_p999_ms": e["p999_ms"],
                "e2e_cdf": e.get("cdf"), "_bytes": 2 * r["sent"] * c["size"]}

    # connection set-up: N connections one after the other, each to its first answered request
    def run_connect(self, c, target, topic, rate):
        cpu0 = sum(B.proc_cpu(pid) for pid in target.pids())
        r = json.loads(self._run(self._lg("connect", "--bootstrap", target.secure_bootstrap(c["sec"]),
                                          "--topic", topic, "--n", c["connections"], "--config",
                                          json.dumps(target.client_config(c["sec"])))).strip().splitlines()[-1])
        cpu1 = sum(B.proc_cpu(pid) for pid in target.pids())
        return {"conn_s": r["conn_s"], "setup_p50_ms": r["setup"]["p50_ms"], "setup_p99_ms": r["setup"]["p99_ms"],
                "setup_p999_ms": r["setup"]["p999_ms"], "client_ms_per_conn": r["cpu_ms_per_conn"],
                "broker_ms_per_conn": (cpu1 - cpu0) / r["connections"] * 1000.0}

    def _conns(self, c, target, topic, mode, seconds):
        cmd = self._lg("conns", "--bootstrap", target.bootstrap.split(",")[0], "--topic", topic,
                       "--n", c["connections"], "--mode", mode, "--seconds", seconds, "--size", c["size"],
                       "--partitions", c["partitions"])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        if '"ready"' not in line:
            out, err = p.communicate(timeout=60)
            raise RuntimeError("conns did not get ready:\n%s%s\n%s" % (line, out, err[-3000:]))
        return p, json.loads(line)

    # idle connections: N held open (one request served each) while one producer measures
    def run_conns_idle(self, c, target, topic, rate):
        p, ready = self._conns(c, target, topic, "idle", 3600)
        try:
            m = self.run_tput(dict(c, kind="conns-idle", gen="ck"), target, topic, None)
        finally:
            p.kill()
            p.communicate()
        m["conns_open_s"] = ready["open_seconds"]
        return m

    # active connections: N connections, each a closed loop of acks=1 Produce (10 records)
    def run_conns_active(self, c, target, topic, rate):
        p, ready = self._conns(c, target, topic, "active", self.args.seconds)
        # The broker's CPU over the loaded phase only (the sampler's also counts the opening of
        # the connections): per request and in cores, beside the load generator's own.  A closed
        # loop's throughput is requests per unit of time, so these say where it goes: CPU per
        # request, and how many cores the broker turns to the load.
        cpu0 = sum(B.proc_cpu(pid) for pid in target.pids())
        out, err = p.communicate(timeout=self.args.seconds + 300)
        cpu1 = sum(B.proc_cpu(pid) for pid in target.pids())
        if p.returncode != 0:
            raise RuntimeError("conns failed:\n%s" % err[-3000:])
        r = json.loads(out.strip().splitlines()[-1])
        if not r["produce_ok"] or not r["requests"]:
            raise RuntimeError("conns: produce failed on %s: %s" % (target.name, r))
        return {"produce_rec_s": r["rec_s"], "produce_mb_s": r["mb_s"], "ack_p50_ms": r["ack"]["p50_ms"],
                "ack_p99_ms": r["ack"]["p99_ms"], "ack_p999_ms": r["ack"]["p999_ms"],
                "ack_cdf": r["ack"].get("cdf"), "conns_open_s": ready["open_seconds"],
                "broker_us_per_req": (cpu1 - cpu0) / r["requests"] * 1e6,
                "broker_cores": (cpu1 - cpu0) / r["seconds"],
                "client_us_per_req": r["cpu_seconds"] / r["requests"] * 1e6,
                "_bytes": r["records"] * c["size"]}


# -- summaries -------------------------------------------------------------------------------

def summarize(runs: dict) -> dict:
    """Per metric: each broker's median, and the median/min/max of per-pair ratios."""
    out = {}
    pairs = list(zip(runs.get("pykbroker", []), runs.get("kafka", [])))
    for key, (_label, _unit, better) in METRICS.items():
        vals = {b: [r[key] for r in runs.get(b, []) if r.get(key) is not None] for b in BROKERS}
        if not all(vals.values()):
            continue
        ratios = [a[key] / b[key] for a, b in pairs
                  if a.get(key) is not None and b.get(key) not in (None, 0)]
        s = {b: statistics.median(v) for b, v in vals.items()}
        if ratios:
            med = statistics.median(ratios)
            s["ratio"] = {"median": med, "min": min(ratios), "max": max(ratios)}
            s["better"] = better
            s["meets"] = med >= 1.0 if better == "higher" else med <= 1.0
        if runs.get(NOAUTH):   # the authorizer cells: pykbroker with it / without it, per pair
            na = [a[key] / n[key] for a, n in zip(runs.get("pykbroker", []), runs[NOAUTH])
                  if a.get(key) is not None and n.get(key) not in (None, 0)]
            if na:
                s[NOAUTH] = statistics.median(r[key] for r in runs[NOAUTH] if r.get(key) is not None)
                s["vs_noauth"] = {"median": statistics.median(na), "min": min(na), "max": max(na)}
            aa = [b[key] / n[key] for b, n in zip(runs.get(NOAUTH_B, []), runs[NOAUTH])
                  if b.get(key) is not None and n.get(key) not in (None, 0)]
            if aa:   # the A/A control: two identical brokers without the authorizer
                s["aa"] = {"median": statistics.median(aa), "min": min(aa), "max": max(aa)}
        out[key] = s
    return out


def within_noise(na: dict, aa: "dict | None") -> str:
    """A note on an on/off miss: inside the A/A control's spread in the same run, or not."""
    if not aa:
        return ""
    low = min(aa["min"], 1 / aa["max"]) if aa["max"] else aa["min"]
    return ", within the A/A spread (%.2f-%.2f)" % (aa["min"], aa["max"]) if na["median"] >= low \
        else ", outside the A/A spread (%.2f-%.2f)" % (aa["min"], aa["max"])


def target_of(kind: str, key: str) -> "tuple | None":
    """Issue 15's targets, as (">=" or "<=", bound) on the ratio pykbroker/Kafka: throughput >=
    Kafka's, p99 latency <= Kafka's, RSS <= 0.1x, CPU per GB <= Kafka's.  None on the achieved
    rate of a fixed-rate run, on fds, or on p50/p99.9 (shown for the shape of the distribution)."""
    if key in ("produce_mb_s", "consume_mb_s", "conn_s") or (key == "produce_rec_s" and kind == "conns-active"):
        return (">=", 1.0)
    if key in ("ack_p99_ms", "e2e_p99_ms", "cpu_s_per_gb", "setup_p99_ms"):
        return ("<=", 1.0)
    if key == "rss_peak_mb":
        return ("<=", 0.1)
    return None


def verdict_of(kind: str, key: str, ratio: float) -> str:
    """"ok", or by how much the median ratio misses :func:`target_of`'s target; "" without one."""
    t = target_of(kind, key)
    if t is None:
        return ""
    op, bound = t
    if (ratio >= bound) if op == ">=" else (ratio <= bound):
        return "ok"
    if bound != 1.0:
        return "MISS: %.2fx (target %gx)" % (ratio, bound)
    return "MISS: %.0f%% less" % ((1 - ratio) * 100) if op == ">=" else "MISS: %.0f%% more" % ((ratio - 1) * 100)


def target_text(t: "tuple | None") -> str:
    return "%s %gx" % t if t else ""


def fmt(v: float) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def shown(v: "float | None") -> "float | None":
    """``v`` as the table prints it: the run records keep the table's figures, not the JSON's."""
    return None if v is None else float(fmt(v))


def _ratio(r: dict) -> list:
    return [round(r["median"], 2), round(r["min"], 2), round(r["max"], 2)]


def rows_of(result: dict) -> list:
    """The table's rows as figures, one dict each: cell, metric, the brokers' medians (pykbroker,
    kafka, or noauth for the authorizer on/off rows, whose other side is pykbroker without the
    authorizer), ratio [median, min, max] of the pairs, and where a target applies the target,
    the verdict and met.  :func:`table` prints them; :func:`write_record` keeps them (the
    committed record of a run, read by summary.py), so both show the same figures."""
    rows = []
    for topo in TOPOLOGIES:
        p, k = result["targets"].get("pykbroker-" + topo), result["targets"].get("kafka-" + topo)
        if p and k:
            rows.append({"cell": "start/" + topo, "metric": "first request s", "pykbroker": shown(p["start_seconds"]),
                         "kafka": shown(k["start_seconds"]), "ratio": [round(p["start_seconds"] / k["start_seconds"], 2)]})
    for c in result["cells"]:
        if c.get("error"):
            rows.append({"cell": c["id"], "error": c["error"].splitlines()[0][:60]})
            continue
        for key in HEADLINE[c["kind"]]:
            s = c["summary"].get(key)
            if not s:
                continue
            label, unit, better = METRICS[key]
            r = s.get("ratio")
            row = {"cell": c["id"], "metric": "%s %s" % (label, unit), "pykbroker": shown(s["pykbroker"]),
                   "kafka": shown(s["kafka"]), "ratio": _ratio(r) if r else None}
            t = target_of(c["kind"], key)
            if r and t:
                row.update(target=target_text(t), verdict=verdict_of(c["kind"], key, r["median"]))
                row["met"] = row["verdict"] == "ok"
            rows.append(row)
            na = s.get("vs_noauth")
            if na and key in ("produce_mb_s", "consume_mb_s"):
                aa = s.get("aa")
                ok = na["median"] >= NOAUTH_TARGET
                rows.append({"cell": c["id"], "metric": "%s %s, authorizer on/off" % (label, unit),
                             "pykbroker": shown(s["pykbroker"]), "noauth": shown(s[NOAUTH]), "ratio": _ratio(na),
                             "target": target_text((">=", NOAUTH_TARGET)),
                             "verdict": "ok" if ok else "MISS: %.2fx (target %.2fx)%s" % (
                                 na["median"], NOAUTH_TARGET, within_noise(na, aa)), "met": ok})
                if aa:
                    rows.append({"cell": c["id"], "metric": "%s %s, A/A off/off (the noise)" % (label, unit),
                                 "ratio": _ratio(aa)})
    return rows


TABLE_HEADER = ("cell", "metric", "pykbroker", "kafka", "pyk/kafka (min-max)", "")


def row_text(row: dict) -> tuple:
    """One row of :func:`rows_of` as the table's six columns (summary.py prints them too)."""
    if "error" in row:
        return (row["cell"], "ERROR", "", "", row["error"], "")
    r = row.get("ratio")
    ratio = "-" if not r else "%.2f" % r[0] if len(r) == 1 else "%.2f (%.2f-%.2f)" % tuple(r)
    kafka = "(off) " + fmt(row["noauth"]) if "noauth" in row else fmt(row["kafka"]) if "kafka" in row else ""
    return (row["cell"], row["metric"], fmt(row["pykbroker"]) if "pykbroker" in row else "", kafka, ratio,
            row.get("verdict", ""))


def markdown_table(rows: list) -> str:
    """Rows of strings, the first the header, as an aligned markdown table."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for i, r in enumerate(rows):
        lines.append("| " + " | ".join(x.ljust(w) for x, w in zip(r, widths)) + " |")
        if i == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def table(result: dict) -> str:
    lines = [markdown_table([TABLE_HEADER] + [row_text(r) for r in rows_of(result)])]
    # the quota-limited producer is measured by its own script (a 30 s run per broker with the
    # quota's windows: not an A/B pair of this harness); its latest result is linked here
    quota = "quota-limited producer and consumer: compat/bench/quota_compare.py, latest run in compat/bench/results/quota-1mibs.md"
    if any(c.get("topology") in ("secure", "acl") for c in result["cells"]):
        lines += ["", quota]
    return "\n".join(lines)


def record_path(json_path: str) -> str:
    """bench-<tag>.json -> bench-<tag>.cells.json, beside it."""
    base = json_path[:-len(".json")] if json_path.endswith(".json") else json_path
    return base + ".cells.json"


def record_of(result: dict, summary: str) -> dict:
    """The small record of a run that is committed (the JSON is not): when, how, and the
    table's rows.  ``summary`` names the run's markdown summary in the same directory; the
    generated table in docs/benchmarks.md links each row to it (compat/bench/summary.py)."""
    rec = {"summary": summary, "mode": result.get("mode"), "started": result.get("started"),
           "pairs": result.get("settings", {}).get("pairs")}
    if result.get("commit"):
        rec["commit"] = result["commit"]
    rec["rows"] = rows_of(result)
    return rec


def dump_record(rec: dict) -> str:
    """One row a line: a new run's record reads, and diffs, like its table."""
    head = {k: v for k, v in rec.items() if k != "rows"}
    lines = ["{" + json.dumps(head)[1:-1] + ', "rows": [']
    lines += ["  " + json.dumps(r) + ("," if i < len(rec["rows"]) - 1 else "") for i, r in enumerate(rec["rows"])]
    return "\n".join(lines) + "\n]}\n"


def write_record(result: dict, json_path: str) -> str:
    """Writes the run's record beside its JSON and returns its path.  Never over the record of
    another run: compat/bench/results keeps the records of earlier runs under their summaries'
    names (bench-full.cells.json is the record of bench-full.md), and a run with the default
    ``--out`` writes bench-<mode>.json there; its record then takes its start in its name."""
    path = record_path(json_path)
    if os.path.exists(path):
        try:
            with open(path) as f:
                other = json.load(f).get("started")
        except ValueError:
            other = None
        if other != result.get("started"):
            stamp = re.sub(r"[^0-9T]", "", (result.get("started") or "")[:16])
            path = path[:-len(".cells.json")] + "-" + stamp + ".cells.json"
    stem = os.path.basename(path)[:-len(".cells.json")]
    with open(path, "w") as f:
        f.write(dump_record(record_of(result, stem + ".md")))
    return path


def machine() -> dict:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    import confluent_kafka
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gb": round(mem / 2**30, 1),
            "loadavg_start": os.getloadavg(), "kernel": platform.release(),
            "python": platform.python_version(), "java": java[0] if java else "",
            "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0]}


# -- the run ---------------------------------------------------------------------------------

def pin_plan(spec: str):
    """(broker cpus, client cpus); empty sets: no pinning."""
    cpus = sorted(os.sched_getaffinity(0))
    if spec == "off" or (spec == "auto" and len(cpus) < 4):
        return set(), set()
    if spec == "auto":
        half = len(cpus) // 2
        return set(cpus[:half]), set(cpus[half:])
    a, b = spec.split(":")
    parse = lambda s: {int(x) for part in s.split(",") for x in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))}
    return parse(a), parse(b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_const", dest="mode", const="quick")
    g.add_argument("--full", action="store_const", dest="mode", const="full")
    g.add_argument("--smoke", action="store_const", dest="mode", const="smoke")
    ap.add_argument("--cells", default=None, help="regex: only the cells whose id matches")
    ap.add_argument("--pairs", type=int, default=None, help="A/B pairs per cell (3; smoke: 1)")
    ap.add_argument("--budget-mb", type=float, default=None,
                    help="MB produced per throughput run (quick 40, full 200, smoke 2)")
    ap.add_argument("--seconds", type=float, default=None, help="length of fixed-time runs (quick 3, full 8)")
    ap.add_argument("--e2e-records", type=int, default=None, help="EndToEndLatency round trips")
    ap.add_argument("--tail-rate", type=float, default=500.0, help="records/s of the tailing-consumer runs")
    ap.add_argument("--pin", default="auto", help="auto | off | BROKER_CPUS:CLIENT_CPUS (e.g. 0-3:4-7)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--list", action="store_true", help="print the cells and exit")
    ap.add_argument("--report", metavar="JSON", help="print the table of an earlier run (bench-TAG.json) and redraw its plots beside it as throughput-TAG.png etc.")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            result = json.load(f)
        print(table(result))
        print("record: %s" % write_record(result, args.report))
        # named after the JSON (bench-<tag>.json -> throughput-<tag>.png, ...): redrawing a
        # partial run saved as bench-cluster.json must not overwrite the full matrix's plots
        base = os.path.splitext(os.path.basename(args.report))[0]
        tag = base[len("bench-"):] if base.startswith("bench-") else base
        return plot(result, os.path.dirname(os.path.abspath(args.report)), tag)
    mode = args.mode or "quick"
    defaults = {"quick": (3, 40, 3, 500), "full": (3, 200, 8, 2000), "smoke": (1, 2, 1, 50)}[mode]
    args.pairs = args.pairs or defaults[0]
    args.budget_mb = args.budget_mb or defaults[1]
    args.seconds = args.seconds or defaults[2]
    args.e2e_records = args.e2e_records or defaults[3]
    cells = matrix(mode)
    if args.cells:
        cells = [c for c in cells if re.search(args.cells, c["id"])]
    if args.list:
        for c in cells:
            print(c["id"])
        return 0
    broker_cpus, client_cpus = pin_plan(args.pin)
    prefix = ["taskset", "-c", ",".join(map(str, sorted(client_cpus)))] if client_cpus and shutil.which("taskset") else []
    if any(c["gen"] == "java" for c in cells):
        J.fetch()
    os.makedirs(args.out, exist_ok=True)
    result = {"mode": mode, "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "kafka_version": B.KafkaOracle(tempfile.gettempdir()).version,
              "kafka_tools_version": J.tools_version(),
              "settings": {"pairs": args.pairs, "budget_mb": args.budget_mb, "seconds": args.seconds,
                           "e2e_records": args.e2e_records, "tail_rate": args.tail_rate,
                           "pin": {"brokers": sorted(broker_cpus), "clients": sorted(client_cpus)}},
              "targets": {}, "cells": []}
    runner = Runner(args, prefix)
    t_all = time.monotonic()
    for topo in TOPOLOGIES:
        todo = [c for c in cells if c["topology"] == topo]
        if not todo:
            continue
        work = tempfile.mkdtemp(prefix="pykbroker-bench-")
        targets = {}
        try:
            for b in brokers_of(topo):
                print("starting %s-%s ..." % (b, topo), flush=True)
                if (b, topo) == ("pykbroker", "scaleout"):   # one broker per broker core
                    t = B.PyKScaleOut(os.path.join(work, b), n=B.scaleout_brokers(broker_cpus)).start()
                else:
                    t = B.make(b, topo, os.path.join(work, b)).start()
                B.pin(t.pids(), broker_cpus)
                targets[b] = t
                result["targets"][t.name] = {"bootstrap": t.bootstrap, "start_seconds": t.start_seconds,
                                             "processes": len(t.pids())}
                print("  %s ready in %.1fs on %s" % (t.name, t.start_seconds, t.bootstrap), flush=True)
            if not args.no_warmup and mode != "smoke":
                w = cell("tput", "ck", topology=topo)
                for b in brokers_of(topo):
                    runner.run(w, targets[b])
            maxima: dict = {}
            warmed = {"tput", "latency"}   # the warm-up above; a latency cell's max run first
            for c in todo:
                print("cell %s" % c["id"], flush=True)
                entry = dict(c, runs={b: [] for b in brokers_of(topo)})
                try:
                    rate = None
                    if not args.no_warmup and mode != "smoke" and c["kind"] not in warmed:
                        # One unrecorded run of the first cell of each other kind: a closed loop
                        # of small requests over many connections runs code of Kafka's that
                        # the flat-out warm-up does not, and until its JIT has compiled it
                        # Kafka spends several times its later CPU per request (first runs:
                        # 120-155 us against 27-51 us after).
                        warmed.add(c["kind"])
                        print("  warm-up", flush=True)
                        for b in brokers_of(topo):
                            runner.run(c, targets[b])
                    if c["kind"] == "latency":
                        base = base_of(c)
                        key = base["id"]
                        if key not in maxima:   # measure the max first (one pair)
                            rates = []
                            for b in BROKERS:
                                rates.append(runner.run(dict(base, kind="latency"), targets[b])["produce_rec_s"])
                            maxima[key] = min(rates)
                        rate = maxima[key] * c["rate_pct"] / 100.0 / c["producers"]
                        entry["rate_rec_s"] = rate * c["producers"]
                        entry["slower_max_rec_s"] = maxima[key]
                        # a fixed rate for a fixed time, not a fixed count
                        args_budget = args.budget_mb
                        args.budget_mb = max(rate * c["producers"] * args.seconds * c["size"] / 1e6, 0.001)
                    try:
                        for i in range(args.pairs):
                            order = run_order(topo, i)
                            for b in order:
                                m = runner.run(c, targets[b], rate)
                                entry["runs"][b].append(m)
                                print("  %-9s %s" % (b, ", ".join("%s=%s" % (k, fmt(v)) for k, v in m.items()
                                                                 if k in HEADLINE[c["kind"]])), flush=True)
                    finally:
                        if c["kind"] == "latency":
                            args.budget_mb = args_budget
                    entry["summary"] = summarize(entry["runs"])
                except Exception as e:   # one failing cell does not lose the others
                    entry["error"] = "%s: %s" % (type(e).__name__, e)
                    print("  ERROR %s" % entry["error"][:2000], flush=True)
                result["cells"].append(entry)
                # after every cell, so an hour-long --full run cut short keeps what it measured
                # (--report reads this file like the final one)
                with open(os.path.join(args.out, "bench-%s.partial.json" % mode), "w") as f:
                    json.dump(result, f, indent=1)
        finally:
            runner.close_admins()   # before the brokers go: no reconnect noise from librdkafka
            for t in targets.values():
                try:
                    t.stop()
                except Exception as e:
                    print("stopping %s: %s" % (t.name, e), file=sys.stderr)
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = time.monotonic() - t_all
    result["machine"]["loadavg_end"] = os.getloadavg()
    path = os.path.join(args.out, "bench-%s.json" % mode)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print()
    print(table(result))
    print()
    print("JSON: %s (%.0f s)" % (path, result["seconds"]))
    print("record: %s" % write_record(result, path))
    plot(result, args.out)
    return 1 if any(c.get("error") for c in result["cells"]) else 0


def plot(result: dict, out: str, tag=None) -> int:
    try:
        import plots
    except ImportError as e:
        print("plots skipped: matplotlib is not installed (pip install '.[bench]'): %s" % e)
        return 0
    for p in plots.plot_all(result, out, tag):
        print("plot: %s" % p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
