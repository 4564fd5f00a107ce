"""How much a Fetch answer carries per partition, against Apache Kafka: the same batches produced
to both brokers, then the same fetches, answer by answer.  Kafka reads a byte slice of the
segment file (LogSegment.read): ``partition_max_bytes`` (or what is left of ``max_bytes``) from
the start of the batch holding the fetch offset, so an answer usually ends inside a batch (the
client drops that partial batch and fetches it again); the first partition with data gets at
least its first batch whole (KIP-74); a later partition whose first batch does not fit in what is
left gets nothing (not part of it: Kafka's firstEntryIncomplete); one segment per read, so an
answer stops at a segment's end.  librdkafka, the Java client and the rest were
built against exactly these answers (compat/bench/results/consume-small-records.md)."""
import struct

from .helpers import batch, connect, create_topic, produce_accepted, wait_for_topic

# Kafka's smallest segment.bytes (4.x): 1 MiB.  ~1.4 MB of batches of uneven sizes rolls once.
SEGMENT = 1 << 20
SIZES = [40, 7, 120, 3, 60, 90, 15, 200, 33, 80, 8, 150, 45, 110, 70, 25, 130, 55, 95, 12]
STARTS = [sum(SIZES[:i]) for i in range(len(SIZES))]   # each batch's base offset


def _values(n, seed):
    return [(b"%d-%d-" % (seed, i)) * 150 for i in range(n)]


def _shape(data):
    """(bytes, base offsets of the whole batches, bytes of the trailing partial batch)."""
    data = bytes(data or b"")
    pos, bases = 0, []
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        bases.append(base)
        pos += 12 + length
    return len(data), bases, len(data) - pos


def _fetch(r, topic, parts, max_bytes, partition_max_bytes):
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": off, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes} for p, off in parts]}],
            "forgotten_topics_data": [], "rack_id": ""}
    resp = r.request(1, 12, body)
    return [(p["partition_index"], p["error_code"], p["high_watermark"]) + _shape(p["records"])
            for t in resp["responses"] for p in t["partitions"]]


def test_fetch_answer_sizes_match_kafka(both):
    topic = "diff-fetch-sizing"

    def scenario(t):
        create_topic(t, topic, 2, configs={"segment.bytes": str(SEGMENT)})
        with connect(t) as r:
            wait_for_topic(r, topic, 2)
            for i, n in enumerate(SIZES):
                for p in (0, 1):
                    # until accepted: Kafka under load can answer NOT_LEADER_OR_FOLLOWER for a
                    # moment after its metadata lists the new topic (a refused batch is not written)
                    produce_accepted(r, topic, p, batch(_values(n, i * 2 + p)))
            end = sum(SIZES)
            seen = []
            # walk partition 0 as a consumer does (from the offset after the last whole batch),
            # with a limit that usually cuts a batch, and one smaller than most batches
            for pmax in (100_000, 5_000):
                off = 0
                while off < end:
                    ans = _fetch(r, topic, [(0, off)], 50 << 20, pmax)
                    seen.append(("walk", pmax, off, ans))
                    last = ans[0][4][-1]
                    off = last + SIZES[STARTS.index(last)]
            # the response limit: partition 0 takes its first batch whole (KIP-74) even over
            # the limit; partition 1 gets what is left if its first batch fits in it, else nothing
            for max_bytes, pmax in ((1, 1 << 20), (10_000, 1 << 20), (60_000, 50_000), (120_000, 1 << 20)):
                seen.append(("limit", max_bytes, pmax, _fetch(r, topic, [(0, 0), (1, 0)], max_bytes, pmax)))
            # a fetch offset inside a batch starts at that batch
            seen.append(("mid", _fetch(r, topic, [(1, 45)], 50 << 20, 20_000)))
            # the whole partition in one answer: it stops at the first segment's end
            seen.append(("segment", _fetch(r, topic, [(0, 0)], 50 << 20, 50 << 20)))
            return seen

    p, k = both(scenario)
    assert len(p) == len(k)
    for a, b in zip(p, k):
        assert a == b, "pykbroker %r\nKafka     %r" % (a, b)
    # the scenario does exercise what it claims: partial trailing batches, a later partition
    # left empty although bytes were left, and an answer ending at a segment's end
    assert any(ans[0][5] for kind, *rest in k if kind == "walk" for ans in [rest[-1]])
    assert any(len(ans) == 2 and ans[1][3] == 0 and ans[0][3] < 60_000 for kind, *rest in k if kind == "limit"
               for ans in [rest[-1]])
    seg = [rest[-1] for kind, *rest in k if kind == "segment"][0][0]
    assert seg[5] == 0 and seg[3] < SEGMENT + 20_000 and seg[4][-1] + 1 < sum(SIZES)

