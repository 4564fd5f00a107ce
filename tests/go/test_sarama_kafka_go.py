"""IBM/sarama and segmentio/kafka-go (the versions in compat/go/go.mod) against one pykbroker:
the Go scenario programs compat/go/cmd/sarama and cmd/kafkago report what the client read back.

- produce/consume with every codec both clients have (none, gzip, snappy, lz4, zstd): keys,
  values (6 KiB too), headers with duplicate keys, out-of-order CreateTime timestamps, read back
  byte-exact per partition at dense offsets.  sarama keeps null and empty keys/values apart;
  kafka-go's reader hands out an empty one as nil (the log keeps the difference), so only its
  bytes are compared;
- sarama's idempotent producer (``Producer.Idempotent``, one request in flight);
- each client's own consumer group (sarama: range, round-robin, sticky; kafka-go: range,
  round-robin) with explicit commits: a member processes a third and leaves, two more resume
  from its commits, every record once.

sarama speaks the versions of Kafka 2.8 (its default ``Config.Version``), kafka-go mostly older
ones: both exercise request versions the newer clients do not send.
"""
from __future__ import annotations

import uuid

import pytest

from pykbroker.local.broker_process import BrokerProcess

from . import gobuild

if gobuild.go_binary() is None:
    pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go): the sarama and kafka-go scenarios "
                "of compat/go need one", allow_module_level=True)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("go-single")), {"group.initial.rebalance.delay.ms": "0"})
    b.start()
    yield b
    b.stop()


def _prefix(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:6])


# (null keys, empty keys, null values, 6 KiB values, headers) read back from 300 records
SHAPES = {"sarama": (75, 75, 32, 6, 800), "kafkago": (150, 0, 64, 6, 800)}


@pytest.mark.parametrize("client", ["sarama", "kafkago"])
def test_produce_consume_every_codec(gobin, broker, client):
    rep = gobuild.run(gobin / client, broker.bootstrap, "roundtrip", prefix=_prefix(client), records=300)
    assert set(rep) == {"none", "gzip", "snappy", "lz4", "zstd"}
    for codec, r in rep.items():
        assert r["mismatches"] == [], (codec, r["mismatches"])
        assert r["produced"] == r["read"] == 300, (codec, r)
        assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
                r["headers_read"]) == SHAPES[client], (codec, r)


def test_sarama_idempotent_producer(gobin, broker):
    rep = gobuild.run(gobin / "sarama", broker.bootstrap, "idempotent", prefix=_prefix("sa-idem"), records=2000)
    assert rep == {"produced": 2000, "read": 2000, "duplicates": 0, "missing": 0, "out_of_order": 0}


@pytest.mark.parametrize("client,balancer", [("sarama", "range"), ("sarama", "roundrobin"), ("sarama", "sticky"),
                                             ("kafkago", "range"), ("kafkago", "roundrobin")])
def test_group_commits_resume_across_members(gobin, broker, client, balancer):
    rep = gobuild.run(gobin / client, broker.bootstrap, "group", prefix=_prefix(client), records=300,
                      balancer=balancer)
    assert rep["problems"] == [], rep
    assert (rep["duplicates"], rep["missing"]) == (0, 0), rep
    assert rep["first_member_processed"] >= 100 and rep["first_member_processed"] + rep["later_members_processed"] == 300
    if client == "sarama":
        assert rep["committed_total"] == 300, rep   # the group's offsets at the end offsets
