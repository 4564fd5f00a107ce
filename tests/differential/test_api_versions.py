"""ApiVersions: every API pykbroker advertises exists on Apache Kafka with the same lowest
version, and pykbroker never advertises a version above Kafka's highest (clients negotiate to
min(ours, theirs), so a higher max would mean semantics Kafka never had)."""
import re
from pathlib import Path

import pytest

from pykbroker.protocol.wire import request_frame

from .helpers import explain, call

HANDLERS = sorted(int(m.group(1)) for p in (Path(__file__).resolve().parents[2] / "pykbroker" / "handlers").glob("k*.py")
                  if (m := re.match(r"k(\d+)_", p.name)))

_cache = {}


def ranges(target):
    if target.name not in _cache:
        r = call(target, 18, 3, {"client_software_name": "differential", "client_software_version": "1.0"})
        assert r["error_code"] == 0
        _cache[target.name] = {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}
    return _cache[target.name]


# Everything Apache Kafka 4.4 advertises that pykbroker does not, or with a lower maximum: the only
# differences allowed in ``test_same_ranges_as_kafka`` (the same list lives in SKIPPED.md).
# key -> (pykbroker's range or None when not advertised, why).
EXCLUDED = {
    # KRaft-internal: the quorum, its voters and features (pykbroker has no KRaft quorum)
    55: (None, "KRaft: DescribeQuorum"), 57: (None, "KRaft: UpdateFeatures"), 64: (None, "KRaft: UnregisterBroker"),
    80: (None, "KRaft: AddRaftVoter"), 81: (None, "KRaft: RemoveRaftVoter"), 94: (None, "KRaft: UnregisterController"),
}


def test_same_ranges_as_kafka(both):
    """The (API, min, max) set pykbroker advertises equals Apache Kafka 4.4's apart from
    EXCLUDED, entry by entry (a stale entry fails too: drop it once the API is built)."""
    p, k = ranges(both.pyk), ranges(both.kafka)
    diff = {key: p.get(key) for key in set(p) | set(k) if p.get(key) != k.get(key)}
    assert diff == {key: rng for key, (rng, _) in EXCLUDED.items()}, explain(
        diff, {key: rng for key, (rng, _) in EXCLUDED.items()})


@pytest.mark.parametrize("api_key", HANDLERS)
def test_advertised_range(both, api_key):
    p = ranges(both.pyk)
    k = ranges(both.kafka)
    assert api_key in p, "pykbroker has a handler for %d but does not advertise it" % api_key
    pmin, pmax = p[api_key]
    kmin, kmax = k.get(api_key, (None, None))
    assert (pmin, pmax <= (kmax if kmax is not None else -1)) == (kmin, True), \
        "pykbroker advertises %d-%d, Kafka %s-%s" % (pmin, pmax, kmin, kmax)


def test_no_api_unknown_to_kafka(both):
    assert sorted(set(ranges(both.pyk)) - set(ranges(both.kafka))) == []


def test_api_versions_v0_unsupported_version(both):
    """A too-new ApiVersions request: v0 body with UNSUPPORTED_VERSION and the supported range of
    ApiVersions itself (KIP-511)."""
    from .helpers import connect

    def scenario(t):
        with connect(t) as r:
            # As a newer client sends it: header v2 (tagged fields) and a v3-shaped body.
            body = b"\x0dkafka-python\x043.0\x00"
            r.send_bytes(request_frame(18, 127, 99, body, client_id="diff", flexible=True))
            frame = r.recv_frame()
        from pykbroker.protocol.codec import APIS
        body = APIS[18].decode("response", 0, memoryview(frame)[4:])
        own = [(a["min_version"], a["max_version"]) for a in body["api_keys"] if a["api_key"] == 18]
        # the range must be the one this broker advertises (Kafka 4.4 has ApiVersions v5)
        return body["error_code"], own == [ranges(t)[18]], own[0][0] if own else None
    p, k = both(scenario)
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_closes_connection(both, version):
    """Advertised but not served: a Produce v0-2 request is an unsupported version, and both
    close the connection without an answer (v0 body: acks, timeout, one topic, one empty
    partition; the same bytes for v1/v2)."""
    from .helpers import connect
    import struct

    def s16(s):
        return struct.pack(">h", len(s)) + s

    def scenario(t):
        with connect(t) as r:
            body = (struct.pack(">hii", 1, 5000, 1) + s16(b"err-one") + struct.pack(">iii", 1, 0, 0))
            r.send_bytes(request_frame(0, version, 5, body, client_id="differential", flexible=False))
            return r.wait_closed()
    p, k = both(scenario)
    assert p == k == True, explain(p, k)


@pytest.mark.parametrize("case", ["none", "match", "bad_cluster", "bad_node", "cluster_only", "node_only"])
def test_api_versions_v5_cluster_and_node_check(both, case):
    """KIP-1242: both cluster id and node id given and one differs: REBOOTSTRAP_REQUIRED; only
    one given: INVALID_REQUEST; both with an empty API list."""
    def scenario(t):
        cid = call(t, 3, 12, {"topics": [], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})["cluster_id"]
        cluster, node = {"none": (None, -1), "match": (cid, t.node_id), "bad_cluster": ("AAAAAAAAAAAAAAAAAAAAAA", t.node_id),
                         "bad_node": (cid, t.node_id + 6), "cluster_only": (cid, -1), "node_only": (None, t.node_id)}[case]
        r = call(t, 18, 5, {"client_software_name": "differential", "client_software_version": "1.0",
                            "cluster_id": cluster, "node_id": node})
        return r["error_code"], bool(r["api_keys"]), r["finalized_features_epoch"] >= 0
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_feature_lists(both):
    """What pykbroker reports (k18_api_versions.FEATURES) against Kafka 4.4: every feature
    pykbroker lists is one of Kafka's with the same minimum, and a level pykbroker finalizes is
    one Kafka supports; Kafka's metadata.version / kraft.version (KRaft's own) and the levels of
    protocols pykbroker has not built (ELR, share group DLQs) are the deliberate differences
    (SKIPPED.md).  transaction.version: 0-2, finalized at 2 on both; streams.version 0-1,
    finalized at 1 on both (KIP-1071 streams groups); share.version finalized at 1 here, 2 on
    Kafka."""
    def scenario(t):
        r = call(t, 18, 4, {"client_software_name": "differential", "client_software_version": "1.0"})
        return ({f["name"]: (f["min_version"], f["max_version"]) for f in r["supported_features"]},
                {f["name"]: f["max_version_level"] for f in r["finalized_features"]})
    (p_sup, p_fin), (k_sup, k_fin) = both(scenario)
    assert set(k_sup) - set(p_sup) == {"metadata.version", "kraft.version"}
    for name, (lo, hi) in p_sup.items():
        assert k_sup[name][0] == lo and hi <= k_sup[name][1], name
    assert p_fin == {"group.version": 1, "transaction.version": 2, "share.version": 1, "streams.version": 1}
    assert p_sup["streams.version"] == k_sup["streams.version"] == (0, 1) and k_fin["streams.version"] == 1
    assert k_fin["group.version"] == 1 and k_fin["transaction.version"] == 2
    # share.version: Kafka 4.4 supports 0-2 and finalizes 2 (level 2 = share group dead-letter
    # queues, KIP-1191); pykbroker serves share groups (level 1) without DLQs (SKIPPED.md)
    assert p_sup["share.version"] == (0, 1) and k_sup["share.version"] == (0, 2) and k_fin["share.version"] == 2
    assert p_sup["transaction.version"] == k_sup["transaction.version"] == (0, 2)
