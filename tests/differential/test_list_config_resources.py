"""ListConfigResources (API 74, KIP-1142) v0-1 against Apache Kafka 4.4: v0 (the former
ListClientMetricsResources) lists client-metrics subscriptions only; v1 lists each requested type
(none = all five), brokers and broker loggers by id, topics including __consumer_offsets; any
type outside the version's set is UNSUPPORTED_VERSION for the whole request.  Topics are compared
as a set restricted to this test's and the offsets topic (other differential tests create their
own; Kafka lists from a hash set)."""
import pytest

from .helpers import call, connect, create_topic, explain, wait_for_topic
from .test_groups import wait_coordinator

CASES = [None, [], [2], [4], [8], [16], [32], [4, 2], [2, 2], [2, 99], [0], [1], [64], [-1]]


def scenario(t, types):
    with connect(t) as r:
        for name in ("lcr-a", "lcr-b"):
            create_topic(t, name, 1)
            wait_for_topic(r, name, 1)
    wait_coordinator(t, "lcr-group")     # both create __consumer_offsets on the lookup
    r = call(t, 74, 0, {}) if types is None else call(t, 74, 1, {"resource_types": types})
    # other tests' topics and configured groups are left out
    listed = [(x["resource_type"], x["resource_name"]) for x in r["config_resources"]
              if x["resource_type"] not in (2, 32) or x["resource_name"] in ("lcr-a", "lcr-b", "__consumer_offsets")]
    # Kafka's order of types is fixed (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC);
    # within TOPIC it is a hash set's
    return r["error_code"], [t for t, _ in listed], sorted(listed)


@pytest.mark.parametrize("types", CASES, ids=lambda c: "v0" if c is None else "v1-" + ",".join(map(str, c)))
def test_list_config_resources(both, types):
    p, k = both(scenario, types)
    assert p == k, explain(p, k)
    code, _, listed = p
    if types in (None, [16], [32]):
        assert (code, listed) == (0, [])
    elif types in ([2, 99], [0], [1], [64], [-1]):
        assert (code, listed) == (35, [])
    elif types == []:
        assert listed == [(2, "__consumer_offsets"), (2, "lcr-a"), (2, "lcr-b"), (4, "1"), (8, "1")]
