#!/usr/bin/env python3
"""librdkafka's fetch-queue back-off against both brokers, run by run (the study behind
results/consume-backoff-2026-11-28.md).

    python compat/bench/backoff_timeline.py run --rounds 10 --records 400000 --out r.jsonl [-- fetch.queue.backoff.ms=10]
    python compat/bench/backoff_timeline.py summary r.jsonl

``run`` starts a pykbroker and an Apache Kafka single node (brokers.py, as bench.py does), then per
round and per broker (order alternating) produces ``--records`` x 100 B to a fresh topic with
``loadgen.py produce`` and reads them back with the harness consumer's settings (librdkafka's
defaults unless given after ``--``) and its ``debug=fetch,queue`` log, timed from ``assign`` as
``loadgen.py consume`` times it. Each run is one JSON line: seconds, the application's count
after every ``consume()`` call, and the debug log. ``summary`` reads from those logs: Fetches
sent, the time from a Fetch to the enqueue of its answer, "Queue full" back-offs, when the first
one came and how many records were fetched by then, the application's drain rate while fetching
and while the fetcher pauses, and the pair ratios of MB/s.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics as S
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOADGEN = os.path.join(HERE, "loadgen.py")

CONSUMER = r'''
import json, os, sys, time
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
bs, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
conf = {"bootstrap.servers": bs, "group.id": "tl-%d" % os.getpid(), "enable.auto.commit": False,
        "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 1 << 20, "fetch.wait.max.ms": 100,
        "debug": "fetch,queue"}
conf.update(dict(kv.split("=", 1) for kv in sys.argv[4:]))
c = Consumer(conf)
parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
got, marks = 0, []
t0, w0 = time.perf_counter(), time.time()
while got < n and time.perf_counter() < t0 + 120:
    got += sum(1 for m in c.consume(min(10000, n - got), 1.0) if m.error() is None)
    marks.append((round(time.time() - w0, 4), got))
dt = time.perf_counter() - t0
c.close()
print(json.dumps({"records": got, "seconds": dt, "mb_s": got * 100 / dt / 1e6, "w0": w0, "marks": marks}))
'''


def cmd_run(a, conf) -> None:
    sys.path.insert(0, HERE)
    import brokers as B
    from confluent_kafka.admin import AdminClient, NewTopic
    tmp = tempfile.mkdtemp(prefix="backoff-")
    ts = {b: B.make(b, "single", os.path.join(tmp, b)) for b in ("pykbroker", "kafka")}
    seq = [0]

    def topic(t) -> str:
        seq[0] += 1
        name = "tl-%d-%d" % (os.getpid(), seq[0])
        admin = AdminClient({"bootstrap.servers": t.bootstrap})   # held until the futures resolve
        for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
            f.result()
        time.sleep(0.5)
        return name

    def produce(t, tp, n) -> None:
        subprocess.run([sys.executable, LOADGEN, "produce", "--bootstrap", t.bootstrap, "--topic", tp,
                        "--records", str(n), "--size", "100", "--linger-ms", "5"], capture_output=True, check=True)
    try:
        for t in ts.values():
            t.start()
            produce(t, topic(t), 100000)   # warm-up (Kafka's JIT)
        with open(a.out, "a") as out:
            for i in range(a.rounds):
                for name in (("pykbroker", "kafka") if i % 2 == 0 else ("kafka", "pykbroker")):
                    t = ts[name]
                    tp = topic(t)
                    produce(t, tp, a.records)
                    r = subprocess.run([sys.executable, "-c", CONSUMER, t.bootstrap, tp, str(a.records)] + conf,
                                       capture_output=True, text=True, timeout=300)
                    res = json.loads(r.stdout.strip().splitlines()[-1])
                    res.update(round=i, broker=name, load=os.getloadavg()[0], conf=conf, log=r.stderr)
                    out.write(json.dumps(res) + "\n")
                    out.flush()
                    print(i, name, "%.1f MB/s" % res["mb_s"], "back-offs", r.stderr.count("Queue full"),
                          "load %.1f" % res["load"], flush=True)
    finally:
        for t in ts.values():
            t.stop()


def events(r) -> list:
    """(seconds since assign, kind, ...) from librdkafka's debug lines ``%7|epoch.ms|FAC|name| msg``."""
    ev = []
    for line in r["log"].splitlines():
        p = line.split("|")
        if len(p) < 5:
            continue
        t, msg = float(p[1]) - r["w0"], "|".join(p[4:])
        m = re.search(r"Enqueue (\d+) message.*qlen (\d+)", msg)
        if m:
            ev.append((t, "enq", int(m[1]), int(m[2])))
        elif re.search(r"Fetch topic .* at offset", msg):
            ev.append((t, "fetch"))
        elif "Queue full" in msg:
            ev.append((t, "backoff"))
    return ev


def run_metrics(r) -> dict:
    ev = events(r)
    rtt, sent = [], None
    for e in ev:
        if e[1] == "fetch":
            sent = e[0]
        elif e[1] == "enq" and sent is not None:
            rtt.append((e[0] - sent) * 1000)
            sent = None
    bos = [e[0] for e in ev if e[1] == "backoff"]
    out = {"broker": r["broker"], "round": r["round"], "seconds": r["seconds"], "mb_s": r["mb_s"],
           "backoffs": len(bos), "fetches": sum(1 for e in ev if e[1] == "fetch"), "rtt_ms": rtt,
           "first_fetch": next((e[0] for e in ev if e[1] == "fetch"), None)}
    if bos:
        t_bo = bos[0]
        fetched = sum(e[2] for e in ev if e[1] == "enq" and e[0] <= t_bo)
        drained = max([g for t, g in r["marks"] if t <= t_bo] or [0])
        whole = fetched // 10000 * 10000   # the application reads in calls of up to 10,000
        t_empty = min([t for t, g in r["marks"] if g >= whole] or [t_bo])
        out.update(first_backoff=t_bo, fill_rate=fetched / max(t_bo - out["first_fetch"], 1e-3),
                   drain_fetching=drained / max(t_bo, 1e-3),
                   drain_paused=(whole - drained) / max(t_empty - t_bo, 1e-3))
    return out


def cmd_summary(a) -> None:
    def q(xs, f="%.2f") -> str:
        xs = sorted(xs)
        return (f + " [" + f + "-" + f + "]") % (S.median(xs), xs[0], xs[-1]) if xs else "-"
    rows = [run_metrics(json.loads(line)) for path in a.files for line in open(path)]
    for b in ("pykbroker", "kafka"):
        x = [m for m in rows if m["broker"] == b]
        if not x:
            continue
        rtt = sorted(v for m in x for v in m["rtt_ms"])
        by = {}
        for m in x:
            by.setdefault(m["backoffs"], []).append(m["seconds"])
        print("%s: %d runs, back-offs %s (mean %.2f)" % (b, len(x), [m["backoffs"] for m in x], S.mean(m["backoffs"] for m in x)))
        print("  MB/s %s; seconds by back-off count %s" % (q([m["mb_s"] for m in x], "%.1f"),
              {k: "%.2f (%d runs)" % (S.median(v), len(v)) for k, v in sorted(by.items())}))
        print("  Fetches per run %s; Fetch to enqueue ms: median %.1f, p90 %.1f" % (
            S.median(m["fetches"] for m in x), S.median(rtt), rtt[int(0.9 * len(rtt))]))
        w = [m for m in x if "first_backoff" in m]
        if w:
            print("  first back-off at s %s; fetched until then M rec/s %s; app drain M rec/s while fetching %s, while paused %s" % (
                q([m["first_backoff"] for m in w], "%.3f"), q([m["fill_rate"] / 1e6 for m in w]),
                q([m["drain_fetching"] / 1e6 for m in w]), q([m["drain_paused"] / 1e6 for m in w])))
    pairs = {}
    for m in rows:
        pairs.setdefault(m["round"], {})[m["broker"]] = m["mb_s"]
    rat = sorted(p["pykbroker"] / p["kafka"] for p in pairs.values() if len(p) == 2)
    if rat:
        print("pairs pykbroker/kafka MB/s: %s, median %.2f" % (" ".join("%.2f" % v for v in rat), S.median(rat)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--records", type=int, default=400000)
    p.add_argument("--out", required=True)
    p = sub.add_parser("summary")
    p.add_argument("files", nargs="+")
    sys.path.insert(0, HERE)
    from fetch_compare import split_client_conf
    argv, conf = split_client_conf(sys.argv[1:] if argv is None else argv)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        cmd_run(a, conf)
    else:
        cmd_summary(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
