"""KIP-848 groups survive a broker restart (clean SIGTERM and kill -9): three confluent-kafka
members (``group.protocol=consumer``, separate processes) keep running while the broker goes
down and comes back; they continue with the same member ids and assignments — no
UNKNOWN_MEMBER_ID, no fencing, no revocation — and with commit-after-processing every record is
consumed exactly once."""
import re

import pytest


from .helpers import Worker, create_topic, produce, start_broker, unique, wait_consumed, wait_stable

SESSION_MS = 10000
# What librdkafka logs (debug=cgrp) when the coordinator forgot or fenced the member.
FORGOTTEN = re.compile(r"UNKNOWN_MEMBER_ID|Unknown member|FENCED_MEMBER_EPOCH|fenced", re.I)


def describe(bootstrap, group):
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": bootstrap})
    d = a.describe_consumer_groups([group])[group].result(30)
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members}, d


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_consumer_protocol_members_survive_broker_restart(tmp_path, clean):
    b = start_broker(str(tmp_path / "data"), **{"group.consumer.session.timeout.ms": str(SESSION_MS),
                                               "group.consumer.heartbeat.interval.ms": "500"})
    topic, group = unique("k848rs"), unique("g")
    workers = []
    try:
        create_topic(b.bootstrap, topic)
        workers = [Worker(tmp_path, "confluent", b.bootstrap, topic, group, "c%d" % i, protocol="consumer",
                          debug="cgrp") for i in range(3)]
        wait_stable(workers, timeout=40)
        produce(b.bootstrap, topic, 300)
        wait_consumed(workers, 300)
        members_before, _ = describe(b.bootstrap, group)
        assert len(members_before) == 3
        events_before = [w.assignment_events() for w in workers]
        err_before = [open(w.out + ".err").read() for w in workers]
        assert not any(FORGOTTEN.search(e) for e in err_before)

        b.restart(clean=clean)
        assert "3 KIP-848 member(s)" in b.log_text(), "group not replayed at load"
        produce(b.bootstrap, topic, 300, start=300)
        seen = wait_consumed(workers, 600, timeout=60)

        # each member was heard from again (so the check below is not vacuous) ...
        members_after, d = describe(b.bootstrap, group)
        assert members_after == members_before, (members_before, members_after)
        assert str(d.state).endswith("STABLE"), d.state
        # ... and none was forgotten, fenced, or had a partition revoked
        for w, before in zip(workers, events_before):
            err = open(w.out + ".err").read()
            assert "ConsumerGroupHeartbeat" in err, "no cgrp debug output from %s" % w.out
            bad = [ln for ln in err.splitlines() if FORGOTTEN.search(ln)]
            assert not bad, "%s: %s" % (w.out, bad[:5])
            assert w.assignment_events() == before, (w.out, before, w.assignment_events())
        assert sorted(seen) == list(range(600)), "records lost"
        dups = sum(n - 1 for n in seen.values())
        assert dups == 0, "%d duplicate(s) without any revocation" % dups
        commit_errors = sum(1 for w in workers for ln in w.lines() if ln.startswith("E commit"))
        print("KIP-848 broker restart (%s): 3 members kept ids %s, 0 duplicates, %d commit(s) failed while down"
              % ("clean" if clean else "kill -9", sorted(m[:8] for m in members_after), commit_errors))
    finally:
        for w in workers:
            if w.alive():
                w.stop()
        b.stop()
