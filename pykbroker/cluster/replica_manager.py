"""``ReplicaManager``: the partitions hosted by this broker and their logs' life cycle.

Start-up (``startup``), per log dir, as Kafka's LogManager:
1. read ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
   ``replication-offset-checkpoint`` (high watermarks) and the clean-shutdown marker;
2. remove partition directories left over from deleted topics (``*-delete``, or a topic /
   partition the metadata image no longer has) in a worker thread — Kafka renames them to
   ``-delete`` and removes them asynchronously, so do we;
3. open every partition of every topic in the metadata image (storage's LogLoader recovers
   segments past the recovery point unless the shutdown was clean), in a worker thread;
4. delete the clean-shutdown marker (a crash from now on must trigger recovery);
5. start the background tasks: checkpoints (recovery points every
   ``log.flush.offset.checkpoint.interval.ms``, high watermarks every
   ``replica.high.watermark.checkpoint.interval.ms``, log start offsets every
   ``log.flush.start.offset.checkpoint.interval.ms``), the time-based flusher (topic ``flush.ms``
   checked every ``log.flush.scheduler.interval.ms``, Kafka's semantics: with the default
   scheduler interval it never runs) and idle producer-id expiry.

Shut-down (``shutdown``): close every log (flush, producer-state snapshot, indexes, epoch
cache), write the checkpoints, then the clean-shutdown marker.

New partitions go to the log dir holding the fewest partitions (Kafka's default placement).

Log dir failure (Kafka's LogDirFailureChannel): an I/O error in a partition's log (append,
read, flush, timestamp lookup, checkpoint write, or opening it at start-up) takes that whole log
dir offline: every partition in it becomes offline (KAFKA_STORAGE_ERROR to Produce, Fetch,
ListOffsets; Metadata shows no leader and this node as offline replica), its checkpoints and its
clean-shutdown marker are no longer written, and new partitions go to the other dirs.  The
partitions of the other dirs keep serving.  A restart brings the dir back (after recovery).
When every log dir is offline, or the first one (Kafka's default metadata.log.dir, and where
the topic metadata lives) fails, the broker halts like Kafka (critical log line, exit status 1,
no clean shutdown); a restart recovers the logs.
Every storage file operation goes through ``self.fs`` (``broker.storage_fs`` when set, e.g. the
fault-injecting file system of the durability tests; the real one otherwise).
All disk work that can take more than a moment (loading, fsync, deleting directories,
checkpoint writes) runs through ``trio.to_thread``; the partition dicts are only mutated on
the trio thread.
"""
from __future__ import annotations

import logging
import os
import time
import uuid

import trio

from ..storage.checkpoints import (LOG_START_OFFSET_CHECKPOINT,
                                   RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                   CleanShutdownFile, OffsetCheckpointFile)
from ..storage.fs import REAL_FS
from ..storage.log import KafkaStorageError, load_log, parse_partition_dir, partition_dir_name
from .partition import OfflinePartition, Partition, log_config_of
from .producer_ids import ProducerIdManager

log = logging.getLogger("pykbroker.replica_manager")

_FOREVER = 2 ** 62  # Kafka uses Long.MAX_VALUE for "never"; trio sleeps forever above this
# Kafka's defaults for the checkpoint intervals (not all of them are in config.py's table).
_DEFAULTS = {
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "log.flush.start.offset.checkpoint.interval.ms": 60000,
    "producer.id.expiration.check.interval.ms": 600000,
}


class ReplicaManager:
    def __init__(self, broker):
        self.broker = broker
        self.log_dirs = list(broker.log_dirs)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self.producer_ids = ProducerIdManager(self.log_dirs[0])
        self.fs = getattr(broker, "storage_fs", None) or REAL_FS
        self.offline_dirs: set[str] = set()
        # set by the broker: tells the controller which replicas went offline (a failed dir)
        self.on_replicas_offline = None
        self._checkpoint_now = trio.Event()
        self._started = False
        # retention (log.retention.check.interval.ms) — see storage/retention.py
        from ..storage.retention import RetentionTask
        self.retention = RetentionTask(self)
        # log compaction (cleanup.policy=compact) — see storage/cleaner.py
        from ..storage.cleaner import LogCleanerTask
        self.cleaner = LogCleanerTask(self)

    def _conf(self, name: str):
        try:
            v = self.broker.config[name]
        except KeyError:
            v = None
        return _DEFAULTS.get(name) if v is None else v

    # ------------------------------------------------------------------ queries
    def get_partition(self, topic: str, partition: int):
        return self.partitions.get((topic, partition))

    def partitions_of(self, topic: str) -> list[Partition]:
        return [p for (t, _), p in self.partitions.items() if t == topic]

    # ------------------------------------------------------------------ start-up
    async def startup(self, nursery) -> None:
        meta = self.broker.metadata
        found: dict[tuple[str, int], str] = {}
        stale: list[str] = []
        ckpt = {"rp": {}, "ls": {}, "hw": {}}
        clean: dict[str, bool] = {}
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            clean[d] = CleanShutdownFile(d, self.fs).exists()
            ckpt["rp"].update(OffsetCheckpointFile(os.path.join(d, RECOVERY_POINT_CHECKPOINT), self.fs).read())
            ckpt["ls"].update(OffsetCheckpointFile(os.path.join(d, LOG_START_OFFSET_CHECKPOINT), self.fs).read())
            ckpt["hw"].update(OffsetCheckpointFile(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT), self.fs).read())
            for name in os.listdir(d):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith("-delete"):
                    stale.append(path)
                    continue
                tp = parse_partition_dir(name)
                if tp is None:
                    continue
                info = meta.topics.get(tp[0])
                if info is None or tp[1] >= info.num_partitions:
                    stale.append(path)
                    continue
                found[tp] = d
        for path in stale:
            log.info("removing partition directory %s of a deleted topic", path)
        if stale:
            await trio.to_thread.run_sync(self._remove_dirs, stale)

        to_open = []
        for info in list(meta.topics.values()):
            for p in info.partition_ids():
                d = found.get((info.name, p)) or self._choose_dir()
                self._dir_of[(info.name, p)] = d
                to_open.append((info, p, d))
        opened = 0
        for info, p, d in to_open:
            tp = (info.name, p)
            cfg = meta.effective_config(info.name)
            if d in self.offline_dirs:
                self.partitions[tp] = OfflinePartition(self, info.name, info.topic_id, p, cfg,
                                                       state=meta.partition_state(info.name, p))
                continue
            try:
                part = await self._open(info, p, d, cfg, recovery_point=ckpt["rp"].get(tp, 0),
                                        clean=clean[d], log_start=ckpt["ls"].get(tp),
                                        hw=ckpt["hw"].get(tp))
            except (OSError, KafkaStorageError) as e:
                self.mark_dir_offline(d, e)
                part = OfflinePartition(self, info.name, info.topic_id, p, cfg,
                                        state=meta.partition_state(info.name, p))
            self.partitions[tp] = part
            opened += 1
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue   # never mark a failed dir clean or touch it again
            try:
                CleanShutdownFile(d, self.fs).delete()
            except OSError as e:
                self.mark_dir_offline(d, e)
        self._report_offline([tp for tp, p in self.partitions.items() if p.offline])
        log.info("opened %d partition log(s) in %s", opened, ", ".join(self.log_dirs))
        self._started = True
        nursery.start_soon(self._checkpoint_loop)
        nursery.start_soon(self._flush_loop)
        nursery.start_soon(self._producer_expiry_loop)
        nursery.start_soon(self.retention.run)
        nursery.start_soon(self.cleaner.run)

    @staticmethod
    def _remove_dirs(paths) -> None:
        import shutil
        for path in paths:
            target = path
            if not path.endswith("-delete"):
                target = "%s.%s-delete" % (path, uuid.uuid4().hex)
                try:
                    os.rename(path, target)
                except OSError:
                    target = path
            shutil.rmtree(target, ignore_errors=True)

    def _choose_dir(self) -> str:
        online = [d for d in self.log_dirs if d not in self.offline_dirs] or self.log_dirs
        if len(online) == 1:
            return online[0]
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        return min(online, key=lambda d: (counts[d], self.log_dirs.index(d)))

    # ------------------------------------------------------------------ log dir failure
    def on_storage_error(self, part, exc) -> None:
        """An I/O error in ``part``'s log: its whole log dir goes offline (Kafka's rule)."""
        d = self._dir_of.get((part.topic, part.partition_id))
        if d is not None:
            self.mark_dir_offline(d, exc)

    def mark_dir_offline(self, d: str, reason) -> None:
        if d in self.offline_dirs:
            return
        self.offline_dirs.add(d)
        parts = [p for tp, p in self.partitions.items() if self._dir_of.get(tp) == d]
        log.error("log dir %s is offline after an I/O error (%s); %d partition(s) in it stop "
                  "serving until a restart", d, reason, len(parts))
        for p in parts:
            p.mark_offline()
        self._report_offline([(p.topic, p.partition_id) for p in parts])
        # Kafka halts (Exit.halt(1): no clean shutdown, so every log is recovered at the next
        # start) when no log dir is left (LogManager.handleLogDirFailure), and then when the
        # metadata log dir failed (ReplicaManager.handleLogDirFailure; metadata.log.dir
        # defaults to the first log dir, which is where our topic metadata lives).
        if len(self.offline_dirs) == len(self.log_dirs):
            self.halt("Shutdown broker because all log dirs in %s have failed" % ", ".join(self.log_dirs))
        elif d == self.log_dirs[0]:
            self.halt("Shutdown broker because the metadata log dir %s has failed" % d)

    def _report_offline(self, tps) -> None:
        if tps and self.on_replicas_offline is not None:
            self.on_replicas_offline(tps)

    def halt(self, message: str, status: int = 1) -> None:
        """Log ``message`` as critical and end the process at once with ``status``, as Kafka's
        Exit.halt: no shutdown, no checkpoints, no clean-shutdown marker.  ``broker.halt_hook``
        (tests running the broker in-process) is called instead when set."""
        log.critical(message)
        hook = getattr(self.broker, "halt_hook", None)
        if hook is not None:
            hook(status, message)
            return
        logging.shutdown()          # flush every handler: the line must reach the log
        try:
            import sys
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(status)

    async def _open(self, info, p: int, d: str, cfg: dict, recovery_point: int = 0,
                    clean: bool = False, log_start=None, hw=None) -> Partition:
        path = os.path.join(d, partition_dir_name(info.name, p))
        def load():
            created = not self.fs.isdir(path)
            lg = load_log(path, log_config_of(cfg), recovery_point=recovery_point,
                          clean_shutdown=clean, log_start_offset=log_start, fs=self.fs)
            if lg.epoch_cache.latest_epoch is None:
                # A new leader records where its epoch starts (Kafka's makeLeader), so
                # OffsetForLeaderEpoch answers (0, LEO) before the first append.  This writes
                # (and fsyncs) leader-epoch-checkpoint: done here, off the event loop.
                lg.epoch_cache.assign(0, lg.log_end_offset)
            if created:
                # the new directory's own entry must survive a power cut too
                self.fs.fsync_dir(d)
            return lg

        lg = await trio.to_thread.run_sync(load)
        return Partition(self, info.name, info.topic_id, p, lg, cfg, high_watermark=hw,
                         state=self.broker.metadata.partition_state(info.name, p))

    # ------------------------------------------------------------------ topic changes
    async def make_partitions(self, topic_info, partition_ids) -> None:
        cfg = self.broker.metadata.effective_config(topic_info.name)
        for p in partition_ids:
            tp = (topic_info.name, p)
            if tp in self.partitions:
                continue
            d = self._choose_dir()
            self._dir_of[tp] = d
            try:
                part = await self._open(topic_info, p, d, cfg)
            except (OSError, KafkaStorageError) as e:
                self._dir_of.pop(tp, None)
                self.mark_dir_offline(d, e)
                raise
            except BaseException:
                self._dir_of.pop(tp, None)
                raise
            self.partitions[tp] = part

    async def delete_partitions(self, topic_info) -> None:
        doomed = []
        for tp in [tp for tp in self.partitions if tp[0] == topic_info.name]:
            part = self.partitions.pop(tp)
            self._dir_of.pop(tp, None)
            part.mark_deleted()
            doomed.append(part)
        if doomed:
            await trio.to_thread.run_sync(self._delete_logs, [p.log for p in doomed if p.log is not None])

    @staticmethod
    def _delete_logs(logs) -> None:
        import shutil
        for lg in logs:
            target = "%s.%s-delete" % (lg.dir.rstrip("/"), uuid.uuid4().hex)
            try:
                os.rename(lg.dir, target)
            except OSError as e:
                log.warning("cannot rename %s for deletion: %s", lg.dir, e)
                target = None
            try:
                lg.delete()  # closes segments (fds live on while a sendfile still uses them)
            except OSError as e:
                log.warning("deleting %s: %s", lg.dir, e)
            if target:
                shutil.rmtree(target, ignore_errors=True)

    def on_config_change(self, topic_info) -> None:
        cfg = self.broker.metadata.effective_config(topic_info.name)
        for part in self.partitions_of(topic_info.name):
            part.update_config(cfg)

    # ------------------------------------------------------------------ checkpoints
    def request_checkpoint(self) -> None:
        self._checkpoint_now.set()

    def _checkpoint_data(self):
        per_dir = {d: {"rp": {}, "ls": {}, "hw": {}} for d in self.log_dirs if d not in self.offline_dirs}
        for tp, part in self.partitions.items():
            e = per_dir.get(self._dir_of.get(tp, self.log_dirs[0]))
            if e is None or part.offline:
                continue
            e["rp"][tp] = part.log.recovery_point
            e["ls"][tp] = part.log.log_start_offset
            e["hw"][tp] = part.log.high_watermark
        return per_dir

    def _write_checkpoints(self, per_dir, kinds=("rp", "ls", "hw")) -> dict:
        names = {"rp": RECOVERY_POINT_CHECKPOINT, "ls": LOG_START_OFFSET_CHECKPOINT,
                 "hw": REPLICATION_OFFSET_CHECKPOINT}
        failed = {}
        for d, data in per_dir.items():
            for k in kinds:
                try:
                    OffsetCheckpointFile(os.path.join(d, names[k]), self.fs).write(data[k])
                except OSError as e:
                    log.error("cannot write %s in %s: %s", names[k], d, e)
                    failed[d] = e
                    break
        return failed

    async def checkpoint(self, kinds=("rp", "ls", "hw")) -> None:
        failed = await trio.to_thread.run_sync(self._write_checkpoints, self._checkpoint_data(), kinds)
        for d, e in failed.items():
            self.mark_dir_offline(d, e)

    async def _checkpoint_loop(self) -> None:
        intervals = {"rp": self._conf("log.flush.offset.checkpoint.interval.ms"),
                     "hw": self._conf("replica.high.watermark.checkpoint.interval.ms"),
                     "ls": self._conf("log.flush.start.offset.checkpoint.interval.ms")}
        due = {k: trio.current_time() + v / 1000.0 for k, v in intervals.items()}
        while True:
            with trio.move_on_at(min(due.values())):
                await self._checkpoint_now.wait()
            now = trio.current_time()
            if self._checkpoint_now.is_set():
                self._checkpoint_now = trio.Event()
                kinds = ("rp", "ls", "hw")
            else:
                kinds = tuple(k for k, t in due.items() if t <= now)
            for k in kinds:
                due[k] = now + intervals[k] / 1000.0
            if kinds:
                await self.checkpoint(kinds)

    async def _flush_loop(self) -> None:
        interval = self._conf("log.flush.scheduler.interval.ms")
        if interval is None or interval >= _FOREVER:
            return  # Kafka's default: the time-based flusher never runs
        last: dict[tuple[str, int], float] = {}
        while True:
            await trio.sleep(interval / 1000.0)
            now = time.monotonic()
            for tp, part in list(self.partitions.items()):
                if part.offline:
                    continue
                flush_ms = part.config.get("flush.ms")
                if flush_ms is None or flush_ms >= _FOREVER:
                    continue
                since = last.setdefault(tp, now)
                if (now - since) * 1000 >= flush_ms and part.log.unflushed_messages > 0:
                    last[tp] = now
                    try:
                        await part.flush()
                    except Exception:
                        log.exception("time-based flush of %s failed", part)

    async def _producer_expiry_loop(self) -> None:
        interval = self._conf("producer.id.expiration.check.interval.ms")
        while True:
            await trio.sleep(interval / 1000.0)
            expiration = self._conf("producer.id.expiration.ms")
            now = int(time.time() * 1000)
            for part in list(self.partitions.values()):
                if not part.offline:
                    part.log.producer_state.remove_expired(now, expiration)

    # ------------------------------------------------------------------ shutdown
    async def shutdown(self) -> None:
        # a failed dir is left alone: no flush, no checkpoint, no clean-shutdown marker, so its
        # logs are recovered at the next start
        parts = [p for p in self.partitions.values() if not p.offline]
        logs = [p.log for p in parts]

        def close_all():
            for lg in logs:
                try:
                    lg.close()
                except Exception:
                    log.exception("closing %s failed", lg.dir)

        await trio.to_thread.run_sync(close_all)
        if not self._started:
            return
        await self.checkpoint()

        def mark_clean():
            for d in self.log_dirs:
                if d not in self.offline_dirs:
                    try:
                        CleanShutdownFile(d, self.fs).write()
                    except OSError as e:
                        log.error("cannot write the clean-shutdown marker in %s: %s", d, e)

        await trio.to_thread.run_sync(mark_clean)
        log.info("closed %d partition log(s); clean shutdown recorded", len(logs))
