"""Delegation tokens on a ZooKeeper cluster (Kafka's ZK layout): a token created through broker 1
is stored in ``/delegation_token/tokens/<id>`` with a change notice under
``/delegation_token/token_changes``, every broker follows the notices, so the token
authenticates on broker 2 (a Java producer with ScramLoginModule tokenauth=true talking only to
broker 2, and the raw SCRAM exchange); expired through broker 2 it stops authenticating on
broker 1."""
import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.helpers import requires_zookeeper

from pykbroker.protocol.wire import WireClient
from pykbroker.security.client import authenticate_sync
from pykbroker.security.errors import AuthenticationFailed

pytestmark = requires_zookeeper

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
MECHS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
LIBS = Path.home() / ".cache" / "pykbroker" / "kafka-4.4.0" / "libs"
JAVA = Path(__file__).parent / "java" / "DelegationTokens.java"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from pykbroker.local.cluster import Cluster
    c = Cluster(2, data_dir=str(tmp_path_factory.mktemp("dtcluster")), security="SASL_PLAINTEXT", users=USERS,
                mechanisms=MECHS, overrides={"delegation.token.secret.key": "cluster-token-secret",
                                             "offsets.topic.replication.factor": "2"})
    with c:
        yield c


def _login(cluster, broker_id, user):
    b = cluster.broker(broker_id)
    return cluster.security.wire_client(b.host, b.port, user=user, mechanism="PLAIN")


def _token_logs_in(cluster, broker_id, tok) -> bool:
    b = cluster.broker(broker_id)
    with WireClient((b.host, b.port), timeout=10) as c:
        try:
            authenticate_sync(c.request, "SCRAM-SHA-256", tok["token_id"], base64.b64encode(tok["hmac"]).decode(),
                              {"tokenauth": "true"})
            return True
        except AuthenticationFailed:
            return False


def _eventually(fn, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def test_token_created_on_one_broker_authenticates_on_the_other(cluster):
    from kazoo.client import KazooClient
    with _login(cluster, 1, "alice") as c:
        tok = c.request(38, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                "renewers": [{"principal_type": "User", "principal_name": "bob"}],
                                "max_lifetime_ms": -1})
    assert tok["error_code"] == 0, tok
    z = KazooClient(hosts=cluster.zookeeper_connect, timeout=10)
    z.start(timeout=10)
    try:
        node = json.loads(z.get("/delegation_token/tokens/%s" % tok["token_id"])[0])
        assert node == {"version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aalice",
                        "renewers": ["User%3Abob"], "issueTimestamp": tok["issue_timestamp_ms"],
                        "maxTimestamp": tok["max_timestamp_ms"], "expiryTimestamp": tok["expiry_timestamp_ms"],
                        "tokenId": tok["token_id"]}
        notices = [z.get("/delegation_token/token_changes/" + n)[0]
                   for n in z.get_children("/delegation_token/token_changes")]
        assert tok["token_id"].encode() in notices
    finally:
        z.stop()
    assert _eventually(lambda: _token_logs_in(cluster, 2, tok))
    with _login(cluster, 2, "bob") as c:   # broker 2 describes it and lets the renewer renew it
        assert [t["token_id"] for t in c.request(41, 3, {"owners": None})["tokens"]] == [tok["token_id"]]
        assert c.request(39, 2, {"hmac": tok["hmac"], "renew_period_ms": 3600000})["error_code"] == 0
    if shutil.which("java") and (LIBS / "kafka-clients-4.4.0.jar").exists():
        r = subprocess.run(["java", "-cp", str(LIBS / "*"), str(JAVA), "produce", cluster.broker(2).bootstrap,
                            tok["token_id"], base64.b64encode(tok["hmac"]).decode(), "SCRAM-SHA-512",
                            "dt-cluster", "via-broker-2"], capture_output=True, text=True, timeout=240)
        assert "sent dt-cluster-" in r.stdout, r.stdout + r.stderr[-2000:]
    with _login(cluster, 2, "alice") as c:
        assert c.request(40, 2, {"hmac": tok["hmac"], "expiry_time_period_ms": -1})["error_code"] == 0
    assert _eventually(lambda: not _token_logs_in(cluster, 1, tok))
    with _login(cluster, 1, "alice") as c:
        assert c.request(41, 3, {"owners": None})["tokens"] == []
