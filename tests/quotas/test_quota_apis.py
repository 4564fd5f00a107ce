"""DescribeClientQuotas / AlterClientQuotas (48/49): requests and answers encoded and decoded by
kafka-python's protocol classes (an independent codec), validation per entity with Kafka 4.4's
messages (the same cases are compared with Apache Kafka in tests/differential/
test_client_quotas.py), validate_only, removal, persistence across a restart, authorization."""
import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import call, call_kafka_python

kp = pytest.importorskip("kafka.protocol.admin")

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = pykbroker.Broker(log_dir=str(tmp_path_factory.mktemp("quota-apis")), config=dict(TEST_CONFIG)).start()
    try:
        yield b
    finally:
        b.stop()


def alter(b, entries, validate_only=False, version=1):
    """kafka-python's AlterClientQuotasRequest: entries [(entity [(type, name)], [(key, value, remove)])]
    -> {((type, name), ...): (code, message)}."""
    req = kp.AlterClientQuotasRequest[version](
        entries=[(list(ent), list(ops)) for ent, ops in entries], validate_only=validate_only)
    resp = call_kafka_python(b, req, version, kp.AlterClientQuotasResponse[version])
    out = {}
    for e in resp.to_dict()["entries"]:
        key = tuple(sorted((c["entity_type"], c["entity_name"]) for c in e["entity"]))
        out[key] = (e["error_code"], e["error_message"])
    return out


def describe(b, components, strict=False, version=1):
    req = kp.DescribeClientQuotasRequest[version](components=list(components), strict=strict)
    resp = call_kafka_python(b, req, version, kp.DescribeClientQuotasResponse[version])
    d = resp.to_dict()
    if d["error_code"]:
        return d["error_code"], d["error_message"]
    return {tuple(sorted((c["entity_type"], c["entity_name"]) for c in e["entity"])):
            {v["key"]: v["value"] for v in e["values"]} for e in d["entries"]}


def test_alter_then_describe_every_entity_kind(broker):
    got = alter(broker, [
        ([("user", "alice")], [("producer_byte_rate", 1024.0, False), ("consumer_byte_rate", 2048.0, False)]),
        ([("user", "alice"), ("client-id", "c1")], [("producer_byte_rate", 512.0, False)]),
        ([("user", None)], [("request_percentage", 50.5, False)]),
        ([("user", None), ("client-id", None)], [("consumer_byte_rate", 100.0, False)]),
        ([("client-id", None)], [("controller_mutation_rate", 2.5, False)]),
        ([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0, False)]),
    ])
    assert set(got.values()) == {(0, None)} and len(got) == 6
    alice = (("user", "alice"),)
    both = (("client-id", "c1"), ("user", "alice"))
    assert describe(broker, [("user", EXACT, "alice")], strict=True) == {
        alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}}
    # not strict: every entity naming user alice, with or without a client id
    assert set(describe(broker, [("user", EXACT, "alice")])) == {alice, both}
    assert describe(broker, [("user", DEFAULT, None)], strict=True) == {
        (("user", None),): {"request_percentage": 50.5}}
    assert set(describe(broker, [("user", SPECIFIED, None), ("client-id", SPECIFIED, None)], strict=True)) == {
        both, (("client-id", None), ("user", None))}
    assert set(describe(broker, [("ip", SPECIFIED, None)])) == {(("ip", "10.0.0.1"),)}
    # no component: everything; strict with none: nothing
    assert len(describe(broker, [])) == 6
    assert describe(broker, [], strict=True) == {}
    # v0 (not flexible) reads the same
    assert describe(broker, [("user", EXACT, "alice")], strict=True, version=0) == {
        alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}}


# entity, ops -> Kafka 4.4's message (INVALID_REQUEST), compared with Apache Kafka by the
# differential suite
INVALID = [
    ([("user", "bob")], [("foo", 1.0, False)], "Invalid configuration key foo"),
    ([("user", "bob")], [("producer_byte_rate", -5.0, False)], "Quota producer_byte_rate must be greater than 0"),
    ([("user", "bob")], [("producer_byte_rate", 0.0, False)], "Quota producer_byte_rate must be greater than 0"),
    ([("user", "bob")], [("producer_byte_rate", 1.5, False)], "producer_byte_rate cannot be a fractional value."),
    ([("user", "bob")], [("request_percentage", float("nan"), False)], "Quota request_percentage must be a finite number"),
    ([("user", "bob")], [("producer_byte_rate", 9.3e18, False)],
     "Proposed value for producer_byte_rate is too large for a LONG."),
    ([("user", "bob")], [("connection_creation_rate", 5.0, False)], "Invalid configuration key connection_creation_rate"),
    ([("ip", "1.2.3.4")], [("producer_byte_rate", 5.0, False)], "Invalid configuration key producer_byte_rate"),
    ([("user", "bob"), ("ip", "1.2.3.4")], [("producer_byte_rate", 5.0, False)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("ip", "not a host!")], [("connection_creation_rate", 5.0, False)], "not a host! is not a valid IP or resolvable host."),
    ([], [("producer_byte_rate", 5.0, False)], "Invalid empty client quota entity"),
    ([("group", "g")], [("producer_byte_rate", -1.0, False)], "Unhandled client quota entity type: group"),
    ([("user", "")], [("producer_byte_rate", 5.0, False)], "Empty user not supported"),
    ([("user", "carol")], [("producer_byte_rate", 5.0, False), ("producer_byte_rate", 6.0, False)],
     "Ignoring duplicate entity ClientQuotaEntity(entries={user=carol})"),
    # keys are checked before values, whatever their order
    ([("user", "u1")], [("producer_byte_rate", -1.0, False), ("nope", 1.0, False)], "Invalid configuration key nope"),
]


@pytest.mark.parametrize("entity,ops,message", INVALID, ids=[m[:40] for _, _, m in INVALID])
def test_invalid_alteration_answered_per_entity(broker, entity, ops, message):
    got = alter(broker, [(entity, ops), ([("user", "fine-" + str(len(message)))], [("producer_byte_rate", 7.0, False)])])
    key = tuple(sorted(dict(entity).items()))
    assert got[key] == (42, message)
    assert got[(("user", "fine-" + str(len(message))),)] == (0, None)   # the other entity is applied
    stored = describe(broker, [])
    assert key not in stored
    assert stored[(("user", "fine-" + str(len(message))),)] == {"producer_byte_rate": 7.0}


def test_duplicate_entity_keeps_the_first_alteration(broker):
    got = alter(broker, [([("user", "dave")], [("producer_byte_rate", 5.0, False)]),
                         ([("user", "dave")], [("consumer_byte_rate", 6.0, False)])])
    assert got == {(("user", "dave"),): (42, "Ignoring duplicate entity ClientQuotaEntity(entries={user=dave})")}
    assert describe(broker, [("user", EXACT, "dave")]) == {(("user", "dave"),): {"producer_byte_rate": 5.0}}


def test_validate_only_and_removal(broker):
    assert alter(broker, [([("user", "eve")], [("producer_byte_rate", 5.0, False)])], validate_only=True) == {
        (("user", "eve"),): (0, None)}
    assert describe(broker, [("user", EXACT, "eve")]) == {}
    alter(broker, [([("user", "eve")], [("producer_byte_rate", 5.0, False), ("consumer_byte_rate", 9.0, False)])])
    # removing a key (an unknown or unset one is no error); the entity goes with its last key
    assert alter(broker, [([("user", "eve")], [("producer_byte_rate", 0.0, True), ("nope", 0.0, True)])]) == {
        (("user", "eve"),): (0, None)}
    assert describe(broker, [("user", EXACT, "eve")]) == {(("user", "eve"),): {"consumer_byte_rate": 9.0}}
    alter(broker, [([("user", "eve")], [("consumer_byte_rate", 0.0, True)])])
    assert describe(broker, [("user", EXACT, "eve")]) == {}


@pytest.mark.parametrize("components,code,message", [
    ([("user", EXACT, None)], 42, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", DEFAULT, "x")], 42, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 3, None)], 42, "Unknown match type 3"),
    ([("group", SPECIFIED, None)], 35, "Unsupported entity type group"),
    ([("", SPECIFIED, None)], 42, "Invalid empty entity type."),
    ([("user", SPECIFIED, None), ("user", SPECIFIED, None)], 42,
     "Entity type user cannot appear more than once in the filter."),
    ([("ip", SPECIFIED, None), ("user", SPECIFIED, None)], 42,
     "Invalid entity filter component combination. IP filter component should not be used with user or "
     "clientId filter component."),
])
def test_invalid_filters(broker, components, code, message):
    assert describe(broker, components) == (code, message)


def test_quotas_survive_a_restart(tmp_path):
    b = pykbroker.Broker(log_dir=str(tmp_path), config=dict(TEST_CONFIG)).start()
    try:
        alter(b, [([("user", "frank"), ("client-id", None)], [("producer_byte_rate", 4096.0, False)]),
                  ([("client-id", "app")], [("request_percentage", 12.5, False)])])
        before = describe(b, [])
        b.restart()
        assert describe(b, []) == before == {
            (("client-id", None), ("user", "frank")): {"producer_byte_rate": 4096.0},
            (("client-id", "app"),): {"request_percentage": 12.5}}
        # and the restarted broker enforces them (the manager got them at load)
        assert b.broker.client_quotas.enabled
    finally:
        b.stop()


def test_authorization(tmp_path):
    b = pykbroker.Broker(log_dir=str(tmp_path), config={
        **TEST_CONFIG, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).start()
    try:
        body = {"entries": [{"entity": [{"entity_type": "user", "entity_name": "x"}],
                             "ops": [{"key": "producer_byte_rate", "value": 10.0, "remove": False}]}],
                "validate_only": False}
        r = call(b, 49, 1, body)
        assert [(e["error_code"], e["error_message"]) for e in r["entries"]] == [(31, "Cluster authorization failed.")]
        d = call(b, 48, 1, {"components": [], "strict": False})
        # no message for Describe (Kafka 4.4's ApiError drops the default text; Alter keeps it)
        assert (d["error_code"], d["error_message"], d["entries"]) == (31, None, None)
        b.acls.allow("User:ANONYMOUS", "ALTER_CONFIGS", cluster=True)
        assert [e["error_code"] for e in call(b, 49, 1, body)["entries"]] == [0]
        # ALTER_CONFIGS implies DESCRIBE_CONFIGS (Kafka's implied operations)
        d = call(b, 48, 1, {"components": [], "strict": False})
        assert d["error_code"] == 0 and d["entries"][0]["values"] == [{"key": "producer_byte_rate", "value": 10.0}]
    finally:
        b.stop()
