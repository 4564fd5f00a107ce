"""pykbroker from two checkouts side by side (prints numbers; not a test): confluent-kafka
produce (acks=1, 1 KiB records) then a catch-up consumer, against `pykbroker serve` started from
each checkout in turn, the order alternating per pair; medians and per-pair ratios.

    python compat/bench/micro/bench_checkouts.py BEFORE_DIR AFTER_DIR [--pairs 8] [--mb 150]

For a refactoring that must not change speed: check out the old commit with
`git worktree add --detach /tmp/before <commit>` and compare it with this checkout."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from pykbroker.local.zookeeper import free_port  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("before")
ap.add_argument("after")
ap.add_argument("--pairs", type=int, default=8)
ap.add_argument("--mb", type=int, default=150, help="MiB produced and read back per run")
ARGS = ap.parse_args()
SIDES = {"before": os.path.abspath(ARGS.before), "after": os.path.abspath(ARGS.after)}
PAIRS, MB = ARGS.pairs, ARGS.mb
REC = os.urandom(1024)


def run(side: str) -> tuple[float, float]:
    """One broker from the side's checkout, fresh data directory: (produce MB/s, consume MB/s)."""
    root = SIDES[side]
    d = tempfile.mkdtemp(prefix="bench-checkouts-")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=root)
    p = subprocess.Popen([sys.executable, "-m", "pykbroker", "serve", "--listeners", "PLAINTEXT://127.0.0.1:%d" % port,
                          "--log-dirs", d + "/data", "--log-level", "WARNING"], cwd=root, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.time() - t0 > 30:
                    raise
                time.sleep(0.05)
        bs = "127.0.0.1:%d" % port
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("ab", 1, 1)])["ab"].result()
        n = MB * 1024
        pr = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 5, "batch.size": 262144,
                       "compression.type": "none", "queue.buffering.max.messages": 1000000})
        t = time.perf_counter()
        for i in range(n):
            while True:
                try:
                    pr.produce("ab", REC)
                    break
                except BufferError:   # the client's queue is full: let it drain
                    pr.poll(0.001)
        pr.flush()
        prod = MB / (time.perf_counter() - t)
        c = Consumer({"bootstrap.servers": bs, "group.id": "ab", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("ab", 0, 0)])
        got = 0
        t = None
        while got < n:
            for m in c.consume(10000, 1.0):
                if m.error() is None:
                    if t is None:   # from the first record: the consumer's start-up is not the broker's
                        t = time.perf_counter()
                    got += 1
        cons = MB / (time.perf_counter() - t)
        c.close()
        return prod, cons
    finally:
        p.terminate()
        p.wait(10)
        shutil.rmtree(d, ignore_errors=True)


res = {"before": [], "after": []}
for i in range(PAIRS):
    order = ("before", "after") if i % 2 == 0 else ("after", "before")
    for s in order:
        res[s].append(run(s))
        print(s, ["%.1f" % x for x in res[s][-1]], flush=True)
out = {}
for s, xs in res.items():
    out[s] = {"produce_MBps": statistics.median(x[0] for x in xs), "consume_MBps": statistics.median(x[1] for x in xs),
              "runs": xs}
# the median of the per-pair ratios: each pair ran back to back, so it shares the machine's load
out["pair_ratio_median_after_over_before"] = {
    what: statistics.median(a[k] / b[k] for a, b in zip(res["after"], res["before"]))
    for k, what in ((0, "produce"), (1, "consume"))}
print(json.dumps(out, indent=1))
