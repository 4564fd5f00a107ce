"""A 3-broker cluster with many partitions: idle CPU, memory and the times of its life cycle
(prints numbers; not a test).

    python compat/bench/micro/bench_cluster_idle.py [--layout 1x1000|100x10|both] [--idle 40] [--skip-faults]

For each layout (one topic of 1,000 partitions, or 100 topics of 10 partitions), RF 3 on
``Cluster(3)`` (a real ZooKeeper and three ``pykbroker serve`` processes):

- ``create``: CreateTopics sent to broker 1 until its answer (pykbroker answers once its own
  metadata shows the topic);
- ``complete``: from the CreateTopics request until every broker's Metadata shows every
  partition with a leader and a full ISR (3 replicas in sync);
- ``idle``: CPU seconds of each broker and of ZooKeeper over ``--idle`` seconds with nothing
  to do (utime+stime of /proc/<pid>/stat, children excluded), as a percentage of one core,
  and each broker's RSS at the end;
- ``restart``: broker 2 stopped with SIGTERM (controlled shutdown) and started again: the time
  to its first answered request (ApiVersions) and until every ISR is full again;
- ``failover``: broker 3 killed with SIGKILL: the time until no partition names it as leader
  any more (dominated by zookeeper.session.timeout.ms, given here as ``--session-ms``) and,
  separately, from its registration's disappearance.

The cluster is started with ``zookeeper.session.timeout.ms=--session-ms`` (default 6000) so the
failover number is not mostly waiting; everything else is the brokers' defaults.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))

from pykbroker.local.cluster import Cluster  # noqa: E402
from pykbroker.protocol.wire import WireClient  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (3rd field of stat): utime and stime are the 14th and 15th
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class CpuMeter:
    """CPU seconds used by the running brokers and ZooKeeper since ``start()``: wall-clock times
    on a loaded machine vary a lot; the CPU a phase costs varies much less.  A process started
    meanwhile counts from 0; one that exited meanwhile is not counted."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.base = {}

    def pids(self):
        out = [b.pid for b in self.cluster.brokers if b.pid is not None]
        return out + [self.cluster.zookeeper.pid]

    def start(self) -> "CpuMeter":
        self.base = {p: cpu_seconds(p) for p in self.pids()}
        return self

    def used(self) -> float:
        total = 0.0
        for p in self.pids():
            try:
                total += cpu_seconds(p) - self.base.get(p, 0.0)
            except OSError:
                pass
        return total


def metadata_all(addr) -> dict:
    with WireClient(addr, timeout=30) as c:
        return c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                 "include_cluster_authorized_operations": False,
                                 "include_topic_authorized_operations": False})


def partitions_of(md, prefix: str):
    for t in md["topics"]:
        if t["name"].startswith(prefix):
            for p in t["partitions"]:
                yield t["name"], p


def wait(pred, timeout: float, what: str, step: float = 0.1) -> float:
    t0 = time.monotonic()
    while True:
        try:
            if pred():
                return time.monotonic() - t0
        except OSError:
            pass
        if time.monotonic() - t0 > timeout:
            raise SystemExit("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(step)


def complete(cluster, brokers, prefix: str, n: int, rf: int) -> bool:
    for b in brokers:
        parts = list(partitions_of(metadata_all(cluster.broker(b).bootstrap), prefix))
        if len(parts) != n or not all(p["error_code"] == 0 and p["leader_id"] >= 0 and len(p["isr_nodes"]) == rf
                                      for _, p in parts):
            return False
    return True


def run(layout: str, args) -> None:
    topics, per = (1, 1000) if layout == "1x1000" else (100, 10)
    prefix = "bench-%s-" % layout
    n = topics * per
    overrides = {"zookeeper.session.timeout.ms": str(args.session_ms)}
    print("== %s: %d topic(s) x %d partitions, RF 3, 3 brokers ==" % (layout, topics, per), flush=True)
    with Cluster(3, overrides=overrides) as c:
        ids = [b.broker_id for b in c.brokers]
        c.wait_registered()
        body = {"topics": [{"name": "%s%03d" % (prefix, i), "num_partitions": per, "replication_factor": 3,
                            "assignments": [], "configs": []} for i in range(topics)],
                "timeout_ms": 120000, "validate_only": False}
        meter = CpuMeter(c).start()
        t0 = time.monotonic()
        with WireClient(c.brokers[0].bootstrap, timeout=180) as w:
            r = w.request(19, 5, body)
        t_create = time.monotonic() - t0
        # REQUEST_TIMED_OUT (7): the broker gave up waiting for its own metadata (30 s); the
        # topic is still being created, so the wait below goes on
        bad = [t for t in r["topics"] if t["error_code"] not in (0, 7)]
        if bad:
            raise SystemExit("CreateTopics failed: %r" % bad[:3])
        timed_out = sum(1 for t in r["topics"] if t["error_code"] == 7)
        wait(lambda: complete(c, ids, prefix, n, 3), 600, "all leaders and ISRs", 0.25)
        t_complete = time.monotonic() - t0
        print("create: %.2f s%s   every leader and full ISR on every broker: %.2f s (CPU of the brokers "
              "and ZooKeeper: %.1f s)" % (t_create, " (%d topic(s) answered REQUEST_TIMED_OUT)" % timed_out
                                          if timed_out else "", t_complete, meter.used()))

        time.sleep(3)   # let the last ISR changes and checkpoints settle
        pids = {b.broker_id: b.pid for b in c.brokers}
        zk_pid = c.zookeeper.pid
        before = {b: cpu_seconds(p) for b, p in pids.items()}
        zk_before = cpu_seconds(zk_pid)
        t1 = time.monotonic()
        time.sleep(args.idle)
        dt = time.monotonic() - t1
        after = {b: cpu_seconds(p) for b, p in pids.items()}
        zk_after = cpu_seconds(zk_pid)
        for b in ids:
            used = after[b] - before[b]
            print("idle broker %d: %.2f CPU s in %.0f s = %.1f%% of a core, RSS %.0f MiB"
                  % (b, used, dt, 100 * used / dt, rss_mib(pids[b])))
        zk_used = zk_after - zk_before
        print("idle ZooKeeper: %.2f CPU s = %.1f%% of a core, RSS %.0f MiB"
              % (zk_used, 100 * zk_used / dt, rss_mib(zk_pid)), flush=True)
        if args.skip_faults:
            return

        # restart: controlled shutdown of broker 2, then start it again
        meter.start()
        t0 = time.monotonic()
        c.broker(2).stop(120)
        t_stop = time.monotonic() - t0
        cpu_stop = meter.used()
        meter.start()
        t0 = time.monotonic()
        c.start(2, timeout=180)
        t_first = time.monotonic() - t0
        wait(lambda: complete(c, ids, prefix, n, 3), 300, "full ISRs after the restart", 0.25)
        t_isr = time.monotonic() - t0
        print("restart broker 2: controlled shutdown %.2f s (CPU of the others %.1f s), start to first "
              "answer %.2f s, to full ISRs %.2f s (CPU of all %.1f s)"
              % (t_stop, cpu_stop, t_first, t_isr, meter.used()), flush=True)

        # failover: kill -9 broker 3
        live = [1, 2]

        def led_by_3_gone() -> bool:
            for b in live:
                for _, p in partitions_of(metadata_all(c.broker(b).bootstrap), prefix):
                    if p["leader_id"] in (3, -1):
                        return False
            return True
        t0 = time.monotonic()
        c.kill(3)
        meter.start()
        t_unreg = wait(lambda: 3 not in c.registered_broker_ids(), 120, "broker 3's registration to go", 0.1)
        t_all = wait(led_by_3_gone, 300, "new leaders", 0.1) + t_unreg
        print("failover of broker 3 (SIGKILL, session timeout %d ms): registration gone after %.2f s, "
              "every partition led by a live broker %.2f s after the kill (%.2f s after the registration "
              "went; CPU of the others %.1f s)" % (args.session_ms, t_unreg, t_all, t_all - t_unreg, meter.used()),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layout", choices=["1x1000", "100x10", "both"], default="both")
    ap.add_argument("--idle", type=float, default=40.0, help="seconds of idle measurement")
    ap.add_argument("--session-ms", type=int, default=6000, help="zookeeper.session.timeout.ms of the brokers")
    ap.add_argument("--skip-faults", action="store_true", help="no restart / failover measurement")
    args = ap.parse_args()
    for layout in (["1x1000", "100x10"] if args.layout == "both" else [args.layout]):
        run(layout, args)


if __name__ == "__main__":
    main()
