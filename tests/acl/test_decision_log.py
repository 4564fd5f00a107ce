"""The authorization decision log and audit-only mode, seen through real clients over
SASL_PLAINTEXT (PLAIN users, confluent-kafka).

- ``kafka.authorizer.logger`` answers "why was alice denied on topic t": one INFO line per denied
  check in Kafka's words (principal, operation, host, resource, request, the deciding rule), and
  at DEBUG the allows with the binding that allowed them.
- ``pykbroker.authorizer.audit.only=true``: the same denials are logged, marked
  "(audit only: allowed)", and the clients are served: records produced and read back."""
import logging
import re
import uuid

import pytest

from tests import needs

needs.module("cryptography")
needs.module("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402

from tests.acl.clients import CONFIG, authorizing_broker, consume as _consume, produce as _produce  # noqa: E402

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
LOGGER = "kafka.authorizer.logger"
LINE = re.compile(r"^Principal = (?P<principal>\S+) is (?P<result>Allowed|Denied) operation = (?P<op>\w+) "
                  r"from host = (?P<host>\S+) on resource = (?P<resource>\S+) for request = (?P<request>\w+) "
                  r"with resourceRefCount = \d+ based on rule (?P<rule>.+?)(?P<audit> \(audit only: allowed\))?$")


def _decisions(caplog, **match):
    """The decision lines of ``kafka.authorizer.logger`` whose fields equal ``match``."""
    out = []
    for r in caplog.records:
        if r.name != LOGGER:
            continue
        m = LINE.match(r.getMessage())
        assert m, r.getMessage()
        d = dict(m.groupdict(), level=r.levelname)
        if all(d[k] == v for k, v in match.items()):
            out.append(d)
    return out


@pytest.fixture(scope="module")
def broker():
    with authorizing_broker(USERS) as b:
        yield b


def test_why_was_alice_denied(broker, caplog):
    topic = "dl-" + uuid.uuid4().hex[:6]
    broker.create_topic(topic)
    alice = broker.client_config("alice")
    caplog.set_level(logging.INFO, logger=LOGGER)
    errs = _produce(alice, topic, [b"x"])
    assert errs and errs[0] is not None and errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errs
    denied = _decisions(caplog, principal="User:alice", resource="Topic:LITERAL:" + topic)
    assert denied, [r.getMessage() for r in caplog.records]
    assert {d["result"] for d in denied} == {"Denied"} and {d["level"] for d in denied} == {"INFO"}
    assert {d["rule"] for d in denied} == {"DefaultDeny"}   # no binding applies to the topic at all
    assert {d["host"] for d in denied} == {"127.0.0.1"}
    # the producer's Metadata asks DESCRIBE first, Kafka's order
    assert ("DESCRIBE", "Metadata") in {(d["op"], d["request"]) for d in denied}, denied
    assert not _decisions(caplog, result="Allowed")         # allows are DEBUG only

    # an explicit DENY is named as the rule; an ALLOW shows at DEBUG with its binding
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    broker.acls.allow("User:alice", "WRITE", topic=topic)
    broker.acls.deny("User:alice", "READ", topic=topic[:3], pattern="PREFIXED")
    broker.acls.allow("User:alice", "READ", group="g-" + topic)
    assert _produce(alice, topic, [b"y"]) == [None]
    allowed = _decisions(caplog, principal="User:alice", op="WRITE", request="Produce", result="Allowed")
    assert allowed and allowed[0]["level"] == "DEBUG", _decisions(caplog)
    assert allowed[0]["rule"] == ("MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=%s, "
                                  "patternType=LITERAL, principal=User:alice, host=*, operation=WRITE, "
                                  "permissionType=ALLOW))" % topic)
    got, _ = _consume(alice, topic, "g-" + topic, 1, timeout=6)
    assert not got
    read = _decisions(caplog, principal="User:alice", op="READ", resource="Topic:LITERAL:" + topic)
    assert read and read[0]["result"] == "Denied" and read[0]["level"] == "INFO", _decisions(caplog)
    assert read[0]["rule"] == ("MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=%s, "
                               "patternType=PREFIXED, principal=User:alice, host=*, operation=READ, "
                               "permissionType=DENY))" % topic[:3])
    assert not any(d["audit"] for d in _decisions(caplog))


def test_audit_only_logs_denials_and_serves_them():
    config = {**CONFIG, "pykbroker.authorizer.audit.only": "true"}
    with authorizing_broker(USERS, config) as b:
        topic = "audit-" + uuid.uuid4().hex[:6]
        b.create_topic(topic)
        alice = b.client_config("alice")
        logger = logging.getLogger(LOGGER)
        records = []
        handler = logging.Handler(logging.INFO)
        handler.emit = records.append
        logger.addHandler(handler)
        old = logger.level
        logger.setLevel(logging.INFO)
        try:
            values = [b"a", b"b", b"c"]
            assert _produce(alice, topic, values) == [None] * 3
            got, errors = _consume(alice, topic, "g-" + topic, 3)
            assert got == values, errors
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old)
        lines = [LINE.match(r.getMessage()) for r in records]
        assert all(lines), [r.getMessage() for r in records]
        denied = {(m["op"], m["resource"], m["request"]) for m in lines
                  if m["principal"] == "User:alice" and m["result"] == "Denied" and m["audit"]}
        assert ("WRITE", "Topic:LITERAL:" + topic, "Produce") in denied, denied
        assert ("READ", "Topic:LITERAL:" + topic, "Fetch") in denied, denied
        assert ("READ", "Group:LITERAL:g-" + topic, "JoinGroup") in denied, denied
        assert all(m["audit"] for m in lines if m["result"] == "Denied")
