"""What the client-scenario comparisons (test_franz_go.py, test_sarama.py, test_kafkajs.py) share.

- :func:`run_jobs`: several scenario runs against one side at once, each in a thread of its own
  (a client process each, or one process running several scenarios); a run's failure is kept and
  raised only by the test that reads that run (:func:`result`), so one failing scenario fails its
  own test, not the module's others.  With ``both.at_once`` the two sides run side by side too:
  the comparison takes the longest single run's time, not the sum.
- :func:`stored`: what the broker stored in a topic, read back with raw Fetches (no client
  between): each record's offset, key, value, headers (byte-exact, null kept apart from empty),
  timestamp, and its batch's codec, timestamp type, transactional flag and whether a producer id
  was set.  Timestamps are made relative to the topic's newest one: each side's producer ran on
  its own clock moment, the pattern must not differ.  Batch boundaries are left out: how a
  client groups records into batches is its linger timing, not the broker's.
- :func:`group_view`: how the broker keeps a consumer group once the scenario is over: the
  committed offsets per partition (OffsetFetch), the group's state, type and protocol type
  (ListGroups v5), its classic description (DescribeGroups v5: state, protocol type, protocol,
  members) and its KIP-848 description (ConsumerGroupDescribe v0: error, state, assignor).
  Group epochs, generations and member ids are left out: they count joins whose number is
  timing (members joining in one rebalance or in two) and ids the broker draws at random.
"""
from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from pykbroker.protocol import wire
from pykbroker.protocol.wire import WireClient
from .helpers import explain


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def attempt(job: Callable[[], Any]) -> Any:
    """``job()``, or its exception kept for :func:`result` to raise."""
    try:
        return job()
    except Exception as e:   # kept for the test reading this run
        return _Failed(e)


def run_jobs(jobs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """``{name: job()}``, the jobs run at once; a job's exception is kept under its name."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(attempt, job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def result(reports: dict, name: str) -> Any:
    """The run ``name`` of :func:`run_jobs`'s answer, or its failure raised again."""
    r = reports[name]
    if isinstance(r, _Failed):
        raise r.error
    return r


def side_results(both_pair: tuple, name: str) -> tuple:
    """``(pykbroker's, Kafka's)`` run ``name`` from ``both.at_once(... run_jobs ...)``'s pair,
    pykbroker's failure raised first."""
    p, k = both_pair
    return result(p, name), result(k, name)


def same_roundtrip(p: dict, k: dict) -> dict:
    """A codec round trip's checks common to every client: both sides' reports and stored records
    equal (pykbroker's and Kafka's); pykbroker's report returned for the client's own checks."""
    assert p["report"] == k["report"], explain(p["report"], k["report"])
    assert p["stored"] == k["stored"], explain(p["stored"], k["stored"])
    return p["report"]


def assert_stored_codecs(stored_by_codec: dict, codec_ids: dict, records: int, idempotent: bool) -> None:
    """Each codec's ``records`` records stored with that codec (``codec_ids``: name -> attribute
    id), CreateTime, not transactional, with a producer id exactly when ``idempotent``."""
    for codec, i in codec_ids.items():
        recs = [r for rs in stored_by_codec[codec].values() for r in rs]
        assert len(recs) == records and {tuple(r[5:]) for r in recs} == {(i, 0, False, idempotent)}, \
            (codec, recs[:3])


def stored(target, topic: str, partitions: int = 3, timestamps: bool = True) -> dict:
    """``{"0": [[offset, key, value, [[header key, value], ...], timestamp - the newest, codec,
    timestamp type, transactional, producer id set], ...], ...}``: every record of ``topic``
    below its high watermark, read with raw Fetch v12 requests from offset 0.  Without
    ``timestamps`` (records the client stamped with its clock as it produced them) the timestamp
    column is None."""
    import warnings
    with warnings.catch_warnings():   # kafka-python loads its protocol schemas with a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBatch
    out: dict[str, list] = {}
    with WireClient((target.host, target.port), timeout=15) as c:
        for p in range(partitions):
            recs: list = []
            offset = 0
            while True:
                part = wire.fetch_part(wire.fetch(c, topic, p, offset))
                assert part["error_code"] == 0, (target, topic, p, part)
                data, pos, before = bytes(part["records"] or b""), 0, offset
                while pos + 12 <= len(data):
                    (length,) = struct.unpack_from(">i", data, pos + 8)
                    if pos + 12 + length > len(data):
                        break   # a partial batch at the end of the answer: fetched again next round
                    batch = DefaultRecordBatch(data[pos:pos + 12 + length])
                    meta = [batch.compression_type, batch.timestamp_type, batch.is_transactional,
                            batch.producer_id >= 0]
                    for r in batch:
                        recs.append([r.offset, r.key, r.value, [[k, v] for k, v in r.headers], r.timestamp] + meta)
                    offset = batch.base_offset + batch.last_offset_delta + 1
                    pos += 12 + length
                if offset >= part["high_watermark"] or offset == before:
                    break
            out[str(p)] = recs
    newest = max((r[4] for rs in out.values() for r in rs), default=0)
    for rs in out.values():
        for r in rs:
            r[4] = r[4] - newest if timestamps else None
    return out


def group_view(target, group: str, topic: str, partitions: int = 3) -> dict:
    """The broker's view of ``group`` after the scenario (see the module's docstring)."""
    with WireClient((target.host, target.port), timeout=15) as c:
        f = c.request(9, 8, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": [
            {"name": topic, "partition_indexes": list(range(partitions))}]}], "require_stable": True})
        g = f["groups"][0]
        offsets = {str(pt["partition_index"]): [pt["committed_offset"], pt["error_code"]]
                   for t in g["topics"] for pt in t["partitions"]}
        listed = [[x["group_state"], x["group_type"], x["protocol_type"]]
                  for x in c.request(16, 5, {"states_filter": [], "types_filter": []})["groups"] if x["group_id"] == group]
        d = c.request(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        cgd = c.request(69, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    return {"offsets": offsets, "offset_fetch_error": g["error_code"], "listed": listed,
            "described": [d["error_code"], d["group_state"], d["protocol_type"], d["protocol_data"], len(d["members"])],
            "consumer_group_described": [cgd["error_code"], cgd["group_state"], cgd["assignor_name"], len(cgd["members"])]}
