"""Followers fetch by topic id (Fetch v13+, the highest version both sides serve, as Kafka's
replica fetcher does) on in-process brokers (tests/replication/conftest.py): the version and
the leader's session kind; a topic deleted and re-created under the same name (the followers
end up with the new topic's records only); a follower that missed a re-creation, or whose
topic id the leader does not know (UNKNOWN_TOPIC_ID); a leader whose partition is another
incarnation than its metadata says (INCONSISTENT_TOPIC_ID).  The follower backs off without
touching its log, and catches up once both sides agree on the id again."""
import logging
import os

from pykbroker.cluster.replica_fetcher import MAX_FETCH_VERSION
from pykbroker.local.broker_process import wait_until
from pykbroker.protocol import wire

from .helpers import fetch_values, followers, produce, wait_replicated

FETCHER_LOG = "pykbroker.replica_fetcher"


def _fetch_state(cluster, node, topic, partition):
    """(fetch version, session uses ids, topic id of the partition's fetch state) of a follower."""
    def get():
        rm = cluster.brokers[node].replica_manager
        f = rm.fetcher_of((topic, partition))
        st = f.partitions.get((topic, partition)) if f is not None else None
        return (f.fetch_version if f else None, f._session_uses_ids if f else None,
                st.topic_id if st else None, f._session_id if f else None)
    return cluster.call(get)


def _follower_values(cluster, node, topic, partition):
    raw = cluster.log_bytes(node, topic, partition)
    return [v for _, _, recs in wire.decode_batches(raw) for (_, _, v) in recs]


def test_followers_fetch_by_topic_id_at_the_highest_version(cluster):
    info = cluster.create_topic("tid", 2, 3)
    for p in (0, 1):
        leader, _ = followers(cluster, "tid", p)
        assert produce(cluster, leader, "tid", p, [b"a%d" % p, b"b%d" % p])["error_code"] == 0
        wait_replicated(cluster, "tid", p)
        leader, fols = followers(cluster, "tid", p)
        for f in fols:
            version, uses_ids, topic_id, session_id = _fetch_state(cluster, f, "tid", p)
            assert (version, uses_ids, topic_id) == (MAX_FETCH_VERSION, True, info.topic_id)
            # the leader holds the follower's session as a topic-id session
            s = cluster.call(lambda: cluster.brokers[leader].replica_manager.fetch_sessions.get(session_id))
            assert s is not None and s.uses_topic_ids is True
            assert _follower_values(cluster, f, "tid", p) == [b"a%d" % p, b"b%d" % p]


def test_topic_recreated_under_the_same_name(cluster):
    old = cluster.create_topic("again", 1, 3)
    leader, _ = followers(cluster, "again", 0)
    assert produce(cluster, leader, "again", 0, [b"old-1", b"old-2", b"old-3"])["error_code"] == 0
    wait_replicated(cluster, "again", 0)
    cluster.acall(cluster.brokers[1].controller.delete_topic, "again")
    new = cluster.create_topic("again", 1, 3)
    assert new.topic_id != old.topic_id
    leader, fols = followers(cluster, "again", 0)
    assert produce(cluster, leader, "again", 0, [b"new-1"])["error_code"] == 0
    assert wait_replicated(cluster, "again", 0) == 1
    for f in fols:
        assert _fetch_state(cluster, f, "again", 0)[2] == new.topic_id
        assert _follower_values(cluster, f, "again", 0) == [b"new-1"]
    _, vals = fetch_values(cluster, leader, "again", 0)
    assert vals == [b"new-1"]


def _one_replicated_record(cluster, topic):
    """``topic`` (1 partition, 3 replicas) holding b"one" on every replica: (leader, a follower)."""
    cluster.create_topic(topic, 1, 3)
    leader, fols = followers(cluster, topic, 0)
    assert produce(cluster, leader, topic, 0, [b"one"])["error_code"] == 0
    wait_replicated(cluster, topic, 0)
    return leader, fols[0]


def _readd_with_topic_id(cluster, f, topic, topic_id):
    """Partition 0 of ``topic`` re-added to follower ``f``'s fetcher under ``topic_id`` (the
    partition keeps its real id)."""
    def readd():
        part = cluster.partition(f, topic, 0)
        real, part.topic_id = part.topic_id, topic_id
        try:
            cluster.brokers[f].replica_manager.fetcher_of((topic, 0)).add_partition(part)
        finally:
            part.topic_id = real
    cluster.call(readd)


def test_unknown_topic_id_backs_off_then_catches_up(cluster, caplog):
    leader, f = _one_replicated_record(cluster, "stale")
    with caplog.at_level(logging.WARNING, logger=FETCHER_LOG):
        # re-added as if this follower's metadata named the topic by an id the leader does not know
        _readd_with_topic_id(cluster, f, "stale", os.urandom(16))
        assert produce(cluster, leader, "stale", 0, [b"two"], acks=1)["error_code"] == 0
        wait_until(lambda: ("ReplicaFetcher(%d <- %d): stale-0: UNKNOWN_TOPIC_ID from the leader" % (f, leader))
                   in caplog.text, 15, what="UNKNOWN_TOPIC_ID warning")
    assert cluster.offsets(f, "stale", 0)[2] == 1          # nothing appended meanwhile
    assert _follower_values(cluster, f, "stale", 0) == [b"one"]
    # the right id again (what the next metadata would bring): it catches up
    cluster.call(lambda: cluster.brokers[f].replica_manager.fetcher_of(("stale", 0))
                 .add_partition(cluster.partition(f, "stale", 0)))
    assert wait_replicated(cluster, "stale", 0) == 2
    assert _follower_values(cluster, f, "stale", 0) == [b"one", b"two"]


def test_follower_behind_a_recreation_keeps_its_log(cluster, caplog):
    """The follower misses the deletion and re-creation (detached from the controller): its
    fetches name the old incarnation's id: the leader answers UNKNOWN_TOPIC_ID or
    INCONSISTENT_TOPIC_ID, and the follower's log keeps the old records only (the new
    incarnation's are never appended to it)."""
    cluster.create_topic("inc", 1, 3)
    leader, fols = followers(cluster, "inc", 0)
    f = fols[0]
    assert produce(cluster, leader, "inc", 0, [b"old"])["error_code"] == 0
    wait_replicated(cluster, "inc", 0)
    old_dir = cluster.call(lambda: cluster.partition(f, "inc", 0).log.dir)
    cluster.call(cluster.cluster.detach, f)
    with caplog.at_level(logging.WARNING, logger=FETCHER_LOG):
        cluster.acall(cluster.brokers[leader].controller.delete_topic, "inc")
        cluster.acall(cluster.brokers[leader].controller.create_topic, "inc", -1, -1,
                      {}, [(0, [leader] + [b for b in (1, 2, 3) if b != leader])])
        assert produce(cluster, leader, "inc", 0, [b"new-1", b"new-2"], acks=1)["error_code"] == 0
        # INCONSISTENT_TOPIC_ID while its session holds the old partition on the leader (the
        # leader resolves it by name to the new incarnation), UNKNOWN_TOPIC_ID for a request
        # naming the old id afresh
        wait_until(lambda: any(("ReplicaFetcher(%d <- %d): inc-0: %s from the leader" % (f, leader, e))
                               in caplog.text for e in ("UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID")),
                   15, what="the detached follower's topic id warning")
    assert cluster.call(lambda: cluster.partition(f, "inc", 0).log.dir) == old_dir
    assert _follower_values(cluster, f, "inc", 0) == [b"old"]


def test_inconsistent_topic_id_backs_off_then_catches_up(cluster, caplog):
    """The leader's partition belongs to another incarnation than the id its metadata maps the
    name to (the window in which a re-created topic's old log is still in place): it answers
    INCONSISTENT_TOPIC_ID; the followers back off without appending, and catch up once the
    leader's partition is the right one again."""
    info = cluster.create_topic("incons", 1, 3)
    leader, fols = followers(cluster, "incons", 0)
    assert produce(cluster, leader, "incons", 0, [b"one"])["error_code"] == 0
    wait_replicated(cluster, "incons", 0)

    def set_leader_id(tid):
        cluster.partition(leader, "incons", 0).topic_id = tid
    with caplog.at_level(logging.WARNING, logger=FETCHER_LOG):
        cluster.call(set_leader_id, os.urandom(16))
        assert produce(cluster, leader, "incons", 0, [b"two"], acks=1)["error_code"] == 0
        for f in fols:
            wait_until(lambda f=f: ("ReplicaFetcher(%d <- %d): incons-0: INCONSISTENT_TOPIC_ID from the leader"
                                    % (f, leader)) in caplog.text, 15, what="INCONSISTENT_TOPIC_ID warnings")
    for f in fols:
        assert _follower_values(cluster, f, "incons", 0) == [b"one"]
    cluster.call(set_leader_id, info.topic_id)
    assert wait_replicated(cluster, "incons", 0) == 2
    for f in fols:
        assert _follower_values(cluster, f, "incons", 0) == [b"one", b"two"]


def test_a_partition_without_topic_id_falls_back_to_names(cluster):
    """Kafka's canUseTopicIds: one partition without an id (a topic from before topic ids) makes
    the fetcher's requests v12 with names, in a new session; ids come back with it."""
    leader, f = _one_replicated_record(cluster, "noid")
    # re-added as the metadata of a topic without id would add it
    _readd_with_topic_id(cluster, f, "noid", bytes(16))
    assert produce(cluster, leader, "noid", 0, [b"two"])["error_code"] == 0
    assert wait_replicated(cluster, "noid", 0) == 2
    _, uses_ids, _, session_id = _fetch_state(cluster, f, "noid", 0)
    assert uses_ids is False
    s = cluster.call(lambda: cluster.brokers[leader].replica_manager.fetch_sessions.get(session_id))
    assert s is not None and s.uses_topic_ids is False
    cluster.call(lambda: cluster.brokers[f].replica_manager.fetcher_of(("noid", 0))
                 .add_partition(cluster.partition(f, "noid", 0)))
    assert produce(cluster, leader, "noid", 0, [b"three"])["error_code"] == 0
    assert wait_replicated(cluster, "noid", 0) == 3
    assert _fetch_state(cluster, f, "noid", 0)[1] is True
    assert _follower_values(cluster, f, "noid", 0) == [b"one", b"two", b"three"]
