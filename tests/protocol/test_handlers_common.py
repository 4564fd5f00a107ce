"""handlers/support/common.py: the partition lookup and the per-partition error answers, without a broker."""
import types

import pytest
import trio

from pykbroker.handlers.support.common import PartitionResponses, each_topic_once, leader_partition
from pykbroker.protocol.errors import ErrorCode, KafkaError
from pykbroker.protocol.records import RecordError
from pykbroker.storage.errors import KafkaStorageError, OffsetOutOfRange, ProducerStateError


class _Partition:
    def __init__(self, offline=False, epoch=5, is_leader=True):
        self.offline = offline
        self.leader_epoch = epoch
        self.is_leader = is_leader

    def check_leader_epoch(self, current):
        if current == -1 or current == self.leader_epoch:
            return 0
        return ErrorCode.FENCED_LEADER_EPOCH if current < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


def _rm(**parts):
    return types.SimpleNamespace(get_partition=lambda topic, idx: parts.get("%s_%d" % (topic, idx)), metadata=None)


@pytest.mark.parametrize("topic,epoch,code", [
    ("missing", -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("off", -1, ErrorCode.KAFKA_STORAGE_ERROR),
    ("ok", 4, ErrorCode.FENCED_LEADER_EPOCH),
    ("ok", 6, ErrorCode.UNKNOWN_LEADER_EPOCH),
    # a follower replica: NOT_LEADER_OR_FOLLOWER, after the epoch checks (Kafka's order)
    ("follower", -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ("follower", 5, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ("follower", 4, ErrorCode.FENCED_LEADER_EPOCH),
])
def test_leader_partition_raises_kafkas_answer(topic, epoch, code):
    rm = _rm(ok_0=_Partition(), off_0=_Partition(offline=True), follower_0=_Partition(is_leader=False))
    with pytest.raises(KafkaError) as e:
        leader_partition(rm, topic, 0, epoch)
    assert e.value.code == code


def test_leader_partition_found():
    p = _Partition()
    assert leader_partition(_rm(ok_0=p), "ok", 0) is p
    assert leader_partition(_rm(ok_0=p), "ok", 0, 5) is p


_SHAPE = PartitionResponses(("topics", "topic", "partitions", "partition"),
                            ("responses", "name", "parts", "index"), {"offset": -1, "errors": []})


def test_error_response_answers_every_partition():
    req = {"topics": [{"topic": "a", "partitions": [{"partition": 0}, {"partition": 1}]},
                      {"topic": "b", "partitions": []}]}
    resp = _SHAPE.error_response(None, req, ErrorCode.INVALID_REQUEST, error_message="m")
    assert resp == {"throttle_time_ms": 0, "responses": [
        {"name": "a", "parts": [
            {"index": 0, "error_code": 42, "offset": -1, "errors": [], "error_message": "m"},
            {"index": 1, "error_code": 42, "offset": -1, "errors": [], "error_message": "m"}]},
        {"name": "b", "parts": []}]}
    a = resp["responses"][0]["parts"]
    assert a[0]["errors"] is not a[1]["errors"]  # list placeholders are not shared


def test_answer_each_turns_kafka_errors_into_entries():
    req = {"topics": [{"topic": "a", "partitions": [{"partition": 0}, {"partition": 1}, {"partition": 2}]}]}

    async def answer(name, p):
        if p["partition"] == 1:
            raise OffsetOutOfRange("beyond the end")
        if p["partition"] == 2:
            raise RecordError(ErrorCode.CORRUPT_MESSAGE, "bad")
        return {"index": p["partition"], "error_code": 0, "offset": 7}

    topics = trio.run(_SHAPE.answer_each, req, answer)
    assert [(e["index"], e["error_code"]) for e in topics[0]["parts"]] == [(0, 0), (1, 1), (2, 2)]


def test_one_family():
    for e in (RecordError(2), KafkaStorageError("disk"), OffsetOutOfRange("x"), ProducerStateError(45)):
        assert isinstance(e, KafkaError) and isinstance(e.code, ErrorCode)
    assert KafkaStorageError("disk").code == ErrorCode.KAFKA_STORAGE_ERROR
    assert ProducerStateError(47).code == ErrorCode.INVALID_PRODUCER_EPOCH
    # RecordError's response message: only record validation codes carry one by default
    assert RecordError(ErrorCode.INVALID_RECORD, "why").message == "why"
    assert RecordError(ErrorCode.CORRUPT_MESSAGE, "why").message is None


def test_each_topic_once_answers_duplicates_at_first_position():
    topics = [{"name": n} for n in ("a", "b", "a", "c", "b")]
    counts = {"a": 2, "b": 2, "c": 1}
    assert [(n, t is None) for n, t in each_topic_once(topics, counts)] == [
        ("a", True), ("b", True), ("c", False)]
