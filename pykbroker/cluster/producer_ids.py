"""Producer id allocation for InitProducerId (idempotent producers).

Kafka hands producer ids out in blocks (KRaft: the controller allocates blocks of 1000 to each
broker and persists the next block start in its metadata log), so an id is never reused, even
across restarts.  A single pykbroker node does the same locally: ``producer_id_block`` in the
first log dir records the end of the block in use.  A new block is made durable (written,
fsynced, renamed) *before* any id from it is handed out, so after a crash the next start
begins beyond every id that could have been returned.  Ids of an unfinished block are skipped
on restart, exactly like Kafka.

In a cluster the blocks must come from the cluster-wide allocator (Kafka: the controller, ZK
``/latest_producer_id_block``), or two brokers would hand out the same ids:
``allocate_block()`` (the controller's ``allocate_producer_id_block(broker_id)``, when it has
one) returns the start of a fresh block of ``BLOCK_SIZE`` ids that no broker ever got before.
"""
from __future__ import annotations

import os
from typing import Awaitable, Callable, Optional

import trio

from ..storage.fs import REAL_FS, FileSystem

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
FILE_NAME = "producer_id_block"


class ProducerIdManager:
    # allocate_block: a cluster controller's next block of producer ids (None: a single node's own)
    def __init__(self, log_dir: str, fs: FileSystem = REAL_FS,
                 allocate_block: Optional[Callable[[], Awaitable[int]]] = None) -> None:
        self.path = os.path.join(log_dir, FILE_NAME)
        self.fs = fs
        self._allocate_block = allocate_block
        self._next = 0          # next id to hand out
        self._end = 0           # exclusive end of the durable block
        self._refill: trio.Event | None = None
        self._durable_end = self._read()
        self._next = self._end = self._durable_end

    def _read(self) -> int:
        try:
            with open(self.path) as fh:
                for line in fh:
                    k, _, v = line.strip().partition("=")
                    if k == "next.block.start":
                        return int(v)
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            raise RuntimeError("cannot read %s: refusing to risk reusing producer ids" % self.path)
        return 0

    def _write(self, end: int) -> None:
        self.fs.write_file_atomic(self.path, b"version=1\nnext.block.start=%d\n" % end)

    async def generate(self) -> int:
        while self._next >= self._end:
            if self._refill is None:
                # This task persists the next block; concurrent callers wait for it (no lock is
                # held across the await: they simply park on the event and re-check).
                self._refill = ev = trio.Event()
                try:
                    if self._allocate_block is not None:
                        start = await self._allocate_block()
                        self._next, self._end = start, start + BLOCK_SIZE
                        continue
                    new_end = self._end + BLOCK_SIZE
                    await trio.to_thread.run_sync(self._write, new_end)
                    self._next, self._end = self._end, new_end
                finally:
                    self._refill = None
                    ev.set()
            else:
                await self._refill.wait()
        pid = self._next
        self._next += 1
        return pid
