"""``LogManager``: the broker's log directories and every partition log in them (Kafka's
LogManager).  The ``ReplicaManager`` asks it for logs and wraps them in ``Partition`` objects;
nothing else opens, deletes or checkpoints a log.

Start-up (``startup``; the blocking part is ``load_logs``, run in a worker thread), per log dir:
1. read ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
   ``replication-offset-checkpoint`` (high watermarks) and the clean-shutdown marker;
2. remove partition directories left over from deleted topics (``*-delete``, or a topic /
   partition the metadata image no longer has) — Kafka renames them to ``-delete`` and removes
   them asynchronously, so do we;
3. open every partition of every topic in the metadata image (storage's LogLoader recovers
   segments past the recovery point unless the shutdown was clean); without a metadata image
   (tools, tests) every partition directory found is opened;
4. delete the clean-shutdown marker (a crash from now on must trigger recovery);
5. start the background tasks in the given nursery: checkpoints (recovery points every
   ``log.flush.offset.checkpoint.interval.ms``, high watermarks every
   ``replica.high.watermark.checkpoint.interval.ms``, log start offsets every
   ``log.flush.start.offset.checkpoint.interval.ms``), the time-based flusher (topic ``flush.ms``
   checked every ``log.flush.scheduler.interval.ms``, Kafka's semantics: with the default
   scheduler interval it never runs), idle producer-id expiry, retention
   (``storage/retention.py``) and the log cleaner (``storage/cleaner.py``).

Shut-down (``shutdown``): close every log (flush, producer-state snapshot, indexes, epoch
cache), write the checkpoints, then the clean-shutdown marker.  The logs' files are written
without per-file fsyncs and made durable by one ``syncfs`` per log dir before the temp files of
the snapshots and epoch checkpoints are renamed into place and a second one after (where the
file system seam supports it; otherwise each log fsyncs as it closes), so 10,000 partitions
close in seconds instead of minutes with the same crash guarantee.

New logs go to the log dir holding the fewest partitions (Kafka's default placement).

Log dir failure (Kafka's LogDirFailureChannel): an I/O error in a log (append, read, flush,
timestamp lookup, checkpoint write, or opening it at start-up) takes that whole log dir offline:
the listeners (the ReplicaManager) are told which partitions it held, its checkpoints and its
clean-shutdown marker are no longer written, and new logs go to the other dirs.  A restart
brings the dir back (after recovery).  When every log dir is offline, or the first one (Kafka's
default metadata.log.dir, and where the topic metadata lives) fails, the broker halts like Kafka
(critical log line, exit status 1, no clean shutdown); a restart recovers the logs.

Every storage file operation goes through ``self.fs`` (the fault-injecting file system of the
durability tests, or the real one), except the scan of the log dirs at start-up: it must still
see the partitions of a failing dir so that they stay offline there instead of being created
afresh in another dir.  All disk work that can take more than a moment (loading, fsync,
deleting directories, checkpoint writes) runs through ``trio.to_thread``; the dicts below are
only mutated on the trio thread (or by ``load_logs`` before any task runs).
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import trio

from .checkpoints import (
    CleanShutdownFile, OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
)
from ..config import BROKER_CONFIGS
from .errors import KafkaStorageError
from .fs import FileSystem, REAL_FS
from .log import Log, parse_partition_dir, partition_dir_name, wall_ms
from .log_config import LogConfig
from .log_loader import load_log

if TYPE_CHECKING:   # both import this module's neighbours; LogManager.start imports them
    from .cleaner import LogCleanerTask
    from .retention import RetentionTask

__all__ = ["LogManager"]

log = logging.getLogger("pykbroker.log_manager")

TopicPartition = tuple  # (topic, partition)

_FOREVER = 2 ** 62  # Kafka uses Long.MAX_VALUE for "never"; trio sleeps forever above this
_CHECKPOINT_FILES = {"rp": RECOVERY_POINT_CHECKPOINT, "ls": LOG_START_OFFSET_CHECKPOINT,
                     "hw": REPLICATION_OFFSET_CHECKPOINT}


class LogManager:
    """``metadata``: ``.topics`` (name -> TopicInfo) and ``.effective_config(name)``; ``config``:
    the broker config (``config[name]``); ``default_config``: the LogConfig of every log when
    there is no metadata; ``halt_hook(status, message)`` replaces the process exit (in-process
    tests); ``new_log_epoch``: the leader epoch a log without any records at its end when opened
    (Kafka's makeLeader; done in the loading thread so its fsync stays off the event loop)."""

    def __init__(self, log_dirs: list[str], fs: Optional[FileSystem] = None, *, config: Any = None,
                 metadata: Any = None, default_config: Optional[LogConfig] = None,
                 halt_hook: Optional[Callable[[int, str], None]] = None,
                 new_log_epoch: Optional[int] = None, clock: Any = None) -> None:
        self.log_dirs = list(log_dirs)
        # the broker's clock (pykbroker/clock.py): wall time of retention, segment.ms, the
        # cleaner's horizons and producer-id expiry
        self.clock = clock
        self.now_ms = clock.time_ms if clock is not None else wall_ms
        self.fs = fs or REAL_FS
        self.config = config
        self.metadata = metadata
        self.default_config = default_config or LogConfig()
        self.halt_hook = halt_hook
        self.new_log_epoch = new_log_epoch
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._topic_configs: dict[str, dict] = {}      # topic -> effective Kafka config
        self.offline_dirs: set[str] = set()
        self.clean_dirs: dict[str, bool] = {}           # log dir -> previous shutdown was clean
        self._dir_failure_listeners: list[Callable[[str, list], None]] = []
        self._checkpoint_now = trio.Event()
        self._loaded = False
        self.retention: Optional[RetentionTask] = None     # set by start
        self.cleaner: Optional[LogCleanerTask] = None      # set by start
        # Moves between log dirs (AlterReplicaLogDirs): the future log being filled in its
        # destination dir, the dir a partition not hosted yet should be created in, and who
        # learns that a partition's log was replaced (the ReplicaManager).
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self._preferred_dir: dict[TopicPartition, str] = {}
        self._log_replaced_listeners: list[Callable[[TopicPartition, Log], None]] = []
        self._nursery: Optional[trio.Nursery] = None        # set by start

    def _conf(self, name: str) -> Any:
        # Every key and its Kafka default is declared in pykbroker/config/broker.py; a LogManager built
        # without a broker config (storage tests) reads those defaults.
        if self.config is None:
            return BROKER_CONFIGS[name].default
        return self.config[name]

    # ------------------------------------------------------------------ queries
    @property
    def had_clean_shutdown(self) -> bool:
        return bool(self.clean_dirs) and all(self.clean_dirs.values())

    def get_log(self, topic: str, partition: int) -> Optional[Log]:
        return self.logs.get((topic, partition))

    def dir_of(self, tp: TopicPartition) -> Optional[str]:
        return self._dir_of.get(tp)

    def is_online(self, tp: TopicPartition) -> bool:
        return tp in self.logs and self._dir_of.get(tp) not in self.offline_dirs

    def is_live(self, tp: TopicPartition, lg: Log) -> bool:
        """``lg`` is still ``tp``'s log (not deleted) and its dir is online."""
        return self.logs.get(tp) is lg and self._dir_of.get(tp) not in self.offline_dirs

    def topic_config(self, topic: str) -> dict:
        return self._topic_configs.get(topic, {})

    def online_logs(self) -> list:
        """[(tp, log, topic config)] of every log whose dir is online."""
        off = self.offline_dirs
        return [(tp, lg, self._topic_configs.get(tp[0], {})) for tp, lg in list(self.logs.items())
                if self._dir_of.get(tp) not in off]

    def _log_config(self, topic: str) -> LogConfig:
        cfg = self._topic_configs.get(topic)
        return self.default_config if cfg is None else LogConfig.from_properties(cfg)

    # ------------------------------------------------------------------ start-up
    def load_logs(self, expected: Optional[dict] = None) -> None:
        """Blocking: read the root files of every log dir, remove leftovers of deleted topics
        and open the logs.  ``expected``: {(topic, partition): topic config} to host (the
        others found are stale), or None to open every partition directory found."""
        found: dict[TopicPartition, str] = {}
        stale: list[str] = []
        ckpt: dict[str, dict] = {"rp": {}, "ls": {}, "hw": {}}
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self.clean_dirs[d] = CleanShutdownFile(d, self.fs).exists()
            for k in ckpt:
                ckpt[k].update(OffsetCheckpointFile(os.path.join(d, _CHECKPOINT_FILES[k]), self.fs).read())
            for name in os.listdir(d):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith("-delete") or name.endswith("-future"):
                    # a move between log dirs interrupted by the restart is abandoned
                    stale.append(path)
                    continue
                tp = parse_partition_dir(name)
                if tp is None:
                    continue
                if expected is not None and tp not in expected:
                    stale.append(path)
                    continue
                if tp in found:
                    # a crash between the two renames of a finished move: both copies hold the
                    # same records (no append runs between the renames); keep the first
                    log.warning("partition %s-%d found in %s and %s: keeping the first", tp[0], tp[1],
                                found[tp], d)
                    stale.append(path)
                    continue
                found[tp] = d
        for path in stale:
            log.info("removing partition directory %s of a deleted topic", path)
        self._remove_dirs(stale)

        if expected is None:
            expected = {tp: None for tp in sorted(found)}
        to_open = []
        for tp, cfg in expected.items():
            if cfg is not None:
                self._topic_configs[tp[0]] = cfg
            d = found.get(tp) or self._choose_dir()
            self._dir_of[tp] = d
            to_open.append((tp, d))
        opened = 0
        for tp, d in to_open:
            if d in self.offline_dirs:
                continue
            try:
                lg = self._open(tp, d, recovery_point=ckpt["rp"].get(tp, 0), clean=self.clean_dirs[d],
                                log_start=ckpt["ls"].get(tp))
            except (OSError, KafkaStorageError) as e:
                self.mark_dir_offline(d, e)
                continue
            hw = ckpt["hw"].get(tp)
            if hw is not None:
                lg.high_watermark = max(lg.log_start_offset, min(hw, lg.log_end_offset))
            self.logs[tp] = lg
            opened += 1
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue   # never mark a failed dir clean or touch it again
            try:
                CleanShutdownFile(d, self.fs).delete()
            except OSError as e:
                self.mark_dir_offline(d, e)
        log.info("opened %d partition log(s) in %s", opened, ", ".join(self.log_dirs))
        self._loaded = True

    async def startup(self, nursery: trio.Nursery) -> None:
        """Open the logs of every partition in the metadata image (in a worker thread: nothing
        else runs yet), then start the background tasks in ``nursery``."""
        from .cleaner import LogCleanerTask
        from .retention import RetentionTask

        expected = None
        if self.metadata is not None:
            expected = {}
            md = self.metadata
            node = getattr(md, "node_id", None)
            for info in list(md.topics.values()):
                cfg = md.effective_config(info.name)
                for p in info.partition_ids():
                    # only the replicas this node hosts (a cluster assigns partitions to brokers)
                    st = md.partition_state(info.name, p) if node is not None else None
                    if st is not None and node not in st.replicas:
                        continue
                    expected[(info.name, p)] = cfg
        await trio.to_thread.run_sync(self.load_logs, expected)
        self._nursery = nursery
        conf = self._conf
        self.retention = RetentionTask(self, nursery.start_soon,
                                       interval_ms=conf("log.retention.check.interval.ms"))
        self.cleaner = LogCleanerTask(self, nursery.start_soon, enabled=conf("log.cleaner.enable"),
                                      backoff_ms=conf("log.cleaner.backoff.ms"),
                                      dedupe_buffer_size=conf("log.cleaner.dedupe.buffer.size"),
                                      io_buffer_load_factor=conf("log.cleaner.io.buffer.load.factor"))
        nursery.start_soon(self._checkpoint_loop)
        nursery.start_soon(self._flush_loop)
        nursery.start_soon(self._producer_expiry_loop)
        nursery.start_soon(self.retention.run)
        nursery.start_soon(self.cleaner.run)

    def _remove_dirs(self, paths: Iterable[str]) -> None:
        """Blocking: rename each directory to ``*-delete`` (unless it is one) and remove it."""
        for path in paths:
            target = path
            if not path.endswith("-delete"):
                target = "%s.%s-delete" % (path.rstrip("/"), uuid.uuid4().hex)
                try:
                    self.fs.rename(path, target)
                except OSError as e:
                    log.warning("cannot rename %s for deletion: %s", path, e)
                    target = path
            try:
                self.fs.rmtree(target)
            except OSError as e:
                log.warning("deleting %s: %s", target, e)

    def _choose_dir(self) -> str:
        online = [d for d in self.log_dirs if d not in self.offline_dirs] or self.log_dirs
        if len(online) == 1:
            return online[0]
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        return min(online, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def _open(self, tp: TopicPartition, d: str, recovery_point: int = 0, clean: bool = False,
              log_start: Optional[int] = None, staged: Optional[list] = None) -> Log:
        """Blocking: open (or create) ``tp``'s log in ``d``.  ``staged`` (a list, for a new
        log only): its leader-epoch checkpoint is left as an unsynced temp file, listed there,
        and ``d`` is not fsynced: the caller makes them durable (:meth:`create_logs`)."""
        path = os.path.join(d, partition_dir_name(tp[0], tp[1]))
        created = not self.fs.isdir(path)
        lg = load_log(path, self._log_config(tp[0]), recovery_point=recovery_point,
                      clean_shutdown=clean, log_start_offset=log_start, fs=self.fs, now_ms=self.now_ms,
                      staged=staged)
        if self.new_log_epoch is not None and lg.epoch_cache.latest_epoch is None:
            # A new leader records where its epoch starts (Kafka's makeLeader), so
            # OffsetForLeaderEpoch answers (0, LEO) before the first append.  This writes
            # (and fsyncs) leader-epoch-checkpoint: done here, off the event loop.
            if staged is None:
                lg.epoch_cache.assign(self.new_log_epoch, lg.log_end_offset)
            else:
                lg.epoch_cache.assign(self.new_log_epoch, lg.log_end_offset, flush=False)
                lg.epoch_cache.flush(staged=staged)
        if created and staged is None:
            # the new directory's own entry must survive a power cut too
            self.fs.fsync_dir(d)
        return lg

    def _open_new_batch(self, items: list[tuple[TopicPartition, str]]
                        ) -> tuple[list[tuple[TopicPartition, str, Log]], dict[str, BaseException]]:
        """Blocking: open the logs of ``items`` (partition, dir) in order; the ones whose
        directory does not exist yet are made durable together at the end.  Kafka fsyncs each
        new log's leader-epoch checkpoint and its parent directory: five fsyncs a partition
        here, and a 2,000-partition topic took 13 s on a 2-core machine, the dir fsyncs
        slowing as the directory grows.  The same files are written unsynced instead, then one
        syncfs per log dir makes them durable, the checkpoint temp files are renamed into place
        and a second syncfs makes the names durable (as a clean shutdown does).  The answer
        waits for both: a crash before leaves at most empty logs with a missing or torn
        checkpoint, which the loader rebuilds (there is nothing in them to lose).

        Stops at the first failing dir; returns the logs opened (the failed dirs' dropped) and
        the error of each failed dir."""
        batch = self.fs.supports_sync_filesystem
        opened: list[tuple[TopicPartition, str, Log]] = []
        failed: dict[str, BaseException] = {}
        staged: dict[str, list] = {}
        for tp, d in items:
            try:
                if batch and not self.fs.isdir(os.path.join(d, partition_dir_name(tp[0], tp[1]))):
                    lg = self._open(tp, d, staged=staged.setdefault(d, []))
                else:
                    lg = self._open(tp, d)
            except (OSError, KafkaStorageError) as e:
                failed[d] = e
                break
            opened.append((tp, d, lg))
        for d, files in staged.items():
            if d in failed:
                continue
            try:
                self.fs.sync_filesystem(d)
                for tmp, path in dict.fromkeys(files):   # a checkpoint staged twice: one rename
                    self.fs.rename(tmp, path)
                self.fs.sync_filesystem(d)
            except OSError as e:
                failed[d] = e
        kept = []
        for tp, d, lg in opened:
            if d in failed:
                lg.abandon()   # not durable: nothing more is written into it
            else:
                kept.append((tp, d, lg))
        return kept, failed

    # ------------------------------------------------------------------ create / delete
    def get_or_create_log(self, topic: str, partition: int) -> Log:
        """Blocking: a partition's log, made if missing (tools and tests outside trio)."""
        tp = (topic, partition)
        lg = self.logs.get(tp)
        if lg is None:
            d = self._dir_of.setdefault(tp, self._choose_dir())
            lg = self.logs[tp] = self._open(tp, d)
        return lg

    async def create_logs(self, topic: str, partitions: Iterable[int], config: dict
                          ) -> tuple[list[tuple[int, Log]], Optional[BaseException]]:
        """The logs of new partitions of one topic, each in the dir holding the fewest (a
        preferred dir first), opened in one worker-thread job whose new logs are synced together
        (:meth:`_open_new_batch`).  Returns the logs made, in partition order, and the first I/O
        error if a dir failed: that dir is taken offline and its logs are not made (the others
        are)."""
        self._topic_configs[topic] = config
        made: list[tuple[int, Log]] = []
        items: list[tuple[TopicPartition, str]] = []
        for p in partitions:
            tp = (topic, p)
            lg = self.logs.get(tp)
            if lg is not None:
                made.append((p, lg))
                continue
            d = self._preferred_dir.pop(tp, None)
            if d is None or d in self.offline_dirs:
                d = self._choose_dir()
            self._dir_of[tp] = d   # before the next choice: the dirs fill evenly
            items.append((tp, d))
        if not items:
            return made, None
        try:
            kept, failed = await trio.to_thread.run_sync(self._open_new_batch, items)
        except BaseException:
            for tp, _ in items:
                self._dir_of.pop(tp, None)
            raise
        opened = set()
        for tp, _, lg in kept:
            if tp in self.logs:   # made meanwhile (another creation): keep that one
                lg.abandon()
            else:
                self.logs[tp] = lg
            made.append((tp[1], self.logs[tp]))
            opened.add(tp)
        for tp, _ in items:
            if tp not in opened:
                self._dir_of.pop(tp, None)
        for d, e in failed.items():
            self.mark_dir_offline(d, e)
        made.sort(key=lambda pl: pl[0])
        return made, next(iter(failed.values()), None)

    async def delete_logs(self, tps: Iterable[TopicPartition]) -> None:
        """Forget ``tps`` at once; rename each directory to ``*-delete`` and remove it in a
        worker thread (segments still being sent keep their open fds)."""
        logs = []
        for tp in tps:
            self._dir_of.pop(tp, None)
            self._preferred_dir.pop(tp, None)
            for lg in (self.logs.pop(tp, None), self._drop_future(tp)):
                if lg is not None:
                    logs.append(lg)
        if tps:
            topics = {tp[0] for tp in tps}
            for t in topics:
                if not any(tp[0] == t for tp in self._dir_of):
                    self._topic_configs.pop(t, None)
        if logs:
            await trio.to_thread.run_sync(self._delete_logs, logs)

    def _delete_logs(self, logs: Iterable[Log]) -> None:
        for lg in logs:
            renamed = "%s.%s-delete" % (lg.dir.rstrip("/"), uuid.uuid4().hex)
            target: Optional[str] = renamed
            try:
                self.fs.rename(lg.dir, renamed)
            except OSError as e:
                log.warning("cannot rename %s for deletion: %s", lg.dir, e)
                target = None
            try:
                lg.delete()  # closes segments (fds live on while a sendfile still uses them)
            except OSError as e:
                log.warning("deleting %s: %s", lg.dir, e)
            if target:
                try:
                    self.fs.rmtree(target)
                except OSError as e:
                    log.warning("deleting %s: %s", target, e)

    # ------------------------------------------------------------------ moves between log dirs
    def add_log_replaced_listener(self, listener: Callable[[TopicPartition, Log], None]) -> None:
        """``listener(tp, new_log)`` when a move between log dirs swapped ``tp``'s log."""
        self._log_replaced_listeners.append(listener)

    def logs_in_dir(self, d: str) -> list:
        """[(tp, log, is_future)] of the current and future logs in log dir ``d``."""
        out = [(tp, lg, False) for tp, lg in list(self.logs.items()) if self._dir_of.get(tp) == d]
        out += [(tp, lg, True) for tp, lg in list(self.future_logs.items()) if self._future_dir_of.get(tp) == d]
        return out

    def _drop_future(self, tp: TopicPartition) -> Optional[Log]:
        self._future_dir_of.pop(tp, None)
        return self.future_logs.pop(tp, None)

    async def alter_log_dir(self, tp: TopicPartition, path: str) -> None:
        """Kafka's ReplicaManager.alterReplicaLogDirs for one partition: move ``tp``'s log to
        log dir ``path`` online.  A future log is created in the destination and filled from
        the current one by a background task, which swaps them once it has caught up (no await
        between its last copy and the swap, so no append is lost).  Raises KafkaError with
        Kafka's codes: LOG_DIR_NOT_FOUND (not a configured log dir), KAFKA_STORAGE_ERROR
        (destination or partition offline, or any log dir offline), REPLICA_NOT_AVAILABLE (not
        hosted here yet: remembered, the log is created there when it comes)."""
        from ..protocol.errors import ErrorCode, KafkaError
        dest = os.path.abspath(path)
        if dest not in self.log_dirs:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, "Log dir %s is not found in the config." % dest)
        if dest in self.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "Log directory %s is offline" % dest)
        if self._future_dir_of.get(tp) not in (None, dest):
            # a move elsewhere is under way: stop it (Kafka's futureReplicaDirChanged)
            old = self._drop_future(tp)
            assert old is not None      # future_logs and _future_dir_of are set and dropped together
            await trio.to_thread.run_sync(self._delete_logs, [old])
        if tp not in self.logs:
            self._preferred_dir[tp] = dest
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE)
        current = self._dir_of.get(tp)
        if current in self.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "Partition %s-%d is offline" % tp)
        if current == dest or tp in self.future_logs:
            return
        if self.offline_dirs:
            # Kafka creates no future log while a log dir is offline (it could not know
            # whether the partition already has one there)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "Can not create log for %s-%d because log directories "
                             "%s are offline" % (tp[0], tp[1], ",".join(sorted(self.offline_dirs))))
        src = self.logs[tp]
        # Kafka's future log directory name: <topic>-<partition>.<uuid without dashes>-future
        fpath = os.path.join(dest, "%s.%s-future" % (partition_dir_name(tp[0], tp[1]), uuid.uuid4().hex))
        try:
            fut = await trio.to_thread.run_sync(
                lambda: load_log(fpath, self._log_config(tp[0]), log_start_offset=src.log_start_offset,
                                 fs=self.fs, now_ms=self.now_ms))
        except (OSError, KafkaStorageError) as e:
            self.mark_dir_offline(dest, e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        if self.logs.get(tp) is not src or tp in self.future_logs:   # changed while creating
            await trio.to_thread.run_sync(self._delete_logs, [fut])
            return
        if fut.log_end_offset != src.log_start_offset:
            fut.truncate_fully_and_start_at(src.log_start_offset)
        self.future_logs[tp] = fut
        self._future_dir_of[tp] = dest
        log.info("moving %s-%d from %s to %s", tp[0], tp[1], current, dest)
        assert self._nursery is not None    # moves start once the manager runs
        self._nursery.start_soon(self._move, tp, fut)

    _MOVE_CHUNK = 1 << 20   # bytes read per copy step (Kafka's replica.fetch.max.bytes default)

    def _read_chunk(self, src: Log, offset: int) -> bytes:
        """Blocking: whole batches of ``src`` from ``offset`` (at most about one chunk)."""
        out = bytearray()
        for region in src.read(offset, self._MOVE_CHUNK, whole_batches=True):
            out += region.read()
        return bytes(out)

    async def _move(self, tp: TopicPartition, fut: Log) -> None:
        """Kafka's ReplicaAlterLogDirsThread for one partition: copy batches (offsets, epochs and
        producer state kept) until the future log reaches the current log's end, then swap."""
        try:
            while True:
                src = self.logs.get(tp)
                if src is None or self.future_logs.get(tp) is not fut:
                    return   # deleted or cancelled: whoever did it removes the future log
                if fut.log_end_offset > src.log_end_offset:
                    fut.truncate_to(src.log_end_offset)   # the follower's log was truncated
                if fut.log_end_offset < src.log_start_offset:
                    fut.truncate_fully_and_start_at(src.log_start_offset)
                if fut.log_end_offset == src.log_end_offset:
                    self._swap(tp, src, fut)
                    return
                offset = fut.log_end_offset
                data = await trio.to_thread.run_sync(self._read_chunk, src, offset)
                if self.logs.get(tp) is not src or self.future_logs.get(tp) is not fut:
                    continue
                if data and offset == fut.log_end_offset and offset <= src.log_end_offset:
                    fut.append_as_follower(bytearray(data))
                else:
                    await trio.sleep(0.01)
        except Exception as e:
            log.warning("move of %s-%d between log dirs failed: %s", tp[0], tp[1], e)
            if self.future_logs.get(tp) is fut:
                d = self._future_dir_of.get(tp)
                self._drop_future(tp)
                if isinstance(e, (OSError, KafkaStorageError)) and d is not None:
                    self.mark_dir_offline(d, e)
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self._delete_logs, [fut])

    def _swap(self, tp: TopicPartition, src: Log, fut: Log) -> None:
        """Kafka's replaceCurrentWithFutureLog, on the event loop with no await (appends wait):
        the future log takes the partition's name in its dir, then the old one is renamed for
        deletion and removed in a worker thread."""
        dest = self._future_dir_of[tp]
        for epoch, start in src.epoch_cache.entries:   # epochs that started with no batch yet
            latest = fut.epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                fut.epoch_cache.assign(epoch, start)
        if fut.log_start_offset < src.log_start_offset:
            fut.delete_records_before(src.log_start_offset)
        fut.high_watermark = src.high_watermark
        fut.rename_dir(os.path.join(dest, partition_dir_name(tp[0], tp[1])))
        src.rename_dir("%s.%s-delete" % (src.dir.rstrip("/"), uuid.uuid4().hex))
        self._drop_future(tp)
        self.logs[tp] = fut
        self._dir_of[tp] = dest
        for listener in self._log_replaced_listeners:
            listener(tp, fut)
        self.request_checkpoint()
        log.info("moved %s-%d to %s", tp[0], tp[1], dest)
        assert self._nursery is not None    # a move runs in the manager's nursery
        self._nursery.start_soon(trio.to_thread.run_sync, self._delete_logs, [src])

    def reconfigure(self, config: Any) -> None:
        """Dynamic broker configs changed: the cleaner's settings follow (retention and the
        flusher read theirs at each pass; topic configs come through ``update_config``)."""
        cleaner = getattr(self, "cleaner", None)
        if cleaner is not None:
            conf = self._conf
            cleaner.reconfigure(conf("log.cleaner.backoff.ms"), conf("log.cleaner.dedupe.buffer.size"),
                                     conf("log.cleaner.io.buffer.load.factor"))

    def update_config(self, topic: str, config: dict) -> None:
        """A topic's config changed: its logs use the new one from now on."""
        self._topic_configs[topic] = config
        lc = LogConfig.from_properties(config)
        for tp, lg in self.logs.items():
            if tp[0] == topic:
                lg.config = lc

    async def delete_below_log_start(self, tp: TopicPartition, lg: Log) -> int:
        """DeleteRecords moved ``lg``'s start: its segments wholly below go (retention's path)."""
        assert self.retention is not None   # DeleteRecords is served once the manager runs
        return await self.retention.delete_below_log_start(tp, lg)

    # ------------------------------------------------------------------ log dir failure
    def add_dir_failure_listener(self, listener: Callable[[str, list], None]) -> None:
        """``listener(dir, [tp, ...])`` is called when ``dir`` goes offline."""
        self._dir_failure_listeners.append(listener)

    def on_storage_error(self, tp: TopicPartition, exc: BaseException) -> None:
        """An I/O error in ``tp``'s log: its whole log dir goes offline (Kafka's rule)."""
        d = self._dir_of.get(tp)
        if d is not None:
            self.mark_dir_offline(d, exc)

    def mark_dir_offline(self, d: str, reason: object) -> None:
        if d in self.offline_dirs:
            return
        self.offline_dirs.add(d)
        tps = [tp for tp, x in self._dir_of.items() if x == d]
        log.error("log dir %s is offline after an I/O error (%s); %d partition(s) in it stop "
                  "serving until a restart", d, reason, len(tps))
        for listener in self._dir_failure_listeners:
            listener(d, tps)
        # Kafka halts (Exit.halt(1): no clean shutdown, so every log is recovered at the next
        # start) when no log dir is left (LogManager.handleLogDirFailure), and then when the
        # metadata log dir failed (ReplicaManager.handleLogDirFailure; metadata.log.dir
        # defaults to the first log dir, which is where our topic metadata lives).
        if len(self.offline_dirs) == len(self.log_dirs):
            self.halt("Shutdown broker because all log dirs in %s have failed" % ", ".join(self.log_dirs))
        elif d == self.log_dirs[0]:
            self.halt("Shutdown broker because the metadata log dir %s has failed" % d)

    def halt(self, message: str, status: int = 1) -> None:
        """Log ``message`` as critical and end the process at once with ``status``, as Kafka's
        Exit.halt: no shutdown, no checkpoints, no clean-shutdown marker.  ``halt_hook``
        (tests running the broker in-process) is called instead when set."""
        log.critical(message)
        if self.halt_hook is not None:
            self.halt_hook(status, message)
            return
        logging.shutdown()          # flush every handler: the line must reach the log
        try:
            import sys
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(status)

    # ------------------------------------------------------------------ checkpoints
    def request_checkpoint(self) -> None:
        self._checkpoint_now.set()

    def _checkpoint_data(self) -> dict[str, dict[str, dict]]:
        per_dir: dict[str, dict[str, dict]] = {d: {"rp": {}, "ls": {}, "hw": {}} for d in self.log_dirs if d not in self.offline_dirs}
        for tp, lg in self.logs.items():
            e = per_dir.get(self._dir_of.get(tp, self.log_dirs[0]))
            if e is None:
                continue
            e["rp"][tp] = lg.recovery_point
            # Kafka lists only the logs whose start is above their first segment's base (the
            # loader falls back to that base for the others)
            if lg.log_start_offset > lg.segments[0].base_offset:
                e["ls"][tp] = lg.log_start_offset
            e["hw"][tp] = lg.high_watermark
        return per_dir

    def write_checkpoints(self, kinds: Iterable[str] = ("rp", "ls", "hw"), per_dir: Optional[dict] = None) -> dict:
        """Blocking: write the checkpoint files of every online dir; {dir: error} of failures."""
        if per_dir is None:
            per_dir = self._checkpoint_data()
        failed = {}
        for d, data in per_dir.items():
            for k in kinds:
                try:
                    OffsetCheckpointFile(os.path.join(d, _CHECKPOINT_FILES[k]), self.fs).write(data[k])
                except OSError as e:
                    log.error("cannot write %s in %s: %s", _CHECKPOINT_FILES[k], d, e)
                    failed[d] = e
                    break
        return failed

    async def checkpoint(self, kinds: Iterable[str] = ("rp", "ls", "hw")) -> None:
        failed = await trio.to_thread.run_sync(self.write_checkpoints, kinds, self._checkpoint_data())
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
            kinds: tuple[str, ...]
            if self._checkpoint_now.is_set():
                self._checkpoint_now = trio.Event()
                kinds = ("rp", "ls", "hw")
            else:
                kinds = tuple(k for k, t in due.items() if t <= now)
            for k in kinds:
                due[k] = now + intervals[k] / 1000.0
            if kinds:
                await self.checkpoint(kinds)

    # ------------------------------------------------------------------ background flush
    async def flush_log(self, tp: TopicPartition, lg: Log) -> None:
        """fsync ``lg`` off the event loop; an I/O error takes its dir offline (and is raised)."""
        try:
            await trio.to_thread.run_sync(lg.flush)
        except KafkaStorageError as e:
            log.error("flush of %s-%d failed: %s", tp[0], tp[1], e)
            self.on_storage_error(tp, e)
            raise

    async def _flush_loop(self) -> None:
        interval = self._conf("log.flush.scheduler.interval.ms")
        if interval is None or interval >= _FOREVER:
            return  # Kafka's default: the time-based flusher never runs
        last: dict[tuple[str, int], float] = {}
        while True:
            await trio.sleep(interval / 1000.0)
            now = time.monotonic()
            for tp, lg, cfg in self.online_logs():
                flush_ms = cfg.get("flush.ms")
                if flush_ms is None or flush_ms >= _FOREVER:
                    continue
                since = last.setdefault(tp, now)
                if (now - since) * 1000 >= flush_ms and lg.unflushed_messages > 0:
                    last[tp] = now
                    try:
                        await self.flush_log(tp, lg)
                    except Exception:
                        log.exception("time-based flush of %s-%d failed", tp[0], tp[1])

    async def _producer_expiry_loop(self) -> None:
        interval = self._conf("producer.id.expiration.check.interval.ms")
        while True:
            await trio.sleep(interval / 1000.0)
            expiration = self._conf("producer.id.expiration.ms")
            now = self.now_ms()
            for _, lg, _ in self.online_logs():
                lg.producer_state.remove_expired(now, expiration)

    # ------------------------------------------------------------------ shutdown
    def abandon(self) -> None:
        """A crash (Broker.crash): close every file descriptor and write nothing (no flush,
        index, snapshot, checkpoint or clean-shutdown marker), as a killed process leaves its
        files; the next start recovers them."""
        for lg in list(self.logs.values()):
            lg.abandon()

    async def shutdown(self) -> None:
        # a failed dir is left alone: no flush, no checkpoint, no clean-shutdown marker, so its
        # logs are recovered at the next start
        entries = [(tp, lg) for tp, lg, _ in self.online_logs()]
        logs = [lg for _, lg in entries]
        unsynced: set = set()   # dirs whose deferred sync failed: no marker (recovered at start)

        def close_all() -> None:
            for lg in logs:
                try:
                    lg.close()
                except Exception:
                    log.exception("closing %s failed", lg.dir)

        def close_all_deferred() -> None:
            # Kafka fsyncs each log as it closes it (segments, indexes, producer snapshot, epoch
            # checkpoint): some 5 fsyncs a partition, over a minute for 10,000 partitions.  The
            # same files are written here without them, the snapshot and epoch checkpoint as temp
            # files; then one syncfs per log dir makes all of it durable, the temp files are
            # renamed into place, and a second syncfs makes the names durable: a crash at any
            # point leaves each file old or new, as the per-file fsyncs did, and the recovery
            # points (and the clean-shutdown marker) are written only after both syncs.
            staged: dict = {}
            for tp, lg in entries:
                d = self._dir_of.get(tp, self.log_dirs[0])
                try:
                    lg.close(staged=staged.setdefault(d, []))
                except Exception:
                    log.exception("closing %s failed", lg.dir)
            for d, files in staged.items():
                try:
                    self.fs.sync_filesystem(d)
                    for tmp, path in files:
                        self.fs.rename(tmp, path)
                    self.fs.sync_filesystem(d)
                except OSError as e:
                    log.error("cannot sync the logs of %s at shutdown: %s; they are recovered at the next "
                              "start", d, e)
                    unsynced.add(d)
            for tp, lg in entries:
                if self._dir_of.get(tp, self.log_dirs[0]) not in unsynced:
                    lg.complete_deferred_close()

        deferred = self._loaded and self.fs.supports_sync_filesystem
        await trio.to_thread.run_sync(close_all_deferred if deferred else close_all)
        if not self._loaded:
            return
        await self.checkpoint()

        def mark_clean() -> None:
            for d in self.log_dirs:
                if d not in self.offline_dirs and d not in unsynced:
                    try:
                        CleanShutdownFile(d, self.fs).write()
                    except OSError as e:
                        log.error("cannot write the clean-shutdown marker in %s: %s", d, e)

        await trio.to_thread.run_sync(mark_clean)
        log.info("closed %d partition log(s); clean shutdown recorded", len(logs))
