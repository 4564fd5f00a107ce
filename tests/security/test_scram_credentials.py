"""AlterUserScramCredentials / DescribeUserScramCredentials (51/50): users managed through
confluent-kafka's admin API log in with SCRAM; Kafka's validation answers; the credentials
survive a restart and are stored as salted keys only."""
import json
import os
import time

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.errors import ErrorCode
from pykbroker.security.scram import salted_password
from pykbroker.protocol.wire import WireClient

needs.module("cryptography")

DESCRIBE, ALTER = 50, 51


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("scram")
    b = pykbroker.Broker(security="SASL_PLAINTEXT", users={"admin": "admin-pw"}, log_dir=str(d),
                         mechanisms=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], config=TEST_CONFIG)
    with b:
        yield b


def _admin(b):
    from confluent_kafka.admin import AdminClient
    return AdminClient(b.client_config("admin", "PLAIN"))


def _produce_as(b, user, mech, password):
    from confluent_kafka import KafkaError, Producer
    errors = []
    p = Producer({**b.client_config(user, mech, password=password), "error_cb": errors.append})
    p.produce("scram-users", b"from-" + user.encode())
    # flush(5), but a failed login (librdkafka's _AUTHENTICATION, through error_cb) ends it at
    # once: the record then stays undelivered (left 1) however long one waits
    deadline = time.monotonic() + 5
    left = p.flush(0.1)
    while left and time.monotonic() < deadline and \
            not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        left = p.flush(0.1)
    return left, errors


def test_users_added_by_the_admin_api_log_in(broker):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)

    a = _admin(broker)
    # one request per mechanism: a user named twice in one request is refused (as Kafka 4.4 does)
    for mech, iterations in ((ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 10000)):
        a.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(mech, iterations), b"carol-pw")])["carol"].result()
    desc = a.describe_user_scram_credentials(["carol"])["carol"].result()
    assert sorted((i.mechanism, i.iterations) for i in desc.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 10000)]
    assert _produce_as(broker, "carol", "SCRAM-SHA-512", "carol-pw")[0] == 0
    left, errors = _produce_as(broker, "carol", "SCRAM-SHA-256", "not-carols")
    assert left == 1 and errors
    # deleted: the mechanism no longer logs in
    a.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result()
    left, errors = _produce_as(broker, "carol", "SCRAM-SHA-512", "carol-pw")
    assert left == 1 and errors
    assert _produce_as(broker, "carol", "SCRAM-SHA-256", "carol-pw")[0] == 0


def _authenticate(c):
    assert c.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert c.request(36, 2, {"auth_bytes": b"\x00admin\x00admin-pw"})["error_code"] == 0


def _upsert(name, mech=1, iterations=4096):
    return {"name": name, "mechanism": mech, "iterations": iterations, "salt": b"salt",
            "salted_password": salted_password("SCRAM-SHA-256", "pw", b"salt", 4096)}


def test_a_user_named_twice_in_one_request_is_refused_whatever_the_mechanisms(broker):
    """Kafka 4.4 (ScramControlManager) allows one change per user and request: two mechanisms of
    one user, or a deletion and an upsertion of it, are DUPLICATE_RESOURCE and nothing changes
    for that user; the other users' changes are made."""
    with WireClient(broker) as c:
        _authenticate(c)
        r = c.request(ALTER, 0, {"deletions": [], "upsertions": [_upsert("two", 1), _upsert("other"),
                                                                  _upsert("two", 2)]})
        assert [(x["user"], x["error_code"], x["error_message"]) for x in r["results"]] == [
            ("two", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            ("other", 0, None)]
        assert c.request(ALTER, 0, {"deletions": [], "upsertions": [_upsert("two", 1)]})["results"][0]["error_code"] == 0
        r = c.request(ALTER, 0, {"deletions": [{"name": "two", "mechanism": 1}], "upsertions": [_upsert("two", 2)]})
        assert r["results"][0]["error_code"] == ErrorCode.DUPLICATE_RESOURCE, r
        r = c.request(DESCRIBE, 0, {"users": [{"name": "two"}, {"name": "other"}]})
        got = {x["user"]: [(i["mechanism"], i["iterations"]) for i in x["credential_infos"]] for x in r["results"]}
        assert got == {"two": [(1, 4096)], "other": [(1, 4096)]}


def test_alter_validation(broker):
    with WireClient(broker) as c:
        _authenticate(c)
        r = c.request(ALTER, 0, {
            "deletions": [{"name": "ghost", "mechanism": 1}],
            "upsertions": [_upsert(""), _upsert("weird", mech=3), _upsert("dup"), _upsert("dup"),
                           _upsert("few", iterations=4095),
                           _upsert("many", iterations=16385), _upsert("fine")]})
        got = {x["user"]: (x["error_code"], x["error_message"]) for x in r["results"]}
        assert got == {
            "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            "dup": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "weird": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "fine": (0, None),
        }
        # only "fine" was stored
        r = c.request(DESCRIBE, 0, {"users": [{"name": "fine"}, {"name": "few"}, {"name": "x"}, {"name": "x"}]})
        got = {x["user"]: (x["error_code"], [(i["mechanism"], i["iterations"]) for i in x["credential_infos"]])
               for x in r["results"]}
        assert got == {"fine": (0, [(1, 4096)]), "few": (ErrorCode.RESOURCE_NOT_FOUND, []),
                       "x": (ErrorCode.DUPLICATE_RESOURCE, [])}
        everyone = c.request(DESCRIBE, 0, {"users": None})
        assert {"admin", "fine"} <= {x["user"] for x in everyone["results"]}


def test_credentials_survive_a_restart_as_salted_keys_only(broker):
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    a = _admin(broker)
    a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-Secret-9")])["dave"].result()
    broker.restart()
    assert _produce_as(broker, "dave", "SCRAM-SHA-256", "dave-Secret-9")[0] == 0
    path = os.path.join(broker.log_dir, "__pykbroker_metadata.json")
    with open(path) as fh:
        text = fh.read()
    stored = json.loads(text)["user_scram_credentials"]["dave"]["SCRAM-SHA-256"]
    assert stored.startswith("salt=") and ",stored_key=" in stored and stored.endswith(",iterations=4096")
    assert "dave-Secret-9" not in text and "admin-pw" not in text
