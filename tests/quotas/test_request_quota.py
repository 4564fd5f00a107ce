"""request_percentage (KIP-124) enforced: the loop time of decoding and handling a client's
requests, as a percentage of the loop over Kafka's sampled windows, throttled with Kafka's
formula (bounded by one window) and KIP-219's throttle_time_ms and mute.

The brokers use ``quota.window.num=2`` (windows of 1 s) so a throttle lasts at most a second.
The measured figures are printed; assertions are only that the throttled client read
throttle_time_ms > 0 and waited, and that another client was not throttled."""
import json
import time

import pytest
import trio

from pykbroker.protocol.wire import WireClient, create_topic
from pykbroker.quota.manager import REQUEST, REQUEST_EXEMPT_APIS, ClientQuotaManager, client_throttles

from .helpers import fetch_v12, quota_broker, set_quota

METADATA_V12 = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with quota_broker(str(tmp_path_factory.mktemp("quota-request"))) as b:
        yield b


def test_timed_counts_loop_time_not_waits():
    """The measure: the handler's steps on the loop, not its sleeps (a long poll, a replication
    wait)."""
    from pykbroker.server.connection import _timed

    async def handler():
        await trio.sleep(0.3)
        t = time.perf_counter()
        while time.perf_counter() - t < 0.02:   # 20 ms of work on the loop
            pass
        await trio.sleep(0)
        return "answer"

    async def main():
        spent = [0.0]
        t0 = time.perf_counter()
        assert await _timed(handler(), spent) == "answer"
        return spent[0], time.perf_counter() - t0

    spent, wall = trio.run(main)
    print("loop time %.1f ms of %.1f ms wall" % (spent * 1000, wall * 1000))
    assert 0.02 <= spent < 0.15 and wall >= 0.3

    async def cancelled():
        spent = [0.0]
        with trio.move_on_after(0.05) as scope:
            await _timed(handler(), spent)
        return scope.cancelled_caught
    assert trio.run(cancelled)   # trio's cancellation reaches the handler through the wrapper


def test_throttle_formula_and_exemptions():
    m = ClientQuotaManager(samples=2, window_seconds=1)
    m.apply({(("client-id", "c"),): {"request_percentage": 10.0}})
    assert m.request_enabled and m.active and not m.enabled
    bound, key = m.resolve(REQUEST, "ANONYMOUS", "c")
    s = m.sensor(key)
    # 50 ms over a window measured as 1 s = 5 % of the loop: within 10 %
    assert m.record_request_time(s, bound, 0.05, 0) == 0
    # 150 ms: 15 %, (15 - 10) / 10 x 1000 ms = 500 ms
    assert m.record_request_time(s, bound, 0.10, 0) == 500
    # bounded by one window (Kafka's ClientRequestQuotaManager.maxThrottleTimeMs)
    assert m.record_request_time(s, bound, 10.0, 0) == 1000
    # Kafka's cluster actions and the SASL exchange are exempt, ApiVersions is not
    assert {4, 5, 6, 7, 27, 56, 17, 36} <= REQUEST_EXEMPT_APIS and 18 not in REQUEST_EXEMPT_APIS
    assert 57 not in REQUEST_EXEMPT_APIS   # UpdateFeatures: throttled on the broker
    # KIP-219 per response class: Metadata v6+, ApiVersions v2+; DescribeClientQuotas never
    assert client_throttles(3, 6) and not client_throttles(3, 5)
    assert client_throttles(18, 2) and not client_throttles(48, 1)


def test_raw_client_throttled_and_muted(broker):
    """A client id with 0.01 % of the loop: Metadata answers carry throttle_time_ms and the next
    request is read only after it; ApiVersions is throttled too (as Kafka); another client id
    is not."""
    set_quota(broker, {"client-id": "rq-raw"}, request_percentage=0.01)
    q = broker.broker.client_quotas
    with WireClient(broker, client_id="rq-raw") as c, WireClient(broker, client_id="rq-free") as free:
        throttle = 0
        for _ in range(20):
            r = c.request(3, 12, METADATA_V12)
            throttle = r["throttle_time_ms"]
            if throttle > 0:
                break
        assert 0 < throttle <= 1000
        t0 = time.monotonic()
        r = c.request(18, 3, {"client_software_name": "rq", "client_software_version": "1"})
        waited = time.monotonic() - t0
        print("Metadata throttle %d ms; next request answered after %.0f ms; ApiVersions throttle %d ms"
              % (throttle, waited * 1000, r["throttle_time_ms"]))
        assert waited >= throttle / 1000.0 * 0.5           # muted (KIP-219)
        assert r["error_code"] == 0 and r["throttle_time_ms"] > 0
        for _ in range(5):
            assert free.request(3, 12, METADATA_V12)["throttle_time_ms"] == 0
    assert q.throttled_requests[REQUEST] >= 2
    rows = {(u, cl): (rate, avg) for qt, u, cl, rate, avg in q.metrics(int(time.monotonic() * 1000)) if qt == REQUEST}
    print("request-time sensors:", rows)
    assert ("", "rq-raw") in rows and not any(cl == "rq-free" for _, cl in rows)


def test_metadata_before_v6_is_held_by_the_broker(broker):
    set_quota(broker, {"client-id": "rq-old"}, request_percentage=0.01)
    with WireClient(broker, client_id="rq-old") as c:
        for _ in range(20):
            t0 = time.monotonic()
            r = c.request(3, 5, {"topics": None, "allow_auto_topic_creation": False})
            elapsed = time.monotonic() - t0
            if r["throttle_time_ms"] > 0:
                break
        assert r["throttle_time_ms"] > 0
        assert elapsed >= r["throttle_time_ms"] / 1000.0 * 0.95   # held before the answer


def test_confluent_kafka_clients(broker):
    """A confluent-kafka producer with a tiny request_percentage reads throttle_time_ms > 0 and
    is slowed down; one with another client id is not throttled."""
    ck = pytest.importorskip("confluent_kafka")
    create_topic(broker, "rq-ck")
    set_quota(broker, {"client-id": "rq-ck-slow"}, request_percentage=0.05)

    def run(client_id):
        throttles = []

        def stats(s):
            for b in json.loads(s)["brokers"].values():
                if b.get("nodeid", -1) >= 0:
                    throttles.append(b["throttle"]["max"])

        p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": client_id,
                         "linger.ms": 0, "batch.num.messages": 1, "max.in.flight": 1,
                         "statistics.interval.ms": 200, "stats_cb": stats})
        delivered = []
        t0 = time.monotonic()
        for i in range(12):
            p.produce("rq-ck", b"v%d" % i, on_delivery=lambda err, m: delivered.append(err))
            p.flush(30)   # one request at a time: each one measured
        elapsed = time.monotonic() - t0
        time.sleep(0.5)
        p.poll(0)
        assert delivered == [None] * 12
        return elapsed, max(throttles or [0])

    slow_s, slow_throttle = run("rq-ck-slow")
    free_s, free_throttle = run("rq-ck-free")
    print("12 produces one at a time: throttled client %.2f s (max throttle %d ms), free client %.2f s "
          "(max throttle %d ms)" % (slow_s, slow_throttle, free_s, free_throttle))
    assert slow_throttle > 0 and free_throttle == 0
    assert slow_s >= slow_throttle / 1000.0       # it waited at least one throttle
    assert broker.broker.client_quotas.throttled_requests[REQUEST] >= 1


def test_fetch_throttled_by_request_quota_is_answered_empty(broker):
    """Kafka: a Fetch throttled by either quota is answered empty (and a Produce with both a byte
    rate and a request quota carries the larger throttle)."""
    from pykbroker.protocol.wire import make_batch
    create_topic(broker, "rq-fetch")
    with WireClient(broker, client_id="rq-filler") as c:
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "rq-fetch", "partition_data": [{"index": 0, "records": make_batch([b"x" * 100] * 10)}]}]})
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
    set_quota(broker, {"client-id": "rq-fetcher"}, request_percentage=0.01, consumer_byte_rate=10 ** 9)
    body = fetch_v12("rq-fetch")
    with WireClient(broker, client_id="rq-fetcher") as c:
        for _ in range(20):
            r = c.request(1, 12, body)
            if r["throttle_time_ms"] > 0:
                break
            assert len(r["responses"][0]["partitions"][0]["records"]) > 0
        assert r["throttle_time_ms"] > 0 and r["responses"] == [] and r["error_code"] == 0
