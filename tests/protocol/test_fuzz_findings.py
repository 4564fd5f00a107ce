"""Regression tests for what the protocol fuzzer (compat/fuzz, docs/fuzzing.md) found: each
request here once made the broker answer bytes no client can decode, or made a handler raise
(an UNKNOWN_SERVER_ERROR answer and a traceback in the log) instead of Kafka's answer."""
import uuid

import pytest

from pykbroker.protocol.codec import APIS
from pykbroker.protocol.primitives import ProtocolError
from pykbroker.protocol.wire import WireClient, create_topic, request_frame

pytestmark = pytest.mark.timeout(60)


def test_metadata_v11_null_topic_name_gets_a_decodable_invalid_request(broker):
    # Before v12 a response topic name is not nullable: Kafka answers the null name as "".
    with WireClient(broker) as c:
        resp = c.request(3, 11, {"topics": [{"topic_id": bytes(16), "name": None}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    (t,) = resp["topics"]
    assert (t["error_code"], t["name"]) == (42, "")   # INVALID_REQUEST


def _heartbeat_with_null_topic(version):
    api = APIS[68]
    good = api.encode_bytes("request", version, {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["zz"], "topic_partitions": None})
    # the one element "zz" (compact length 3) becomes a null string (compact length 0)
    i = good.index(b"\x03zz")
    return good[:i] + b"\x00" + good[i + 3:]


def test_null_string_element_of_a_nullable_array_is_malformed():
    # subscribed_topic_names may be null (the array), its elements may not: Kafka's reader
    # rejects a null element, and the consumer group code sorted the names and raised TypeError.
    for v in (0, 1):
        with pytest.raises(ProtocolError):
            APIS[68].decode("request", v, _heartbeat_with_null_topic(v))
    # DescribeConfigs configuration_keys (nullable array of strings), same rule
    api = APIS[32]
    good = api.encode_bytes("request", 1, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": ["ab"]}],
        "include_synonyms": False})
    i = good.index(b"\x00\x02ab")
    with pytest.raises(ProtocolError):
        api.decode("request", 1, good[:i] + b"\xff\xff" + good[i + 4:])


def test_null_string_element_closes_the_connection(broker):
    with WireClient(broker) as c:
        c.send_bytes(request_frame(68, 0, 5, _heartbeat_with_null_topic(0)))
        assert c.wait_closed(10)
    assert "TypeError" not in broker.log_text()


def _new_topic(c, prefix: str):
    """A new one-partition topic ``<prefix>-<random>`` and a group name of its own: (topic, group)."""
    tag = uuid.uuid4().hex[:6]
    create_topic(c, "%s-%s" % (prefix, tag), 1)
    return "%s-%s" % (prefix, tag), "%s-g-%s" % (prefix, tag)


def _share_group(c, prefix: str):
    """``_new_topic``, its group made a share group by a member subscribing to the topic."""
    topic, group = _new_topic(c, prefix)
    hb = c.request(76, 1, {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
                           "rack_id": None, "subscribed_topic_names": [topic]})
    assert hb["error_code"] == 0
    return topic, group


def test_offset_commit_to_a_share_group_is_group_id_not_found(broker):
    with WireClient(broker) as c:
        topic, group = _share_group(c, "share-commit")
        resp = c.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                "group_instance_id": None,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": 1,
                                     "committed_metadata": ""}]}]})
    (t,) = resp["topics"]
    (p,) = t["partitions"]
    # Kafka's ShareGroup.validateOffsetCommit: "Group ... is not a consumer group."
    assert p["error_code"] == 69   # GROUP_ID_NOT_FOUND


def test_join_group_on_a_share_group_is_inconsistent_group_protocol(broker):
    # JoinGroup found the share group and called its (missing) join: AttributeError, answered
    # UNKNOWN_SERVER_ERROR.  Kafka's classicGroupJoin: "Group exists but it's not a consumer
    # group" -> INCONSISTENT_GROUP_PROTOCOL.
    with WireClient(broker) as c:
        topic, group = _share_group(c, "share-join")
        resp = c.request(11, 5, {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                 "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                 "protocols": [{"name": "range", "metadata": b""}]})
    assert resp["error_code"] == 23   # INCONSISTENT_GROUP_PROTOCOL


def test_offset_commit_v3_with_the_largest_retention_is_accepted(broker):
    # now + retention_time_ms overflowed the int64 expire timestamp: struct.error in the
    # handler, answered UNKNOWN_SERVER_ERROR.  Kafka adds the two as Java longs and commits.
    with WireClient(broker) as c:
        topic, group = _new_topic(c, "ret-commit")
        resp = c.request(8, 3, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                "retention_time_ms": (1 << 63) - 1,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": 7,
                                     "committed_metadata": "m"}]}]})
        (t,) = resp["topics"]
        (p,) = t["partitions"]
        assert p["error_code"] == 0
        # the broker answers the next request on the same connection (nothing broke)
        assert c.request(18, 0, {})["error_code"] == 0


# ----------------------------------------------------------------- the fuzzer's own classification
# (compat/fuzz/fuzzer.py): what a long run reported as held connections that were not the broker's.

# A mutated Produce v10 (acks=-1) from a long run, its size prefix announcing 145 of its 148 bytes:
# the broker answers the 145 bytes, and reads the last 3 plus whatever follows as the start of a
# next frame, whose rest it waits for (as Kafka waits for an incomplete frame).
_SHORT_PREFIX_PRODUCE = bytes.fromhex(
    "000000910000000a00013bc2000772646b61666b610000ffff000075300205667a2d3202000000016a000000"
    "00000000000000005d0000000002fba510220004000000000000000000d8cba3000001a21cd8cba300000000"
    "000000040000000000000000000128b52ffd00581d0100e8680000000a6b65792d354876616c75652d7a7374"
    "642d3502026804763501000f962600000004a18d")


def _fuzzer(broker, **kw):
    from compat.fuzz.fuzzer import LiveFuzzer
    return LiveFuzzer(broker.bootstrap, pid=None, corpus=[], answer_timeout=1.0, held_timeout=1.0,
                      alive_timeout=5.0, **kw)


def test_no_probe_behind_a_short_size_prefix(broker):
    fz = _fuzzer(broker)
    corr = 0x13bc2   # the frame's own correlation id: its answer is what is read first
    fz._stop = None
    out = fz.send(_SHORT_PREFIX_PRODUCE, 0, 10, corr, "produce v10 (mutated)", reconnect_after=True,
                  short_prefix=True)
    assert out in ("answer", "close", "unprobed"), out
    assert fz.figures.held == 0 and fz.figures.bad_answers == 0, fz.figures.findings
    # the probe appended as before the fix: its bytes complete no frame, so it is never answered
    # and the connection counted as held although the broker did all Kafka does
    fz2 = _fuzzer(broker)
    fz2._stop = None
    fz2.send(_SHORT_PREFIX_PRODUCE, 0, 10, corr, "produce v10 (mutated)", reconnect_after=True)
    assert fz2.figures.held == 1, fz2.figures.findings


def test_join_group_held_while_the_group_rebalances_is_classified_as_kafka_does(broker):
    # JoinGroup v0's rebalance timeout is its session timeout (30 min here): the second member's
    # join waits for the first to rejoin, as Kafka 4.4 does (tests/differential/test_groups.py).
    from compat.fuzz.fuzzer import frame
    group = "fz-held-%s" % uuid.uuid4().hex[:6]
    body = {"group_id": group, "session_timeout_ms": 1800000, "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}]}
    with WireClient(broker, timeout=30) as first:
        for _ in range(100):
            if first.request(11, 0, body)["error_code"] not in (14, 15, 16):
                break
        fz = _fuzzer(broker)
        fz._stop = None
        data = frame(11, 0, 77, APIS[11].encode_bytes("request", 0, body))
        out = fz.send(data, 11, 0, 77, "join_group v0")
    assert out == "held_expected", (out, fz.figures.findings)
    assert (fz.figures.held, fz.figures.held_expected) == (0, 1)
    assert "PreparingRebalance" in fz.figures.findings[0]


def test_topic_deleted_while_partitions_are_added(broker):
    # A long run grew a pool topic to thousands of partitions while another connection deleted
    # it: the addition's publication raised KeyError (UNKNOWN_SERVER_ERROR, a traceback) and the
    # logs it had made stayed open and on disk under the deleted topic's name (fds and memory
    # grew).  Kafka's controller orders the two; so does pykbroker now: the delete waits for the
    # addition, answered NONE, and then removes every partition.
    import os
    import threading
    import time

    if not hasattr(broker, "lines"):
        pytest.skip("looks at the broker's log and data dir")
    name = "fz-grow-%s" % uuid.uuid4().hex[:6]
    with WireClient(broker) as c:
        create_topic(c, name, 1)
    seen = len(broker.lines)
    out = {}

    def grow():
        with WireClient(broker, timeout=120) as c:
            out["grow"] = c.request(37, 2, {"topics": [{"name": name, "count": 600, "assignments": None}],
                                            "timeout_ms": 60000, "validate_only": False})["results"][0]["error_code"]

    th = threading.Thread(target=grow)
    th.start()
    time.sleep(0.1)   # the addition of 600 partitions takes a second or more: the delete lands in it
    with WireClient(broker, timeout=120) as c:
        deleted = c.request(20, 6, {"topics": [{"name": name, "topic_id": bytes(16)}], "timeout_ms": 60000})
    th.join(120)
    assert deleted["responses"][0]["error_code"] == 0
    assert out["grow"] in (0, 3), out   # NONE (ordered first) or UNKNOWN_TOPIC_OR_PARTITION, never -1
    errors = [ln for ln in broker.lines[seen:] if " ERROR " in ln]
    assert not errors, errors
    with WireClient(broker) as c:
        create_topic(c, name, 2)
        md = c.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": name}],
                               "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [len(t["partitions"]) for t in md["topics"]] == [2]
    deadline = time.monotonic() + 30
    while True:   # the old partitions' directories go (deletion renames, then removes them)
        left = [d for d in os.listdir(broker.data_dir) if d.startswith(name + "-")
                and d[len(name) + 1:].isdigit()]
        if sorted(left) == [name + "-0", name + "-1"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(left) == [name + "-0", name + "-1"], sorted(left)[:10]


# -- timeout_ms of CreateTopics / CreatePartitions (docs/fuzzing.md: additions of thousands of
# partitions held their connection for over a minute, past their timeout_ms)
_GROWN = 301   # new logs are made in one batch (0.25-1.5 ms a log here): 75 ms or more, far past the 5 ms timeout below


def _grow(c, name, count, timeout_ms):
    return c.request(37, 3, {"topics": [{"name": name, "count": count, "assignments": None}],
                             "timeout_ms": timeout_ms, "validate_only": False})["results"][0]


def _grow_past_timeout(c, broker, name):
    """``name`` made with one partition, then grown to ``_GROWN`` with a 5 ms timeout (which
    passes before the logs exist); returns the CreatePartitions answer and how many lines the
    broker had logged before it."""
    create_topic(c, name, 1)
    seen = len(broker.lines)
    return _grow(c, name, _GROWN, 5), seen


def _logged(broker, seen, text, timeout=10.0):
    """A line holding ``text`` among the broker's log lines after the first ``seen`` (read by
    a thread: waited for)."""
    import time
    deadline = time.monotonic() + timeout
    while not any(text in ln for ln in broker.lines[seen:]):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _partition_count(c, name):
    t = c.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": name}], "allow_auto_topic_creation": False,
                          "include_topic_authorized_operations": False})["topics"][0]
    return len(t["partitions"]) if t["error_code"] == 0 else -t["error_code"]


def test_partitions_added_past_the_timeout_are_answered_at_it_and_appear_later(broker):
    # Kafka 4.4 answers an addition once its controller committed it (NONE, measured: 5,000
    # partitions with a 20 ms timeout answered NONE), and its broker makes the logs after; the
    # addition was answered here only once every log existed.  Now the request waits at most its
    # timeout_ms, is answered NONE, and the controller goes on: the partitions appear, usable by
    # a real client.
    import time
    from pykbroker.protocol.wire import wait_for_topic
    confluent_kafka = pytest.importorskip("confluent_kafka")

    if not hasattr(broker, "lines"):
        pytest.skip("looks at the broker's log")
    name = "cp-timeout-%s" % uuid.uuid4().hex[:6]
    with WireClient(broker, timeout=60) as c:
        grown, seen = _grow_past_timeout(c, broker, name)
        assert grown == {"name": name, "error_code": 0, "error_message": None}
        # answered before the logs existed: the controller said it goes on
        assert _logged(broker, seen, "goes on after the request's timeout"), broker.lines[seen:][-20:]
        wait_for_topic(c, name, _GROWN, timeout=60)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    p.produce(name, value=b"to-the-last", partition=_GROWN - 1)
    assert p.flush(30) == 0
    cons = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name,
                                     "enable.auto.commit": False})
    cons.assign([confluent_kafka.TopicPartition(name, _GROWN - 1, 0)])
    deadline, got = time.monotonic() + 30, None
    while got is None and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and not m.error():
            got = (m.partition(), m.offset(), m.value())
    cons.close()
    assert got == (_GROWN - 1, 0, b"to-the-last")
    assert not [ln for ln in broker.lines[seen:] if " ERROR " in ln]


def test_topic_deleted_while_an_answered_addition_goes_on(broker):
    # The delete lands after the addition was answered (its timeout passed) while the controller
    # still makes the logs: it waits for them, as for an addition still answering
    # (test_topic_deleted_while_partitions_are_added), then removes every partition.
    import os
    import time

    if not hasattr(broker, "lines"):
        pytest.skip("looks at the broker's log and data dir")
    name = "cp-timeout-del-%s" % uuid.uuid4().hex[:6]
    with WireClient(broker, timeout=60) as c:
        grown, seen = _grow_past_timeout(c, broker, name)
        assert grown["error_code"] == 0
        deleted = c.request(20, 6, {"topics": [{"name": name, "topic_id": bytes(16)}], "timeout_ms": 60000})
        assert deleted["responses"][0]["error_code"] == 0
        assert _logged(broker, seen, "goes on after the request's timeout")
        assert _partition_count(c, name) == -3   # UNKNOWN_TOPIC_OR_PARTITION
    assert not [ln for ln in broker.lines[seen:] if " ERROR " in ln]
    deadline = time.monotonic() + 30
    while True:   # no partition directory stays behind (deletion renames, then removes them)
        left = [d for d in os.listdir(broker.data_dir) if d.startswith(name + "-")]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert left == []


def test_timeout_zero_fails_the_whole_request_and_makes_nothing(broker):
    # Kafka 4.4's controller never starts a request whose deadline (now + timeout_ms) has passed:
    # every topic REQUEST_TIMED_OUT with a null message, nothing checked (an existing, an invalid,
    # a validate_only request alike) and nothing made (measured, compat/kafka/oracle.py).
    tag = uuid.uuid4().hex[:6]
    existing, new = "t0-old-%s" % tag, "t0-new-%s" % tag
    with WireClient(broker) as c:
        create_topic(c, existing, 1)
        for timeout_ms, validate_only in ((0, False), (-1, False), (0, True)):
            r = c.request(19, 7, {"topics": [
                {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
                for n, p in ((new, 1), (existing, 1), ("t0-bad-%s" % tag, 0))],
                "timeout_ms": timeout_ms, "validate_only": validate_only})
            assert [(t["name"], t["error_code"], t["error_message"], t["num_partitions"]) for t in r["topics"]] == [
                (new, 7, None, -1), (existing, 7, None, -1), ("t0-bad-%s" % tag, 7, None, -1)]
            r = c.request(37, 3, {"topics": [{"name": existing, "count": 3, "assignments": None},
                                             {"name": "t0-nope-%s" % tag, "count": 2, "assignments": None}],
                                  "timeout_ms": timeout_ms, "validate_only": validate_only})
            assert [(t["name"], t["error_code"], t["error_message"]) for t in r["results"]] == [
                (existing, 7, None), ("t0-nope-%s" % tag, 7, None)]
        assert (_partition_count(c, new), _partition_count(c, existing)) == (-3, 1)
