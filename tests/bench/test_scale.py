"""The fd budget of segment files (pykbroker/storage/fdpool.py) under a real client load.

A pykbroker broker runs with ``RLIMIT_NOFILE`` lowered to 256 (set in the child before it
execs): its segment-file budget is then 128 files, and 2,000 partitions each with a segment
could never all be open.  confluent-kafka's AdminClient creates 20 topics x 100 partitions, its
producer writes 2 records to every partition, and one consumer assigned to all 2,000 partitions
(one Fetch spans all of them) reads every record back and checks its value: that only works if
segment files are opened lazily, closed when idle, and a Fetch's file regions are sent without
holding every file open.  Then the broker restarts (loading 2,000 logs within the same limit)
and the records are read back once more.  The broker's open fds, read from ``/proc/PID/fd``,
stay under the limit throughout (``compat/bench/scale.py`` samples them; here the limit itself
is the assertion: one fd too many is an EMFILE, which takes the log dir offline).

About 20-40 s on a loaded 2-core machine.  ``compat/bench/scale.py`` runs the full-size check
(10,000 partitions, 1,000 idle connections, idle CPU); docs/benchmarks.md has its numbers.
"""
from __future__ import annotations

import importlib.util
import os
import resource
from pathlib import Path

import pytest

from pykbroker.local.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
# loaded by path, not through sys.path: compat/bench on sys.path for the rest of the session
# would let its modules shadow others of the same name (it once held a "profile.py")
_spec = importlib.util.spec_from_file_location("pykbroker_bench_scale", ROOT / "compat" / "bench" / "scale.py")
scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scale)

NOFILE = 256
TOPICS, PARTITIONS, RECORDS = 20, 100, 2


def _limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


@pytest.mark.timeout(300)
def test_2000_partitions_within_256_fds(tmp_path):
    names = ["fdb-%02d" % i for i in range(TOPICS)]
    b = BrokerProcess(str(tmp_path / "data"), preexec_fn=_limit)
    b.start(timeout=60)
    try:
        pid = b.proc.pid
        with open("/proc/%d/limits" % pid) as f:
            assert any(line.startswith("Max open files") and " %d " % NOFILE in line for line in f)
        sampler = scale.FdSampler(pid, interval=0.05)
        sampler.start()
        scale.create_topics(b.bootstrap, names, PARTITIONS)
        assert scale.produce_all(b.bootstrap, names, PARTITIONS, RECORDS) == TOPICS * PARTITIONS * RECORDS
        alive = lambda: b.proc.poll() is None  # noqa: E731
        # every value checked, offset by offset (consume_all raises on any difference)
        assert scale.consume_all(b.bootstrap, names, PARTITIONS, RECORDS, timeout=180,
                                 alive=alive) == TOPICS * PARTITIONS * RECORDS
        sampler.stop.set()
        sampler.join()
        assert b.proc.poll() is None, b.log_text()[-3000:]
        assert "Too many open files" not in b.log_text()
        # the segment files open at once stayed within the budget (half the limit), give or
        # take the few in use at that instant (a new segment's file is open before an idle one
        # is closed; one file per connection in sendfile): bounded, not one per partition
        assert 0 < sampler.peak_logs <= NOFILE // 2 + 8, sampler.peak_logs
        assert sampler.peak < NOFILE
        # a restart loads every log within the same limit, and the data is all there
        b.restart()
        assert scale.consume_all(b.bootstrap, names, PARTITIONS, RECORDS, timeout=180,
                                 alive=lambda: b.proc.poll() is None) == TOPICS * PARTITIONS * RECORDS
        assert "Too many open files" not in b.log_text()
        assert len(os.listdir("/proc/%d/fd" % b.proc.pid)) < NOFILE
    finally:
        try:
            b.stop(timeout=60)
        except Exception:
            b.kill()
