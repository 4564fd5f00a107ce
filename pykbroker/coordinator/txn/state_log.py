"""Transaction metadata as records on the internal topic ``__transaction_state``.

Layout (Apache Kafka's TransactionLogKey / TransactionLogValue v0, so Kafka tooling can read it):

- a transactional id lives in partition ``abs(javaStringHashCode(id)) %
  transaction.state.log.num.partitions`` (the same hash as groups);
- key: version int16 = 0, transactional id (string);
- value: version int16 = 0, producer id int64, producer epoch int16, transaction timeout int32,
  status int8 (TransactionState ids below), partitions (nullable array of {topic string,
  partitions [int32]}; null for Empty, as Kafka writes it), last update timestamp int64,
  transaction start timestamp int64.
  A null value (tombstone) removes the id (expiry).  The topic is compacted: the
  latest record per id is its state, and replaying a partition rebuilds the coordinator.
- value v1 (flexible: compact strings and arrays, tagged fields), which Kafka 4 writes whenever
  the finalized ``transaction.version`` is at least 1 (TransactionVersion.transactionLogValueVersion),
  for transaction version 1 and 2 clients alike: the same fields plus tagged
  PreviousProducerId (tag 0), NextProducerId (tag 1), ClientTransactionVersion (tag 2, int16) and
  NextProducerEpoch (tag 3), each written only when it differs from its default (-1, -1, 0, -1),
  as Kafka's generated serializer does.  Both versions are read.
"""
from __future__ import annotations

import struct
from typing import Iterable, Union

from ...protocol.primitives import read_uvarint, skip_tagged_fields, write_uvarint

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


def _read_str(buf: Union[bytes, memoryview], pos: int) -> tuple[str, int]:
    (n,) = _H.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise ValueError("null string in transaction log record")
    return bytes(buf[pos:pos + n]).decode("utf-8"), pos + n


def key(transactional_id: str) -> bytes:
    return _H.pack(0) + _str(transactional_id)


def parse_key(buf: Union[bytes, memoryview]) -> str:
    (version,) = _H.unpack_from(buf, 0)
    if version != 0:
        raise ValueError("unknown transaction log key version %d" % version)
    return _read_str(buf, 2)[0]


_Q = struct.Struct(">q")


def _cstr(s: str) -> bytes:
    b = s.encode("utf-8")
    out = bytearray()
    write_uvarint(out, len(b) + 1)
    return bytes(out) + b


def value(producer_id: int, producer_epoch: int, timeout_ms: int, state: int, partitions: Iterable[tuple[str, int]],
          last_update_ms: int, start_ms: int, version: int = 0, previous_producer_id: int = -1,
          next_producer_id: int = -1, client_transaction_version: int = 0) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    out = bytearray(_VALUE_HEAD.pack(version, producer_id, producer_epoch, timeout_ms, state))
    # Kafka writes an Empty id's partitions as a null array (TransactionLog.valueToBytes)
    null = state == EMPTY
    if version == 0:
        out += _I.pack(-1 if null else len(by_topic))
        for t, ps in by_topic.items():
            out += _str(t) + _I.pack(len(ps)) + b"".join(_I.pack(p) for p in ps)
        out += _TIMES.pack(last_update_ms, start_ms)
        return bytes(out)
    write_uvarint(out, 0 if null else len(by_topic) + 1)
    for t, ps in by_topic.items():
        out += _cstr(t)
        write_uvarint(out, len(ps) + 1)
        out += b"".join(_I.pack(p) for p in ps)
        out.append(0)                      # the partition struct's (empty) tagged fields
    out += _TIMES.pack(last_update_ms, start_ms)
    tags = []
    if previous_producer_id != -1:
        tags.append((0, _Q.pack(previous_producer_id)))
    if next_producer_id != -1:
        tags.append((1, _Q.pack(next_producer_id)))
    if client_transaction_version != 0:
        tags.append((2, _H.pack(client_transaction_version)))
    write_uvarint(out, len(tags))
    for tag, data in tags:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    return bytes(out)


def parse_value(buf: Union[bytes, memoryview]) -> dict:
    version, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(buf, 0)
    if version not in (0, 1):
        raise ValueError("unknown transaction log value version %d" % version)
    pos = _VALUE_HEAD.size
    parts: set[tuple[str, int]] = set()
    out = {"producer_id": pid, "producer_epoch": epoch, "timeout_ms": timeout, "state": state,
           "partitions": parts, "previous_producer_id": -1, "next_producer_id": -1,
           "next_producer_epoch": -1, "client_transaction_version": 0}
    if version == 0:
        (n,) = _I.unpack_from(buf, pos)
        pos += 4
        for _ in range(max(n, 0)):
            t, pos = _read_str(buf, pos)
            (m,) = _I.unpack_from(buf, pos)
            pos += 4
            for _ in range(m):
                parts.add((t, _I.unpack_from(buf, pos)[0]))
                pos += 4
        out["last_update_ms"], out["start_ms"] = _TIMES.unpack_from(buf, pos)
        return out
    n, pos = read_uvarint(buf, pos)            # compact nullable array: 0 = null
    for _ in range(max(n - 1, 0)):
        ln, pos = read_uvarint(buf, pos)
        t = bytes(buf[pos:pos + ln - 1]).decode("utf-8")
        pos += ln - 1
        m, pos = read_uvarint(buf, pos)
        for _ in range(max(m - 1, 0)):
            parts.add((t, _I.unpack_from(buf, pos)[0]))
            pos += 4
        pos = skip_tagged_fields(buf, pos)
    out["last_update_ms"], out["start_ms"] = _TIMES.unpack_from(buf, pos)
    pos += _TIMES.size
    ntags, pos = read_uvarint(buf, pos)
    for _ in range(ntags):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if tag == 0:
            out["previous_producer_id"] = _Q.unpack_from(buf, pos)[0]
        elif tag == 1:
            out["next_producer_id"] = _Q.unpack_from(buf, pos)[0]
        elif tag == 2:
            out["client_transaction_version"] = _H.unpack_from(buf, pos)[0]
        elif tag == 3:
            out["next_producer_epoch"] = _H.unpack_from(buf, pos)[0]
        pos += size                        # unknown tags are skipped, as Kafka's reader does
    return out


