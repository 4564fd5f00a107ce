"""What the quota tests on an embedded broker share: the broker with short quota windows and
AlterClientQuotas."""
from __future__ import annotations

import contextlib

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import call

# two windows of 1 s: a throttle lasts about a second, so the tests measure it quickly
QUOTA_CONFIG = {**TEST_CONFIG, "quota.window.num": "2", "quota.window.size.seconds": "1"}


@contextlib.contextmanager
def quota_broker(log_dir: str):
    """An embedded broker with :data:`QUOTA_CONFIG` in ``log_dir``, stopped on exit."""
    b = pykbroker.Broker(log_dir=log_dir, config=QUOTA_CONFIG).start()
    try:
        yield b
    finally:
        b.stop()


def set_quota(b, entity: dict, **values):
    """AlterClientQuotas v1 (``entity``: type -> name, None for the default): must be accepted."""
    r = call(b, 49, 1, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
        "ops": [{"key": k, "value": float(v), "remove": False} for k, v in values.items()]}]})
    assert [e["error_code"] for e in r["entries"]] == [0], r


def fetch_v12(topic: str) -> dict:
    """A Fetch v12 body reading ``topic``'s partition 0 from offset 0 at once (max_wait_ms 0),
    outside any fetch session: what a throttled consumer's fetch looks like."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
