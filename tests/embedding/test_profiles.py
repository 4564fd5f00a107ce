"""--as-kafka version profiles: ApiVersions and the versions served limited to what that Apache
Kafka release's broker offered; real clients negotiate down and work."""
import subprocess
import sys

import pytest

import pykbroker
from pykbroker import profiles
from pykbroker.embedded import TEST_CONFIG
from pykbroker.handlers import load_handlers
from pykbroker.protocol import wire
from tests.polling import kafka_python_values, poll_values

API_VERSIONS_V3 = {"client_software_name": "t", "client_software_version": "1"}


def _advertised(bootstrap, version=3):
    with wire.WireClient(bootstrap) as c:
        r = c.request(18, version, API_VERSIONS_V3 if version >= 3 else {})
    assert r["error_code"] == 0
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}


@pytest.fixture(scope="module")
def kafka28():
    with pykbroker.Broker(config=TEST_CONFIG, as_kafka="2.8") as b:
        yield b


def test_api_versions_are_the_intersection_with_the_release(kafka28):
    adv = _advertised(kafka28.bootstrap_servers)
    ours = load_handlers(lazy=True)
    release = profiles.KAFKA_2_8
    assert set(adv) == {k for k in ours if k in release
                        and max(ours[k].MIN_VERSION, release[k][0]) <= min(ours[k].MAX_VERSION, release[k][1])}
    for k, (lo, hi) in adv.items():
        assert hi == min(ours[k].MAX_VERSION, release[k][1]), k
        assert lo >= release[k][0]
    # what 2.8 had not: KIP-848 (68, 69); what it had less of: Fetch v12, Metadata v11, ApiVersions v3
    assert 68 not in adv and 69 not in adv
    assert adv[1][1] == 12 and adv[3][1] == 11 and adv[18][1] == 3 and adv[60] == (0, 0)


def test_a_version_or_api_the_release_lacked_closes_the_connection(kafka28):
    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    with wire.WireClient(kafka28.bootstrap_servers, timeout=10) as c:
        assert c.closed_after(3, 12, body)          # Metadata v12 came with 3.x
    with wire.WireClient(kafka28.bootstrap_servers, timeout=10) as c:
        assert c.request(3, 11, body)["brokers"]   # v11 is served
    with wire.WireClient(kafka28.bootstrap_servers, timeout=10) as c:
        assert c.closed_after(68, 0, {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                      "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 1000,
                                      "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
                                      "server_assignor": None, "topic_partitions": []})
    with wire.WireClient(kafka28.bootstrap_servers, timeout=10) as c:   # ApiVersions v4: v0 answer
        r = c.recv(18, 0, c.send(18, 4, API_VERSIONS_V3))   # answered in v0 (KIP-511)
        assert r["error_code"] == 35 and {a["api_key"] for a in r["api_keys"]} == set(_advertised(kafka28.bootstrap_servers))


def test_clients_negotiate_down_and_work(kafka28):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer

    kafka28.create_topic("prof-t")
    p = Producer({"bootstrap.servers": kafka28.bootstrap_servers, "linger.ms": 0})
    for i in range(5):
        p.produce("prof-t", value=b"p%d" % i, partition=0)
    assert p.flush(15) == 0
    assert [r.value for r in kafka28.records("prof-t")] == [b"p%d" % i for i in range(5)]
    c = Consumer({"bootstrap.servers": kafka28.bootstrap_servers, "group.id": "prof-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        c.subscribe(["prof-t"])
        got = poll_values(c, 5, 30, poll=0.2)
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert got == [b"p%d" % i for i in range(5)]
    assert kafka28.committed_offsets("prof-g") == {("prof-t", 0): 5}
    kc = KafkaConsumer("prof-t", group_id="prof-kp", bootstrap_servers=kafka28.bootstrap_servers,
                       auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        kgot = kafka_python_values(kc, 5, 30)
        # kafka-python infers the broker version from ApiVersions: what it guesses for 2.8
        assert kc.config["api_version"] >= (2, 6) and kc.config["api_version"] < (3, 0)
    finally:
        kc.close()
    assert kgot == got


def test_profiles_of_other_releases():
    with pykbroker.Broker(config=TEST_CONFIG, as_kafka="3.9.1") as b:
        adv = _advertised(b.bootstrap_servers)
        from pykbroker.handlers import k01_fetch
        assert 68 not in adv and adv[1][1] == min(k01_fetch.MAX_VERSION, profiles.KAFKA_3_9[1][1])
    with pykbroker.Broker(config=TEST_CONFIG, as_kafka="4.x") as b39:
        adv4 = _advertised(b39.bootstrap_servers)
    with pykbroker.Broker(config=TEST_CONFIG) as newest:
        assert _advertised(newest.bootstrap_servers) == adv4   # 4.x: everything built today
    with pytest.raises(ValueError):
        pykbroker.Broker(as_kafka="1.0")


def test_serve_as_kafka(tmp_path):
    with pykbroker.Broker.subprocess(log_dir=tmp_path, config=TEST_CONFIG, as_kafka="2.8") as b:
        assert _advertised(b.bootstrap_servers)[3][1] == 11
    r = subprocess.run([sys.executable, "-m", "pykbroker", "serve", "--log-dirs", str(tmp_path / "x"),
                        "--as-kafka", "0.9"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unknown Kafka version" in r.stderr
