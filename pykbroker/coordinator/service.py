"""What the group, share and transaction coordinators share: their internal topic's life on this
broker (as the services Kafka runs on coordinator-common's runtime: GroupCoordinatorService,
ShareCoordinatorService, and the TransactionCoordinator's state manager).

A coordinator keeps its state in one internal topic (``__consumer_offsets``,
``__share_group_state``, ``__transaction_state``), one shard per partition on its
:class:`CoordinatorRuntime`.  The topic is created on first use, as Kafka does (FindCoordinator
or a share-state write), with the coordinator's replication factor and segment size.  A single
broker (``leads_every_partition``) loads every shard itself, at startup when the topic exists,
else once it created it; on a cluster the broker's leadership events call
:meth:`CoordinatorService.on_become_leader` / :meth:`CoordinatorService.on_resign`.
"""
from __future__ import annotations

import time
from typing import Any

import trio

from .runtime import CoordinatorRuntime


class CoordinatorService:
    """Base of a coordinator on a :class:`CoordinatorRuntime`.  A subclass names its topic's
    creation configs, builds ``self.runtime`` in its ``startup`` (ending with
    :meth:`_load_existing_topic`) and says what it loaded (:meth:`_log_loaded`)."""

    # Kafka's broker configs the internal topic is created with
    REPLICATION_FACTOR_CONFIG = ""
    SEGMENT_BYTES_CONFIG = ""
    # the broker config whose value the topic gets as its min.insync.replicas ("": none, the
    # broker default applies, as for Kafka's __consumer_offsets)
    MIN_ISR_CONFIG = ""

    # config: the BrokerConfig (or a test's dict of the keys read); log_: the topic's
    # InternalTopicLog subclass, which is also the runtime's PartitionWriter (both roles: Any)
    def __init__(self, config: Any, log_: Any, leads_every_partition: bool,
                 num_partitions: int) -> None:
        self.config = config
        self.log = log_   # the topic's partitions (an InternalTopicLog: the runtime's PartitionWriter)
        self.leads_every_partition = leads_every_partition
        self.num_partitions = num_partitions   # the config until the topic exists, then the topic's
        self.runtime: CoordinatorRuntime | None = None   # set in startup()
        self._topic_ready = False
        self._creating: trio.Event | None = None   # set while one task creates the topic

    async def _load_existing_topic(self) -> None:
        """The end of ``startup``: the topic as an earlier run (or another broker) created it."""
        if self.log.exists():
            self.num_partitions = self.log.num_partitions()
            self._topic_ready = True
            if self.leads_every_partition:
                await self._lead_every_partition()

    async def _lead_every_partition(self) -> None:
        """Single broker: this broker leads every partition, so it loads every shard (and waits,
        so the first request finds them loaded)."""
        t0 = time.monotonic()
        rt = self.runtime
        assert rt is not None   # built by startup(), which calls this
        for p in range(self.num_partitions):
            rt.on_become_leader(p, self.log.leader_epoch(p))
        await rt.wait_loaded()
        self._log_loaded(time.monotonic() - t0)

    def _log_loaded(self, seconds: float) -> None:
        """Log what the shards hold once every one is loaded (``seconds``: how long it took)."""

    def on_become_leader(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads ``partition`` of the topic: load its shard (Kafka's onElection)."""
        assert self.runtime is not None   # leadership is reported once the broker started us
        self.runtime.on_become_leader(partition, leader_epoch)

    def on_resign(self, partition: int, leader_epoch: int | None = None) -> None:
        """This broker no longer leads the partition: drop its shard (Kafka's onResignation)."""
        assert self.runtime is not None   # leadership is reported once the broker started us
        self.runtime.on_resign(partition, leader_epoch)

    def _topic_configs(self) -> dict:
        """Configs the topic is created with from the broker's (its min.insync.replicas, as
        Kafka's transactionTopicConfigs / the share coordinator's topic configs)."""
        min_isr = self.config_value(self.MIN_ISR_CONFIG, None) if self.MIN_ISR_CONFIG else None
        return {} if min_isr is None else {"min.insync.replicas": str(min_isr)}

    def config_value(self, key: str, default: Any) -> Any:
        """A broker config, or ``default`` for a unit test's config dict without it."""
        try:
            return self.config[key]
        except KeyError:
            return default

    async def ensure_topic(self) -> None:
        """Create the internal topic on first use, as Kafka does; concurrent callers wait for the
        one creating it."""
        if self._topic_ready:
            return
        if self._creating is not None:
            await self._creating.wait()
            return
        self._creating = trio.Event()
        try:
            if not self.log.exists():
                await self.log.create(self.num_partitions, self.config[self.REPLICATION_FACTOR_CONFIG],
                                      self.config[self.SEGMENT_BYTES_CONFIG], self._topic_configs())
            self.num_partitions = self.log.num_partitions()
            if self.leads_every_partition:
                await self._lead_every_partition()
            self._topic_ready = True
        finally:
            ev, self._creating = self._creating, None
            ev.set()
