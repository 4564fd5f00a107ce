"""Confluent's @confluentinc/kafka-javascript (librdkafka underneath, built from the npm package's
bundled sources by ``npm ci``; driven through its KafkaJS-style API; the version in
compat/node/package-lock.json) against pykbroker: one broker and a 3-broker cluster.  The
scenarios are compat/node/confluent.js, judged on the data set and rules of compat/node/lib/scen.js.

- produce/consume with every codec librdkafka has (none, gzip, snappy, lz4, zstd), the shared data
  set byte-exact at the offsets the delivery reports named; this client sends an empty key or
  value as null (client behaviour, compat/node/README.md), so only bytes are compared there;
- librdkafka's idempotent producer with every record in flight at once;
- transactions committed and aborted, read read_committed and read_uncommitted;
- librdkafka's consumer group with its round-robin (eager) and cooperative-sticky (incremental)
  assignors: one member commits a third of each partition and leaves, two resume from its commits and rebalance;
- the KafkaJS-style admin calls this client has: createTopics (and again), listTopics,
  fetchTopicMetadata, deleteTopicRecords, fetchTopicOffsets(ByTimestamp), deleteTopics;
- TLS and SASL against the directory's secured broker (tests/node/secure.py): security.protocol
  SSL with ssl.ca.location, mutual TLS, SASL_SSL with PLAIN and SCRAM-SHA-512, each a byte-exact
  round trip; a wrong password refused with librdkafka's authentication failure, nothing written;
- kill -9 of a partition leader on the cluster under librdkafka's idempotent producer, then its
  restart.

Runs on the directory's broker, secured broker and cluster (tests/node/conftest.py), about 45 s
(the leader kill ~20 s).  Skipped like
test_kafkajs.py when node/npm or compat/node's packages are missing, and when the client's native
module does not load.
"""
from __future__ import annotations

import uuid

import pytest


from . import noderun
from .secure import GUARDED, REFUSED_WITHIN_MS
from tests.node.noderun import native_packages  # noqa: F401 (autouse: waits for the packages)

noderun.skip_module_unless_usable(native=True)


RECORDS = 300
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _prefix(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:6])


@pytest.fixture(scope="module")
def single(node_broker):
    # two processes side by side, as test_kafkajs.py's: each scenario mostly waits on the broker
    runs = [noderun.start("confluent.js", node_broker.bootstrap, names, prefix=_prefix("ckjs"), rf=1, records=RECORDS)
            for names in (["roundtrip", "idempotent"], ["txn", "group", "admin"])]
    rep: dict = {}
    for r in runs:
        rep.update(r.report())
    return {"report": rep, "rf": 1, "bootstrap": node_broker.bootstrap}


@pytest.fixture(scope="module")
def cluster(node_cluster):
    rep = noderun.start("confluent.js", node_cluster.bootstrap_servers, ["txn", "group", "admin"],
                        prefix=_prefix("ckjs"), rf=3, records=RECORDS).report()
    return {"report": rep, "rf": 3}


@pytest.fixture
def target(request):
    return request.getfixturevalue(request.param)


def _scenario(target, name):
    return noderun.scenario(target["report"], name)


def test_produce_consume_every_codec(single):
    rep = _scenario(single, "roundtrip")
    assert set(rep) == set(CODEC_IDS)
    for codec, r in rep.items():
        assert r["mismatches"] == [], (codec, r["mismatches"])
        assert r["produced"] == r["read"] == RECORDS and r["offsets_dense"], (codec, r)
        # empty keys and values arrive as null (the client sends them so); 6 KiB values, headers
        assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
                r["headers_read"]) == (150, 0, 64, 6, 800), (codec, r)
        assert noderun.batch_codecs(single["bootstrap"], r["topic"]) == {CODEC_IDS[codec]}, codec


def test_idempotent_producer(single):
    r = _scenario(single, "idempotent")
    assert r == {"produced": RECORDS * 10, "read": RECORDS * 10, "duplicates": 0, "missing": 0, "out_of_order": 0,
                 "offset_errors": 0}


@pytest.mark.parametrize("target", ["single", "cluster"], indirect=True)
def test_transactions_commit_and_abort(target):
    r = _scenario(target, "txn")
    assert r["read_committed"] == {"c1": 30, "c2": 30, "c3": 30}, r
    assert r["read_uncommitted"] == {"c1": 30, "a1": 30, "c2": 30, "a2": 30, "c3": 30}, r


@pytest.mark.parametrize("target", ["single", "cluster"], indirect=True)
@pytest.mark.parametrize("assignor", ["roundRobin", "cooperativeSticky"])
def test_group_rebalance_and_committed_offsets(target, assignor):
    r = _scenario(target, "group")[assignor]
    a, b, c = noderun.check_group_run(r, RECORDS)
    assert b["assignments"][0] == [0, 1, 2] and c["processed"] > 0 and r["committed_at_end"], r
    # B and C shared the partitions: C's first partitions and B's after that rebalance split them
    c_first = next(x for x in c["assignments"] if x)
    b_after = b["assignments"][1]
    assert 0 < len(c_first) < 3 and sorted(b_after + c_first) == [0, 1, 2], r
    # when C joined, B gave up everything (eager) / only the partitions moving to C (incremental)
    first_revoke = b["revoked"][0]
    if assignor == "roundRobin":
        assert first_revoke == [0, 1, 2], r
    else:
        assert first_revoke == c_first, r


@pytest.mark.parametrize("target", ["single", "cluster"], indirect=True)
def test_admin_client(target):
    r = _scenario(target, "admin")
    rf = target["rf"]
    assert r["created_again"] is False and r["listed"], r
    assert r["metadata"] == [[0, rf, rf, True], [1, rf, rf, True]], r
    assert r["delete_records"] == [[0, 4]] and r["offsets"] == [[0, 4, 10], [1, 0, 0]], r
    assert r["offset_for_timestamp"] == 7 and r["listed_after_delete"] is False, r


# --- TLS, mutual TLS and SASL: the directory's secured broker (tests/node/secure.py) ----------
SECURE_OK = ["ssl", "mtls", "sasl-plain", "sasl-scram-sha-256", "sasl-scram-sha-512"]
WRONG_PASSWORD = ["plain", "scram-sha-256", "scram-sha-512"]


@pytest.fixture(scope="module")
def secure(node_secure):
    """One process running every connection case at once (the ``secure`` scenario): librdkafka's
    security.protocol SSL / SASL_SSL, ssl.ca.location, a client certificate, PLAIN,
    SCRAM-SHA-256 and SCRAM-SHA-512."""
    s = node_secure
    cases = [s.case("ssl", "SSL"), s.case("mtls", "MTLS", client_cert=True), s.password("sasl-plain", "plain"),
             s.password("sasl-scram-sha-256", "scram-sha-256"), s.password("sasl-scram-sha-512", "scram-sha-512", user="bob")]
    cases += [s.password("wrong-" + m, m, user="bob" if m.endswith("512") else "alice", wrong=True) for m in WRONG_PASSWORD]
    rep = noderun.start("confluent.js", s.address("SASL_SSL"), ["secure"], wait=90, prefix=_prefix("ckjs"),
                        security=s.write_cases("confluent", cases)).report()
    return {"report": noderun.scenario(rep, "secure"), "broker": s}


@pytest.mark.parametrize("case", SECURE_OK)
def test_secure_produce_consume(secure, case):
    r = noderun.scenario(secure["report"], case)
    assert r["mismatches"] == [] and r["produced"] == r["read"] == 30 and r["offsets_dense"], r
    # empty keys and values arrive as null (this client sends them so), 6 KiB value, headers
    assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
            r["headers_read"]) == (16, 0, 6, 1, 80), r


@pytest.mark.parametrize("mechanism", WRONG_PASSWORD)
def test_secure_wrong_password_refused(secure, mechanism):
    r = noderun.scenario(secure["report"], "wrong-" + mechanism)
    # librdkafka's authentication failure, with the broker's SaslAuthenticate message, at once in
    # its log (within REFUSED_WITHIN_MS); the connect then fails (no metadata: ERR__TRANSPORT)
    # and nothing is sent
    assert r["connected"] is False and r["sent"] is None and r["connect_error"]["code"] == -195, r
    message = "Authentication failed: Invalid username or password" if mechanism == "plain" else \
        "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism.upper()
    assert r["failures_logged"] and "SASL authentication error: %s" % message in r["failures_logged"][0], r
    assert r["refused_after_ms"] < REFUSED_WITHIN_MS, r
    assert secure["broker"].end_offsets(GUARDED) == (0, 0)


# --- kill -9 of a partition leader on the cluster ----------------------------------------------
def test_idempotent_producer_across_a_leader_kill(node_cluster):
    """kill -9 of partition 0's leader while librdkafka's idempotent producer (enable.idempotence,
    acks all, up to 5 requests in flight per partition) writes 3000 records, then the broker's
    restart: every acknowledged record read back once, in produce order per partition, at the
    offset its delivery report named."""
    noderun.check_leaderkill(node_cluster, "confluent.js", _prefix("ckjs-kill"), pace_ms=20)
