"""What the benchmarks read of a running process from /proc, written once."""
from __future__ import annotations

import os


def thread_cpu_seconds(pid: int) -> float:
    """CPU seconds of every thread of the process so far, in nanoseconds' resolution (the first
    field of /proc/PID/task/TID/schedstat: time on a CPU; /proc/PID/stat counts 10 ms ticks, too
    coarse for a run of a few tenths of a second of broker CPU).  Unlike the wall time it hardly
    depends on the machine's load."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass   # a thread that ended meanwhile
    return total / 1e9
