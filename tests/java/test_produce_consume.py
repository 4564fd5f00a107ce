"""Java kafka-clients 3.9.x and 4.x: default producer, then consumers (assign + seek, subscribe).

A JVM per profile runs the ``roundtrip`` scenario, beside other modules' scenarios, (compat/java/.../Roundtrip.java): the default
producer (idempotent, acks=all) sends keyed records with headers and explicit timestamps, then an
assigned consumer and one subscribed consumer per group protocol read them back. The tests check
what the Java side observed against what was sent, byte for byte.
"""
import glob
import os
import struct

import pytest
from kafka.partitioner.default import murmur2

pytestmark = pytest.mark.timeout(900)   # the first test of a session may build the Maven project

PARTITIONS = 3
COUNT = 30
BASE_TS = 1_700_000_000_000
TOPIC = "java-roundtrip-%s"


def value(i):
    """Mirror of Roundtrip.value (None for the null-value record)."""
    if i == COUNT - 2:
        return None
    return b"value-%d-" % i + bytes((i + j) % 256 for j in range((i * 37) % 500))


def key(i):
    return None if i == COUNT - 1 else b"key-%d" % (i % 10)


def headers(i):
    return [["idx", str(i).encode().hex()], ["bin", bytes([0, 0xFF, i % 256]).hex()],
            ["dup", b"a".hex()], ["dup", b"b".hex()], ["empty", ""], ["null", "<null>"]]


PROTOCOLS = {"kafka39": "classic", "kafka4": "classic,consumer"}


def roundtrip_args(profile):
    return {"topic": TOPIC % profile, "partitions": PARTITIONS, "count": COUNT, "base_ts": BASE_TS,
            "protocols": PROTOCOLS[profile]}


# both profiles' scenarios at once, one JVM each, on the session's shared broker with other
# modules' (tests/java/conftest.py)
JAVA_BATCH = [(p, "roundtrip", roundtrip_args(p)) for p in PROTOCOLS]
JAVA_SHARED_BROKER = True


@pytest.fixture(scope="module")
def roundtrip(scenario):
    return lambda profile: scenario(profile, "roundtrip", **roundtrip_args(profile))


def sent_by_index(r):
    r.assert_phase("produce")
    sent = {e["i"]: e for e in r.all("sent")}
    assert sorted(sent) == list(range(COUNT))
    return sent


@pytest.mark.parametrize("profile", ["kafka39", "kafka4"])
def test_default_producer(roundtrip, profile, broker):
    r = roundtrip(profile)
    start = r.one("start")
    assert start["client_version"].startswith("3.9." if profile == "kafka39" else "4.")
    sent = sent_by_index(r)
    # Offsets: dense from 0 in every partition, in send order.
    per_part = {}
    for i in range(COUNT):
        per_part.setdefault(sent[i]["partition"], []).append(sent[i]["offset"])
    for p, offs in per_part.items():
        assert offs == list(range(len(offs))), (p, offs)
    for i in range(COUNT):
        s = sent[i]
        assert s["timestamp"] == BASE_TS + 1000 * i   # CreateTime: the producer's timestamp
        if i == COUNT - 3:
            assert s["partition"] == PARTITIONS - 1      # explicit partition
        elif key(i) is not None:
            assert s["partition"] == (murmur2(key(i)) & 0x7FFFFFFF) % PARTITIONS
    # The default Java producer is idempotent: its batches carry a producer id and sequences from 0.
    seqs = {}
    for log in glob.glob(os.path.join(broker.data_dir, TOPIC % profile + "-*", "*.log")):
        part = int(os.path.basename(os.path.dirname(log)).rsplit("-", 1)[1])
        data = open(log, "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0:
                break
            pid, epoch, base_seq, n = struct.unpack_from(">qhii", data, pos + 43)
            last_delta = struct.unpack_from(">i", data, pos + 23)[0]
            seqs.setdefault(part, []).append((pid, epoch, base_seq, last_delta + 1))
            pos += 12 + length
    assert sorted(seqs) == sorted(per_part), seqs
    for part, batches in seqs.items():
        assert all(pid >= 0 and epoch >= 0 for pid, epoch, _, _ in batches), batches
        assert len({pid for pid, _, _, _ in batches}) == 1, batches
        expect = 0
        for _, _, base_seq, n in batches:
            assert base_seq == expect, batches
            expect += n
        assert expect == len(per_part[part])


def check_records(r, phase, sent, expect_indexes=None):
    recs = r.all("record", phase=phase)
    by_pos = {(e["partition"], e["offset"]): e for e in recs}
    assert len(by_pos) == len(recs), "duplicates in %s" % phase
    want = expect_indexes if expect_indexes is not None else range(COUNT)
    assert len(recs) == len(list(want)), (phase, len(recs))
    for i in want:
        s = sent[i]
        e = by_pos.get((s["partition"], s["offset"]))
        assert e is not None, "record %d (partition %d offset %d) not read in %s" % (i, s["partition"], s["offset"], phase)
        assert e["key"] == (key(i).hex() if key(i) is not None else None)
        assert e["value"] == (value(i).hex() if value(i) is not None else None)
        assert e["timestamp"] == BASE_TS + 1000 * i
        assert e["timestamp_type"] == "CreateTime"
        assert e["headers"] == headers(i)
        assert e["leader_epoch"] is not None and e["leader_epoch"] >= 0
    # Per partition, records arrive in offset order.
    for p in {e["partition"] for e in recs}:
        offs = [e["offset"] for e in recs if e["partition"] == p]
        assert offs == sorted(offs)


@pytest.mark.parametrize("profile", ["kafka39", "kafka4"])
def test_assign_seek_read(roundtrip, profile):
    r = roundtrip(profile)
    sent = sent_by_index(r)
    r.assert_phase("assign_read")
    assert r.one("partitions_for")["partitions"] == PARTITIONS
    check_records(r, "assign", sent)
    counts = {p: sum(1 for s in sent.values() if s["partition"] == p) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        o = r.one("consumer_offsets", partition=p)
        assert (o["beginning"], o["end"]) == (0, counts[p])
        # offsetsForTimes(base+5500): the first record of the partition with timestamp >= it.
        later = sorted((s["offset"], s["timestamp"]) for s in sent.values()
                       if s["partition"] == p and s["timestamp"] >= BASE_TS + 5500)
        assert (o["for_time_offset"], o["for_time_timestamp"]) == (later[0] if later else (None, None))
        assert r.one("position", phase="assign", partition=p)["position"] == counts[p]
    # seek(partition 0, offset 2) reads partition 0 from offset 2 on.
    seek = [e["offset"] for e in r.all("record", phase="seek")]
    assert seek == list(range(2, counts[0]))


def check_group_read(r, protocol, sent):
    r.assert_phase("subscribe_" + protocol)
    check_records(r, "subscribe_" + protocol, sent)
    assert r.one("assignment", phase="subscribe_" + protocol)["partitions"] == list(range(PARTITIONS))
    counts = {p: sum(1 for s in sent.values() if s["partition"] == p) for p in range(PARTITIONS)}
    committed = {e["partition"]: e["offset"] for e in r.all("committed", phase="subscribe_" + protocol)}
    assert committed == counts
    # A new member of the same group resumes from the committed offsets: nothing is read again.
    r.assert_phase("resume_" + protocol)
    assert r.all("record", phase="resume_" + protocol) == []
    positions = {e["partition"]: e["position"] for e in r.all("position", phase="resume_" + protocol)}
    assert positions == counts


@pytest.mark.parametrize("profile", ["kafka39", "kafka4"])
def test_subscribe_classic_group(roundtrip, profile):
    r = roundtrip(profile)
    check_group_read(r, "classic", sent_by_index(r))


def test_subscribe_consumer_group_protocol(roundtrip):
    """KIP-848 (group.protocol=consumer) is generally available in the 4.x client only."""
    r = roundtrip("kafka4")
    check_group_read(r, "consumer", sent_by_index(r))
