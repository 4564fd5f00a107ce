"""Fetch sessions (KIP-227) and Fetch v13+ topic ids against Apache Kafka: the same sequence of
full / incremental fetches (consumer side) gets the same answers, apart from the session id's
value and the topic ids (normalised).  Covers what an incremental answer lists (nothing when
idle, a partition that got records, forgotten partitions never again), the session errors
(FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR), closing
a session, and UNKNOWN_TOPIC_ID."""
import time
import uuid

import pytest

from .helpers import batch, connect, create_topic, explain, produce, wait_for_topic, ZERO_UUID


def _topic_id(r, name):
    md = r.request(3, 12, {"topics": [{"topic_id": ZERO_UUID, "name": name}],
                           "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return md["topics"][0]["topic_id"]


def _produce(t, topic, p, values, r):
    """Produce, retrying while the new topic's leadership settles (Kafka's metadata
    propagates asynchronously: NOT_LEADER_OR_FOLLOWER right after creation)."""
    deadline = time.monotonic() + 30
    while True:
        code = produce(t, topic, p, batch(values), raw=r)["error_code"]
        if code == 0 or time.monotonic() > deadline:
            assert code == 0
            return
        time.sleep(0.2)


def _req(version, session_id, epoch, parts=(), forgotten=(), max_wait_ms=0):
    """parts: [(topic name or id, partition, offset)]; v13+ name topics by id."""
    ids = version >= 13
    topics = []
    for t, p, off in parts:
        entry = {"partition": p, "current_leader_epoch": -1, "fetch_offset": off, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}
        if topics and topics[-1]["_k"] == t:
            topics[-1]["partitions"].append(entry)
        else:
            topics.append({"_k": t, "topic": "" if ids else t, "topic_id": t if ids else ZERO_UUID,
                           "partitions": [entry]})
    for t in topics:
        del t["_k"]
    return {"cluster_id": None, "replica_id": -1, "replica_state": None, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": session_id,
            "session_epoch": epoch, "topics": topics,
            "forgotten_topics_data": [{"topic": "" if ids else t, "topic_id": t if ids else ZERO_UUID,
                                       "partitions": [p]} for t, p in forgotten],
            "rack_id": ""}


def _shape(resp, names):
    """What must be equal: error, whether a session id was given, and per listed partition its
    error, offsets and record count (topic ids mapped back to names)."""
    out = []
    for t in resp["responses"]:
        name = names.get(t.get("topic_id"), t.get("topic"))
        for p in t["partitions"]:
            recs = p["records"]
            out.append((name, p["partition_index"], p["error_code"], p["high_watermark"],
                        p["log_start_offset"], len(recs) if recs is not None else None))
    return {"error_code": resp["error_code"], "has_session": resp["session_id"] != 0, "partitions": out}


@pytest.mark.parametrize("version", [12, 13, 17, 18])
def test_incremental_fetch_session(both, version):
    topic = "diff-fs-%d" % version

    def scenario(t):
        create_topic(t, topic, 3)
        with connect(t) as r:
            wait_for_topic(r, topic, 3)
            tid = _topic_id(r, topic)
            key = tid if version >= 13 else topic
            names = {tid: topic}
            for p in range(3):
                _produce(t, topic, p, [b"a%d" % p], r)
            seen = []
            full = r.request(1, version, _req(version, 0, 0, [(key, p, 0) for p in range(3)]))
            sid = full["session_id"]
            seen.append(_shape(full, names))
            # nothing changed but the positions the client now names: offsets 1 everywhere
            inc = r.request(1, version, _req(version, sid, 1, [(key, p, 1) for p in range(3)]))
            seen.append(_shape(inc, names))
            # idle: nothing named, nothing listed
            seen.append(_shape(r.request(1, version, _req(version, sid, 2)), names))
            # new records on partition 1 only: only it is listed
            _produce(t, topic, 1, [b"b1", b"c1"], r)
            seen.append(_shape(r.request(1, version, _req(version, sid, 3)), names))
            # forget partition 2; an append there is not reported
            seen.append(_shape(r.request(1, version, _req(version, sid, 4, [(key, 1, 3)], forgotten=[(key, 2)])),
                               names))
            _produce(t, topic, 2, [b"x"], r)
            seen.append(_shape(r.request(1, version, _req(version, sid, 5)), names))
            # session errors: a wrong epoch, an unknown id, topic ids switched on or off
            seen.append(_shape(r.request(1, version, _req(version, sid, 9)), names))
            other = 13 if version < 13 else 12
            seen.append(_shape(r.request(1, other, _req(other, sid, 6)), names))
            # (the epoch did not move on errors)
            seen.append(_shape(r.request(1, version, _req(version, sid, 6)), names))
            bogus = 1 if sid != 1 else 2
            seen.append(_shape(r.request(1, version, _req(version, bogus, 1)), names))
            # close it (epoch -1): sessionless full answer; the session is gone after
            seen.append(_shape(r.request(1, version, _req(version, sid, -1, [(key, 0, 1)])), names))
            seen.append(_shape(r.request(1, version, _req(version, sid, 7)), names))
            if version >= 13:
                # an unknown topic id
                unknown = uuid.uuid4().bytes
                seen.append(_shape(r.request(1, version, _req(version, 0, -1, [(unknown, 0, 0)])),
                                   {unknown: "<unknown>"}))
            return seen
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_session_left_empty_is_closed(both):
    """Forgetting every partition closes the session: session id 0, and the id is unknown after."""
    topic = "diff-fs-empty"

    def scenario(t):
        create_topic(t, topic, 1)
        with connect(t) as r:
            wait_for_topic(r, topic, 1)
            full = r.request(1, 12, _req(12, 0, 0, [(topic, 0, 0)]))
            sid = full["session_id"]
            emptied = r.request(1, 12, _req(12, sid, 1, forgotten=[(topic, 0)]))
            after = r.request(1, 12, _req(12, sid, 2))
            return [full["session_id"] != 0, _shape(emptied, {}), _shape(after, {})]
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_incremental_order_under_the_byte_limit(both):
    """A response limit that fits one partition's data (KIP-74: at least one batch): the full
    fetch gives it to the first partition; incremental fetches then give it to the partitions
    that had nothing yet, because a partition that returned records moves to the end of the
    session's order (Kafka's fairness rule)."""
    topic = "diff-fs-order"

    def scenario(t):
        create_topic(t, topic, 3)
        with connect(t) as r:
            wait_for_topic(r, topic, 3)
            for p in range(3):
                _produce(t, topic, p, [b"%d" % p * 200], r)
            names = {}

            def req(sid, epoch, parts=()):
                q = _req(12, sid, epoch, parts)
                q["max_bytes"] = 10   # below one batch: only the first partition with data gets one
                return q
            seen = []
            full = r.request(1, 12, req(0, 0, [(topic, p, 0) for p in range(3)]))
            sid = full["session_id"]
            seen.append(_shape(full, names))
            got = {p: 0 for p in range(3)}
            for epoch in range(1, 4):
                prev = seen[-1]["partitions"]
                named = [(topic, p, 1) for (_, p, _, _, _, n) in prev if n and not got[p]]
                for (_, p, _, _, _, n) in prev:
                    if n:
                        got[p] = 1
                seen.append(_shape(r.request(1, 12, req(sid, epoch, named)), names))
            return seen
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [12, 15, 18])
def test_fetch_from_a_non_replica(both, version):
    """A follower fetch (``replica_id``, v15+ in ``replica_state``) from a broker id that is no
    replica of the partition: the same per-partition answer as Kafka's, with or without a
    session."""
    topic = "diff-fs-nonreplica"

    def scenario(t):
        create_topic(t, topic, 1)
        with connect(t) as r:
            wait_for_topic(r, topic, 1)
            _produce(t, topic, 0, [b"a"], r)
            key = _topic_id(r, topic) if version >= 13 else topic
            out = []
            for epoch in (-1, 0):
                q = _req(version, 0, epoch, [(key, 0, 0)])
                if version >= 15:
                    q["replica_state"] = {"replica_id": 7, "replica_epoch": -1}
                else:
                    q["replica_id"] = 7
                resp = r.request(1, version, q)
                out.append(_shape(resp, {key: topic}))
            return out
    p, k = both(scenario)
    assert p == k, explain(p, k)
