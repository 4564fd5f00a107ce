"""Byte-rate quotas enforced: Kafka's sampled rate and throttle formula (sans-IO), its
precedence, and on a broker the throttle a real client reads back.

The brokers here use ``quota.window.num=2`` (windows of 1 s) so that a throttle lasts about a
second instead of ten; the formula is the same.  Assertions are on the throttle values the
broker answers and on lower bounds of how long it holds a connection (a muted connection is
never answered sooner than its throttle time), never on a throughput within tight bounds."""
import json
import time

import pytest

import pykbroker
from pykbroker.quota.manager import FETCH, PRODUCE, ClientQuotaManager
from pykbroker.quota.rate import Rate
from pykbroker.protocol.wire import WireClient, create_topic, make_batch

from .helpers import QUOTA_CONFIG, fetch_v12, quota_broker, set_quota


def test_rate_and_throttle_time_are_kafkas():
    r = Rate(11, 1000)
    r.record(1000, 0)
    # a first burst is measured over (samples - 1) windows: 1000 B / 10 s
    assert r.measure(0) == 100.0
    # (observed - bound) / bound x window = (100 - 50) / 50 x 10 000 ms
    assert r.throttle_ms(50, 0) == 10000
    assert r.throttle_ms(100, 0) == 0
    r.record(1000, 2500)            # a new sample, 2.5 s later
    assert r.window_size_ms(2500) == 2500 + 8 * 1000
    assert r.measure(2500) == pytest.approx(2000 / 10.5)
    # samples without an event for samples x window are dropped
    assert r.measure(2500 + 11000) == 0.0
    # Java's Math.round: half up
    r2 = Rate(2, 1000)
    r2.record(3, 0)                 # 3 / 1 s, bound 2: 0.5 x 1000 ms
    assert r2.throttle_ms(2, 0) == 500


def _stored(*items):
    return {tuple(sorted(e.items(), key=lambda kv: {"client-id": 0, "user": 1}[kv[0]])): v for e, v in items}


def test_precedence_and_shared_rates():
    m = ClientQuotaManager()
    assert not m.enabled and m.resolve(PRODUCE, "alice", "app") is None
    m.apply(_stored(({"client-id": None}, {"producer_byte_rate": 1.0}),
                    ({"client-id": "app"}, {"producer_byte_rate": 2.0}),
                    ({"user": None}, {"producer_byte_rate": 3.0}),
                    ({"user": None, "client-id": None}, {"producer_byte_rate": 4.0}),
                    ({"user": None, "client-id": "app"}, {"producer_byte_rate": 5.0}),
                    ({"user": "alice"}, {"producer_byte_rate": 6.0}),
                    ({"user": "alice", "client-id": None}, {"producer_byte_rate": 7.0}),
                    ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 8.0, "consumer_byte_rate": 80.0})))
    assert m.enabled
    assert m.resolve(PRODUCE, "alice", "app") == (8.0, (PRODUCE, "alice", "app"))
    assert m.resolve(FETCH, "alice", "app") == (80.0, (FETCH, "alice", "app"))
    assert m.resolve(FETCH, "alice", "other") is None      # no consumer quota at any other level
    assert m.resolve(PRODUCE, "alice", "other") == (7.0, (PRODUCE, "alice", "other"))
    assert m.resolve(PRODUCE, "bob", "app") == (5.0, (PRODUCE, "bob", "app"))
    assert m.resolve(PRODUCE, "bob", "other") == (4.0, (PRODUCE, "bob", "other"))
    m.apply(_stored(({"user": "alice"}, {"producer_byte_rate": 6.0}),
                    ({"user": None}, {"producer_byte_rate": 3.0}),
                    ({"client-id": "app"}, {"producer_byte_rate": 2.0}),
                    ({"client-id": None}, {"producer_byte_rate": 1.0})))
    # a user-level quota is shared by every client id of the user (one rate: client tag "")
    assert m.resolve(PRODUCE, "alice", "x") == m.resolve(PRODUCE, "alice", "y") == (6.0, (PRODUCE, "alice", ""))
    assert m.resolve(PRODUCE, "bob", "x") == (3.0, (PRODUCE, "bob", ""))
    m.apply(_stored(({"client-id": "app"}, {"producer_byte_rate": 2.0}), ({"client-id": None}, {"producer_byte_rate": 1.0})))
    # a client-id-level quota is shared by every user of the client id
    assert m.resolve(PRODUCE, "alice", "app") == m.resolve(PRODUCE, "bob", "app") == (2.0, (PRODUCE, "", "app"))
    assert m.resolve(PRODUCE, "alice", "zzz") == (1.0, (PRODUCE, "", "zzz"))
    m.apply({})
    assert not m.enabled


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with quota_broker(str(tmp_path_factory.mktemp("quota-throttle"))) as b:
        yield b


def _produce(c, topic, nbytes, version):
    batch = make_batch([b"x" * nbytes])
    t0 = time.monotonic()
    r = c.request(0, version, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
    return r["throttle_time_ms"], time.monotonic() - t0


def _until_throttled(c, topic, version, nbytes=6000):
    """Produce ``nbytes`` at a time until an answer carries a throttle (a slow machine spreads
    the requests over more of the window, so how many it takes varies; the formula itself is
    test_rate_and_throttle_time_are_kafkas's)."""
    for _ in range(10):
        throttle, elapsed = _produce(c, topic, nbytes, version)
        if throttle > 0:
            return throttle, elapsed
    raise AssertionError("never throttled")


def test_produce_throttled_client_side_kip219(broker):
    """Produce v9: answered at once with throttle_time_ms, then the connection is muted."""
    create_topic(broker, "q-produce")
    set_quota(broker, {"client-id": "slow-producer"}, producer_byte_rate=10000)
    with WireClient(broker, client_id="slow-producer") as c, WireClient(broker, client_id="free") as free:
        first, _ = _produce(c, "q-produce", 6000, 9)      # ~6 KB over a 1 s window: within 10 KB/s
        assert first == 0
        throttle, _ = _until_throttled(c, "q-produce", 9)
        # (observed - bound) / bound x window: at most a window's worth here
        assert 0 < throttle <= 1000
        assert _produce(free, "q-produce", 6000, 9)[0] == 0   # another client id: no quota
        t0 = time.monotonic()
        _produce(c, "q-produce", 10, 9)   # muted: read only once the throttle time is over
        assert time.monotonic() - t0 >= throttle / 1000.0 * 0.5
    q = broker.broker.client_quotas
    assert q.throttled_requests[PRODUCE] >= 1
    # Kafka's throttle metrics (kafka.server:type=Produce,user=,client-id=), as Prometheus series
    from prometheus_client import generate_latest
    from pykbroker.observability.metrics import BrokerMetrics
    text = generate_latest(BrokerMetrics(lambda: None, None, lambda: q).registry).decode()
    series = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            series[name] = float(v)
    slow = '{client_id="slow-producer",user=""}'
    assert series["kafka_server_produce_throttle_time" + slow] >= throttle / 2   # the window's average
    assert series["kafka_server_produce_byte_rate" + slow] > 0   # (back near the bound after the mute)
    assert not any('client_id="free"' in k for k in series)   # no quota: not accounted
    assert series['pykbroker_server_quota_throttled_requests_total{quota="Produce"}'] >= 1


def test_produce_throttled_broker_side_before_v6(broker):
    """Produce v5 (the client does not throttle itself): the broker holds the answer."""
    create_topic(broker, "q-produce-v5")
    set_quota(broker, {"client-id": "old-producer"}, producer_byte_rate=10000)
    with WireClient(broker, client_id="old-producer") as c:
        assert _produce(c, "q-produce-v5", 6000, 5)[0] == 0
        throttle, elapsed = _until_throttled(c, "q-produce-v5", 5)
        assert elapsed >= throttle / 1000.0 * 0.95    # held for the throttle time before answering


def test_throttled_fetch_is_answered_empty(broker):
    create_topic(broker, "q-fetch")
    with WireClient(broker, client_id="filler") as c:
        for _ in range(8):
            _produce(c, "q-fetch", 4000, 9)
    set_quota(broker, {"client-id": "slow-consumer"}, consumer_byte_rate=10000)
    body = fetch_v12("q-fetch")
    with WireClient(broker, client_id="slow-consumer") as c:
        answers = []
        for _ in range(10):
            r = c.request(1, 12, body)
            answers.append(r)
            if r["throttle_time_ms"] > 0:
                break
        throttled = answers[-1]
        assert throttled["throttle_time_ms"] > 0
        assert (throttled["error_code"], throttled["session_id"], throttled["responses"]) == (0, 0, [])
        # the answers with data never held more than the quota lets through in its window
        for r in answers[:-1]:
            assert 0 < len(r["responses"][0]["partitions"][0]["records"]) <= 10000 + 4000
        t0 = time.monotonic()
        c.request(1, 12, body)   # muted: read only once the throttle time is over
        assert time.monotonic() - t0 >= throttled["throttle_time_ms"] / 1000.0 * 0.5
    assert broker.broker.client_quotas.throttled_requests[FETCH] >= 1
    # Fetch v7 (the client does not throttle itself before v8): the broker holds the empty answer
    v7 = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
          "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
          "topics": [{"topic": "q-fetch", "partitions": [
              {"partition": 0, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    with WireClient(broker, client_id="slow-consumer") as c:
        for _ in range(10):
            t0 = time.monotonic()
            r = c.request(1, 7, v7)
            elapsed = time.monotonic() - t0
            if r["throttle_time_ms"] > 0:
                break
        assert r["throttle_time_ms"] > 0 and r["responses"] == []
        assert elapsed >= r["throttle_time_ms"] / 1000.0 * 0.95


def test_confluent_kafka_producer_reads_the_throttle(broker):
    ck = pytest.importorskip("confluent_kafka")
    create_topic(broker, "q-ck")
    set_quota(broker, {"client-id": "ck-slow"}, producer_byte_rate=20000)
    throttles = []

    def stats(s):
        for b in json.loads(s)["brokers"].values():
            if b.get("nodeid", -1) >= 0:
                throttles.append(b["throttle"]["max"])

    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "ck-slow", "linger.ms": 5,
                     "statistics.interval.ms": 200, "stats_cb": stats})
    payload = b"y" * 1000
    delivered = []
    for i in range(60):
        p.produce("q-ck", payload, key=str(i).encode(), on_delivery=lambda err, m: delivered.append(err))
        p.poll(0)
    assert p.flush(30) == 0
    time.sleep(0.5)
    p.poll(0)
    assert delivered == [None] * 60
    # librdkafka read throttle_time_ms > 0 from the broker's answers (its "throttle" window stats)
    assert max(throttles) > 0
    assert broker.broker.client_quotas.throttled_requests[PRODUCE] >= 1
    assert [r.value for r in broker.records("q-ck")] == [payload] * 60


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')


def _sasl_plain(port, user, client_id):
    c = WireClient(("127.0.0.1", port), client_id=client_id)
    assert c.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert c.request(36, 2, {"auth_bytes": b"\x00%s\x00%s-secret" % (user.encode(), user.encode())})["error_code"] == 0
    return c


def test_user_quota_follows_the_sasl_principal(tmp_path):
    """A quota on user alice applies to alice's SASL connections whatever their client id (one
    rate for all of them), and not to bob's."""
    cfg = {**QUOTA_CONFIG, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
           "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    with pykbroker.Broker(log_dir=str(tmp_path), config=cfg) as b:
        ports = {li.name: li.port for li in b.broker.bound}
        plain = ("127.0.0.1", ports["PLAINTEXT"])
        create_topic(plain, "q-sasl")
        set_quota(plain, {"user": "alice"}, producer_byte_rate=10000)
        a1 = _sasl_plain(ports["SASL_PLAINTEXT"], "alice", "one")
        a2 = _sasl_plain(ports["SASL_PLAINTEXT"], "alice", "two")
        bob = _sasl_plain(ports["SASL_PLAINTEXT"], "bob", "one")
        try:
            assert _produce(a1, "q-sasl", 6000, 9)[0] == 0
            assert _produce(bob, "q-sasl", 6000, 9)[0] == 0
            assert _produce(bob, "q-sasl", 6000, 9)[0] == 0     # bob has no quota
            # alice's second client id adds to the same rate: over
            assert _until_throttled(a2, "q-sasl", 9)[0] > 0
        finally:
            for c in (a1, a2, bob):
                c.close()
        sensors = {(t, u, c) for t, u, c, _, _ in b.broker.client_quotas.metrics(int(time.perf_counter() * 1000))}
        assert sensors == {("Produce", "alice", "")}


def _create_topics(c, topics, version=7):
    return c.request(19, version, {"topics": [{"name": n, "num_partitions": p, "replication_factor": 1,
                                               "assignments": [], "configs": []} for n, p in topics],
                                   "timeout_ms": 10000, "validate_only": False})


def test_controller_mutation_rate(broker):
    """KIP-599: a token bucket of controller_mutation_rate x samples x window partitions (here
    10/s x 2 s = 20).  Strict versions refuse a topic while the bucket is below zero; older ones
    create it and only throttle."""
    set_quota(broker, {"client-id": "mutator"}, controller_mutation_rate=10)
    set_quota(broker, {"client-id": "old-mutator"}, controller_mutation_rate=10)
    with WireClient(broker, client_id="mutator") as c:
        r = _create_topics(c, [("mut-a", 25), ("mut-exists", 1), ("mut-b", 1)])
        got = {t["name"]: (t["error_code"], t["error_message"]) for t in r["topics"]}
        # mut-a takes the bucket to -5; then nothing more until it refills
        assert got == {"mut-a": (0, None), "mut-exists": (89, None), "mut-b": (89, None)}
        assert 0 < r["throttle_time_ms"] <= 500       # -(-5) / 10 x 1000 at most
        t0 = time.monotonic()
        # an invalid topic is answered with its own error, before the quota (Kafka's order)
        r = _create_topics(c, [("mut-a", 1)])
        assert time.monotonic() - t0 >= 0.2          # muted for the throttle first
        assert [t["error_code"] for t in r["topics"]] == [36]
    with WireClient(broker, client_id="old-mutator") as c:
        # permissive before v6: created, then the bucket is ~40 partitions below zero
        r = _create_topics(c, [("mut-c", 59), ("mut-d", 1)], version=5)
        assert [t["error_code"] for t in r["topics"]] == [0, 0]
        assert 0 < r["throttle_time_ms"] <= 4000
    # (new connections: the one above is muted for that long; the bucket is the client id's)
    with WireClient(broker, client_id="old-mutator") as c:
        r = c.request(37, 3, {"topics": [{"name": "mut-d", "count": 3, "assignments": None}],
                              "timeout_ms": 10000, "validate_only": False})
        assert [(x["error_code"], x["error_message"]) for x in r["results"]] == [(89, None)]   # strict from v3
        assert r["throttle_time_ms"] > 0
    with WireClient(broker, client_id="old-mutator") as c:
        r = c.request(37, 2, {"topics": [{"name": "mut-d", "count": 3, "assignments": None}],
                              "timeout_ms": 10000, "validate_only": False})
        assert [x["error_code"] for x in r["results"]] == [0] and r["throttle_time_ms"] > 0   # permissive
    with WireClient(broker, client_id="old-mutator") as c:
        r = c.request(20, 5, {"topic_names": ["mut-c"], "timeout_ms": 10000})
        assert [x["error_code"] for x in r["responses"]] == [89] and r["throttle_time_ms"] > 0   # strict from v5
    with WireClient(broker, client_id="old-mutator") as c:
        r = c.request(20, 4, {"topic_names": ["mut-c"], "timeout_ms": 10000})
        assert [x["error_code"] for x in r["responses"]] == [0] and r["throttle_time_ms"] > 0    # permissive
    assert broker.broker.client_quotas.throttled_requests["ControllerMutation"] >= 6


def _session_fetch(c, topic, parts, session_id, epoch, forgotten=()):
    """Fetch v12 on a session: ``parts`` {partition: fetch offset} named in the request."""
    return c.request(1, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "",
        "forgotten_topics_data": [{"topic": topic, "partitions": list(forgotten)}] if forgotten else [],
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": off, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, off in parts.items()]}]
        if parts else []})


def test_throttled_fetch_leaves_the_session_as_it_was(broker):
    """A throttled Fetch is answered empty, so the fetch session must not learn what the answer
    would have told (Kafka's getThrottledResponse: no updateAndGenerateResponseData): an
    incremental fetch still lists, afterwards, a partition whose log start moved before the
    throttled one; a throttled full fetch (epoch 0) creates no session."""
    topic = "q-fetch-session"
    create_topic(broker, topic, partitions=2)
    with WireClient(broker, client_id="filler") as c:
        batch = make_batch([b"x" * 100])
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 1, "records": batch}]}]})
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
    with WireClient(broker, client_id="sess-consumer") as c:
        # the session, before any quota: p0 (empty) at 0, p1 at its end (1)
        r = _session_fetch(c, topic, {0: 0, 1: 1}, 0, 0)
        sid = r["session_id"]
        assert r["error_code"] == 0 and sid > 0
    with WireClient(broker, client_id="filler") as c:
        for _ in range(4):
            _produce(c, topic, 4000, 9)    # p0: data the next answer would carry
        r = c.request(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 1, "offset": 1}]}],
                              "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0   # p1's log start: 0 -> 1
    set_quota(broker, {"client-id": "sess-consumer"}, consumer_byte_rate=1000)
    sessions = broker.broker.replica_manager.fetch_sessions
    with WireClient(broker, client_id="sess-consumer") as c:
        r = _session_fetch(c, topic, {}, sid, 1)
        assert r["throttle_time_ms"] > 0
        assert (r["error_code"], r["session_id"], r["responses"]) == (0, sid, [])
    with WireClient(broker, client_id="sess-consumer") as c:
        before = len(sessions)
        r = _session_fetch(c, topic, {0: 0}, 0, 0)    # still over the quota: throttled
        assert r["throttle_time_ms"] > 0 and (r["session_id"], r["responses"]) == (0, [])
        assert len(sessions) == before    # no session made for an answer never sent
    with WireClient(broker, client_id="free-consumer") as c:
        # another client id (no quota), the same session: p1's new log start was never told
        r = _session_fetch(c, topic, {}, sid, 2, forgotten=[0])
        assert r["error_code"] == 0 and r["throttle_time_ms"] == 0
        listed = {p["partition_index"]: p for t in r["responses"] for p in t["partitions"]}
        assert list(listed) == [1], r
        assert listed[1]["log_start_offset"] == 1 and listed[1]["error_code"] == 0
