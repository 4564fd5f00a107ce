"""``pykbroker users add|list|delete`` against a SASL_PLAINTEXT pykbroker, through
``--command-config`` (the admin's own SCRAM login): a user added by the CLI logs in with
confluent-kafka and round-trips a record; deleted, the same login is refused."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from tests.security.clients import produce_until_answer

TIMEOUT = 120


@pytest.fixture(scope="module")
def secure():
    with pykbroker.Broker(security="SASL_PLAINTEXT", users={"admin": "admin-secret"},
                          mechanisms=["SCRAM-SHA-512", "SCRAM-SHA-256"], config=TEST_CONFIG) as b:
        yield b


def _users(b, tmp_path, *args, input=None, java=False):
    props = tmp_path / "admin.properties"
    if java:   # the file Kafka's own tools take (sasl.jaas.config)
        b.java_properties_file(str(props), "admin", "SCRAM-SHA-512")
    else:
        cfg = b.client_config("admin", "SCRAM-SHA-512")
        props.write_text("".join("%s=%s\n" % (k, v) for k, v in cfg.items() if k != "bootstrap.servers"))
    cmd = [sys.executable, "-m", "pykbroker", "users", *args, "-b", b.bootstrap_servers,
           "--command-config", str(props), "--timeout", "20"]
    return subprocess.run(cmd, input=input, capture_output=True, timeout=TIMEOUT)


def _login(b, user, password, mechanism="SCRAM-SHA-256"):
    """A produce then consume as ``user``: the values read back, or the KafkaException."""
    cfg = b.client_config(user, mechanism, password=password)
    topic = "users-" + uuid.uuid4().hex[:6]
    delivered, errors = produce_until_answer(cfg, topic, b"hello", timeout=12)
    if not delivered or delivered[0] is not None:
        raise KafkaException(errors[0] if errors else delivered[0] if delivered else "not delivered")
    c = Consumer({**cfg, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                return [m.value()]
        return []
    finally:
        c.close()


def test_add_login_list_delete(secure, tmp_path):
    pw = "bob-pw-" + uuid.uuid4().hex[:6]
    # the password from stdin (a script), never echoed on stdout or stderr
    r = _users(secure, tmp_path, "add", "bob", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192",
               input=(pw + "\n").encode())
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"Completed updating config for user bob.\n"   # kafka-configs.sh's line
    assert pw.encode() not in r.stdout + r.stderr
    assert _login(secure, "bob", pw) == [b"hello"]
    with pytest.raises(KafkaException):
        _login(secure, "bob", "wrong-password")

    r = _users(secure, tmp_path, "list")
    assert r.returncode == 0, r.stderr
    assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192" in r.stdout.decode()
    r = _users(secure, tmp_path, "list", "bob", "--json", java=True)   # Kafka's properties form too
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}]}]

    r = _users(secure, tmp_path, "delete", "bob")
    assert r.returncode == 0, r.stderr
    with pytest.raises(KafkaException):
        _login(secure, "bob", pw)
    r = _users(secure, tmp_path, "list", "bob")
    assert r.returncode == 1 and b"no such user" in r.stderr


def test_errors_in_the_users_words(secure, tmp_path):
    r = _users(secure, tmp_path, "add", "carol", "--iterations", "100", "--password", "x")
    assert r.returncode == 1 and b"add user carol" in r.stderr and b"Traceback" not in r.stderr
    r = _users(secure, tmp_path, "add", "carol", "--mechanism", "MD5", "--password", "x")
    assert r.returncode == 2 and b"unknown SCRAM mechanism" in r.stderr
    r = _users(secure, tmp_path, "add", "carol", input=b"\n")
    assert r.returncode == 2 and b"empty password" in r.stderr
    r = _users(secure, tmp_path, "delete", "nobody-" + uuid.uuid4().hex[:4])
    assert r.returncode == 1 and b"no such user" in r.stderr
    assert _users(secure, tmp_path, "add", "dave", "--password", "dave-pw").returncode == 0   # SCRAM-SHA-512
    r = _users(secure, tmp_path, "delete", "dave", "--mechanism", "SCRAM-SHA-256")
    assert r.returncode == 1 and b"no such credential" in r.stderr and b"RESOURCE_NOT_FOUND" in r.stderr
    # a wrong admin password in the properties: the command fails, in words, without a hang
    props = tmp_path / "bad.properties"
    cfg = secure.client_config("admin", "SCRAM-SHA-512", password="wrong")
    props.write_text("".join("%s=%s\n" % (k, v) for k, v in cfg.items() if k != "bootstrap.servers"))
    r = subprocess.run([sys.executable, "-m", "pykbroker", "users", "list", "-b", secure.bootstrap_servers,
                        "--command-config", str(props), "--timeout", "10"], capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 1 and b"authentication to the broker failed" in r.stderr, r.stderr
    assert b"Traceback" not in r.stderr and b"wrong" not in r.stderr
