#!/usr/bin/env python3
"""pykbroker with the authorizer on (10,000 bindings) against the same broker without it: many
short A/B pairs, the broker's CPU per unit of work beside the throughput, and a profile.

    python compat/bench/acl_ab.py [--pairs 8] [--records 400000] [--size 100] [--out DIR]
    python compat/bench/acl_ab.py --profile DIR     # py-spy of the authorizing broker as well
    python compat/bench/acl_ab.py --micro           # the decision's in-process costs, no broker

The ``acl`` cells of bench.py compare the two inside a run that also measures Kafka, a few
pairs of 200 MB each; on a shared 2-core machine one pair's ratio differs from the next by up to
2x.  This script measures only the two pykbroker brokers (brokers.py's ``PyKAcl`` with
StandardAuthorizer and the ``acl`` topology's 10,000 bindings, and ``PyKNoAuth``), both running
throughout, in pairs that alternate their order (on off, off on, ...) so that neither always
runs first, each run on a fresh topic, with:

* ``tput``: confluent-kafka flat out (loadgen.py produce, linger 5 ms, acks=1) then a catch-up
  consumer over the backlog: produce and consume MB/s, and the broker's CPU seconds per GB of
  each phase (every thread's time on a CPU, /proc/PID/task/*/schedstat);
* ``conns``: ``--conns`` connections, each a closed loop of acks=1 Produce requests of 10
  records (loadgen.py conns --mode active): requests per second and the broker's CPU
  microseconds per request, where a per-request cost would show first.

The table has each metric's median on and off and the median of the per-pair ratios on/off
(with their min and max).  CPU per unit of work moves far less with the machine's load than
throughput does: it is what the authorizer adds to each request.  ``--profile DIR``: one more
``tput`` run on the authorizing broker under ``py-spy record`` (raw collapsed stacks and a flame
graph), with the share of its samples under pykbroker/acl/.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Run as a script, so compat/bench is sys.path[0]; brokers puts the repository root on the path.
import brokers as B  # noqa: E402
from procstat import thread_cpu_seconds  # noqa: E402

HERE = Path(__file__).resolve().parent
LOADGEN = str(HERE / "loadgen.py")
ON, OFF = B.ON, B.OFF
METRICS = (("produce_mb_s", "produce MB/s", "higher"), ("consume_mb_s", "consume MB/s", "higher"),
           ("produce_cpu_s_per_gb", "broker CPU s/GB produced", "lower"),
           ("consume_cpu_s_per_gb", "broker CPU s/GB consumed", "lower"),
           ("conns_req_s", "closed-loop Produce requests/s", "higher"),
           ("conns_us_per_req", "broker CPU us/request", "lower"))


def _lg(*args) -> list:
    return [sys.executable, LOADGEN] + [str(a) for a in args]


def _last_json(cmd: list, timeout: float = 900) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (" ".join(cmd[:6]), r.returncode, r.stderr[-3000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


class AB:
    def __init__(self, args):
        self.args = args
        self.seq = 0
        self._admins: dict = {}

    def admin(self, bootstrap: str):
        from confluent_kafka.admin import AdminClient
        if bootstrap not in self._admins:
            self._admins[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
        return self._admins[bootstrap]

    def topic(self, t, partitions: int = 1) -> str:
        from confluent_kafka.admin import NewTopic
        self.seq += 1
        name = "bench-ab-%d-%d" % (os.getpid(), self.seq)
        a = self.admin(t.bootstrap)
        for f in a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=60).values():
            f.result()
        deadline = time.monotonic() + 60
        while True:
            md = a.list_topics(name, timeout=30).topics.get(name)
            if md is not None and md.error is None and all(p.leader >= 0 for p in md.partitions.values()) \
                    and len(md.partitions) == partitions:
                return name
            if time.monotonic() > deadline:
                raise RuntimeError("topic %s not ready" % name)
            time.sleep(0.1)

    def drop(self, t, name: str) -> None:
        for f in self.admin(t.bootstrap).delete_topics([name], operation_timeout=60).values():
            f.result()

    def tput(self, t) -> dict:
        a = self.args
        name = self.topic(t)
        pid = t.pids()[0]
        try:
            c0 = thread_cpu_seconds(pid)
            p = _last_json(_lg("produce", "--bootstrap", t.bootstrap, "--topic", name, "--records", a.records,
                               "--size", a.size, "--acks", 1, "--linger-ms", 5))
            c1 = thread_cpu_seconds(pid)
            c = _last_json(_lg("consume", "--bootstrap", t.bootstrap, "--topic", name, "--records", p["records"]))
            c2 = thread_cpu_seconds(pid)
        finally:
            self.drop(t, name)
        if c["records"] < p["records"]:
            raise RuntimeError("consumed %d of %d" % (c["records"], p["records"]))
        gb = p["records"] * a.size / 1e9
        return {"produce_mb_s": p["mb_s"], "consume_mb_s": c["mb_s"], "ack_p99_ms": p["ack"]["p99_ms"],
                "produce_cpu_s_per_gb": (c1 - c0) / gb, "consume_cpu_s_per_gb": (c2 - c1) / gb}

    def conns(self, t) -> dict:
        a = self.args
        name = self.topic(t)
        pid = t.pids()[0]
        try:
            proc = subprocess.Popen(_lg("conns", "--bootstrap", t.bootstrap, "--topic", name, "--n", a.conns,
                                        "--mode", "active", "--seconds", a.seconds, "--size", a.size,
                                        "--partitions", 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            line = proc.stdout.readline()
            if '"ready"' not in line:
                raise RuntimeError("conns not ready: %s %s" % (line, proc.stderr.read()[-2000:]))
            c0 = thread_cpu_seconds(pid)
            out, err = proc.communicate(timeout=a.seconds + 300)
            c1 = thread_cpu_seconds(pid)
        finally:
            self.drop(t, name)
        r = json.loads(out.strip().splitlines()[-1])
        if not r["produce_ok"] or not r["requests"]:
            raise RuntimeError("conns failed: %s" % r)
        return {"conns_req_s": r["requests"] / r["seconds"], "conns_us_per_req": (c1 - c0) / r["requests"] * 1e6}


def summarize(runs: dict) -> dict:
    out = {}
    for key, _label, _better in METRICS:
        on = [r[key] for r in runs[ON] if key in r]
        off = [r[key] for r in runs[OFF] if key in r]
        if not on or not off:
            continue
        ratios = [a[key] / b[key] for a, b in zip(runs[ON], runs[OFF]) if key in a and b.get(key)]
        if not ratios:
            continue
        out[key] = {ON: statistics.median(on), OFF: statistics.median(off),
                    "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                              "all": ratios}}
    return out


def table(summary: dict) -> str:
    rows = ["| metric | authorizer on | off | on/off per pair: median (min-max) |", "|---|---|---|---|"]
    for key, label, better in METRICS:
        s = summary.get(key)
        if s:
            r = s["ratio"]
            rows.append("| %s (%s is better) | %.2f | %.2f | %.3f (%.2f-%.2f) |"
                        % (label, better, s[ON], s[OFF], r["median"], r["min"], r["max"]))
    return "\n".join(rows)


def profile(ab: AB, t, out: Path, tag: str = ON) -> dict:
    """One ``tput`` run on ``t`` under py-spy: raw stacks, a flame graph, the acl/ share, and
    the functions most often on top of the stack."""
    import collections
    out.mkdir(parents=True, exist_ok=True)
    raw, svg = out / ("acl-%s-tput.txt" % tag), out / ("acl-%s-tput.svg" % tag)
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(t.pids()[0]), "--rate", "200", "--nonblocking",
                            "--format", "raw", "--output", str(raw)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)   # py-spy attached before the load starts
    try:
        m = ab.tput(t)
    finally:
        spy.send_signal(2)
        spy.communicate(timeout=120)
    total = acl = decide = 0
    leaves: collections.Counter = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        leaves[stack.rsplit(";", 1)[-1].split(" (")[0]] += int(n)
        if "pykbroker/acl/" in stack:
            acl += int(n)
        if "decide (" in stack:
            decide += int(n)
    if shutil.which("inferno-flamegraph"):
        with open(svg, "w") as f:
            subprocess.run(["inferno-flamegraph"], stdin=open(raw), stdout=f, check=False)
    return {"run": m, "samples": total, "samples_in_acl": acl, "samples_in_decide": decide,
            "top": leaves.most_common(15)}


def micro(n_bindings: int) -> dict:
    """In-process costs of the authorizer with the ``acl`` topology's bindings (microseconds per
    call, best of 5): an uncached decision for the benchmark's principal on a benchmark topic
    (1,000 other principals' bindings on its ``bench`` prefix) and for one of those principals,
    ``authorized_operations`` of a topic, and what a Produce of one partition pays per request
    with the decision cached: the dispatcher's ``begin``, the transactional-records check and
    the topic's check."""
    import timeit

    from pykbroker.acl.authorizer import Authorizer
    from pykbroker.acl.bindings import TOPIC, WRITE, AclBinding
    from pykbroker.acl.check import AuthSession
    from pykbroker.acl.requirements import row as table_row
    from pykbroker.handlers.k00_produce import _has_transactional_records
    from pykbroker.protocol.wire import make_batch

    a = Authorizer()
    a.load(AclBinding(b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
                      b.operation.value, b.permission_type.value) for b in B.acl_bindings(n_bindings))

    class Conn:
        peer, principal = "127.0.0.1:40000", "User:ANONYMOUS"
    s = AuthSession(a, Conn())
    row = table_row(0, "topic")
    request = {"transactional_id": None, "topic_data": [{"name": "bench-1-1", "partition_data": [
        {"index": 0, "records": memoryview(make_batch([b"x" * 100] * 10))}]}]}

    def produce_checks():
        s.begin("Produce")
        _has_transactional_records(request)
        return {t["name"] for t in request["topic_data"] if not s.permits(row, t["name"])}

    def us(fn, number):
        return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6
    return {"bindings": n_bindings,
            "decide_uncached_us": us(lambda: a.decide("User:ANONYMOUS", "127.0.0.1", WRITE, TOPIC, "bench-1-1"), 200),
            "decide_uncached_other_principal_us": us(lambda: a.decide("User:svc-40", "127.0.0.1", WRITE, TOPIC,
                                                                      "bench-1-1"), 200),
            "authorized_operations_uncached_us": us(lambda: a.authorized_operations(
                "User:ANONYMOUS", "127.0.0.1", TOPIC, "bench-1-1"), 50),
            "produce_request_checks_cached_us": us(produce_checks, 20000)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--records", type=int, default=400000, help="records produced per tput run")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--conns", type=int, default=20, help="connections of the closed-loop run (0: none)")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of the closed-loop run")
    ap.add_argument("--bindings", type=int, default=B.BINDINGS)
    ap.add_argument("--profile", metavar="DIR", help="py-spy one more tput run of the authorizing broker")
    ap.add_argument("--out", default=None, help="write the JSON of every run here")
    ap.add_argument("--micro", action="store_true", help="only the in-process costs (no broker): JSON")
    a = ap.parse_args(argv)
    if a.micro:
        print(json.dumps(micro(a.bindings)))
        return 0
    result = B.ab_result({k: v for k, v in vars(a).items() if k not in ("out", "profile")})
    with B.acl_on_off("pykbroker-acl-ab-", a.bindings) as targets:
        ab = AB(a)
        for t in targets.values():   # warm-up, not recorded
            ab.tput(t)
        runs: dict = {ON: [], OFF: []}
        for i, order in B.pair_orders(a.pairs):
            got = {}
            for k in order:
                got[k] = ab.tput(targets[k])
            if a.conns:
                for k in order[::-1]:
                    got[k].update(ab.conns(targets[k]))
            for k in order:
                runs[k].append(got[k])
                print("pair %d %-3s %s" % (i, k, ", ".join("%s=%.3g" % kv for kv in got[k].items())), flush=True)
        result["runs"] = runs
        result["summary"] = summarize(runs)
        if a.profile:   # the broker without the authorizer too: what differs between the two
            result["profile"] = {k: profile(ab, targets[k], Path(a.profile), k) for k in (ON, OFF)}
            print("profile: %s" % json.dumps(result["profile"]), flush=True)
    return B.ab_report(result, table(result["summary"]), a.out)

if __name__ == "__main__":
    sys.exit(main())
