"""Transaction metadata as records on the internal topic ``__transaction_state``.

Layout (Apache Kafka's TransactionLogKey / TransactionLogValue v0, so Kafka tooling can read it):

- a transactional id lives in partition ``abs(javaStringHashCode(id)) %
  transaction.state.log.num.partitions`` (the same hash as groups);
- key: version int16 = 0, transactional id (string);
- value: version int16 = 0, producer id int64, producer epoch int16, transaction timeout int32,
  status int8 (TransactionState ids below), partitions (nullable array of {topic string,
  partitions [int32]}), last update timestamp int64, transaction start timestamp int64.
  A null value (tombstone) removes the id (expiry, not built).  The topic is compacted: the
  latest record per id is its state, and replaying a partition rebuilds the coordinator.
  Kafka 4's v1 value adds tagged fields (previous/next producer id, client transaction version)
  for transaction version 2, which pykbroker does not offer.
"""
from __future__ import annotations

import struct

TRANSACTION_STATE_TOPIC = "__transaction_state"

# Kafka's TransactionState ids (as written in the log).
EMPTY = 0
ONGOING = 1
PREPARE_COMMIT = 2
PREPARE_ABORT = 3
COMPLETE_COMMIT = 4
COMPLETE_ABORT = 5
DEAD = 6
PREPARE_EPOCH_FENCE = 7

# Names as DescribeTransactions / ListTransactions show them (Kafka's TransactionState.stateName).
STATE_NAMES = {EMPTY: "Empty", ONGOING: "Ongoing", PREPARE_COMMIT: "PrepareCommit",
               PREPARE_ABORT: "PrepareAbort", COMPLETE_COMMIT: "CompleteCommit",
               COMPLETE_ABORT: "CompleteAbort", DEAD: "Dead", PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
STATES_BY_NAME = {v: k for k, v in STATE_NAMES.items()}

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")
_TIMES = struct.Struct(">qq")


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return _H.pack(len(b)) + b


def _read_str(buf, pos: int) -> tuple[str, int]:
    (n,) = _H.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise ValueError("null string in transaction log record")
    return bytes(buf[pos:pos + n]).decode("utf-8"), pos + n


def key(transactional_id: str) -> bytes:
    return _H.pack(0) + _str(transactional_id)


def parse_key(buf) -> str:
    (version,) = _H.unpack_from(buf, 0)
    if version != 0:
        raise ValueError("unknown transaction log key version %d" % version)
    return _read_str(buf, 2)[0]


def value(producer_id: int, producer_epoch: int, timeout_ms: int, state: int, partitions,
          last_update_ms: int, start_ms: int) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    out = bytearray(_VALUE_HEAD.pack(0, producer_id, producer_epoch, timeout_ms, state))
    out += _I.pack(len(by_topic))
    for t, ps in by_topic.items():
        out += _str(t) + _I.pack(len(ps)) + b"".join(_I.pack(p) for p in ps)
    out += _TIMES.pack(last_update_ms, start_ms)
    return bytes(out)


def parse_value(buf) -> dict:
    version, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(buf, 0)
    if version not in (0, 1):
        raise ValueError("unknown transaction log value version %d" % version)
    pos = _VALUE_HEAD.size
    if version == 1:
        raise ValueError("flexible (v1) transaction log values are not read by pykbroker")
    (n,) = _I.unpack_from(buf, pos)
    pos += 4
    parts = set()
    for _ in range(max(n, 0)):
        t, pos = _read_str(buf, pos)
        (m,) = _I.unpack_from(buf, pos)
        pos += 4
        for _ in range(m):
            parts.add((t, _I.unpack_from(buf, pos)[0]))
            pos += 4
    last_update, start = _TIMES.unpack_from(buf, pos)
    return {"producer_id": pid, "producer_epoch": epoch, "timeout_ms": timeout, "state": state,
            "partitions": parts, "last_update_ms": last_update, "start_ms": start}
