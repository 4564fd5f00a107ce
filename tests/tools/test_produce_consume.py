"""``pykbroker produce`` and ``pykbroker consume`` against pykbroker and Apache Kafka: records
written by the CLI are read back with confluent-kafka and the reverse, byte for byte; the JSON
lines of both brokers are the same (timestamps aside)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .helpers import cli, name, same_as_kafka, scrub, sides, wait_topic


def _read_all(t, topic, n, timeout=60.0):
    """n records of the topic with a plain confluent-kafka consumer (assign, from the start)."""
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": name("reader"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    md = c.list_topics(topic, timeout=30)
    c.assign([TopicPartition(topic, p, 0) for p in md.topics[topic].partitions])
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(100, timeout=0.5):
            assert m.error() is None, m.error()
            out.append(m)
    c.close()
    return sorted(out, key=lambda m: (m.partition(), m.offset()))


def _create(t, topic, partitions=1, *config):
    cli(t, "topics", "create", "--topic", topic, "--partitions", str(partitions),
        *[a for kv in config for a in ("--config", kv)])
    wait_topic(t, topic, partitions)


# three codecs and every acks value; snappy and none go the same way through the option
@pytest.mark.parametrize("compression,acks", [("gzip", "1"), ("lz4", "0"), ("zstd", "all")])
def test_cli_produce_client_reads(target, compression, acks):
    topic = name("cli-produce")
    _create(t := target, topic, 2)
    lines = [b"k%d|value %d \xff\x00 with|bar" % (i, i) for i in range(200)] + [b"empty|"]
    r = cli(t, "produce", "--topic", topic, "--key-separator", "|", "--header", "source=cli", "--header", "n=1",
            "--partition", "1", "--acks", acks, "--compression", compression, "--json",
            input=b"\n".join(lines) + b"\n")
    summary = json.loads(r.stdout)
    assert summary["records"] == 201 and summary["failed"] == 0 and list(summary["partitions"]) == ["1"]
    got = _read_all(t, topic, 201)
    assert [(m.partition(), m.key(), m.value(), m.headers()) for m in got] == \
        [(1, k, v, [("source", b"cli"), ("n", b"1")]) for k, _, v in (ln.partition(b"|") for ln in lines)]
    assert [m.offset() for m in got] == list(range(201))
    if acks != "0":
        assert summary["partitions"]["1"] == {"records": 201, "first_offset": 0, "last_offset": 200}


def test_produce_from_file_without_keys(target, tmp_path):
    topic = name("cli-file")
    _create(target, topic)
    f = tmp_path / "in.txt"
    f.write_bytes(b"one\n\ntwo:2\nlast-without-newline")
    r = cli(target, "produce", "--topic", topic, "--file", str(f), "--progress")
    assert b"produced 4 records" in r.stderr   # the final progress line (asked for: stderr is a pipe)
    assert [(m.key(), m.value()) for m in _read_all(target, topic, 4)] == \
        [(None, b"one"), (None, b""), (None, b"two:2"), (None, b"last-without-newline")]
    # without --progress and with a pipe for stderr: no progress display
    r = cli(target, "produce", "--topic", topic, input=b"x\n")
    assert r.stderr == b""


def _client_records(t, topic):
    p = Producer({"bootstrap.servers": t.bootstrap})
    p.produce(topic, value=b"plain", partition=0, timestamp=1_700_000_000_000)
    p.produce(topic, key=b"k", value=b"\xff\xfe binary", partition=0, headers=[("h", b"v"), ("bin", b"\x80")],
              timestamp=1_700_000_001_000)
    p.produce(topic, key=b"tomb", value=None, partition=1, timestamp=1_700_000_002_000)
    p.produce(topic, key="ключ".encode(), value="значение".encode(), partition=1, timestamp=1_700_000_003_000)
    assert p.flush(60) == 0


def _from_the_end(t, topic, timeout=60.0):
    """Without a start option the CLI starts at the end (Kafka's default): it prints a record
    written after it started, never an old one.  Records are written until it has printed one
    (when it resolved "the end" is not observable from outside)."""
    proc = subprocess.Popen([sys.executable, "-m", "pykbroker", "consume", "--topic", topic, "--partition", "0",
                             "--max-messages", "1", "--bootstrap-server", t.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p = Producer({"bootstrap.servers": t.bootstrap})
    deadline = time.monotonic() + timeout
    try:
        i = 0
        while proc.poll() is None and time.monotonic() < deadline:
            p.produce(topic, b"late-%d" % i, partition=0)
            p.flush(30)
            i += 1
            time.sleep(0.3)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    return out.startswith(b"late-") and out.endswith(b"\n") and out.count(b"\n") == 1


def test_client_produces_cli_consumes(both):
    topic = name("cli-consume")

    def scenario(t):
        # the records carry 2023 timestamps, long past the default 7-day retention: without
        # retention.ms=-1, Kafka's retention check (30 s after start, then every 5 minutes)
        # deletes them mid-scenario and the --max-messages read below waits for ever
        _create(t, topic, 2, "retention.ms=-1")
        _client_records(t, topic)
        # the five reads are independent (each its own process, none writes): side by side, about
        # 1.5 s each of mostly waiting on the broker, instead of one after another
        reads = {
            "json": ("consume", "--topic", topic, "--from-beginning", "--exit-at-end", "--format", "json"),
            "value": ("consume", "--topic", topic, "--partition", "0", "--offset", "earliest", "--exit-at-end",
                      "--print-key", "--key-separator", "="),
            "offset": ("consume", "--topic", topic, "--partition", "1", "--offset", "1", "--exit-at-end"),
            "timestamp": ("consume", "--topic", topic, "--from-timestamp", "1700000001000", "--exit-at-end",
                          "--format", "json"),
            "max": ("consume", "--topic", topic, "--from-beginning", "--max-messages", "1", "--partition", "0")}
        with ThreadPoolExecutor(len(reads)) as pool:
            done = {k: pool.submit(cli, t, *args) for k, args in reads.items()}
            r = {k: f.result() for k, f in done.items()}
        seen = {k: r[k].stdout for k in ("value", "offset", "timestamp", "max")}
        # partitions interleave as fetches return; within one, offset order
        seen["json"] = sorted((json.loads(line) for line in r["json"].stdout.splitlines()),
                              key=lambda m: (m["partition"], m["offset"]))
        assert r["json"].stderr.decode().strip().endswith("Processed a total of 4 messages"), (t.name, r["json"].stderr)
        # last: it writes records to partition 0 until the command started at the end prints one
        seen["end"] = _from_the_end(t, topic)
        return seen

    p, k = both(scenario)
    assert p["json"] == [
        {"topic": topic, "partition": 0, "offset": 0, "timestamp": 1700000000000, "timestamp_type": "CreateTime",
         "key": None, "value": "plain", "headers": []},
        {"topic": topic, "partition": 0, "offset": 1, "timestamp": 1700000001000, "timestamp_type": "CreateTime",
         "key": "k", "value": None, "value_base64": "//4gYmluYXJ5",
         "headers": [{"key": "h", "value": "v"}, {"key": "bin", "value": None, "value_base64": "gA=="}]},
        {"topic": topic, "partition": 1, "offset": 0, "timestamp": 1700000002000, "timestamp_type": "CreateTime",
         "key": "tomb", "value": None, "headers": []},
        {"topic": topic, "partition": 1, "offset": 1, "timestamp": 1700000003000, "timestamp_type": "CreateTime",
         "key": "ключ", "value": "значение", "headers": []}]
    for side in sides(p, k):
        assert side["value"] == b"null=plain\nk=\xff\xfe binary\n"
        assert side["offset"] == "значение\n".encode()
        assert sorted((m["partition"], m["offset"]) for m in map(json.loads, side["timestamp"].splitlines())) \
            == [(0, 1), (1, 0), (1, 1)]
        assert side["max"] == b"plain\n" and side["end"] is True
    same_as_kafka(p, k, lambda side: scrub(side["json"]))


def test_read_committed(target):
    topic = name("cli-txn")
    _create(target, topic)
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": name("txn")})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.flush(60)
    p.abort_transaction(60)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(60)
    r = cli(target, "consume", "--topic", topic, "--from-beginning", "--exit-at-end",
            "--isolation-level", "read_committed", "--progress")
    committed = r.stdout
    assert b"consumed 1 records" in r.stderr   # the progress display's last line, asked for
    everything = cli(target, "consume", "--topic", topic, "--from-beginning", "--exit-at-end").stdout
    assert committed == b"committed\n"
    assert everything == b"aborted\ncommitted\n"


def test_consume_with_group_commits(target):
    topic, group = name("cli-group-consume"), name("cli-g")
    _create(target, topic)
    cli(target, "produce", "--topic", topic, input=b"".join(b"r%d\n" % i for i in range(20)))
    first = cli(target, "consume", "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "5")
    assert first.stdout == b"r0\nr1\nr2\nr3\nr4\n"
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    [tp] = c.committed([TopicPartition(topic, 0)], timeout=30)
    c.close()
    assert tp.offset == 5
    # the group resumes where it committed
    rest = cli(target, "consume", "--topic", topic, "--group", group, "--max-messages", "15")
    assert rest.stdout == b"".join(b"r%d\n" % i for i in range(5, 20))
