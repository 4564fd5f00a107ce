"""``pykbroker groups`` against pykbroker and Apache Kafka: a group's offsets committed by a real
consumer, listed and described (lag per partition, members, assignment) the same way by both
brokers; reset-offsets plans without writing (dry run) and writes with --execute, read back with
confluent-kafka's ``committed()``; delete."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .helpers import cli, cli_json, name, same_as_kafka, scrub, wait_topic


def _commit(t, group, topic, offsets, timeout=60.0):
    """Commit with a plain consumer.  Retried: the first group of a fresh Apache Kafka waits for
    __consumer_offsets to be created (COORDINATOR_NOT_AVAILABLE meanwhile)."""
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def _committed(t, group, topic, partitions):
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": group})
    got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    c.close()
    return {tp.partition: tp.offset for tp in got}


def _join(t, group, topic, partitions, timeout=60.0):
    """A subscribed consumer holding the group (Stable, with both partitions assigned)."""
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": group, "client.id": "cli-test-member",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    deadline = time.monotonic() + timeout
    while len(c.assignment()) < partitions:
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.2)
    return c


def test_groups(both):
    topic, group = name("cli-groups"), name("cli-group")

    def scenario(t):
        seen = {}
        cli(t, "topics", "create", "--topic", topic, "--partitions", "2")
        wait_topic(t, topic, 2)
        # records 0..9 in partition 0 with timestamps 1000*i, 0..4 in partition 1
        for p, n in ((0, 10), (1, 5)):
            cli(t, "produce", "--topic", topic, "--partition", str(p), input=b"".join(b"v%d\n" % i for i in range(n)))
        _commit(t, group, topic, {0: 7, 1: 2})
        listed = cli_json(t, "groups", "list")
        seen["list"] = [g for g in listed if g["group"] == group]
        seen["describe_empty"] = cli_json(t, "groups", "describe", "--group", group)
        r = cli(t, "groups", "describe", "--group", name("no-such-group"), check=False)
        seen["describe_missing"] = (r.returncode, b"does not exist" in r.stderr)

        # dry run (the default): the plan, nothing written
        seen["dry"] = cli_json(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
        assert _committed(t, group, topic, [0, 1]) == {0: 7, 1: 2}
        text = cli(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-latest").stdout
        assert b"dry run" in text
        seen["shift"] = cli_json(t, "groups", "reset-offsets", "--group", group, "--topic", "%s:0" % topic,
                                 "--shift-by", "-3", "--execute")
        assert _committed(t, group, topic, [0, 1]) == {0: 4, 1: 2}
        seen["clamped"] = cli_json(t, "groups", "reset-offsets", "--group", group, "--all-topics",
                                   "--to-offset", "8", "--execute")
        assert _committed(t, group, topic, [0, 1]) == {0: 8, 1: 5}
        seen["earliest"] = cli_json(t, "groups", "reset-offsets", "--group", group, "--topic", topic,
                                    "--to-earliest", "--execute")
        assert _committed(t, group, topic, [0, 1]) == {0: 0, 1: 0}

        # an active group: reset refused (exit 1), describe shows the member and its assignment
        member = _join(t, group, topic, 2)
        try:
            r = cli(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-latest",
                    "--execute", check=False)
            seen["reset_active"] = (r.returncode, b"inactive" in r.stderr)
            seen["describe_active"] = cli_json(t, "groups", "describe", "--group", group)
            text = cli(t, "groups", "describe", "--group", group).stdout.decode()
            assert "cli-test-member" in text and "LAG" in text
            r = cli(t, "groups", "delete", "--group", group, check=False)
            seen["delete_active"] = (r.returncode, b"NON_EMPTY_GROUP" in r.stderr)
        finally:
            member.close()
        assert _committed(t, group, topic, [0, 1]) == {0: 0, 1: 0}
        seen["delete"] = cli_json(t, "groups", "delete", "--group", group)
        assert group not in [g["group"] for g in cli_json(t, "groups", "list")]
        return scrub(seen)

    p, k = both(scenario)
    # offsets only, never joined: no protocol type, a "simple" group on both brokers
    assert p["list"] == [{"group": group, "state": "empty", "type": "classic", "simple": True}]
    assert p["describe_empty"] == [{
        "group": group, "state": "empty", "type": "classic", "protocol": None, "coordinator": 1, "members": [],
        "offsets": [{"topic": topic, "partition": 0, "current_offset": 7, "log_end_offset": 10, "lag": 3,
                     "member_id": "<member_id>", "client_id": None, "host": "<host>"},
                    {"topic": topic, "partition": 1, "current_offset": 2, "log_end_offset": 5, "lag": 3,
                     "member_id": "<member_id>", "client_id": None, "host": "<host>"}]}]
    assert p["describe_missing"] == (1, True)
    assert p["dry"] == {"group": group, "executed": False, "offsets": [
        {"topic": topic, "partition": 0, "current_offset": 7, "new_offset": 0},
        {"topic": topic, "partition": 1, "current_offset": 2, "new_offset": 0}]}
    assert p["shift"]["offsets"] == [{"topic": topic, "partition": 0, "current_offset": 7, "new_offset": 4}]
    assert [o["new_offset"] for o in p["clamped"]["offsets"]] == [8, 5]   # partition 1 ends at 5
    assert p["reset_active"] == (1, True) and p["delete_active"] == (1, True)
    active = p["describe_active"][0]
    assert active["state"] == "stable" and active["protocol"] == "range"
    assert [(m["client_id"], m["assignment"]) for m in active["members"]] == \
        [("cli-test-member", [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}])]
    assert [(o["partition"], o["lag"], o["client_id"]) for o in active["offsets"]] == \
        [(0, 10, "cli-test-member"), (1, 5, "cli-test-member")]
    assert p["delete"] == [{"group": group, "deleted": True, "error": None}]
    same_as_kafka(p, k)


def test_reset_to_timestamp(target):
    topic, group = name("cli-reset-ts"), name("cli-group-ts")
    t = target
    # 2020 timestamps are past the default 7-day retention: retention.ms=-1 keeps a retention
    # check (Kafka's runs 30 s after start, then every 5 minutes) from deleting them mid-test
    cli(t, "topics", "create", "--topic", topic, "--config", "retention.ms=-1")
    wait_topic(t, topic, 1)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": t.bootstrap})
    for i in range(5):
        p.produce(topic, b"v%d" % i, partition=0, timestamp=1_600_000_000_000 + 1000 * i)
    assert p.flush(60) == 0
    out = cli_json(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-timestamp",
                   "1600000002500", "--execute")
    assert out["offsets"] == [{"topic": topic, "partition": 0, "current_offset": None, "new_offset": 3}]
    assert _committed(t, group, topic, [0]) == {0: 3}
    out = cli_json(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-datetime",
                   "2020-09-13T12:26:41Z", "--execute")   # 1600000001000 ms
    assert out["offsets"][0]["new_offset"] == 1 and _committed(t, group, topic, [0]) == {0: 1}
    # after every record: the latest offset, as Kafka's tool
    out = cli_json(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-timestamp",
                   "1900000000000", "--execute")
    assert out["offsets"][0]["new_offset"] == 5 and _committed(t, group, topic, [0]) == {0: 5}
    # the group's consumer starts where the reset put it
    r = cli(t, "consume", "--topic", topic, "--group", group, "--exit-at-end")
    assert (r.stdout, r.stderr.splitlines()[-1]) == (b"", b"Processed a total of 0 messages")
    cli(t, "groups", "reset-offsets", "--group", group, "--topic", topic, "--shift-by", "-2", "--execute")
    got = cli(t, "consume", "--topic", topic, "--group", group, "--max-messages", "2").stdout
    assert got == b"v3\nv4\n"
