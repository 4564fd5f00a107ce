"""The storage layer's errors: what ``Log``, ``LogLoader`` and ``LogManager`` raise.

Each carries the Kafka error code a broker answers for it (they are ``KafkaError``s, see
pykbroker/protocol/errors.py), so a handler answers ``e.code`` without knowing which it caught.
"""
from __future__ import annotations

from pykbroker.protocol.errors import ErrorCode, KafkaError

__all__ = ["StorageError", "OffsetOutOfRange", "KafkaStorageError", "ProducerStateError"]


class StorageError(KafkaError):
    """A failure of the log layer; ``code`` is what Kafka answers for it (KafkaError family)."""
    code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "") -> None:
        Exception.__init__(self, message)
        self.message = message or None


class OffsetOutOfRange(StorageError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class KafkaStorageError(StorageError):
    """Disk I/O failed; the produce/fetch answer is KAFKA_STORAGE_ERROR."""
    code = ErrorCode.KAFKA_STORAGE_ERROR


class ProducerStateError(StorageError):
    """A producer-state check refused a batch; ``code`` is per instance (sequence/epoch errors)."""

    def __init__(self, code: int, message: str = "") -> None:
        Exception.__init__(self, message or f"producer state error {code}")
        self.code = ErrorCode(code)
        self.message = message or None
