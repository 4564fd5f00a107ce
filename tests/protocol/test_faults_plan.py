"""The fault plan and the dispatcher's fault hook without sockets (server/faults.py)."""
import pytest
import trio

from pykbroker.protocol.errors import ErrorCode
from pykbroker.server.dispatch import Close, Delayed, HandleRequest, SendResponse
from pykbroker.server.faults import FaultPlan, FaultRule, api_key, error_code

from .test_dispatch import HANDLERS, MAX_FRAME, events, frame, response
from pykbroker.server.dispatch import Dispatcher

NLF = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


def dispatcher(plan):
    return Dispatcher(HANDLERS, MAX_FRAME, None, "conn", "1.2.3.4:5", plan)


def produce_v9(parts=((("t", 0), b"a"), (("t", 1), b"b"), (("u", 0), b"c"))):
    topics = {}
    for (t, p), rec in parts:
        topics.setdefault(t, []).append({"index": p, "records": rec})
    return {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}


def test_names_and_codes():
    assert api_key("Produce") == 0 and api_key("list_offsets") == 2 and api_key("ListOffsets") == 2
    assert api_key(1) == 1
    assert error_code("NOT_LEADER_OR_FOLLOWER") == NLF and error_code(NLF) == NLF
    for bad in (lambda: api_key("Nope"), lambda: api_key(9999), lambda: error_code("NOPE"),
                lambda: FaultRule("Produce", "error", partition=0),
                lambda: FaultRule("Produce", "error", count=0)):
        with pytest.raises(ValueError):
            bad()


def test_no_rule_is_a_plain_request():
    d = dispatcher(FaultPlan())
    [ev] = events(d, frame(0, 9, 1, produce_v9()))
    assert ev.__class__ is HandleRequest and ev.handler is HANDLERS[0]


def test_whole_request_error_counts_down_then_serves():
    plan = FaultPlan()
    plan.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    plan.fail("Fetch", "NOT_LEADER_OR_FOLLOWER", count=1)  # another API: untouched by Produce
    d = dispatcher(plan)
    evs = events(d, frame(0, 9, 1, produce_v9()) + frame(0, 9, 2, produce_v9()) + frame(0, 9, 3, produce_v9()))
    assert [e.__class__ for e in evs] == [SendResponse, SendResponse, HandleRequest]
    for ev, corr in zip(evs[:2], (1, 2)):
        c, body = response(ev, 0, 9, True)
        assert c == corr
        assert [(t["name"], p["index"], p["error_code"]) for t in body["responses"]
                for p in t["partition_responses"]] == [("t", 0, NLF), ("t", 1, NLF), ("u", 0, NLF)]
    assert [r.api_key for r in plan.rules] == [1]  # the spent rule is gone


def test_partition_rule_splits_the_request_and_merges_in_order():
    plan = FaultPlan()
    plan.fail("Produce", "NOT_LEADER_OR_FOLLOWER", topic="t", partition=1, count=1)
    d = dispatcher(plan)
    [ev] = events(d, frame(0, 9, 7, produce_v9()))
    assert ev.__class__ is HandleRequest
    # The handler sees the request without t-1.
    assert [(t["name"], [p["index"] for p in t["partition_data"]]) for t in ev.request["topic_data"]] == [
        ("t", [0]), ("u", [0])]
    seen = []

    class Fake:  # stands in for the Produce handler: answers what it was given
        RESPONSES = HANDLERS[0].RESPONSES

        @staticmethod
        async def handle(ctx, request):
            seen.append(request)
            return {"throttle_time_ms": 0, "responses": [
                {"name": t["name"], "partition_responses": [
                    {"index": p["index"], "error_code": 0, "base_offset": 5, "log_append_time_ms": -1,
                     "log_start_offset": 0, "record_errors": [], "error_message": None}
                    for p in t["partition_data"]]} for t in request["topic_data"]]}

    ev.handler.handler = Fake
    out = trio.run(ev.handler.handle, ev.ctx, ev.request)
    assert seen == [ev.request]
    _, body = response(d.finish(ev, out), 0, 9, True)
    assert [(t["name"], p["index"], p["error_code"], p["base_offset"]) for t in body["responses"]
            for p in t["partition_responses"]] == [("t", 0, 0, 5), ("t", 1, NLF, -1), ("u", 0, 0, 5)]
    # count=1: the next request is not touched.
    [ev] = events(d, frame(0, 9, 8, produce_v9()))
    assert ev.handler is HANDLERS[0] and not plan.rules


def test_topic_rule_misses_other_topics_and_non_partition_apis():
    plan = FaultPlan()
    plan.fail("Produce", "NOT_LEADER_OR_FOLLOWER", topic="zzz", count=1)
    plan.fail("Metadata", "NOT_LEADER_OR_FOLLOWER", topic="t", count=1)
    d = dispatcher(plan)
    [ev] = events(d, frame(0, 9, 1, produce_v9()))
    assert ev.handler is HANDLERS[0]
    [ev] = events(d, frame(3, 12, 2, {"topics": [{"name": "t", "topic_id": b"\0" * 16}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False}))
    assert ev.handler is HANDLERS[3]
    assert len(plan.rules) == 2  # nothing spent


def test_delay_and_drop():
    plan = FaultPlan()
    plan.delay("ApiVersions", 0.25, count=1)
    d = dispatcher(plan)
    body = {"client_software_name": "t", "client_software_version": "1"}
    [ev] = events(d, frame(18, 3, 1, body))
    assert ev.__class__ is Delayed and ev.seconds == 0.25 and ev.event.__class__ is HandleRequest
    [ev] = events(d, frame(18, 3, 2, body))
    assert ev.__class__ is HandleRequest
    # A delay combined with an error: the error answer, delayed.
    plan.delay("Produce", 0.5)
    plan.fail("Produce", "KAFKA_STORAGE_ERROR", count=1)
    [ev] = events(d, frame(0, 9, 3, produce_v9()))
    assert ev.__class__ is Delayed and ev.event.__class__ is SendResponse
    plan.clear()
    plan.drop_connection("Produce")
    evs = events(d, frame(18, 3, 4, body) + frame(0, 9, 5, produce_v9()) + frame(18, 3, 6, body))
    assert [e.__class__ for e in evs] == [HandleRequest, Close]  # nothing after the drop
    assert d.closed and not plan.rules


def test_acks0_produce_error_closes():
    plan = FaultPlan()
    plan.fail("Produce", "NOT_LEADER_OR_FOLLOWER")
    d = dispatcher(plan)
    req = produce_v9()
    req["acks"] = 0
    [ev] = events(d, frame(0, 9, 1, req))
    assert ev.__class__ is Close


def test_coordinator_load_in_progress_on_find_coordinator():
    plan = FaultPlan()
    plan.fail("FindCoordinator", "COORDINATOR_LOAD_IN_PROGRESS", count=1)
    d = dispatcher(plan)
    [ev] = events(d, frame(10, 4, 1, {"key_type": 0, "coordinator_keys": ["g1", "g2"]}))
    _, body = response(ev, 10, 4, True)
    code = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert [(c["key"], c["error_code"]) for c in body["coordinators"]] == [("g1", code), ("g2", code)]
