"""A transactional id's state in memory (Kafka's TransactionMetadata) and the fields one
transition writes (Kafka's TxnTransitMetadata): what the coordinator's state machine
(coordinator.py) reads and changes, and its shards rebuild when they load."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from . import state_log as S
from .state_log import EMPTY

# Kafka: an epoch at Short.MAX_VALUE - 1 is exhausted; the next bump takes a new producer id.
MAX_EPOCH = 32767 - 1


class TxnMetadata:
    __slots__ = ("transactional_id", "producer_id", "last_producer_id", "producer_epoch",
                 "last_producer_epoch", "timeout_ms", "state", "partitions", "start_ms",
                 "last_update_ms", "pending", "client_tv", "next_producer_id")

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int, timeout_ms: int,
                 state: Optional[int] = EMPTY, partitions: Optional[Iterable[tuple[str, int]]] = None,
                 start_ms: int = -1, last_update_ms: int = -1) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = -1
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = -1
        self.timeout_ms = timeout_ms
        self.state = state   # None: a new id whose first write is in flight
        self.partitions: set = set(partitions or ())
        self.start_ms = start_ms
        self.last_update_ms = last_update_ms
        self.pending: Optional[int] = None   # the state being written, while a write is in flight
        # Kafka's clientTransactionVersion: the transaction version of the client request that
        # made the last transition (2: the epoch is bumped by every EndTxn), and nextProducerId:
        # the producer id that takes over once a TV2 transaction that exhausted the epoch completes.
        self.client_tv = 0
        self.next_producer_id = -1

    def __repr__(self) -> str:
        return "TxnMetadata(%r, pid=%d, epoch=%d, %s, %d partition(s)%s)" % (
            self.transactional_id, self.producer_id, self.producer_epoch, S.STATE_NAMES.get(self.state),  # type: ignore[arg-type]  # repr of any state
            len(self.partitions), ", pending %s" % S.STATE_NAMES.get(self.pending) if self.pending is not None else "")


class TxnTransitMetadata:
    """The fields a transition writes (Kafka's TxnTransitMetadata)."""
    __slots__ = ("producer_id", "last_producer_id", "producer_epoch", "last_producer_epoch", "timeout_ms",
                 "state", "partitions", "start_ms", "last_update_ms", "client_tv", "next_producer_id")
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: int
    partitions: set
    start_ms: int
    last_update_ms: int
    client_tv: int
    next_producer_id: int

    def __init__(self, m: TxnMetadata, **changes: Any) -> None:
        for f in self.__slots__:
            setattr(self, f, getattr(m, f))
        self.partitions = set(m.partitions)
        for k, v in changes.items():
            setattr(self, k, v)

    def apply(self, m: TxnMetadata) -> None:
        for f in self.__slots__:
            setattr(m, f, getattr(self, f))
