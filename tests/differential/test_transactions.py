"""Transactions on the wire, pykbroker against Apache Kafka: the same raw scenario (InitProducerId
with a transactional id, AddPartitionsToTxn, transactional Produce, EndTxn abort and commit, an
open transaction, the errors of each step) gives the same answers, and Fetch returns the same
batches (data and control, attributes, sequences, epochs), aborted lists, high watermarks and
last stable offsets under both isolation levels.  Producer ids differ between the two brokers
and are normalised to their order of appearance."""
from __future__ import annotations

import time
import uuid

from pykbroker.protocol.records import control_type, iter_batches

from tests.groups.helpers import txn_offset_commit_v3

from .helpers import absorbed, batch, call, connect, create_topic, explain, list_offsets

RETRIABLE = (14, 15, 16, 51)   # load in progress, not available, not coordinator, concurrent
NOT_COORDINATOR = 16
API_NAMES = {10: "FindCoordinator", 22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn",
             28: "TxnOffsetCommit"}


def _retry(t, api, version, body, field="error_code", timeout=30.0):
    """The request, retried while it answers what Kafka's clients retry (every retried answer
    is noted in helpers.ABSORBED and shown in the summary)."""
    deadline = time.monotonic() + timeout
    while True:
        r = call(t, api, version, body)
        code = r[field] if field else r
        if code not in RETRIABLE or time.monotonic() > deadline:
            return r
        _absorb(t, api, code)
        time.sleep(0.2)


def _absorb(t, api, code):
    """Note a retried answer.  NOT_COORDINATOR is retried for Kafka only: its single node names
    itself coordinator before it has taken over a new __transaction_state / __consumer_offsets
    partition and answers NOT_COORDINATOR meanwhile (seen in this module's summary), which its
    clients absorb by looking up and retrying.  pykbroker's coordinators own their partitions
    before FindCoordinator names them, so a NOT_COORDINATOR from it is a failure, not a retry."""
    assert not (code == NOT_COORDINATOR and t.name == "pykbroker"), \
        "pykbroker named itself coordinator, then answered %s with NOT_COORDINATOR" % API_NAMES.get(api, api)
    absorbed(t, API_NAMES.get(api, str(api)), code)


def _coordinator(t, tid):
    r = _retry(t, 10, 3, {"key": tid, "key_type": 1})
    assert r["error_code"] == 0, (t, r)


def _init(t, tid, timeout_ms=60000, version=4):
    r = _retry(t, 22, version, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                "producer_id": -1, "producer_epoch": -1})
    return r


def _add(t, tid, pid, epoch, topic, parts, version=3):
    deadline = time.monotonic() + 30
    while True:
        r = call(t, 24, version, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                  "v3_and_below_producer_epoch": epoch,
                                  "v3_and_below_topics": [{"name": topic, "partitions": parts}]})
        codes = [p["partition_error_code"] for tr in r["results_by_topic_v3_and_below"]
                 for p in tr["results_by_partition"]]
        if not (set(codes) & {51}) or time.monotonic() > deadline:
            return codes
        _absorb(t, 24, 51)
        time.sleep(0.1)


def _end(t, tid, pid, epoch, commit, version=3):
    return _retry(t, 26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                   "committed": commit})["error_code"]


def _produce(t, tid, topic, part, values, pid, epoch, seq, transactional=True):
    with connect(t) as c:
        r = c.request(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": part, "records": batch(
                values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)}]}]})
    p = r["responses"][0]["partition_responses"][0]
    return {"error_code": p["error_code"], "base_offset": p["base_offset"]}


def _wait_end(t, topic, part, end):
    deadline = time.monotonic() + 90   # generous: a loaded CI machine (seen above 30 s for Kafka once)
    while list_offsets(t, topic, part, -1, isolation_level=1)["offset"] != end:
        assert time.monotonic() < deadline, "markers of %s not written" % topic
        time.sleep(0.05)


def _fetch(t, topic, part, isolation, pids):
    with connect(t) as c:
        r = c.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": part, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
    p = r["responses"][0]["partitions"][0]
    data = bytes(p["records"] or b"")

    def norm(pid):
        return pids.setdefault(pid, "P%d" % len(pids)) if pid >= 0 else pid
    batches = [(h.base_offset, h.last_offset_delta, h.is_control, h.is_transactional, norm(h.producer_id),
                h.producer_epoch, h.base_sequence, h.records_count,
                control_type(data[h.position:h.position + h.size]) if h.is_control else None)
               for h in iter_batches(data)]
    aborted = None if p["aborted_transactions"] is None else \
        [(norm(a["producer_id"]), a["first_offset"]) for a in p["aborted_transactions"]]
    return {"error_code": p["error_code"], "high_watermark": p["high_watermark"],
            "last_stable_offset": p["last_stable_offset"], "aborted": aborted, "batches": batches}


def scenario(t):
    topic = "txn-diff"
    tid = "txn-diff-id"
    create_topic(t, topic, 2)
    _coordinator(t, tid)
    out = {}
    init = _init(t, tid)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    out["init"] = (init["error_code"], epoch)
    out["init_bad_timeout"] = _init(t, tid + "-x", timeout_ms=2_000_000_000)["error_code"]
    out["add_unknown_topic"] = _add(t, tid, pid, epoch, "no-such-topic", [0])
    out["add_wrong_pid"] = _add(t, tid, pid + 100000, epoch, topic, [0])
    out["add_wrong_epoch"] = _add(t, tid, pid, epoch + 1, topic, [0])
    out["end_without_txn"] = _end(t, tid, pid, epoch, True)
    # a transactional write to a partition not in the transaction
    out["produce_not_added"] = _produce(t, tid, topic, 1, [b"x"], pid, epoch, 0)["error_code"]
    # transaction 1: aborted
    out["add1"] = _add(t, tid, pid, epoch, topic, [0, 1])
    out["produce1"] = [_produce(t, tid, topic, 0, [b"a1", b"a2"], pid, epoch, 0),
                       _produce(t, tid, topic, 1, [b"a3"], pid, epoch, 0)]
    out["end1_wrong_epoch"] = _end(t, tid, pid, epoch + 1, False)
    out["end1"] = _end(t, tid, pid, epoch, False)
    _wait_end(t, topic, 0, 3)
    _wait_end(t, topic, 1, 2)
    out["end1_again_commit"] = _end(t, tid, pid, epoch, True)
    out["end1_retry"] = _end(t, tid, pid, epoch, False)
    # transaction 2: committed, partition 0 only
    out["add2"] = _add(t, tid, pid, epoch, topic, [0])
    out["produce2"] = _produce(t, tid, topic, 0, [b"c1"], pid, epoch, 2)
    out["end2"] = _end(t, tid, pid, epoch, True)
    _wait_end(t, topic, 0, 5)
    # transaction 3: left open
    out["add3"] = _add(t, tid, pid, epoch, topic, [0])
    out["produce3"] = _produce(t, tid, topic, 0, [b"o1", b"o2"], pid, epoch, 3)
    # a non-transactional write of the same producer while its transaction is open
    out["produce_plain"] = _produce(t, None, topic, 0, [b"p"], pid, epoch, 5, transactional=False)["error_code"]
    pids: dict = {}
    for part in (0, 1):
        for iso in (0, 1):
            out["fetch-%d-%d" % (part, iso)] = _fetch(t, topic, part, iso, pids)
        out["latest-%d" % part] = [list_offsets(t, topic, part, -1, isolation_level=iso)["offset"] for iso in (0, 1)]
    out["end3"] = _end(t, tid, pid, epoch, False)
    # a second InitProducerId bumps the epoch
    again = _init(t, tid)
    out["init_again"] = (again["error_code"], again["producer_epoch"] - epoch, again["producer_id"] == pid)
    return out


def test_transaction_scenario(both):
    p, k = both(scenario)
    assert p == k, explain(p, k)


# -- transaction version 2 (KIP-890 part 2) ------------------------------------------------------

def _produce_v(t, tid, topic, part, values, pid, epoch, seq, version, topic_id=None):
    """A transactional Produce at ``version`` (v13 names the topic by id)."""
    td = {"topic_id": topic_id} if version >= 13 else {"name": topic}
    td["partition_data"] = [{"index": part, "records": batch(values, producer_id=pid, producer_epoch=epoch,
                                                             base_sequence=seq, transactional=True)}]
    deadline = time.monotonic() + 30
    while True:
        with connect(t) as c:
            r = c.request(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [td]})
        code = r["responses"][0]["partition_responses"][0]["error_code"]
        # NOT_ENOUGH_REPLICAS: the coordinator still completes the previous transaction; NOT_LEADER_OR_FOLLOWER /
        # UNKNOWN_TOPIC_OR_PARTITION: Kafka has not yet made the new topic's leader live (all retried by clients)
        if code not in (19, 6, 3) or time.monotonic() > deadline:
            return code
        time.sleep(0.1)


def _end_v5(t, tid, pid, epoch, commit, base):
    """EndTxn v5: (error, returned epoch relative to ``base``, returned the same producer id?)."""
    r = _retry(t, 26, 5, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit})
    return (r["error_code"], r["producer_epoch"] - base if r["producer_epoch"] >= 0 else -1,
            r["producer_id"] == pid if r["producer_id"] >= 0 else None)


def _describe(t, tid, base):
    s = call(t, 65, 0, {"transactional_ids": [tid]})["transaction_states"][0]
    return (s["error_code"], s["transaction_state"], s["producer_epoch"] - base,
            sorted((x["topic"], p) for x in s["topics"] for p in x["partitions"]))


def _wait_state(t, tid, state):
    deadline = time.monotonic() + 30
    while _describe(t, tid, 0)[1] != state:
        assert time.monotonic() < deadline, "%s never reached %s" % (tid, state)
        time.sleep(0.05)


def _txn_log(t, tid, pid, e0):
    """The id's records in ``__transaction_state`` as written by the broker, read back raw
    (Kafka 4 writes flexible v1 values): [(value version, state, epoch - e0, last epoch - e0 or
    None, partitions of the data topic, client transaction version, previous pid is pid, next pid)]."""
    from pykbroker.coordinator.group.offsets import partition_for
    from pykbroker.coordinator.txn import state_log as S
    from pykbroker.protocol.records import decode_records
    part = partition_for(tid, 50)
    with connect(t) as c:
        r = c.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "__transaction_state", "partitions": [
                {"partition": part, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    data = bytes(r["responses"][0]["partitions"][0]["records"] or b"")
    out = []
    for h in iter_batches(data):
        for rec in decode_records(data[h.position:h.position + h.size]):
            if rec.value is None or S.parse_key(rec.key) != tid:
                continue
            v = S.parse_value(rec.value)
            out.append((int.from_bytes(rec.value[:2], "big"), S.STATE_NAMES[v["state"]], v["producer_epoch"] - e0,
                        sorted(tp for tp in v["partitions"] if not tp[0].startswith("__")),
                        len(v["partitions"]), v["client_transaction_version"],
                        v["previous_producer_id"] == pid, v["next_producer_id"]))
    return out


def scenario_tv2(t):
    topic, tid, group = "txn-tv2", "txn-tv2-id", "txn-tv2-group"
    create_topic(t, topic, 2)
    md = call(t, 3, 12, {"topics": [{"name": topic, "topic_id": b"\0" * 16}], "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False})
    topic_id = md["topics"][0]["topic_id"]
    _coordinator(t, tid)
    _retry(t, 10, 3, {"key": group, "key_type": 0})
    init = _init(t, tid, version=5)
    pid, e0 = init["producer_id"], init["producer_epoch"]
    out = {"init": (init["error_code"], e0)}
    # v11 (a TV1 client) to a partition not in the transaction: TRANSACTION_ABORTABLE
    out["produce_v11_not_added"] = _produce_v(t, tid, topic, 0, [b"x"], pid, e0, 0, 11)
    # transaction 1: Produce v12 / v13 add their partitions, TxnOffsetCommit v5 the group's
    out["produce1"] = [_produce_v(t, tid, topic, 0, [b"c1", b"c2"], pid, e0, 0, 12),
                       _produce_v(t, tid, topic, 1, [b"c3"], pid, e0, 0, 13, topic_id)]
    deadline = time.monotonic() + 30
    while True:   # the group's coordinator may still be loading (retried, as clients do)
        r = call(t, 28, 5, {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": e0,
                            "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                                       "committed_leader_epoch": -1,
                                                                       "committed_metadata": ""}]}]})
        codes = [p["error_code"] for x in r["topics"] for p in x["partitions"]]
        if not set(codes) & set(RETRIABLE) or time.monotonic() > deadline:
            break
        for code in set(codes) & set(RETRIABLE):
            _absorb(t, 28, code)
        if 16 in codes:
            _retry(t, 10, 3, {"key": group, "key_type": 0})
        time.sleep(0.2)
    out["txn_offset_commit"] = codes
    d = _describe(t, tid, e0)
    out["describe1"] = (d[0], d[1], d[2], [tp for tp in d[3] if tp[0] == topic], len(d[3]))
    out["end1_wrong_epoch"] = _end_v5(t, tid, pid, e0 + 1, True, e0)
    out["end1"] = _end_v5(t, tid, pid, e0, True, e0)
    _wait_end(t, topic, 0, 3)
    _wait_end(t, topic, 1, 2)
    _wait_state(t, tid, "CompleteCommit")
    out["end1_retry"] = _end_v5(t, tid, pid, e0, True, e0)
    out["end1_retry_abort"] = _end_v5(t, tid, pid, e0, False, e0)
    out["describe_after1"] = _describe(t, tid, e0)
    out["produce_old_epoch"] = _produce_v(t, tid, topic, 0, [b"late"], pid, e0, 2, 12)
    out["verify_only_after"] = [
        p["partition_error_code"] for x in call(t, 24, 5, {"transactions": [
            {"transactional_id": tid, "producer_id": pid, "producer_epoch": e0 + 1, "verify_only": True,
             "topics": [{"name": topic, "partitions": [0]}]}]})["results_by_transaction"][0]["topic_results"]
        for p in x["results_by_partition"]]
    # transaction 2 with the bumped epoch: aborted
    out["produce2"] = _produce_v(t, tid, topic, 0, [b"a1"], pid, e0 + 1, 0, 12)
    out["end2"] = _end_v5(t, tid, pid, e0 + 1, False, e0)
    _wait_end(t, topic, 0, 5)
    _wait_state(t, tid, "CompleteAbort")
    # an abort of a transaction the coordinator never saw, then a commit of none
    out["end_empty_abort"] = _end_v5(t, tid, pid, e0 + 2, False, e0)
    _wait_state(t, tid, "CompleteAbort")
    out["end_empty_commit"] = _end_v5(t, tid, pid, e0 + 3, True, e0)
    # transaction 3 committed, then a commit with the epoch it returned (no transaction open)
    out["produce3"] = _produce_v(t, tid, topic, 1, [b"c4"], pid, e0 + 3, 0, 12)
    out["end3"] = _end_v5(t, tid, pid, e0 + 3, True, e0)
    _wait_end(t, topic, 1, 4)
    _wait_state(t, tid, "CompleteCommit")
    out["end_empty_commit_after_commit"] = _end_v5(t, tid, pid, e0 + 4, True, e0)
    out["describe_end"] = _describe(t, tid, e0)
    pids: dict = {}
    for part in (0, 1):
        for iso in (0, 1):
            out["fetch-%d-%d" % (part, iso)] = _fetch(t, topic, part, iso, pids)
    out["transaction_log"] = _txn_log(t, tid, pid, e0)
    committed = call(t, 9, 8, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
                               "require_stable": True})
    out["committed_offset"] = [p["committed_offset"] for g in committed["groups"] for x in g["topics"]
                               for p in x["partitions"]]
    return out


def test_transaction_version_2_scenario(both):
    """Transaction version 2 on the wire: implicit adds by Produce v12/v13 and TxnOffsetCommit v5,
    EndTxn v5 epoch bumps and their retries, markers with the bumped epoch, the fencing of the
    old epoch, an abort without a transaction."""
    p, k = both(scenario_tv2)
    assert p == k, explain(p, k)
    # the comparison covered real TV2 state records: flexible v1 values naming client version 2
    assert {(r[0], r[5]) for r in p["transaction_log"]} >= {(1, 0), (1, 2)}, p["transaction_log"]


# -- TxnOffsetCommit v6: topics by id (KIP-1319) -------------------------------------------------

def _toc(t, version, tid, group, pid, epoch, topics, generation=-1, member_id=""):
    """One TxnOffsetCommit; ``topics`` = [(name or topic id, [(partition, offset)])]. Retries the
    group coordinator's retriable answers as clients do. Answers [(topic, [(partition, error)])]."""
    body = {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id_or_member_epoch": generation, "member_id": member_id, "group_instance_id": None,
            "topics": [{("topic_id" if version >= 6 else "name"): key, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": ""}
                for p, o in parts]} for key, parts in topics]}
    deadline = time.monotonic() + 30
    while True:
        r = call(t, 28, version, body)
        codes = {p["error_code"] for x in r["topics"] for p in x["partitions"]}
        if not codes & set(RETRIABLE) or time.monotonic() > deadline:
            break
        for code in codes & set(RETRIABLE):
            _absorb(t, 28, code)
        if 16 in codes:
            _retry(t, 10, 3, {"key": group, "key_type": 0})
        time.sleep(0.2)
    return [(x["topic_id"] if version >= 6 else x["name"], [(p["partition_index"], p["error_code"]) for p in x["partitions"]])
            for x in r["topics"]] + ([] if version < 6 else [("names", sorted({x["name"] for x in r["topics"]}))])


def scenario_txn_offset_commit_v6(t):
    topic, other, tid, group = "toc-v6", "toc-v6-other", "toc-v6-id", "toc-v6-group"
    create_topic(t, topic, 2)
    create_topic(t, other, 1)
    md = call(t, 3, 12, {"topics": [{"name": n, "topic_id": b"\0" * 16} for n in (topic, other)],
                         "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    ids = {x["name"]: x["topic_id"] for x in md["topics"]}
    unknown, zero = bytes(range(1, 17)), b"\0" * 16   # an id no topic has; the zero id
    names = {ids[topic]: "T", ids[other]: "O", unknown: "U", zero: "Z"}

    def norm(res):   # topic ids differ between the clusters: named by role
        return [(names.get(k, k) if isinstance(k, (bytes, bytearray)) else k, v) for k, v in res]

    _coordinator(t, tid)
    _retry(t, 10, 3, {"key": group, "key_type": 0})
    init = _init(t, tid, version=5)
    pid, e0 = init["producer_id"], init["producer_epoch"]
    out = {"init": init["error_code"]}
    # only unknown topic ids, with a wrong epoch: answered from the topic checks alone
    out["only_unknown_ids_fenced"] = norm(_toc(t, 6, tid, group, pid, e0 + 7, [(unknown, [(0, 1)]), (zero, [(0, 1)])]))
    # only unknown names (v5), same: the topic check comes first
    out["only_unknown_name_v5"] = _toc(t, 5, tid, group, pid, e0 + 7, [("toc-v6-nope", [(0, 1)])])
    # a generation for a group that does not exist: GROUP_ID_NOT_FOUND at v6, ILLEGAL_GENERATION at v5
    out["unknown_group_generation_v6"] = norm(_toc(t, 6, tid, group + "-none", pid, e0, [(ids[topic], [(0, 1)])],
                                                   generation=3, member_id="m"))
    out["unknown_group_generation_v5"] = _toc(t, 5, tid, group + "-none", pid, e0, [(topic, [(0, 1)])],
                                              generation=3, member_id="m")
    # a KIP-848 member's epoch newer than its own: STALE_MEMBER_EPOCH at v6, ILLEGAL_GENERATION at v5
    group848 = group + "-848"
    _retry(t, 10, 3, {"key": group848, "key_type": 0})
    with connect(t, timeout=40) as c:
        hb = c.request(68, 1, {"group_id": group848, "member_id": str(uuid.uuid4()), "member_epoch": 0,
                               "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                               "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                               "server_assignor": None, "topic_partitions": []})
    out["heartbeat"] = hb["error_code"]
    for v in (6, 5):
        key = ids[topic] if v == 6 else topic
        out["stale_member_epoch_v%d" % v] = norm(_toc(t, v, tid, group848, pid, e0, [(key, [(0, 1)])],
                                                       generation=hb["member_epoch"] + 5, member_id=hb["member_id"]))
    out["produce"] = _produce_v(t, tid, topic, 0, [b"v1", b"v2"], pid, e0, 0, 12)
    # the mixed commit: known partitions, a partition the topic lacks, an unknown id, the zero id,
    # the same topic twice (one answer entry per topic id)
    out["mixed"] = norm(_toc(t, 6, tid, group, pid, e0, [
        (ids[topic], [(0, 5), (7, 1)]), (unknown, [(0, 1), (1, 1)]), (ids[other], [(0, 3)]), (zero, [(2, 1)]),
        (ids[topic], [(1, 6)])]))
    out["end"] = _end_v5(t, tid, pid, e0, True, e0)
    _wait_end(t, topic, 0, 3)
    _wait_state(t, tid, "CompleteCommit")
    fetched = call(t, 9, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0, 1]}, {"name": other, "partition_indexes": [0]}]}],
        "require_stable": True})
    out["committed"] = sorted((x["name"], p["partition_index"], p["committed_offset"], p["error_code"])
                              for g in fetched["groups"] for x in g["topics"] for p in x["partitions"])
    # after the commit (epoch bumped): the old epoch with a known topic is fenced, an unknown id is not
    out["old_epoch"] = norm(_toc(t, 6, tid, group, pid, e0, [(ids[topic], [(0, 9)]), (unknown, [(0, 1)])]))
    return out


def test_txn_offset_commit_v6_scenario(both):
    """TxnOffsetCommit v6 (topic ids, KIP-1319) on the wire: unknown and zero topic ids answered
    UNKNOWN_TOPIC_ID before any transaction or group check, partitions a topic lacks
    UNKNOWN_TOPIC_OR_PARTITION, one answer entry per topic id (names empty), GROUP_ID_NOT_FOUND for a
    generation of a group that does not exist, STALE_MEMBER_EPOCH for a KIP-848 member's wrong epoch
    (ILLEGAL_GENERATION at v5), and the offsets committed by id read back by name."""
    p, k = both(scenario_txn_offset_commit_v6)
    assert p == k, explain(p, k)
    assert ("toc-v6", 0, 5, 0) in p["committed"] and ("toc-v6", 1, 6, 0) in p["committed"], p["committed"]
    # the comparison covered the v6 codes (UNKNOWN_TOPIC_ID, GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH)
    # and their older forms (UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_GENERATION)
    assert p["only_unknown_ids_fenced"][:2] == [("U", [(0, 100)]), ("Z", [(0, 100)])], p
    assert p["only_unknown_name_v5"] == [("toc-v6-nope", [(0, 3)])], p
    assert p["unknown_group_generation_v6"][0] == ("T", [(0, 69)]), p
    assert p["unknown_group_generation_v5"] == [("toc-v6", [(0, 22)])], p
    assert p["stale_member_epoch_v6"][0] == ("T", [(0, 113)]) and p["stale_member_epoch_v5"] == [("toc-v6", [(0, 22)])], p


# -- InitProducerId with the producer's id/epoch (KIP-360) under transaction version 2 -----------

def _reinit(t, tid, pid, epoch, base):
    """InitProducerId v5 naming the producer's last id/epoch, as a client recovering from an
    unconfirmed EndTxn sends it: (error, epoch relative to ``base`` or -1, same producer id?)."""
    r = _retry(t, 22, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                          "producer_id": pid, "producer_epoch": epoch})
    return (r["error_code"], r["producer_epoch"] - base if r["producer_epoch"] >= 0 else -1,
            r["producer_id"] == pid if r["producer_id"] >= 0 else None)


def scenario_tv2_reinit(t):
    """A TV2 client whose EndTxn outcome it never learned (its response lost, or retries
    exhausted) re-runs InitProducerId with the epoch it had *before* the EndTxn bumped it.  The
    coordinator must take that for a retry (Kafka's lastProducerEpoch, kept through Complete*) and
    answer the current epoch, not PRODUCER_FENCED: franz-go's GroupTransactSession fails every
    buffered record with that answer."""
    topic, tid = "txn-tv2-reinit", "txn-tv2-reinit-id"
    create_topic(t, topic, 1)
    _coordinator(t, tid)
    init = _init(t, tid, version=5)
    pid, e0 = init["producer_id"], init["producer_epoch"]
    out = {"init": init["error_code"]}
    # a committed transaction: EndTxn v5 bumps e0 -> e0+1
    out["produce1"] = _produce_v(t, tid, topic, 0, [b"c1"], pid, e0, 0, 12)
    out["end1"] = _end_v5(t, tid, pid, e0, True, e0)
    _wait_end(t, topic, 0, 2)
    _wait_state(t, tid, "CompleteCommit")
    # the client never saw end1's answer: InitProducerId with the pre-bump epoch
    out["reinit_pre_bump_after_commit"] = _reinit(t, tid, pid, e0, e0)
    out["state_after_reinit"] = _describe(t, tid, e0)[:3]
    # now with the epoch it got back: a bump
    cur = e0 + out["reinit_pre_bump_after_commit"][1] if out["reinit_pre_bump_after_commit"][0] == 0 else e0 + 1
    out["reinit_current"] = _reinit(t, tid, pid, cur, e0)
    cur = e0 + out["reinit_current"][1] if out["reinit_current"][0] == 0 else cur
    # an epoch older than the last one is fenced
    out["reinit_stale"] = _reinit(t, tid, pid, e0, e0)
    # an aborted transaction (EndTxn v5 abort bumps too), then the pre-bump epoch again
    out["produce2"] = _produce_v(t, tid, topic, 0, [b"a1"], pid, cur, 0, 12)
    out["end2"] = _end_v5(t, tid, pid, cur, False, e0)
    _wait_end(t, topic, 0, 4)
    _wait_state(t, tid, "CompleteAbort")
    out["reinit_pre_bump_after_abort"] = _reinit(t, tid, pid, cur, e0)
    cur = e0 + out["reinit_pre_bump_after_abort"][1] if out["reinit_pre_bump_after_abort"][0] == 0 else cur + 1
    out["describe_end"] = _describe(t, tid, e0)[:3]
    # a new incarnation (no id/epoch: InitProducerId bumps and forgets the last epoch), then the
    # old incarnation's KIP-360 re-init with the epoch it had: fenced, not a "retry" of the bump
    fresh = _init(t, tid, version=5)
    out["new_incarnation"] = (fresh["error_code"], fresh["producer_epoch"] - e0, fresh["producer_id"] == pid)
    out["old_incarnation_reinit"] = _reinit(t, tid, pid, cur, e0)
    cur = e0 + out["new_incarnation"][1]
    # a producer re-inits with its epoch while its transaction is open (franz-go does after its
    # produce retries ran out): the coordinator fences and aborts it (CONCURRENT_TRANSACTIONS,
    # retried by _reinit), then answers the retried re-init
    out["produce3"] = _produce_v(t, tid, topic, 0, [b"o1"], pid, cur, 0, 12)
    out["reinit_while_open"] = _reinit(t, tid, pid, cur, e0)
    out["describe_after_fence"] = _describe(t, tid, e0)[:3]
    return out


def test_tv2_init_producer_id_retry_after_end_txn(both):
    """KIP-360 InitProducerId after a transaction version 2 EndTxn, with the epoch before its bump:
    the same answers as Kafka 4.4 (the current epoch, no bump, no fencing)."""
    p, k = both(scenario_tv2_reinit)
    assert p == k, explain(p, k)
    # the scenario reached the case it is about: the pre-bump epoch was accepted
    assert p["reinit_pre_bump_after_commit"][0] == 0, p


# -- TxnOffsetCommit against a classic group's member checks (KIP-447) ----------------------------

def scenario_txn_offset_commit_group_states(t):
    """TxnOffsetCommit v3 (sarama's version) against a classic group whose only member has joined
    but not synced (CompletingRebalance), then is Stable: the member's generation, no member at
    all (generation -1, what sarama's AddOffsetsToTxn with a group id sends), a wrong generation,
    an unknown member.  Kafka's ClassicGroup.validateOffsetCommit leaves the group state out for
    transactional commits (no REBALANCE_IN_PROGRESS) and accepts one without member and
    generation whatever the state.  Then the transaction commits: the offsets read back."""
    from .test_groups import JOIN_V, SYNC_V, join_body, wait_coordinator
    topic, group, tid = "txn-grp-states", "txn-grp-states-g", "txn-grp-states-id"
    create_topic(t, topic, 1)
    wait_coordinator(t, group)
    _coordinator(t, tid)
    init = _init(t, tid)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    out = {}
    with connect(t) as c:
        mid = c.request(11, JOIN_V, join_body(group, session=30000, rebalance=30000))["member_id"]
        j = c.request(11, JOIN_V, join_body(group, mid, session=30000, rebalance=30000))
        gen = j["generation_id"]
        out["join"] = (j["error_code"], gen, j["leader"] == mid)
        out["add_offsets"] = _retry(t, 25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                               "group_id": group})["error_code"]

        def commit(offset, generation, member):
            r = call(t, 28, 3, txn_offset_commit_v3(tid, group, pid, epoch, generation, member, topic, offset))
            return r["topics"][0]["partitions"][0]["error_code"]
        d = call(t, 15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        out["state_before_sync"] = d["group_state"]
        out["completing_rebalance"] = {"member": commit(3, gen, mid), "no_member": commit(4, -1, ""),
                                       "wrong_generation": commit(5, gen + 1, mid),
                                       "unknown_member": commit(5, gen, "nobody")}
        s = c.request(14, SYNC_V, {"group_id": group, "generation_id": gen, "member_id": mid,
                                   "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": [{"member_id": mid, "assignment": b""}]})
        out["sync"] = s["error_code"]
        out["stable"] = {"member": commit(6, gen, mid), "no_member": commit(7, -1, ""),
                         "wrong_generation": commit(8, gen + 1, mid), "unknown_member": commit(8, gen, "nobody")}
        out["end"] = _end(t, tid, pid, epoch, True)
        deadline = time.monotonic() + 30
        while True:
            f = call(t, 9, 7, {"groups": None, "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                               "require_stable": True})
            p = f["topics"][0]["partitions"][0]
            if p["error_code"] != 88 or time.monotonic() > deadline:   # UNSTABLE_OFFSET_COMMIT until the marker
                break
            time.sleep(0.1)
        out["committed"] = (p["error_code"], p["committed_offset"])
        c.request(13, 4, {"group_id": group, "members": [{"member_id": mid, "group_instance_id": None,
                                                          "reason": None}]})
    return out


def test_txn_offset_commit_group_states(both):
    p, k = both(scenario_txn_offset_commit_group_states)
    assert p == k, explain(p, k)
    assert p["completing_rebalance"]["member"] == 0 and p["committed"] == (0, 7), p
