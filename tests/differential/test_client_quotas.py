"""DescribeClientQuotas / AlterClientQuotas as Apache Kafka 4.4 answers them: the same
alterations (valid, invalid per entity, duplicates, validate_only, removals) then the same
filters, on the session's two brokers.  Per-entity codes and messages, the entities' components
and values are compared exactly; Kafka lists entities in a hash order, so both answers are
compared sorted.  Every quota is removed again at the end, and defaults get only values that
cannot throttle the other tests sharing these brokers."""
from __future__ import annotations

from .helpers import call, explain

NAME = "diffq-"   # entity names no other test uses


def ent(**kw):
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in kw.items()]


def op(key, value=0.0, remove=False):
    return {"key": key, "value": float(value), "remove": remove}


U, C = NAME + "alice", NAME + "app"
ALTERATIONS = [
    ([{"entity": ent(user=U), "ops": [op("producer_byte_rate", 1 << 30), op("consumer_byte_rate", 1 << 31)]},
      {"entity": ent(user=U, client_id=C), "ops": [op("producer_byte_rate", 1 << 29)]},
      {"entity": ent(user=None), "ops": [op("request_percentage", 1e6)]},
      {"entity": ent(user=None, client_id=None), "ops": [op("controller_mutation_rate", 1e6)]},
      {"entity": ent(client_id=C), "ops": [op("request_percentage", 1e6), op("controller_mutation_rate", 1e6)]},
      {"entity": ent(ip="10.11.12.13"), "ops": [op("connection_creation_rate", 1000)]},
      {"entity": ent(ip="localhost"), "ops": [op("connection_creation_rate", 1000)]}], False),
    # one invalid entity each, next to a valid one
    ([{"entity": ent(user=NAME + "bob"), "ops": [op("foo", 1)]},
      {"entity": ent(user=NAME + "bob2"), "ops": [op("producer_byte_rate", -5)]},
      {"entity": ent(user=NAME + "bob3"), "ops": [op("producer_byte_rate", 0)]},
      {"entity": ent(user=NAME + "bob4"), "ops": [op("producer_byte_rate", 1.5)]},
      {"entity": ent(user=NAME + "bob5"), "ops": [op("request_percentage", float("inf"))]},
      {"entity": ent(user=NAME + "bob6"), "ops": [op("producer_byte_rate", 9.3e18)]},
      {"entity": ent(user=NAME + "bob7"), "ops": [op("connection_creation_rate", 5)]},
      {"entity": ent(user=NAME + "bob8"), "ops": [op("producer_byte_rate", -1), op("nope", 1)]},
      {"entity": ent(ip="10.0.0.9"), "ops": [op("producer_byte_rate", 5)]},
      {"entity": ent(ip="10.0.0.10"), "ops": [op("connection_creation_rate", 2.5)]},
      {"entity": ent(user=NAME + "bob", ip="10.0.0.9"), "ops": [op("producer_byte_rate", 5)]},
      {"entity": ent(client_id=NAME + "c", ip="10.0.0.9"), "ops": [op("producer_byte_rate", 5)]},
      {"entity": ent(ip="not a host!"), "ops": [op("connection_creation_rate", 5)]},
      {"entity": [], "ops": [op("producer_byte_rate", 5)]},
      {"entity": ent(group="g"), "ops": [op("producer_byte_rate", -1)]},
      {"entity": ent(user=""), "ops": [op("producer_byte_rate", 5)]},
      {"entity": ent(ip=""), "ops": [op("connection_creation_rate", 5)]},
      {"entity": ent(user=NAME + "carol"), "ops": [op("producer_byte_rate", 5), op("producer_byte_rate", 6)]},
      {"entity": ent(user=NAME + "dave"), "ops": [op("producer_byte_rate", 1 << 30)]},
      {"entity": ent(user=NAME + "dave"), "ops": [op("consumer_byte_rate", 6)]},
      {"entity": ent(user=NAME + "frank"), "ops": [op("producer_byte_rate", 1 << 30)]}], False),
    # validate_only stores nothing
    ([{"entity": ent(user=NAME + "eve"), "ops": [op("producer_byte_rate", 1 << 30)]},
      {"entity": ent(user=NAME + "eve2"), "ops": [op("nope", 1)]}], True),
    # removals: a set key, an unset one, an unknown one; the entity goes with its last key
    ([{"entity": ent(user=U), "ops": [op("producer_byte_rate", remove=True), op("nope", remove=True)]},
      {"entity": ent(user=NAME + "zed"), "ops": [op("producer_byte_rate", remove=True)]},
      {"entity": ent(user=NAME + "frank"), "ops": [op("producer_byte_rate", remove=True)]}], False),
]

FILTERS = [
    ([], False), ([], True),
    ([{"entity_type": "user", "match_type": 0, "match": U}], False),
    ([{"entity_type": "user", "match_type": 0, "match": U}], True),
    ([{"entity_type": "user", "match_type": 1, "match": None}], False),
    ([{"entity_type": "user", "match_type": 1, "match": None}], True),
    ([{"entity_type": "user", "match_type": 2, "match": None}], False),
    ([{"entity_type": "user", "match_type": 2, "match": None}, {"entity_type": "client-id", "match_type": 2,
                                                                  "match": None}], True),
    ([{"entity_type": "client-id", "match_type": 0, "match": C}], True),
    ([{"entity_type": "ip", "match_type": 2, "match": None}], False),
    ([{"entity_type": "user", "match_type": 0, "match": None}], False),
    ([{"entity_type": "user", "match_type": 1, "match": "x"}], False),
    ([{"entity_type": "user", "match_type": 2, "match": "x"}], False),
    ([{"entity_type": "user", "match_type": 3, "match": None}], False),
    ([{"entity_type": "group", "match_type": 2, "match": None}], False),
    ([{"entity_type": "", "match_type": 2, "match": None}], False),
    ([{"entity_type": "user", "match_type": 2, "match": None}, {"entity_type": "user", "match_type": 1,
                                                                  "match": None}], False),
    ([{"entity_type": "ip", "match_type": 2, "match": None}, {"entity_type": "user", "match_type": 2,
                                                                "match": None}], False),
]


def _entity_key(entity):
    return [(c["entity_type"], c["entity_name"] is None, c["entity_name"] or "") for c in entity]


def _alter(t, entries, validate_only, version=1):
    r = call(t, 49, version, {"entries": entries, "validate_only": validate_only})
    return r["throttle_time_ms"], sorted(r["entries"], key=lambda e: _entity_key(e["entity"]))


def _describe(t, components, strict, version=1):
    r = call(t, 48, version, {"components": components, "strict": strict})
    if r["entries"] is not None:
        r["entries"] = sorted(r["entries"], key=lambda e: _entity_key(e["entity"]))
    return r


def _settled(t):
    """Kafka answers AlterClientQuotas once its controller has the change; the broker's
    metadata image (what DescribeClientQuotas reads) follows a moment later.  Wait until two
    reads agree (pykbroker's first read already does)."""
    import time
    before = _describe(t, [], False)
    for _ in range(50):
        time.sleep(0.1)
        now = _describe(t, [], False)
        if now == before:
            return
        before = now


def _remove_all(t):
    r = call(t, 48, 1, {"components": [], "strict": False})
    entries = [{"entity": e["entity"], "ops": [op(v["key"], remove=True) for v in e["values"]]}
               for e in r["entries"] or ()]
    if entries:
        call(t, 49, 1, {"entries": entries, "validate_only": False})
        _settled(t)
    return call(t, 48, 1, {"components": [], "strict": False})["entries"]


def test_alter_and_describe_client_quotas_as_kafka(both):
    def scenario(t):
        try:
            out = {"alter": [_alter(t, entries, vo) for entries, vo in ALTERATIONS],
                   "alter_v0": _alter(t, [{"entity": ent(user=NAME + "v0"), "ops": [op("nope", 1)]}], False, 0)}
            _settled(t)
            out.update({
                   "describe": [_describe(t, comps, strict) for comps, strict in FILTERS],
                   "describe_v0": _describe(t, [{"entity_type": "user", "match_type": 0, "match": U}], False, 0)})
        finally:
            left = _remove_all(t)
        out["left_after_cleanup"] = left
        return out

    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_throttled_produce_and_fetch_as_kafka(both):
    """The same byte-rate quotas on both brokers, the same traffic: both answer a throttle in
    Produce (with the records appended) and answer a throttled Fetch with no partitions.  The
    throttle times themselves depend on timing and are not compared.  Quotas of a client id no
    other test uses, removed afterwards; the muted connections are closed."""
    from pykbroker.protocol import wire
    from .helpers import create_topic

    client = NAME + "throttled"
    topic = NAME + "throttled"
    chunk = b"q" * 100_000

    def scenario(t):
        create_topic(t, topic)
        call(t, 49, 1, {"validate_only": False, "entries": [{"entity": ent(client_id=client), "ops": [
            op("producer_byte_rate", 100_000), op("consumer_byte_rate", 100_000)]}]})
        _settled(t)   # (Kafka's broker applies the quota once its metadata has it)
        try:
            out = {}
            # Kafka's rate counts a first burst over 10 windows: > 1 MB is over 100 KB/s
            with wire.WireClient(t, client_id=client) as c:
                for i in range(30):
                    r = wire.produce(c, topic, 0, wire.make_batch([chunk]), acks=1)
                    if r["throttle_time_ms"] > 0:
                        break
                out["produce"] = (r["throttle_time_ms"] > 0, wire.produce_part(r)["error_code"], i >= 9)
            with wire.WireClient(t, client_id=client) as c:
                for i in range(10):
                    r = wire.fetch(c, topic, 0, 0, version=12, max_bytes=1 << 22, partition_max_bytes=1 << 22)
                    if r["throttle_time_ms"] > 0:
                        break
                out["fetch"] = (r["throttle_time_ms"] > 0, r["error_code"], r["session_id"], r["responses"])
            return out
        finally:
            _remove_all(t)

    p, k = both(scenario)
    assert p == k, explain(p, k)
    assert p["produce"] == (True, 0, True) and p["fetch"] == (True, 0, 0, [])
