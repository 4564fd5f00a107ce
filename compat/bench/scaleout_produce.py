#!/usr/bin/env python3
"""The scale-out producer cell, run by run, with its spread: per producer, per broker process and
per client (the study behind results/scaleout-produce-2026-11-28.md).

    python compat/bench/scaleout_produce.py --target scaleout|kafka|single [--reps 5] [--budget-mb 200]
                                            [--partitions 8] [--delete]

Starts one target as bench.py does (brokers.py: ``scaleout`` = one pykbroker broker per core, RF
1; ``kafka`` = one Apache Kafka broker on every core; ``single`` = one pykbroker broker), then
per rep creates a topic, runs the cell's load (4 ``loadgen.py produce`` processes, 1 KiB records,
acks=1, linger 5 ms, ``--budget-mb`` in all) and prints one JSON line: each producer's time and
ack p50/p99, the records each broker took (the sticky partitioner spreads a short burst
unevenly), each broker process's user/system CPU seconds, and the producers' CPU seconds and
context switches.  ``--delete`` deletes each rep's topic after it, as bench.py does.  The data
directory is removed at the end (a few runs of GBs fill a disk).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import brokers as B  # noqa: E402

LOADGEN = str(HERE / "loadgen.py")
PRODUCERS = 4   # the cell's


def target(kind: str, work: str):
    return {"single": lambda: B.PyKSingle(work), "scaleout": lambda: B.PyKScaleOut(work, n=2),
            "kafka": lambda: B.KafkaScaleOut(work)}[kind]().start()


def rep(t, admin, topic: str, partitions: int, budget_mb: float) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import NewTopic
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if len(md.partitions) == partitions and all(p.leader >= 0 for p in md.partitions.values()):
            break
        time.sleep(0.2)
    per = int(budget_mb * 1e6 / 1024 / PRODUCERS)
    cmd = [sys.executable, LOADGEN, "produce", "--bootstrap", t.bootstrap, "--topic", topic, "--records", str(per),
           "--size", "1024", "--acks", "1", "--compression", "none", "--linger-ms", "5", "--rate", "0"]
    cpu0 = {p: B.proc_cpu_split(p) for p in t.pids()}
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(PRODUCERS)]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1 = {p: B.proc_cpu_split(p) for p in t.pids()}
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": "scaleout-produce"})
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    c.close()
    per_broker: dict = {}
    for p in md.partitions.values():
        per_broker[p.leader] = per_broker.get(p.leader, 0) + ends[p.id]
    return {"produce_mb_s": round(sum(o["mb_s"] for o in outs), 1),
            "ack_p99_ms": round(max(o["ack"]["p99_ms"] for o in outs), 1),   # the worst producer's, as bench.py
            "producer_s": [round(o["seconds"], 3) for o in outs],
            "producer_enqueue_s": [round(o["enqueue_seconds"], 3) for o in outs],
            "producer_p99_ms": [round(o["ack"]["p99_ms"]) for o in outs],
            "producer_p50_ms": [round(o["ack"]["p50_ms"]) for o in outs],
            "records_per_broker": per_broker,
            "broker_cpu_user_sys": {p: [round(b - a, 2) for a, b in zip(cpu0[p], cpu1[p])] for p in cpu0},
            "clients_cpu_user_sys": [round(ru1.ru_utime - ru0.ru_utime, 2), round(ru1.ru_stime - ru0.ru_stime, 2)],
            "clients_ctx_switches": [ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", choices=("scaleout", "kafka", "single"), required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget-mb", type=float, default=200.0, help="MB produced per rep (bench.py --full: 200)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--delete", action="store_true", help="delete each rep's topic after it")
    a = ap.parse_args(argv)
    from confluent_kafka.admin import AdminClient
    work = tempfile.mkdtemp(prefix="scaleout-produce-")
    try:
        t = target(a.target, work)
        try:
            admin = AdminClient({"bootstrap.servers": t.bootstrap})
            for i in range(a.reps):
                topic = "scaleout-produce-%d" % i
                r = rep(t, admin, topic, a.partitions, a.budget_mb)
                if a.delete:
                    for f in admin.delete_topics([topic]).values():
                        f.result()
                print(json.dumps(dict(target=a.target, rep=i, **r)), flush=True)
        finally:
            t.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
