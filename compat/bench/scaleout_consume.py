#!/usr/bin/env python3
"""The scale-out cells' catch-up consume, run by run, with librdkafka's fetch log and each broker
process's CPU (the study behind results/scaleout-consume-2026-11-28.md).

    python compat/bench/scaleout_consume.py run --rounds 4 --budget-mb 100 --out r.jsonl [--reread 1] [-- k=v ...]
    python compat/bench/scaleout_consume.py summary r.jsonl

``run`` starts the ``scaleout`` targets as bench.py does (brokers.py: one pykbroker broker per
core, RF 1, against one Kafka broker), then per round and per broker (order alternating) creates
an 8-partition topic, produces ``--budget-mb`` of 1 KiB records with 4 ``loadgen.py produce``
processes, and reads them back with ``loadgen.py consume`` (the harness's consumer and settings,
plus librdkafka's ``debug=fetch`` log and any ``k=v`` after ``--``); ``--reread N`` reads the same
topic N more times (the consume apart from the produce before it); ``--kafka-brokers 2`` runs
Apache Kafka as two brokers with RF 1 topics, the layout of pykbroker's side (the control).  Each consume is one JSON
line: its result, each broker process's CPU seconds over it, the load average and the log.
``summary`` reads per run from the logs, per broker connection: Fetch requests, records and bytes
enqueued, how long each Fetch took to its enqueue, "Queue full" back-offs, and when the last
partition of each broker was read to its end.
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
sys.path.insert(0, HERE)


def cmd_run(a, conf: dict) -> None:
    import brokers as B
    from bench import Runner
    tmp = tempfile.mkdtemp(prefix="scaleout-consume-")
    ts = {"pykbroker": B.PyKScaleOut(os.path.join(tmp, "pykbroker"), n=B.scaleout_brokers()),
          "kafka": B.KafkaScaleOut(os.path.join(tmp, "kafka"))}
    if a.kafka_brokers > 1:
        # the control: Kafka laid out as pykbroker's side (RF 1 topics over as many brokers), so
        # that a difference in how librdkafka fetches from one broker or from several shows
        k = B.KafkaCluster(os.path.join(tmp, "kafka"), n=a.kafka_brokers)
        k.topology = "scaleout"   # Runner.create_topic: RF 1, as on both sides of the cells
        ts["kafka"] = k
    runner = Runner(argparse.Namespace(budget_mb=a.budget_mb), [])
    records = int(a.budget_mb * 1e6 / a.size)
    per = records // a.producers

    def produce(t, topic) -> int:
        procs = [subprocess.Popen([sys.executable, LOADGEN, "produce", "--bootstrap", t.bootstrap, "--topic", topic,
                                   "--records", str(per), "--size", str(a.size), "--linger-ms", "5"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(a.producers)]
        return sum(json.loads(p.communicate()[0].strip().splitlines()[-1])["records"] for p in procs)

    def consume(t, topic, n) -> dict:
        cpu0 = {pid: B.proc_cpu(pid) for pid in t.pids()}
        la = os.getloadavg()[0]
        r = subprocess.run([sys.executable, LOADGEN, "consume", "--bootstrap", t.bootstrap, "--topic", topic,
                            "--records", str(n), "--config", json.dumps(dict(conf, debug="fetch"))],
                           capture_output=True, text=True, timeout=300)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        res["broker_cpu_s"] = {str(pid): round(B.proc_cpu(pid) - c, 3) for pid, c in cpu0.items()}
        res["load"] = la
        res["log"] = r.stderr
        return res

    try:
        for t in ts.values():
            t.start()
            tp = runner.create_topic(t, a.partitions)   # warm-up (Kafka's JIT)
            consume(t, tp, produce(t, tp))
        with open(a.out, "a") as out:
            for i in range(a.rounds):
                for name in (("pykbroker", "kafka") if i % 2 == 0 else ("kafka", "pykbroker")):
                    t = ts[name]
                    tp = runner.create_topic(t, a.partitions)
                    n = produce(t, tp)
                    for k in range(1 + a.reread):
                        res = consume(t, tp, n)
                        res.update(round=i, broker=name, read=k, conf=conf)
                        out.write(json.dumps(res) + "\n")
                        out.flush()
                        m = run_metrics(res)
                        print(i, name, k, "%.1f MB/s" % res["mb_s"], "%.2f s" % res["seconds"],
                              "back-offs", m["backoffs"], "cpu", res["broker_cpu_s"],
                              "load %.1f" % res["load"], flush=True)
                    runner.delete_topic(t, tp)
    finally:
        runner.close_admins()
        for t in ts.values():
            t.stop()


LINE = re.compile(r"^%7\|(\d+\.\d+)\|(\w+)\|[^|]*\| \[thrd:([^\]]+)\]: (.*)$")


def run_metrics(r) -> dict:
    """Per broker thread (``host:port/id``): Fetches, records and bytes enqueued, Fetch-to-enqueue
    ms, back-offs, last enqueue; from librdkafka's ``debug=fetch`` lines."""
    per: dict = {}
    t0 = None
    backoffs = 0
    for line in r["log"].splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t, fac, thrd, msg = float(m[1]), m[2], m[3], m[4]
        if msg.startswith(thrd + ": "):
            msg = msg[len(thrd) + 2:]
        if "Queue full" in msg:
            backoffs += 1
        if not re.match(r"[\w.]+:\d+/\d+$", thrd):
            continue
        b = per.setdefault(thrd, {"fetches": 0, "records": 0, "bytes": 0, "rtt_ms": [], "_sent": None,
                                  "first": None, "last_enq": None, "partitions": 0})
        f = re.match(r"Fetch (\d+)/\d+/\d+ toppar", msg)
        if f and f[1] != "0":
            b["fetches"] += 1
            b["partitions"] += int(f[1])
            b["_sent"] = t
            b["_got"] = 0
            if b["first"] is None:
                b["first"] = t
            t0 = t if t0 is None else min(t0, t)
        e = re.search(r"Enqueue (\d+) message\(s\) \((\d+) bytes", msg)
        if e:
            b["records"] += int(e[1])
            b["bytes"] += int(e[2])
            b["last_enq"] = t
            if b["_sent"] is not None:
                b["rtt_ms"].append((t - b["_sent"]) * 1000)
                b["_sent"] = None
    for b in per.values():
        b.pop("_sent", None)
        b.pop("_got", None)
        for k in ("first", "last_enq"):
            if b[k] is not None and t0 is not None:
                b[k] = round(b[k] - t0, 3)
    return {"backoffs": backoffs, "brokers": per}


def cmd_summary(a) -> None:
    rows = [json.loads(line) for path in a.files for line in open(path)]
    for r in rows:
        m = run_metrics(r)
        print("%s round %d read %d: %.1f MB/s %.2f s, back-offs %d, load %.1f, broker CPU s %s" % (
            r["broker"], r["round"], r["read"], r["mb_s"], r["seconds"], m["backoffs"], r["load"],
            r.get("broker_cpu_s")))
        for thrd, b in sorted(m["brokers"].items()):
            rtt = sorted(b["rtt_ms"])
            print("   %-22s fetches %4d (%.1f partitions each) records %7d MB %6.1f, per Fetch %5.2f MB;"
                  " Fetch->enqueue ms median %s p90 %s; first Fetch %.3f s, last enqueue %s s" % (
                      thrd, b["fetches"], b["partitions"] / max(b["fetches"], 1), b["records"], b["bytes"] / 1e6,
                      b["bytes"] / 1e6 / max(b["fetches"], 1),
                      "%.1f" % S.median(rtt) if rtt else "-", "%.1f" % rtt[int(0.9 * len(rtt))] if rtt else "-",
                      b["first"] or 0, b["last_enq"]))
    for k in sorted({r["read"] for r in rows}):
        for b in ("pykbroker", "kafka"):
            v = [r["mb_s"] for r in rows if r["broker"] == b and r["read"] == k]
            if v:
                print("read %d %s MB/s: %s, median %.1f" % (k, b, " ".join("%.1f" % x for x in v), S.median(v)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--budget-mb", type=float, default=100)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--producers", type=int, default=4)
    p.add_argument("--reread", type=int, default=0, help="read the same topic this many more times")
    p.add_argument("--kafka-brokers", type=int, default=1,
                   help="Apache Kafka as this many brokers (the control: 2 = the layout of pykbroker's side)")
    p.add_argument("--out", required=True)
    p = sub.add_parser("summary")
    p.add_argument("files", nargs="+")
    from fetch_compare import split_client_conf
    argv, conf = split_client_conf(sys.argv[1:] if argv is None else argv)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        cmd_run(a, dict(kv.split("=", 1) for kv in conf))
    else:
        cmd_summary(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
