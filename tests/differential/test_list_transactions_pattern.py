"""ListTransactions v2 (KIP-1152): the transactional id pattern (null/empty = all, a whole-id
regular expression match, an invalid pattern INVALID_REGULAR_EXPRESSION), as Apache Kafka 4.4."""
import time

import pytest

from .helpers import connect, explain

IDS = ("ltp-abc", "ltp-abd", "ltp-x", "zz-ltp-abc")
_ready = set()


def ready(t):
    if t.name in _ready:
        return
    with connect(t) as c:
        for tid in IDS:
            deadline = time.monotonic() + 60
            while True:   # the coordinator may still be loading __transaction_state
                fc = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
                if fc["coordinators"][0]["error_code"] == 0:
                    r = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                          "producer_id": -1, "producer_epoch": -1})
                    if r["error_code"] == 0:
                        break
                assert time.monotonic() < deadline, (fc, tid)
                time.sleep(0.2)
    _ready.add(t.name)


@pytest.mark.parametrize("pattern", [None, "", "ltp-ab.", "ltp", "ltp.*", "[", ".*ltp-abc", "(?i)LTP-ABC"])
def test_transactional_id_pattern(both, pattern):
    def scenario(t):
        ready(t)
        with connect(t) as c:
            r = c.request(66, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                  "transactional_id_pattern": pattern})
        return r["error_code"], sorted((x["transactional_id"], x["transaction_state"]) for x in r["transaction_states"]
                                       if x["transactional_id"] in IDS)
    p, k = both(scenario)
    assert p == k, explain(p, k)
