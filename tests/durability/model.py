"""Shared pieces of the durability tests: a workload that remembers what it wrote and what
was acknowledged, an independent parser of segment files (the oracle for "longest valid
prefix"), and the figures each fault class reports."""
from __future__ import annotations

import os
import random
import re
import struct
from dataclasses import dataclass, field

import crc32c
import trio

from pykbroker.protocol.records import Record, encode_batch
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import KafkaStorageError, LogConfig, LogManager

T0 = 1_700_000_000_000
TOPIC = "t"


def make_batch(i: int, nrec: int) -> bytes:
    return encode_batch([Record(None, T0 + i * 10 + j, b"k%05d" % i, b"v-%05d-%d-" % (i, j) + b"x" * (20 + i % 50), [])
                         for j in range(nrec)], base_offset=0)


@dataclass
class Written:
    data: bytes          # the batch bytes as stored (offsets and epoch patched)
    first: int
    last: int
    acked: bool


@dataclass
class Run:
    lm: LogManager
    log: object
    written: list = field(default_factory=list)
    error: Exception | None = None

    @property
    def acked_offsets(self) -> list[int]:
        return [o for w in self.written if w.acked for o in range(w.first, w.last + 1)]


def start(root: str, fs, cfg: LogConfig | None = None) -> LogManager:
    lm = LogManager([root], fs, default_config=cfg or LogConfig())
    lm.load_logs()
    return lm


def checkpoint_recovery_points(lm: LogManager) -> None:
    """Write the recovery-point checkpoint as the broker's checkpoint task does; raise its error."""
    failed = lm.write_checkpoints(("rp",))
    if failed:
        raise next(iter(failed.values()))


def shutdown(lm: LogManager) -> None:
    trio.run(lm.shutdown)


def produce(root: str, fs, cfg: LogConfig, n: int, seed: int = 0, checkpoint_every: int = 0,
            lm: LogManager | None = None, stop_on_error: bool = True) -> Run:
    """Append ``n`` batches of 1-5 records; "ack" = ``Log.append`` returned (it fsyncs first
    when flush.messages says so).  The recovery-point checkpoint is written every
    ``checkpoint_every`` appends, as the broker's checkpoint task does."""
    rng = random.Random(seed)
    lm = lm or start(root, fs, cfg)
    lg = lm.get_or_create_log(TOPIC, 0)
    run = Run(lm, lg)
    for i in range(n):
        v = validate_produce_records(make_batch(i, rng.randint(1, 5)), 1 << 20)
        leo = lg.log_end_offset
        try:
            info = lg.append(v, 0)
        except KafkaStorageError as e:
            run.error = e
            if lg.log_end_offset > leo:   # written, but the fsync failed: not acknowledged
                run.written.append(Written(bytes(v.buffer), leo, lg.log_end_offset - 1, False))
            if stop_on_error:
                break
            continue
        run.written.append(Written(bytes(v.buffer), info.first_offset, info.last_offset, True))
        if checkpoint_every and (i + 1) % checkpoint_every == 0:
            try:
                checkpoint_recovery_points(lm)
            except OSError as e:
                run.error = e
                if stop_on_error:
                    break
    return run


_SEG = re.compile(r"^(\d{20})\.log$")
_HDR = struct.Struct(">qiibIhiqqqhii")


def valid_prefix_of_files(partition_dir: str) -> tuple[bytes, int]:
    """Independent oracle: the longest run of well-formed, CRC-valid batches with contiguous
    offsets, reading the segment files in base-offset order.  Returns (bytes, next offset)."""
    if not os.path.isdir(partition_dir):
        return b"", 0
    segs = sorted(int(m.group(1)) for m in map(_SEG.match, os.listdir(partition_dir)) if m)
    out = []
    expected = None
    for base in segs:
        with open(os.path.join(partition_dir, "%020d.log" % base), "rb") as fh:
            data = fh.read()
        pos = 0
        while pos + _HDR.size <= len(data):
            f = _HDR.unpack_from(data, pos)
            size = f[1] + 12
            if f[1] < _HDR.size - 12 or f[3] != 2 or pos + size > len(data):
                break
            if crc32c.crc32c(data[pos + 21:pos + size]) != f[4]:
                break
            if (expected is not None and f[0] != expected) or (expected is None and f[0] != base):
                break
            out.append(data[pos:pos + size])
            expected = f[0] + f[6] + 1
            pos += size
        if pos != len(data):
            break
    return b"".join(out), (expected or 0)


def log_bytes(lg) -> bytes:
    if lg.log_end_offset == lg.log_start_offset:
        return b""
    return b"".join(r.read() for r in lg.read(lg.log_start_offset, 1 << 31, min_one_batch=True, whole_batches=True))


def disk_log_bytes(partition_dir: str) -> int:
    if not os.path.isdir(partition_dir):
        return 0
    return sum(os.path.getsize(os.path.join(partition_dir, n))
               for n in os.listdir(partition_dir) if n.endswith(".log"))


@dataclass
class Figures:
    name: str
    written_records: int
    acked_records: int
    on_disk_bytes: int
    recovered_bytes: int
    records_recovered: int
    acked_lost: int

    @property
    def bytes_truncated(self) -> int:
        return self.on_disk_bytes - self.recovered_bytes

    def report(self) -> str:
        return ("[durability] %-40s written=%d acked=%d recovered=%d acked_lost=%d "
                "bytes_truncated=%d" % (self.name, self.written_records, self.acked_records,
                                        self.records_recovered, self.acked_lost,
                                        self.bytes_truncated))


def recover_and_check(name: str, root: str, fs, run: Run, cfg: LogConfig | None = None) -> tuple:
    """Reload after a fault and check the invariants every fault class must keep:
    the log loads; its content is exactly the longest valid prefix of what is on disk; that
    prefix is a prefix of what was written (batch by batch); re-reading is stable; the log
    takes appends again.  Returns (Figures, reloaded LogManager, log)."""
    pdir = os.path.join(root, "%s-0" % TOPIC)
    on_disk = disk_log_bytes(pdir)
    expected, expected_next = valid_prefix_of_files(pdir)
    lm = start(root, fs, cfg)
    lg = lm.get_or_create_log(TOPIC, 0)
    got = log_bytes(lg)
    assert got == expected, "recovered log differs from the longest valid prefix on disk"
    assert lg.log_end_offset == (expected_next if expected else lg.active_segment.base_offset)
    written = b"".join(w.data for w in run.written)
    assert written.startswith(got), "recovered bytes are not a prefix of what was written"
    # whole batches only
    ends, acc = {0}, 0
    for w in run.written:
        acc += len(w.data)
        ends.add(acc)
    assert len(got) in ends
    # stable: indexes answer lookups for every surviving batch
    for w in run.written:
        if w.last < lg.log_end_offset:
            assert lg.read(w.last, 1)[0].read()[:8] == w.first.to_bytes(8, "big")
    leo = lg.log_end_offset
    figs = Figures(name, sum(w.last - w.first + 1 for w in run.written), len(run.acked_offsets),
                   on_disk, len(got), leo - lg.log_start_offset,
                   sum(1 for o in run.acked_offsets if o >= leo))
    print(figs.report())
    return figs, lm, lg
