"""librdkafka's own test programs against pykbroker (compat/librdkafka/suite.py builds them from
the librdkafka source tree that compat/node's Confluent client pins).

- One broker with Kafka's StandardAuthorizer (``allow.everyone.if.no.acl.found=true``, no super
  user, PLAINTEXT): 0109 (auto-creation and subscriptions with a denied topic), 0115 (producer
  against a denying ACL), 0119 (consumer: Describe allowed, Read denied), each setting its ACLs
  with Apache Kafka 4.4's own kafka-acls.sh; and the ACL and SCRAM-credential parts of 0081
  (CreateAcls, DescribeAcls, DeleteAcls, Describe/AlterUserScramCredentials).
- A 3-broker SASL_PLAINTEXT cluster (the tests create topics with replication factor 3) with
  ``connections.max.reauth.ms`` set: 0142 (KIP-368 re-authentication while producing, consuming,
  in transactions and with share consumers; a re-authentication with wrong credentials) and
  0135 (credentials changed at runtime), with PLAIN and with SCRAM-SHA-512; the brokers' own
  connections re-authenticate too (cluster/interbroker.py).

- One broker with an SSL listener requiring client certificates: 0097 (certificate verification,
  keys and CAs in every encoding librdkafka loads, untrusted client certificates refused).

0097 mostly waits (a one-second poll per case, 19 cases) on a broker of its own: its run starts
with the re-authentication test (``ssl_run``), in a thread beside that test's runs, and its own
test checks its report (about 30 s of the module's time saved).  Not beside the authorization
runs, which are CPU-bound (kafka-acls.sh's JVMs): 0119 missed its own 40 s deadline there on 2
loaded cores; and the authorization and re-authentication runs stay one after the other.

The whole of 0081 (every admin API) passes too (compat/librdkafka/README.md has the command and
the last result); CI runs the parts above, the ones Security I and II are judged by.
"""
from __future__ import annotations

import logging
import re
import threading

import pytest

from tests import background, needs
from tests.node import noderun

from compat.librdkafka import suite  # noqa: E402

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.server import secure

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true", "group.initial.rebalance.delay.ms": "0"}
# short, so 0142's 15 scenarios (each a little longer than one interval) take about a minute
REAUTH_MS = 2000


@pytest.fixture(scope="module")
def runner():
    why = noderun.missing() or noderun.wait_for_build()
    if why is None:
        try:
            return suite.build()
        except suite.Unavailable as e:
            why = str(e)
    needs.skip_missing(why)


@pytest.fixture(scope="module")
def kafka_path():
    try:
        return suite.kafka_path()
    except suite.Unavailable as e:
        needs.skip_missing(str(e))


def _in_threads(**runs):
    """Run the given zero-argument functions side by side; {name: result}."""
    out, errors = {}, {}

    def go(name, fn):
        try:
            out[name] = fn()
        except BaseException as e:   # reported below, with the others' results
            errors[name] = e
    threads = [threading.Thread(target=go, args=kv) for kv in runs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise next(iter(errors.values()))
    return out


def _assert_passed(rep, tests, subtests=()):
    assert rep.returncode == 0 and all(rep.tests.get(t) == "PASSED" for t in tests), \
        "librdkafka tests failed: %r\n%s" % (rep.tests, rep.failures())
    # each named subtest really ran and passed (a skipped one would prove nothing)
    for name in subtests:
        got = [v for k, v in rep.subtests.items() if name in k]
        assert got and all(v == "PASS" for v in got), (name, rep.subtests)


def test_authorization_tests_and_0081_acls_and_scram(runner, kafka_path, tmp_path):
    b = BrokerProcess(str(tmp_path / "data"), AUTHORIZER)
    b.start()
    try:
        conf = {"bootstrap.servers": b.bootstrap}
        env = {"KAFKA_PATH": str(kafka_path)}
        reps = _in_threads(
            auth=lambda: suite.run(runner, ["0109", "0115", "0119"], conf, parallel=3, env=env),
            acls=lambda: suite.run(runner, ["0081"], conf, subtests="Acls", env=env),
            scram=lambda: suite.run(runner, ["0081"], conf, subtests="UserScramCredentials", env=env))
    finally:
        b.stop()
    _assert_passed(reps["auth"], ["0109_auto_create_topics", "0115_producer_auth", "0119_consumer_auth"],
                   ["Test producer auth with topic known", "Test producer auth with topic not known"])
    assert "Test unauthorized Fetch PASS" in reps["auth"].log
    _assert_passed(reps["acls"], ["0081_admin"], ["do_test_CreateAcls", "do_test_DescribeAcls", "do_test_DeleteAcls"])
    _assert_passed(reps["scram"], ["0081_admin"], ["do_test_UserScramCredentials"])
    assert sum(1 for k in reps["scram"].subtests if "UserScramCredentials" in k) == 3


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory):
    needs.module("kazoo.client")
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster
    overrides = {"connections.max.reauth.ms": str(REAUTH_MS), "group.initial.rebalance.delay.ms": "0",
                 "zookeeper.session.timeout.ms": "6000", "offsets.topic.num.partitions": "6",
                 "transaction.state.log.num.partitions": "6"}
    with Cluster(3, str(tmp_path_factory.mktemp("rdk-sasl")), overrides=overrides, zk_tick_time=500,
                 security="SASL_PLAINTEXT", users={"alice": "alice-secret"}) as c:
        c.wait_registered()
        yield c


# KIP-368's own race, Kafka's as well: librdkafka re-authenticates at 90 % of the session's
# lifetime (200 ms before its end with REAUTH_MS), and a request it sent before that but that the
# broker reads after the end closes the connection (Kafka's SocketServer does the same).  A
# producer sending 200 acks=all requests a second keeps a queue on its connection once the
# replication round trip, on 2 loaded cores shared by 3 brokers, ZooKeeper and two runners, is
# slower than 5 ms; the connection then closes during the handshake and 0142's error callback
# fails the test.  That one signature is run again once; any other failure fails at once.
_REAUTH_RACE = re.compile(r"Disconnected: connection (?:reset|closed) by peer.*in state AUTH_HANDSHAKE")


def _lost_the_reauthentication_race(rep) -> bool:
    failed = [k for k, v in rep.subtests.items() if v == "FAIL"]
    return (bool(failed) and all("message loss while reauthenticating" in k or "reauth in the middle of a txn" in k
                                 for k in failed)
            and "SASL" in rep.failures() and _REAUTH_RACE.search(rep.log) is not None)


def test_reauthentication_and_runtime_credentials_on_a_sasl_cluster(runner, ssl_run, sasl_cluster):
    """With PLAIN and with SCRAM-SHA-512, side by side (one runner process each: the runner's own
    parallel mode shares one error callback between tests, so 0135's deliberate authentication
    failures could fail 0142).  ``ssl_run``: 0097's run starts here, beside these (checked by its
    own test below)."""
    def one(mechanism):
        conf = {"bootstrap.servers": sasl_cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret"}
        # 0142's scenarios are librdkafka's non-quick subtests: run in full mode
        rep = suite.run(runner, ["0135", "0142"], conf, full=True)
        if rep.returncode != 0 and _lost_the_reauthentication_race(rep):
            logging.getLogger(__name__).warning("%s: 0142 lost KIP-368's race (run again once):\n%s",
                                                mechanism, rep.failures())
            rep = suite.run(runner, ["0135", "0142"], conf, full=True)
        return rep
    reps = _in_threads(plain=lambda: one("PLAIN"), scram=lambda: one("SCRAM-SHA-512"))
    for rep in reps.values():
        _assert_passed(rep, ["0135_sasl_credentials", "0142_reauthentication"],
                       ["test producer message loss while reauthenticating",
                        "test consumer message loss while reauthenticating",
                        "test share consumer message loss while reauthenticating",
                        "test reauth in the middle of a txn",
                        "test reauth failure with wrong credentials for reauth",
                        "set_after_auth_failure=no", "set_after_auth_failure=yes"])
    # the brokers' own connections (followers' fetches) re-authenticated in place, as Kafka's do:
    # none was closed for an expired session (which stalled replication and, behind it, the
    # clients' acks=all produces until their own sessions ran out)
    for b in sasl_cluster.brokers:
        with open(b.log_path, errors="replace") as fh:
            assert "SASL session of User:broker expired" not in fh.read(), b.log_path


# librdkafka's own race, not the broker's: when the runner's thread is preempted inside
# SSL_connect() (between a write and the next read, e.g. by the broker it just woke on a loaded
# machine), the whole handshake, the broker's alert included, runs within that one call, and
# librdkafka reports a failure there as a transport error without its "SSL handshake failed:"
# prefix (rdkafka_transport.c, rd_kafka_transport_connected), which 0097's event callback
# refuses.  pykbroker answers within a few milliseconds, so on a 2-core machine at load 13 one
# run in two met it; each such run is retried (it fails within ~10 s), up to four runs.
_RDK_SSL_CONNECT_RACE = re.compile(r"bootstrap: \.\./ssl/[^ ]+ error:[0-9A-F]+:SSL routines::.* in state SSL_HANDSHAKE\)")
_RDK_EXPECTED = "Expected _SSL or _ALL_BROKERS_DOWN error codes, got: Local: Broker transport failure"


class _SecureLog(logging.Handler):
    """The messages of pykbroker's TLS/SASL log (``secure.log``, INFO and up) while installed."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        self._level = secure.log.level
        secure.log.setLevel(logging.INFO)
        secure.log.addHandler(self)
        return self

    def __exit__(self, *exc):
        secure.log.removeHandler(self)
        secure.log.setLevel(self._level)


def _ssl_run(runner, pki_dir):
    """0097 against an in-process broker: the environment, the last report and the broker's TLS
    log lines."""
    needs.module("cryptography")
    import pykbroker
    from pykbroker.embedded import TEST_CONFIG
    env = suite.ssl_environment(str(pki_dir))
    cfg = {"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL", **env.broker, **TEST_CONFIG}
    with _SecureLog() as seen, pykbroker.Broker(config=cfg) as b:
        conf = {"bootstrap.servers": "127.0.0.1:%d" % b.broker.bound[0].port, **env.conf}
        for _ in range(4):
            rep = suite.run(runner, ["0097"], conf, env=env.env)
            if rep.returncode == 0 or _RDK_EXPECTED not in rep.log or not _RDK_SSL_CONNECT_RACE.search(rep.log):
                break
    return env, rep, seen.messages


@pytest.fixture(scope="module")
def ssl_run(request, runner, tmp_path_factory):
    """0097's run, started by the first test asking for it (the re-authentication test, so that
    it runs beside that test's runs; it shares nothing with them: its own in-process broker,
    certificates and port); the module waits for it to end."""
    yield from background.ahead(request, "test_librdkafka_suite.py::test_0097_ssl_verify_against_a_mutual_tls_listener",
                                lambda _run, pki=tmp_path_factory.mktemp("pki"): _ssl_run(runner, pki), "0097")


def test_0097_ssl_verify_against_a_mutual_tls_listener(ssl_run):
    """0097 with the environment librdkafka's harness (trivup) gives it: a CA, a client key and
    certificate in PEM, DER and PKCS#12 (loaded by location, as PEM strings and through
    set_ssl_cert()), a PEM with two CAs, and a listener requiring client certificates from that
    CA, over TLS 1.2 as trivup configures Kafka.  Its cases: verification callbacks accepting and
    refusing the broker's certificate, and librdkafka's fixture certificates (signed by a CA the
    broker does not trust) refused by the broker with Kafka's alert, bad_certificate (42: the test
    accepts no other; OpenSSL's own would be unknown_ca); plus 0097_ssl_verify_local (bad PEM
    strings, no broker).  Against Apache Kafka 4.4 the same run passes (measured); with TLS 1.3
    enabled it fails there too (the alert arrives after the client's handshake)."""
    env, rep, messages = ssl_run.result()
    _assert_passed(rep, ["0097_ssl_verify", "0097_ssl_verify_local"])
    assert env.env["SSL_password"] not in rep.log   # the key's password is never printed
    passed = [ln for ln in rep.log.splitlines() if "[ PASSED: " in ln and "SSL cert verify" in ln]
    # every case ran (none skipped for a missing setting): 5 per client key (ours, librdkafka's
    # untrusted one, its untrusted one under an intermediate CA), 3 root-CA-only, 1 PKCS#12
    assert len(passed) == 19, "\n".join(passed)
    assert sum("untrusted_client_key=1" in ln for ln in passed) == 10
    # librdkafka's certificates were refused by this broker's verification (the test itself
    # cannot tell a refusal from a dropped connection)
    refused = [m for m in messages if "TLS handshake with" in m]
    assert any("certificate verify failed" in m for m in refused), refused
