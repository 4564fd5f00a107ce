"""The fetch-session cache's admission and eviction rules (cluster/fetch_session.py), which are
Kafka's FetchSessionCacheShard's: sans-IO, with explicit clocks."""
import trio

from pykbroker.cluster.fetch_session import EVICTION_MS, NUM_SHARDS, FetchSessionCache, FetchSessionCacheShard


def shard(max_entries=2):
    stats = {"sessions_created": 0, "evictions": 0}
    return FetchSessionCacheShard(max_entries, EVICTION_MS, (1 << 31) // NUM_SHARDS, 3, stats), stats


def new(sh, now, privileged=False, size=1):
    s = sh.maybe_create(now, privileged, size, False)
    if s is not None:
        for i in range(size):
            s.add(("t", i), "t", None, i, {})
        sh.touch(s, now)
    return s


def test_session_ids_name_their_shard():
    sh, _ = shard(50)
    for _ in range(50):
        s = new(sh, 0)
        assert sh.shard_num * sh.id_range <= s.id < (sh.shard_num + 1) * sh.id_range


def test_full_shard_refuses_a_young_unprivileged_session_of_the_same_size():
    sh, stats = shard(2)
    a, b = new(sh, 0, size=3), new(sh, 0, size=3)
    assert new(sh, 1000, size=3) is None                  # nobody is old enough to make room
    assert new(sh, 1000, size=100) is None                # bigger does not help while they are young
    assert set(sh.sessions) == {a.id, b.id} and stats["evictions"] == 0


def test_privileged_evicts_the_smallest_unprivileged():
    sh, stats = shard(2)
    big, small = new(sh, 0, size=5), new(sh, 0, size=2)
    f = new(sh, 10, privileged=True, size=1)
    assert f is not None and set(sh.sessions) == {big.id, f.id} and stats["evictions"] == 1
    # a young privileged session is not evictable by anyone but staleness
    assert new(sh, 20, privileged=True, size=100) is not None    # evicts the other unprivileged one
    assert new(sh, 30, privileged=True, size=100) is None


def test_older_sessions_evictable_by_bigger_ones_after_the_eviction_time():
    sh, _ = shard(2)
    a, b = new(sh, 0, size=5), new(sh, 0, size=2)
    t = EVICTION_MS + 1
    # they are evictable once touched after EVICTION_MS (Kafka decides membership on touch);
    # touching also makes them recently used, so it is not staleness that frees the slot
    sh.touch(a, t)
    sh.touch(b, t)
    assert new(sh, t + 1, size=2) is None          # not bigger than the smallest (2)
    c = new(sh, t + 1, size=3)                      # bigger: evicts b (the smallest)
    assert c is not None and set(sh.sessions) == {a.id, c.id}


def test_stale_session_goes_first_least_recently_used():
    sh, stats = shard(2)
    a, b = new(sh, 0), new(sh, 5)
    sh.touch(a, 10)          # b is now the least recently used
    c = new(sh, 5 + EVICTION_MS + 1, size=1)
    assert c is not None and set(sh.sessions) == {a.id, c.id} and stats["evictions"] == 1


def test_cache_shards_slots_round_robin_and_lookup():
    async def main():
        cache = FetchSessionCache(slots=16)          # 2 per shard
        made = [cache.maybe_create(False, 1, False) for _ in range(NUM_SHARDS * 2)]
        assert all(s is not None for s in made)
        for s in made:
            cache.touch(s)
        assert len(cache) == 16
        assert {cache._shard_of(s.id).shard_num for s in made} == set(range(NUM_SHARDS))
        assert all(cache.get(s.id) is s for s in made)
        assert cache.maybe_create(False, 1, False) is None      # full, nobody evictable
        assert cache.remove(made[0].id) and cache.get(made[0].id) is None
        # fewer than 8 slots: no session ever (slots / 8 == 0 per shard, as in Kafka)
        assert FetchSessionCache(slots=7).maybe_create(True, 1, False) is None
    trio.run(main)
