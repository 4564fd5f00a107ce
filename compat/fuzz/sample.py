"""Sample a broker process's RSS, open fds and CPU time from /proc while a fuzz run goes on.

    python compat/fuzz/sample.py --parent <pid of run.py> --every 10 --out samples.csv

The broker is found as the ``pykbroker serve`` child of ``--parent`` (or given as ``--pid``);
one CSV line per sample (seconds since start, RSS kB, peak RSS kB, open fds, CPU seconds of the
broker, CPU seconds of the fuzzing worker processes among the parent's descendants), until the broker
exits.  Independent of the fuzzer's own readings (taken after health checks), so memory and fds
over the run are seen at even intervals."""
import argparse
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    with open("/proc/%d/stat" % pid) as fh:
        rest = fh.read().rsplit(")", 1)[1].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK   # ppid, utime+stime


def children(ppid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if _stat(int(name))[0] == ppid:
                    out.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def descendants(ppid):
    out, todo = [], [ppid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    pid = a.pid
    t0 = time.monotonic()
    while pid is None:
        for c in descendants(a.parent):
            if "pykbroker serve" in cmdline(c):
                pid = c
        if pid is None:
            if time.monotonic() - t0 > 120:
                sys.exit("no broker child of %s" % a.parent)
            time.sleep(1)
    with open(a.out, "w") as out:
        out.write("seconds,rss_kb,peak_rss_kb,fds,broker_cpu_s,workers_cpu_s\n")
        t0 = time.monotonic()
        while True:
            try:
                rss = hwm = 0
                with open("/proc/%d/status" % pid) as fh:
                    for line in fh:
                        if line.startswith("VmRSS:"):
                            rss = int(line.split()[1])
                        elif line.startswith("VmHWM:"):
                            hwm = int(line.split()[1])
                fds = len(os.listdir("/proc/%d/fd" % pid))
                cpu = _stat(pid)[1]
                workers = 0.0
                if a.parent:
                    for c in descendants(a.parent):
                        if c != pid and "multiprocessing" in cmdline(c):
                            try:
                                workers += _stat(c)[1]
                            except (OSError, IndexError):
                                pass
            except (OSError, IndexError, ValueError):
                break   # the broker exited
            out.write("%.0f,%d,%d,%d,%.1f,%.1f\n" % (time.monotonic() - t0, rss, hwm, fds, cpu, workers))
            out.flush()
            time.sleep(a.every)


if __name__ == "__main__":
    main()
