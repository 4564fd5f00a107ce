"""``pykbroker acls add|list|remove`` (kafka-acls.sh's options) against a running SASL_PLAINTEXT
pykbroker with StandardAuthorizer, the admin (a super user) logging in through
``--command-config``: alice's consumer is refused, reads the records once ``acls add --consumer``
granted her topic and group, and is refused again after ``acls remove``; ``list`` shows what the
broker holds (DescribeAcls)."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaError, Producer

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from tests.acl.clients import authorizing_broker, consume

TIMEOUT = 120
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def secure():
    with authorizing_broker(USERS) as b:
        yield b


def _acls(b, tmp_path, *args, user="admin"):
    props = tmp_path / ("%s.properties" % user)
    cfg = b.client_config(user)
    props.write_text("".join("%s=%s\n" % (k, v) for k, v in cfg.items() if k != "bootstrap.servers"))
    cmd = [sys.executable, "-m", "pykbroker", "acls", *args, "-b", b.bootstrap_servers,
           "--command-config", str(props), "--timeout", "20"]
    return subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)


def _consume(b, topic, group, n, timeout=12):
    """alice's consumer: (values read, errors seen); stops at an authorization error."""
    return consume(b.client_config("alice"), topic, group, n, timeout, stop_when_denied=True)


def _denied(errors) -> bool:
    return bool(errors) and errors[-1] in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


def test_add_list_remove_with_a_real_consumer(secure, tmp_path):
    topic, group = "acl-cli-" + uuid.uuid4().hex[:6], "acl-cli-g-" + uuid.uuid4().hex[:6]
    secure.create_topic(topic)
    values = [b"a", b"b", b"c"]
    p = Producer({**secure.client_config("admin"), "message.timeout.ms": 8000})
    for v in values:
        p.produce(topic, v)
    assert p.flush(15) == 0

    got, errors = _consume(secure, topic, group, 3, timeout=8)
    assert not got and _denied(errors), errors

    r = _acls(secure, tmp_path, "add", "--allow-principal", "User:alice", "--consumer", "--topic", topic,
              "--group", group)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=%s, patternType=LITERAL)`" % topic in out
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out
    assert "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=%s, patternType=LITERAL)`" % group in out

    got, errors = _consume(secure, topic, group, 3)
    assert got == values, errors

    r = _acls(secure, tmp_path, "list", "--topic", topic, "--json")
    assert r.returncode == 0, r.stderr
    listed = {(x["principal"], x["operation"], x["permission_type"], x["pattern_type"]) for x in json.loads(r.stdout)}
    assert listed == {("User:alice", "READ", "ALLOW", "LITERAL"), ("User:alice", "DESCRIBE", "ALLOW", "LITERAL")}

    r = _acls(secure, tmp_path, "remove", "--allow-principal", "User:alice", "--operation", "read", "--topic", topic,
              "--force")
    assert r.returncode == 0, r.stderr
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in r.stdout.decode()
    got, errors = _consume(secure, topic, group + "-2", 3, timeout=8)
    assert not got and _denied(errors), errors

    r = _acls(secure, tmp_path, "list", "--principal", "User:alice", "--json")
    left = {(x["resource_type"], x["resource_name"], x["operation"]) for x in json.loads(r.stdout)}
    assert left == {("TOPIC", topic, "DESCRIBE"), ("GROUP", group, "READ")}

    # every binding of the resources, then nothing is left
    r = _acls(secure, tmp_path, "remove", "--topic", topic, "--group", group, "--force")
    assert r.returncode == 0, r.stderr
    r = _acls(secure, tmp_path, "list", "--principal", "User:alice", "--json")
    assert json.loads(r.stdout) == []


def test_prefixed_deny_and_host(secure, tmp_path):
    """--resource-pattern-type prefixed, --deny-principal with --deny-host, --operation All."""
    prefix = "pfx-" + uuid.uuid4().hex[:4]
    r = _acls(secure, tmp_path, "add", "--deny-principal", "User:alice", "--deny-host", "10.0.0.9",
              "--topic", prefix, "--resource-pattern-type", "prefixed", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["added"] == [{
        "resource_type": "TOPIC", "resource_name": prefix, "pattern_type": "PREFIXED", "principal": "User:alice",
        "host": "10.0.0.9", "operation": "ALL", "permission_type": "DENY"}]   # --operation defaults to All
    # a match filter finds the prefixed binding from a topic under it
    r = _acls(secure, tmp_path, "list", "--topic", prefix + "-orders", "--resource-pattern-type", "match", "--json")
    assert [(x["resource_name"], x["pattern_type"]) for x in json.loads(r.stdout)] == [(prefix, "PREFIXED")]
    r = _acls(secure, tmp_path, "remove", "--topic", prefix, "--resource-pattern-type", "prefixed", "--force")
    assert r.returncode == 0 and b"host=10.0.0.9, operation=ALL, permissionType=DENY" in r.stdout, r


def test_errors(secure, tmp_path):
    r = _acls(secure, tmp_path, "add", "--topic", "t")                       # no principal
    assert r.returncode == 2 and b"--allow-principal" in r.stderr, r
    r = _acls(secure, tmp_path, "add", "--allow-principal", "alice", "--topic", "t")   # not Type:name
    assert r.returncode == 2, r
    r = _acls(secure, tmp_path, "add", "--allow-principal", "User:alice", "--operation", "Fly", "--topic", "t")
    assert r.returncode == 2 and b"unknown operation" in r.stderr, r
    r = _acls(secure, tmp_path, "remove", "--topic", "t")                      # no tty, no --force
    assert r.returncode == 2 and b"--force" in r.stderr, r
    # alice is no super user: CreateAcls needs ALTER on the cluster
    r = _acls(secure, tmp_path, "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t",
              user="alice")
    assert r.returncode == 1 and b"CLUSTER_AUTHORIZATION_FAILED" in r.stderr.upper().replace(b" ", b"_") or \
        b"authoriz" in r.stderr.lower(), r


def test_without_an_authorizer_says_so(tmp_path):
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        # (list cannot tell: librdkafka drops DescribeAcls' top-level error and gives no binding)
        cmd = [sys.executable, "-m", "pykbroker", "acls", "add", "--allow-principal", "User:alice", "--topic", "t",
               "-b", b.bootstrap_servers, "--timeout", "20"]
        r = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 1 and b"SECURITY_DISABLED" in r.stderr.upper().replace(b" ", b"_") or \
        b"security" in r.stderr.lower(), r
