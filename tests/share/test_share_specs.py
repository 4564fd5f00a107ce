"""protocol_specs/ of the KIP-932 APIs against Apache Kafka 4.4's own message definitions.

kafka-python's bundle (what tests/protocol/test_spec_drift.py reads) has no share group APIs, so
these specs are checked against the kafka-clients jar of the oracle's Apache Kafka instead, with
the same field-by-field comparison."""
import pytest

from pykbroker.protocol.codec import APIS
from compat.kafka.upstream import load_from_kafka_jar, parse_range
from tests.protocol.test_spec_drift import norm_ours, norm_upstream

SHARE_APIS = {76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
              83: "InitializeShareGroupState", 84: "ReadShareGroupState", 85: "WriteShareGroupState",
              86: "DeleteShareGroupState", 87: "ReadShareGroupStateSummary", 90: "DescribeShareGroupOffsets",
              91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets"}


@pytest.mark.parametrize("api_key", sorted(SHARE_APIS))
def test_share_spec_matches_kafka(api_key):
    name = SHARE_APIS[api_key]
    req = load_from_kafka_jar(name + "Request")
    resp = load_from_kafka_jar(name + "Response")
    assert req is not None and resp is not None, "the oracle's kafka-clients jar is needed (compat/kafka/oracle.py)"
    ours = APIS[api_key]
    assert req["apiKey"] == api_key
    lo, hi = parse_range(req["validVersions"])
    assert (ours.min_version, ours.max_version) == (lo, hi), "Kafka 4.4 serves exactly these versions"
    assert parse_range(req["flexibleVersions"])[0] == ours.flexible_from
    for kind, doc, fields in (("request", req, ours.request), ("response", resp, ours.response)):
        common = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
        for v in range(ours.min_version, ours.max_version + 1):
            assert norm_ours(fields, v) == norm_upstream(doc["fields"], v, common), (name, kind, v)
