"""The per-log configuration: the topic-level settings the storage layer reads.

``LogConfig`` holds Kafka's topic config names and defaults for segments, indexes, flushing,
message size and timestamp type; ``LogConfig.from_properties`` builds one from a topic's
config.  It is plain data: every ``Log`` and ``LogLoader`` is handed one.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LogConfig"]


@dataclass
class LogConfig:
    """Topic-level settings the storage layer uses (Kafka names/defaults)."""
    segment_bytes: int = 1 << 30                  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000        # segment.ms
    segment_jitter_ms: int = 0                    # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024   # segment.index.bytes
    index_interval_bytes: int = 4096              # index.interval.bytes
    flush_interval_messages: int = (1 << 63) - 1  # flush.messages (Long.MAX_VALUE)
    max_message_bytes: int = 1048588              # max.message.bytes (1 MiB + 12)
    message_timestamp_type: str = "CreateTime"    # message.timestamp.type
    producer_snapshots_to_keep: int = 2

    _KAFKA_NAMES = {
        "segment.bytes": ("segment_bytes", int),
        "segment.ms": ("segment_ms", int),
        "segment.jitter.ms": ("segment_jitter_ms", int),
        "segment.index.bytes": ("segment_index_bytes", int),
        "index.interval.bytes": ("index_interval_bytes", int),
        "flush.messages": ("flush_interval_messages", int),
        "max.message.bytes": ("max_message_bytes", int),
        "message.timestamp.type": ("message_timestamp_type", str),
    }

    @classmethod
    def from_properties(cls, props: dict) -> "LogConfig":
        """Build from Kafka topic config names (unknown names ignored)."""
        c = cls()
        for k, v in (props or {}).items():
            if k in cls._KAFKA_NAMES and v is not None:
                attr, typ = cls._KAFKA_NAMES[k]
                setattr(c, attr, typ(v))
        return c

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries(self) -> int:
        return max(1, self.segment_index_bytes // 8)

    @property
    def max_time_index_entries(self) -> int:
        return max(1, self.segment_index_bytes // 12)
