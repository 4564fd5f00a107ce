"""The Go (franz-go, sarama, kafka-go) and Node (kafkajs, @confluentinc/kafka-javascript) clients'
``secure`` scenarios on a secured 3-broker pykbroker cluster: every broker's one listener is
SASL_SSL (the clients' and the inter-broker one: the brokers replicate over TLS, authenticated
with SCRAM-SHA-256 as the broker user), with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
OAUTHBEARER (Kafka's unsecured JWT validator) for the clients.

Each client logs in with every mechanism it has (the cases that get in of tests/go/
test_go_security.py and tests/node's test_secure_*), creates a topic of 3 partitions with 3
replicas through its own admin calls, produces the round trip's 30 records (null, empty and
binary keys and values, a 6 KiB value, duplicate headers, out-of-order timestamps; acks=all)
and reads them back byte-exact at the offsets its produce answers named, over the cluster's
TLS and SASL.  Then, per topic: every partition has 3 replicas, all in sync, and the three
brokers hold the same number of bytes of it (DescribeLogDirs asked of each broker): the
records were replicated over the secured inter-broker listener.

One cluster for the module (ZooKeeper + 3 brokers, ~10 s); one program run per client for the
Node clients (all their cases at once), one per case for the Go ones (their flags are per
process), side by side.  About 35 s in all.  The refused cases (wrong passwords, missing
certificates) are the single broker's and the differential suite's
(tests/differential/test_secure_clients.py)."""
from __future__ import annotations

import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import needs
from tests.go import gobuild
from tests.cluster.helpers import requires_zookeeper

needs.module("cryptography")
needs.module("kazoo.client")

pytestmark = requires_zookeeper

USERS = {"alice": "alice-Pa55word!", "bob": 'b"o\\b-secret'}   # a quote and a backslash: JAAS escaping
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
RECORDS = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from pykbroker.local.cluster import Cluster
    from tests.client_brokers import CLUSTER_OVERRIDES
    c = Cluster(3, data_dir=str(tmp_path_factory.mktemp("secclients")), security="SASL_SSL", users=USERS,
                mechanisms=MECHANISMS, zk_tick_time=500,
                overrides={**CLUSTER_OVERRIDES, "offsets.topic.replication.factor": "3",
                           "transaction.state.log.replication.factor": "3"})
    with c:
        yield c


def _wire(cluster, broker):
    b = cluster.broker(broker)
    return cluster.security.wire_client(b.host, b.port)   # the broker user, over SASL_SSL


def check_replicated(cluster, topic, partitions=3, timeout=15.0):
    """Every partition of ``topic``: 3 replicas, all in sync, and the same size on each broker
    (DescribeLogDirs of each); returns {partition: size}."""
    from pykbroker.protocol import wire
    with _wire(cluster, 1) as c:
        md = wire.metadata(c, [topic])
    parts = md["topics"][0]["partitions"]
    assert len(parts) == partitions, md
    for p in parts:
        assert sorted(p["replica_nodes"]) == [1, 2, 3] and sorted(p["isr_nodes"]) == [1, 2, 3], (topic, p)
    deadline = time.monotonic() + timeout
    while True:
        sizes = {}
        for broker in (1, 2, 3):
            with _wire(cluster, broker) as c:
                r = c.request(35, 1, {"topics": [{"topic": topic, "partitions": list(range(partitions))}]})
            for d in r["results"]:
                for t in d["topics"]:
                    for p in t["partitions"]:
                        sizes.setdefault(p["partition_index"], {})[broker] = p["partition_size"]
        same = all(len(set(s.values())) == 1 and len(s) == 3 and min(s.values()) > 0 for s in sizes.values())
        if (same and len(sizes) == partitions) or time.monotonic() > deadline:
            assert same and len(sizes) == partitions, (topic, sizes)
            return {p: s[1] for p, s in sizes.items()}
        time.sleep(0.2)


# --- Go --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gobin(tmp_path_factory):
    return gobuild.build_for_module(tmp_path_factory)


# kafka-go has no OAUTHBEARER
GO_MECHANISMS = {"franzgo": MECHANISMS, "sarama": MECHANISMS, "kafkago": MECHANISMS[:3]}


@pytest.mark.parametrize("client", ["franzgo", "sarama", "kafkago"])
def test_go_client_secure_round_trips_replicated(cluster, gobin, client):

    def run(mech):
        # bob (a quote and a backslash in the password) for SCRAM-SHA-512, alice for the others
        user = "bob" if mech == "SCRAM-SHA-512" else "alice"
        flags = {"tls": "true", "ca": cluster.security.ca_file, "sasl": mech}
        if mech == "OAUTHBEARER":
            flags["oauth_token"] = gobuild.unsecured_jwt(user)
        else:
            flags.update(user=user, password=USERS[user])
        prefix = "%s-%s-%s" % (client, mech.lower(), uuid.uuid4().hex[:6])
        rep = gobuild.run(gobin / client, cluster.bootstrap_servers, "secure", wait=90, prefix=prefix,
                          records=RECORDS, rf=3, **flags)
        return prefix + "-sec", rep

    with ThreadPoolExecutor(4) as pool:
        runs = dict(zip(GO_MECHANISMS[client], pool.map(run, GO_MECHANISMS[client])))
    for mech, (topic, rep) in runs.items():
        assert "roundtrip" in rep, (mech, rep)
        r = rep["roundtrip"]
        assert r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS, (mech, r)
        # the shapes came back: the 6 KiB value, 4 headers on two records of three
        assert r["big_values_read"] == 1 and r["headers_read"] == 4 * 20, (mech, r)
        check_replicated(cluster, topic)


# --- Node ------------------------------------------------------------------------------------
def _node_cases(cluster, mechanisms):
    cases = []
    for mech in mechanisms:
        user = "bob" if mech == "scram-sha-512" else "alice"
        sasl = ({"mechanism": mech, "sub": user} if mech == "oauthbearer"
                else {"mechanism": mech, "username": user, "password": USERS[user]})
        cases.append({"name": "sasl-" + mech, "brokers": cluster.bootstrap_servers,
                      "ssl": {"ca": cluster.security.ca_file}, "sasl": sasl, "expect": "ok"})
    return cases


def _node_run(cluster, tmp_path, script, mechanisms):
    from tests.node import noderun
    cases = _node_cases(cluster, mechanisms)
    path = os.path.join(str(tmp_path), "cases.json")
    with open(path, "w") as fh:
        json.dump({"cases": cases}, fh)
    rep = noderun.start(script, cluster.bootstrap_servers, ["secure"], wait=120,
                        prefix="%s-%s" % (script.split(".")[0], uuid.uuid4().hex[:6]), rf=3,
                        security=path).report()
    rep = noderun.scenario(rep, "secure")
    return {c["name"]: noderun.scenario(rep, c["name"]) for c in cases}


def test_kafkajs_secure_round_trips_replicated(cluster, tmp_path):
    from tests.node import noderun
    noderun.require()
    out = _node_run(cluster, tmp_path, "kafkajs.js", ["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"])
    for name, r in out.items():
        assert r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS, (name, r)
        # the data set's shapes as kafkajs keeps them (null and empty keys apart)
        assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
                r["headers_read"]) == (8, 8, 3, 1, 80), (name, r)
        check_replicated(cluster, r["topic"])


def test_confluent_kafka_javascript_secure_round_trips_replicated(cluster, tmp_path):
    from tests.node import noderun
    noderun.require(native=True)
    out = _node_run(cluster, tmp_path, "confluent.js", ["plain", "scram-sha-256", "scram-sha-512"])
    for name, r in out.items():
        assert r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS and r["offsets_dense"], (name, r)
        # empty keys and values arrive as null (this client sends them so), 6 KiB value, headers
        assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
                r["headers_read"]) == (16, 0, 6, 1, 80), (name, r)
        check_replicated(cluster, r["topic"])
