"""pykbroker's quota rate and throttle time against Kafka's, value for value.

tests/quotas/data/kafka_rate_oracle.json holds event sequences and what Kafka 4.4's own classes
answered for each (a quota sensor built as ClientQuotaManager builds it, QuotaUtils.throttleTime;
compat/kafka/quota/rate_oracle.py made it and remakes it).  Most sequences are closed loops, a
client sending again as soon as its throttle is over, so a difference at any step (a sample
boundary, the first windows counted as ``samples - 1``, the purge of idle samples, the rounding)
changes the answer at the event where it first matters.  No JVM here: the answers are stored."""
import json
import math
from pathlib import Path

import pytest

from pykbroker.quota.rate import Rate

DATA = json.loads((Path(__file__).parent / "data" / "kafka_rate_oracle.json").read_text())
SCENARIOS = sorted(k for k in DATA if not k.startswith("_"))


@pytest.mark.parametrize("name", SCENARIOS)
def test_rate_and_throttle_equal_kafkas(name):
    s = DATA[name]
    r = Rate(s["samples"], s["window_ms"])
    bound = s["bound"]
    for i, (t, value, check, throttle, measured, window) in enumerate(s["events"]):
        r.record(value, t)
        if not check:
            continue
        got = (r.throttle_ms(bound, t), r.measure(t), r.window_size_ms(t))
        assert got[0] == throttle and got[2] == window and math.isclose(got[1], measured, rel_tol=1e-12), (
            "event %d (t=%d ms, value %r): pykbroker throttle/rate/window %r, Kafka %r"
            % (i, t, value, got, (throttle, measured, window)))


def test_the_scenarios_throttle():
    # the stored answers exercise the throttle formula, not only the unthrottled path
    for name in SCENARIOS:
        assert sum(1 for e in DATA[name]["events"] if e[3] > 0) >= 10, name
