"""``ReplicaManager``: the partitions hosted by this broker (Kafka's ReplicaManager).

It owns the ``Partition`` objects and routes produce/fetch to them (``get_partition``); their
logs belong to the ``LogManager`` (storage/manager.py: log dirs, opening and recovering,
deleting, flushing, checkpoints — high watermarks included —, retention, the cleaner, log dir
failure).  The controller's metadata changes reach it through ``make_partitions``,
``delete_partitions`` and ``on_config_change``.

Start-up (``startup``, after the LogManager's): one ``Partition`` per partition of every topic
in the metadata image, wrapping the log the LogManager opened; a partition whose log dir is
offline (or whose log could not be opened) is an ``OfflinePartition``.

Log dir failure: the LogManager tells it which partitions the failed dir held; each becomes
offline (KAFKA_STORAGE_ERROR to Produce, Fetch, ListOffsets; Metadata shows no leader and this
node as offline replica).  The partitions of the other dirs keep serving.

The partition dict is only mutated on the trio thread.
"""
from __future__ import annotations

import logging

from .partition import OfflinePartition, Partition, PartitionHooks
from .producer_ids import ProducerIdManager

log = logging.getLogger("pykbroker.replica_manager")


class ReplicaManager:
    """``metadata``: ``.topics`` (name -> TopicInfo) and ``.effective_config(name)``."""

    def __init__(self, node_id: int, log_manager, metadata):
        self.node_id = node_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.producer_ids = ProducerIdManager(log_manager.log_dirs[0], log_manager.fs)
        self._hooks = None
        # set by the broker: tells the controller which replicas went offline (a failed dir)
        self.on_replicas_offline = None
        log_manager.add_dir_failure_listener(self._on_dir_offline)

    # ------------------------------------------------------------------ queries
    def get_partition(self, topic: str, partition: int):
        return self.partitions.get((topic, partition))

    def partitions_of(self, topic: str) -> list[Partition]:
        return [p for (t, _), p in self.partitions.items() if t == topic]

    # ------------------------------------------------------------------ start-up
    async def startup(self, nursery) -> None:
        """Wrap the logs the LogManager opened (its ``startup`` ran first)."""
        lm = self.log_manager
        self._hooks = PartitionHooks(lm.on_storage_error, lm.request_checkpoint,
                                     lm.delete_below_log_start, nursery.start_soon)
        meta = self.metadata
        for info in list(meta.topics.values()):
            cfg = meta.effective_config(info.name)
            for p in info.partition_ids():
                tp = (info.name, p)
                if lm.is_online(tp):
                    self.partitions[tp] = self._partition(info, p, lm.get_log(*tp), cfg)
                else:
                    self.partitions[tp] = OfflinePartition(info.name, info.topic_id, p, cfg,
                                                           state=meta.partition_state(info.name, p))
        self._report_offline([tp for tp, part in self.partitions.items() if part.offline])

    def _partition(self, info, p: int, lg, cfg: dict) -> Partition:
        return Partition(info.name, info.topic_id, p, lg, cfg, hooks=self._hooks,
                         state=self.metadata.partition_state(info.name, p))

    def _on_dir_offline(self, d: str, tps) -> None:
        gone = []
        for tp in tps:
            part = self.partitions.get(tp)
            if part is not None:
                part.mark_offline()
                gone.append(tp)
        self._report_offline(gone)

    def _report_offline(self, tps) -> None:
        if tps and self.on_replicas_offline is not None:
            self.on_replicas_offline(tps)

    # ------------------------------------------------------------------ topic changes
    async def make_partitions(self, topic_info, partition_ids) -> None:
        cfg = self.metadata.effective_config(topic_info.name)
        for p in partition_ids:
            tp = (topic_info.name, p)
            if tp in self.partitions:
                continue
            lg = await self.log_manager.create_log(topic_info.name, p, cfg)
            self.partitions[tp] = self._partition(topic_info, p, lg, cfg)

    async def delete_partitions(self, topic_info) -> None:
        doomed = [tp for tp in self.partitions if tp[0] == topic_info.name]
        for tp in doomed:
            self.partitions.pop(tp).mark_deleted()
        await self.log_manager.delete_logs(doomed)

    def on_config_change(self, topic_info) -> None:
        cfg = self.metadata.effective_config(topic_info.name)
        self.log_manager.update_config(topic_info.name, cfg)
        for part in self.partitions_of(topic_info.name):
            part.update_config(cfg)
