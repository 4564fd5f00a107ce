"""The Produce fast path (handlers/support/produce_fast.py) against the general path: the same
requests fed to two in-process brokers, one whose dispatcher may take the fast path and one
whose dispatcher never does, must get the same answer bytes and leave the same log bytes.

The requests cover the common case (several versions, plain and idempotent, acks 1 and 0) and
the errors the fast path hands to the general path or answers from the partition's status:
an unknown topic, a partition that does not exist, a partition this broker does not lead, a
corrupt CRC, an out-of-order sequence and a duplicate, a batch over max.message.bytes, a
compacted topic's keyless record, a transactional id, acks=-1 and invalid acks.  Each case also
checks which path served it on the fast broker, so a fast path that silently falls back for
everything would fail here."""
from __future__ import annotations

import os
import struct
import tempfile
import types

import pytest
import trio

from pykbroker.broker import BrokerServer
from pykbroker.config import BrokerConfig
from pykbroker.handlers.support import produce_fast
from pykbroker.local.zookeeper import free_port
from pykbroker.protocol.wire import make_batch, request_frame
from pykbroker.server.dispatch import Close, Dispatcher, HandleRequest, SendResponse
from pykbroker.storage.log_validator import validate_produce_records, validate_single_batch

TS = 1_700_000_000_000   # fixed record timestamps: the two brokers' logs must be byte-equal


class GeneralOnly(Dispatcher):
    def _fast_produce_ok(self) -> bool:
        return False


def produce(version, topic, partition, records, acks=1, transactional_id=None, topic_id=None, timeout_ms=30000):
    t = {"name": topic, "partition_data": [{"index": partition, "records": records}]}
    if version >= 13:
        t = {"topic_id": topic_id, "partition_data": t["partition_data"]}
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms, "topic_data": [t]}


def batch(n=3, size=20, **kw):
    return make_batch([b"v" * size] * n, timestamps=[TS + i for i in range(n)], **kw)


def corrupt_crc(b):
    b = bytearray(b)
    b[-1] ^= 0xFF     # a record byte: covered by the CRC, nothing else notices
    return bytes(b)


async def _broker(nursery, log_dir):
    broker = BrokerServer(BrokerConfig({"log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:%d" % free_port()}))
    await nursery.start(broker.run)
    d = Dispatcher(broker.handlers, 100 << 20, broker, None, "test")
    topics = [("t", 4, []), ("small", 1, [{"name": "max.message.bytes", "value": "300"}]),
              ("c", 1, [{"name": "cleanup.policy", "value": "compact"}])]
    d.receive_data(request_frame(19, 4, 1, {
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": c}
                   for n, p, c in topics], "timeout_ms": 30000, "validate_only": False}))
    ev = d.next_event()
    await ev.handler.handle(ev.ctx, ev.request)
    for _ in range(100):
        rm = broker.services.replica_manager
        if all(rm.get_partition(n, i) is not None and rm.get_partition(n, i).is_leader
               for n, p, _ in topics for i in range(p)):
            break
        await trio.sleep(0.05)
    return broker


async def _send(d, frame):
    """Carry out one request as the connection does: (path, answer bytes or 'close' or None)."""
    d.receive_data(frame)
    ev = d.next_event()
    assert isinstance(ev, HandleRequest), ev
    path = "fast" if isinstance(ev.handler, produce_fast.FastPath) else "general"
    try:
        resp = await ev.handler.handle(ev.ctx, ev.request)
    except Exception as e:
        out = d.fail(ev, e)
    else:
        out = d.finish(ev, resp)
    if out is None:
        return path, None
    if isinstance(out, Close):
        return path, "close"
    assert isinstance(out, SendResponse)
    return path, b"".join(bytes(p) for p in out.parts)


def _logs(log_dir):
    out = {}
    for name in sorted(os.listdir(log_dir)):
        p = os.path.join(log_dir, name)
        if os.path.isdir(p) and name[0] != "_" and "-" in name:
            for f in sorted(os.listdir(p)):
                if f.endswith(".log"):
                    with open(os.path.join(p, f), "rb") as fh:
                        out[(name, f)] = fh.read()
    return out


ALTER = "alter"   # a case that changes topic t's config on both brokers (no Produce)
# the partition's reading of a config value sent as a string (None: deleted, the default)
_TYPED = {"max.message.bytes": lambda v: 1048588 if v is None else int(v),
          "cleanup.policy": lambda v: ["delete"] if v is None else [v]}


async def _alter_t(broker, configs):
    """IncrementalAlterConfigs on topic t (a value of None deletes the config), then wait until
    the partitions have the new config."""
    d = Dispatcher(broker.handlers, 100 << 20, broker, None, "test")
    d.receive_data(request_frame(44, 1, 1, {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": k, "config_operation": 1 if v is None else 0, "value": v} for k, v in configs.items()]}],
        "validate_only": False}))
    ev = d.next_event()
    out = await ev.handler.handle(ev.ctx, ev.request)
    assert out["responses"][0]["error_code"] == 0, out
    rm = broker.services.replica_manager
    for _ in range(200):
        if all(rm.get_partition("t", i).config.get(k) == _TYPED[k](v) for i in range(4) for k, v in configs.items()):
            return
        await trio.sleep(0.01)
    raise AssertionError("config of t not applied: %s: %s" % (configs, rm.get_partition("t", 0).config))


# (label, version, request body or a function of the topic id, acks, the path the fast broker takes)
def _cases():
    pid = 4000
    yield "plain v9", 9, produce(9, "t", 0, batch()), "fast"
    yield "plain v9 p1", 9, produce(9, "t", 1, batch(5)), "fast"
    yield "plain v3", 3, produce(3, "t", 2, batch()), "fast"
    yield "plain v5", 5, produce(5, "t", 3, batch()), "fast"
    yield "plain v8", 8, produce(8, "t", 0, batch()), "fast"
    yield "plain v11", 11, produce(11, "t", 1, batch()), "fast"
    yield "plain v12", 12, produce(12, "t", 2, batch(1, 5000)), "fast"
    # the records' length as a one-, two- and three-byte varint (decode reads the first two inline)
    yield "small v9", 9, produce(9, "t", 3, batch(1, 10)), "fast"
    yield "large v9", 9, produce(9, "t", 3, batch(1, 20000)), "fast"
    yield "v13 by topic id", 13, lambda tid: produce(13, "t", 3, batch(), topic_id=tid), "fast"
    yield "v13 unknown topic id", 13, lambda tid: produce(13, "t", 3, batch(), topic_id=b"\x01" * 16), "fast"
    yield "acks=0", 9, produce(9, "t", 0, batch(), acks=0), "fast"
    yield "idempotent seq 0", 9, produce(9, "t", 1, batch(producer_id=pid, producer_epoch=0, base_sequence=0)), "fast"
    yield "idempotent seq 3", 9, produce(9, "t", 1, batch(producer_id=pid, producer_epoch=0, base_sequence=3)), "fast"
    yield "duplicate", 9, produce(9, "t", 1, batch(producer_id=pid, producer_epoch=0, base_sequence=3)), "fast"
    yield "out-of-order sequence", 9, produce(9, "t", 1, batch(producer_id=pid, producer_epoch=0,
                                                                 base_sequence=9)), "fast"
    yield "out-of-order sequence v12", 12, produce(12, "t", 1, batch(producer_id=pid, producer_epoch=0,
                                                                       base_sequence=11)), "fast"
    yield "old producer epoch", 9, produce(9, "t", 1, batch(producer_id=pid, producer_epoch=-1 + 0,
                                                              base_sequence=6)), "fast"
    yield "out-of-order acks=0", 9, produce(9, "t", 1, batch(producer_id=pid, producer_epoch=0, base_sequence=20),
                                            acks=0), "fast"
    yield "unknown topic", 9, produce(9, "nope", 0, batch()), "fast"
    yield "unknown topic acks=0", 9, produce(9, "nope", 0, batch(), acks=0), "fast"
    yield "wrong partition", 9, produce(9, "t", 99, batch()), "fast"
    yield "wrong partition v3", 3, produce(3, "t", 99, batch()), "fast"
    yield "corrupt CRC", 9, produce(9, "t", 0, corrupt_crc(batch())), "fast"
    yield "corrupt CRC v5", 5, produce(5, "t", 0, corrupt_crc(batch())), "fast"
    yield "record too large", 9, produce(9, "small", 0, batch(5, 100)), "fast"
    yield "fits max.message.bytes", 9, produce(9, "small", 0, batch(1, 10)), "fast"
    yield "compacted, keyless", 9, produce(9, "c", 0, batch()), "fast"
    yield "compacted, keyed", 9, produce(9, "c", 0, make_batch([b"v"], keys=[b"k"], timestamps=[TS])), "fast"
    yield "two batches", 9, produce(9, "t", 0, batch() + batch()), "fast"
    yield "trailing bytes", 9, produce(9, "t", 0, batch() + b"\x00\x00"), "fast"
    yield "batch length below 14", 9, produce(9, "t", 0, b"\x00" * 8 + struct.pack(">i", 3) + b"\x00" * 60), "fast"
    yield "null records", 9, produce(9, "t", 0, None), "general"
    yield "empty records", 9, produce(9, "t", 0, b""), "fast"
    yield "transactional id", 9, produce(9, "t", 0, batch(), transactional_id="tx"), "general"
    yield "acks=-1", 9, produce(9, "t", 0, batch(), acks=-1), "general"
    yield "acks=2", 9, produce(9, "t", 0, batch(), acks=2), "general"
    yield "two partitions", 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch()}, {"index": 1, "records": batch()}]}]}, \
        "general"
    yield "not leader", 9, produce(9, "t", 2, batch()), "fast"
    yield "after the errors", 9, produce(9, "t", 0, batch()), "fast"
    # the topic's config changed after fast appends (the fast path keeps its reading of a
    # partition's config until the config is replaced): the next requests see the new one
    yield "alter t: max.message.bytes=300", 2, ALTER, {"max.message.bytes": "300"}, None
    yield "over the new max.message.bytes", 9, produce(9, "t", 0, batch(5, 100)), "fast"
    yield "alter t: compact", 2, ALTER, {"max.message.bytes": None, "cleanup.policy": "compact"}, None
    yield "keyless on the now compacted t", 9, produce(9, "t", 0, batch()), "fast"
    yield "alter t: back to the defaults", 2, ALTER, {"cleanup.policy": None}, None
    yield "plain v9 after the config changes", 9, produce(9, "t", 0, batch(5, 100)), "fast"


def test_fast_and_general_paths_answer_and_append_the_same_bytes():
    cases = list(_cases())
    results = []

    async def main():
        with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
            async with trio.open_nursery() as nursery:
                fast_broker = await _broker(nursery, da)
                general_broker = await _broker(nursery, db)
                ids = [b.services.metadata_cache.get("t").topic_id for b in (fast_broker, general_broker)]
                for corr, (label, version, body, *rest) in enumerate(cases, 100):
                    if body == ALTER:
                        for b in (fast_broker, general_broker):
                            await _alter_t(b, rest[0])
                        continue
                    if label == "not leader":
                        for b in (fast_broker, general_broker):
                            b.services.replica_manager.get_partition("t", 2).is_leader = False
                    outs = []
                    # a dispatcher per request, as after a close (acks=0 failures) a connection is gone
                    fast = Dispatcher(fast_broker.handlers, 100 << 20, fast_broker, None, "fast")
                    general = GeneralOnly(general_broker.handlers, 100 << 20, general_broker, None, "general")
                    for d, tid in ((fast, ids[0]), (general, ids[1])):
                        b = body(tid) if callable(body) else body
                        path, out = await _send(d, request_frame(0, version, corr, b))
                        if isinstance(out, bytes):
                            out = out.replace(tid, b"<topic id>")
                        outs.append((path, out))
                    results.append((label, outs))
                    if label == "not leader":
                        for b in (fast_broker, general_broker):
                            b.services.replica_manager.get_partition("t", 2).is_leader = True
                logs = _logs(da), _logs(db)
                nursery.cancel_scope.cancel()
        results.append(("logs", logs))

    trio.run(main)
    *answers, (_, (logs_fast, logs_general)) = results
    cases = [c for c in cases if c[2] != ALTER]
    for (label, _, _, want_path), (_, ((path_f, out_f), (path_g, out_g))) in zip(cases, answers):
        assert path_g == "general", label
        assert path_f == want_path, label
        assert out_f == out_g, label
    # every case answered something distinguishable: the comparison is not between two Nones
    by_label = dict(answers)
    assert by_label["acks=0"][0][1] is None and by_label["out-of-order acks=0"][0][1] == "close"
    assert by_label["unknown topic acks=0"][0][1] == "close"
    assert logs_fast == logs_general
    assert logs_fast[("t-0", "00000000000000000000.log")]   # appended through the fast path
    # the error answers carry the errors (decoded once here; the byte equality above covers the rest)
    from pykbroker.protocol.wire import decode_response

    def code(label, version=9):
        body = decode_response(by_label[label][0][1][4:], 0, version, None) if version < 9 else \
            __import__("pykbroker.protocol.codec", fromlist=["APIS"]).APIS[0].decode(
                "response", version, by_label[label][0][1][9:])
        return body["responses"][0]["partition_responses"][0]["error_code"]

    assert code("plain v9") == 0
    assert code("unknown topic") == 3
    assert code("wrong partition") == 3
    assert code("corrupt CRC") == 2
    assert code("out-of-order sequence") == 45
    assert code("record too large") == 10
    assert code("not leader") == 6
    assert code("compacted, keyless") == 87
    assert code("over the new max.message.bytes") == 10
    assert code("keyless on the now compacted t") == 87
    assert code("plain v9 after the config changes") == 0


@pytest.mark.parametrize("mutate", [
    lambda b: b, lambda b: corrupt_crc(b), lambda b: b + b"\x00",
    lambda b: b[:-1], lambda b: b[:8] + struct.pack(">i", 3) + b[12:],
    lambda b: b[:16] + b"\x01" + b[17:],           # magic 1
    lambda b: struct.pack(">q", 5) + b[8:],         # baseOffset != 0
    lambda b: b[:57] + struct.pack(">i", 7) + b[61:],   # recordsCount disagrees with lastOffsetDelta
])
def test_single_batch_validation_agrees_with_the_general_validator(mutate):
    """Where validate_single_batch accepts, validate_produce_records returns the same thing;
    where the general one refuses, the single-batch one never accepts."""
    for b in (batch(), batch(producer_id=7, producer_epoch=1, base_sequence=2147483646), batch(1, 0)):
        data = mutate(b)
        fast = validate_single_batch(memoryview(bytearray(data)), 1 << 20, 9, TS, None)
        try:
            general = validate_produce_records(memoryview(bytearray(data)), 1 << 20, api_version=9, now_ms=TS)
        except Exception:
            assert fast is None
            continue
        if fast is not None:
            assert bytes(fast.buffer) == bytes(general.buffer)
            assert fast.batches == general.batches and fast.offset_count == general.offset_count


@pytest.mark.parametrize("connection, fast", [
    (None, True),
    (types.SimpleNamespace(authz=None, observer=None, quotas=None), True),
    (types.SimpleNamespace(authz=None, observer=None, quotas=types.SimpleNamespace(active=False)), True),
    (types.SimpleNamespace(authz=types.SimpleNamespace(begin=lambda name: None), observer=None, quotas=None), False),
    (types.SimpleNamespace(authz=None, observer=object(), quotas=None), False),
    (types.SimpleNamespace(authz=None, observer=None, quotas=types.SimpleNamespace(active=True)), False),
    ("fault rule", False),
])
def test_fast_path_only_when_nothing_else_looks_at_the_request(connection, fast):
    """An authorizer session, an observer (metrics, traces, request logs), a client quota or a
    fault rule: the general path, which they hook into."""
    from pykbroker.handlers import load_handlers
    from pykbroker.server.faults import FaultPlan

    handlers = load_handlers()
    faults = None
    if connection == "fault rule":
        faults, connection = FaultPlan(), None
        faults.rules.append(object())   # any rule: the dispatcher only asks whether there is one
    d = Dispatcher(handlers, 1 << 20, types.SimpleNamespace(handlers=handlers), connection, "test", faults)
    if faults is not None:
        d._inject = lambda ctx, handler, spec, request: HandleRequest(ctx, handler, spec, request)
    d.receive_data(request_frame(0, 9, 7, produce(9, "t", 0, batch())))
    ev = d.next_event()
    assert isinstance(ev, HandleRequest)
    assert isinstance(ev.handler, produce_fast.FastPath) is fast
    assert isinstance(ev.request, produce_fast.FastProduce) is fast
