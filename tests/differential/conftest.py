"""Fixtures of the differential suite: one pykbroker and one Apache Kafka per session.

Every test runs the same scenario against both (``both(fn, ...)``) and asserts that what the
client observed is equal after normalising only what must differ between two clusters (cluster
id, node id, ports, topic ids, timestamps).  The Apache Kafka broker comes from
``compat/kafka/oracle.py`` (jars from Maven Central, cached under ~/.cache/pykbroker).  If Java,
Maven or the jars are missing the tests FAIL: the oracle is part of what CI checks.
``PYKBROKER_QUICK=1`` skips the whole suite (everyday runs).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from pathlib import Path

import pytest

from pykbroker.local.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]

# The same single-node settings on both sides, given explicitly to both (the oracle writes them to
# its server.properties), so DescribeConfigs reports them as STATIC_BROKER_CONFIG on both.
COMMON_OVERRIDES = {
    "node.id": "1",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # the oracle names its inter-broker listener (it also has a CONTROLLER listener)
    "inter.broker.listener.name": "PLAINTEXT",
}


def _load_oracle():
    spec = importlib.util.spec_from_file_location("pykbroker_kafka_oracle", ROOT / "compat" / "kafka" / "oracle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYKBROKER_QUICK") == "1":
        here = str(Path(__file__).parent)
        skip = pytest.mark.skip(reason="PYKBROKER_QUICK=1: the differential suite against Apache Kafka runs in CI")
        for item in items:
            if str(item.fspath).startswith(here):
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    from .helpers import ABSORBED
    if ABSORBED:
        terminalreporter.section("differential: retried answers (side, request, error code: count)")
        for (side, what, code), n in sorted(ABSORBED.items()):
            terminalreporter.write_line("%-9s %-28s %3d: %d" % (side, what, code, n))


class Target:
    """One side of the comparison: a name, a bootstrap address and its identities to normalise."""

    def __init__(self, name, bootstrap, node_id, proc):
        self.name = name
        self.bootstrap = bootstrap
        self.node_id = node_id
        self.proc = proc
        host, port = bootstrap.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def __repr__(self):
        return "<%s %s>" % (self.name, self.bootstrap)


@contextlib.contextmanager
def started_oracle(tmp_path_factory, name: str, overrides: dict, sasl_listener: bool = False):
    """One Apache Kafka node (compat/kafka/oracle.py) with ``overrides``, started, stopped at the
    end; with ``sasl_listener`` also a SASL_PLAINTEXT listener (its port: ``.sasl_port``).
    Never a skip: a missing oracle is a CI failure."""
    oracle = _load_oracle()
    cls = oracle.KafkaOracle
    if sasl_listener:
        from tests.ports import free_port

        class SaslOracle(oracle.KafkaOracle):
            sasl_port = free_port()

            def properties(self):
                p = super().properties()
                p["listeners"] += ",SASL_PLAINTEXT://127.0.0.1:%d" % self.sasl_port
                p["advertised.listeners"] += ",SASL_PLAINTEXT://127.0.0.1:%d" % self.sasl_port
                p["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
                return p
        cls = SaslOracle
    k = cls(tmp_path_factory.mktemp(name), dict(overrides))
    try:
        k.start()
    except Exception as e:
        pytest.fail("Apache Kafka (the oracle) could not be started: %s" % e, pytrace=False)
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    with started_oracle(tmp_path_factory, "kafka", COMMON_OVERRIDES) as k:
        t = Target("kafka", k.bootstrap, k.node_id, k)
        t.start_seconds = k.start_seconds
        yield t


@pytest.fixture(scope="session")
def pyk(tmp_path_factory):
    d = tmp_path_factory.mktemp("pykbroker")
    b = BrokerProcess(str(d / "data"), COMMON_OVERRIDES)
    b.start()
    yield Target("pykbroker", b.bootstrap, 1, b)
    try:
        b.stop()
    except Exception:
        b.kill()


@pytest.fixture(scope="session")
def both(pyk, kafka):
    """``both(fn, *args)`` -> (what fn observed on pykbroker, what it observed on Kafka)."""

    def run(fn, *args, **kw):
        return fn(pyk, *args, **kw), fn(kafka, *args, **kw)

    run.pyk, run.kafka = pyk, kafka
    run.at_once = lambda fn, *args, **kw: at_once(lambda t: fn(t, *args, **kw), pyk, kafka)
    return run


def at_once(observe, pyk_side, kafka_side):
    """``(observe(pyk_side), observe(kafka_side))`` run side by side, for the scenarios that
    drive a client process against each broker: the two brokers share nothing, and the clients
    mostly wait (rebalances, transactions, process starts), so the test takes the longer run's
    time instead of the sum.  The pykbroker side's failure is raised first."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        p, k = pool.submit(observe, pyk_side), pool.submit(observe, kafka_side)
        return p.result(), k.result()


# The authorizer node's SASL_PLAINTEXT listener and what its SASL clients use: PLAIN users admin,
# alice and bob, SCRAM, delegation tokens, admin a super user besides ANONYMOUS (PLAINTEXT).
# test_acl_enforcement.py logs in as alice (no bindings until the test grants them);
# test_delegation_tokens.py's authorizer test as all three.
_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
AUTHORIZER_SASL = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                   "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                       'org.apache.kafka.common.security.plain.PlainLoginModule required '
                       'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";',
                   "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": _SCRAM_JAAS,
                   "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": _SCRAM_JAAS,
                   "delegation.token.secret.key": "differential-secret",
                   "super.users": "User:admin;User:ANONYMOUS"}


def authorizer_config() -> dict:
    """The authorizer node's settings (what a pykbroker side compared with it gets)."""
    from tests.client_acls import AUTH
    return {**AUTH, **AUTHORIZER_SASL}


@pytest.fixture(scope="session")
def _kafka_authorizer_node(tmp_path_factory):
    """The Apache Kafka with StandardAuthorizer and ``super.users=User:ANONYMOUS`` (so PLAINTEXT
    clients may manage ACLs) that test_acls.py, test_client_acls.py, test_acl_enforcement.py
    and test_delegation_tokens.py's authorizer test share: one JVM start, not one per module.
    Besides its PLAINTEXT listener it has a SASL_PLAINTEXT one with :data:`AUTHORIZER_SASL`
    (the SASL clients of test_acl_enforcement.py and test_delegation_tokens.py; the other
    modules use PLAINTEXT only, as ANONYMOUS) and groups form without Kafka's 3 s delay, as on the
    pykbroker sides (TEST_CONFIG).  Use it through :func:`kafka_authorizer`."""
    with started_oracle(tmp_path_factory, "kafka-authorizer", {**authorizer_config(), "group.initial.rebalance.delay.ms": "0"},
                        sasl_listener=True) as k:
        yield k


@pytest.fixture(scope="package")
def sasl_oracles(tmp_path_factory):
    """``get(config)`` -> ``{"plain": (host, port), "sasl": (host, port)}``: the Apache Kafka with
    a SASL_PLAINTEXT listener beside its PLAINTEXT one and ``config`` (helpers.sasl_sides), one
    per configuration for the whole directory: modules comparing with the same settings share
    its JVM start.  Stopped when the directory ends."""
    started: dict = {}
    with contextlib.ExitStack() as stack:
        def get(config: dict) -> dict:
            key = tuple(sorted(config.items()))
            if key not in started:
                k = stack.enter_context(started_oracle(
                    tmp_path_factory, "kafka-sasl", {"group.initial.rebalance.delay.ms": "0", **config},
                    sasl_listener=True))
                started[key] = {"plain": ("127.0.0.1", k.port), "sasl": ("127.0.0.1", k.sasl_port)}
            return started[key]
        yield get


# DeleteAcls / DescribeAcls filter matching every binding (type, pattern, operation and permission
# ANY = 1; no name, principal or host)
_ANY_ACL = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


def _clear_acls(address, timeout: float = 15.0) -> None:
    """Delete every binding and wait until Kafka's broker lists none (it applies the
    controller's records a moment after DeleteAcls answered)."""
    from pykbroker.protocol.wire import WireClient
    with WireClient(address) as c:
        r = c.request(31, 3, {"filters": [_ANY_ACL]})
        assert all(f["error_code"] == 0 for f in r["filter_results"]), r
        deadline = time.monotonic() + timeout
        while True:
            left = c.request(29, 3, _ANY_ACL)["resources"]
            if not left:
                return
            assert time.monotonic() < deadline, "Kafka still lists bindings after deleting them all: %r" % left
            time.sleep(0.05)


@pytest.fixture(scope="module")
def kafka_authorizer(_kafka_authorizer_node):
    """The shared authorizer Kafka for one module, with no binding at its start and none left at
    its end: the modules describe with filters matching every binding, so none may see
    another's."""
    address = ("127.0.0.1", _kafka_authorizer_node.port)
    _clear_acls(address)
    yield _kafka_authorizer_node
    _clear_acls(address)


# Runs started ahead, with the directory, one after another in one background thread (one JVM
# set-up at a time beside the foreground's), in the order their modules come: each is ready long
# before its module is reached.  None of them shares a broker, topic or group with the modules it
# overlaps, and none is timed.
def _previous(*runs):
    """The last run of the chain that was started (None: this one starts at once)."""
    return next((r for r in runs if r is not None), None)


@pytest.fixture(scope="package", autouse=True)
def scenario_sample_run(request, tmp_path_factory, interbroker_kafka_answers_run, jbod_run):
    """test_scenarios_on_kafka.py's oracle and its child pytest run of the scenario sample (about
    45 s: a JVM start, a child pytest with a Java scenario, mostly waiting on them), last in the
    background thread's chain: its Kafka node, topics and groups are its own and its checks
    (every sampled test passed) have no timing bound.  Its oracle stays up for the module's other
    test and stops with the directory."""
    from tests import background
    if not (background.selected(request, "test_scenarios_on_kafka.py::test_scenario_sample_passes_on_kafka")
            or background.selected(request, "test_scenarios_on_kafka.py::test_kafka_bootstrap_option_on_kafka")):
        yield None
        return
    from .test_scenarios_on_kafka import sample_run
    previous = _previous(jbod_run, interbroker_kafka_answers_run)

    def go(run):
        if previous is not None:
            previous.join()
        return sample_run(tmp_path_factory, stack, run)
    with contextlib.ExitStack() as stack:
        run = background.Background(go, "scenario-sample")
        yield run
        run.join()


@pytest.fixture(scope="package", autouse=True)
def interbroker_kafka_answers_run(request, tmp_path_factory):
    """test_interbroker_store_updates.py's Apache Kafka side (about 15 s: an SSL oracle's start,
    three IncrementalAlterConfigs, its stop; answers only, nothing timed), first in the background
    thread's chain (the lightest: one JVM start beside the directory's first JVM starts), long
    before its module is reached.  Its test compares pykbroker's answers with these."""
    from tests import background
    if not background.selected(request, "test_interbroker_store_updates.py::test_inter_broker_store_updates_answered_as_kafka"):
        yield None
        return

    from .test_interbroker_store_updates import kafka_run
    run = background.Background(lambda run: kafka_run(tmp_path_factory), "interbroker-kafka-answers")
    yield run
    run.join()


@pytest.fixture(scope="package", autouse=True)
def jbod_run(request, tmp_path_factory, interbroker_kafka_answers_run):
    """test_log_dirs.py's two JBOD brokers (pykbroker and Apache Kafka, each with two log dirs;
    5-20 s of JVM start), started in the background thread's turn after the answers above, long
    before their module is reached, and left idle until then: the module's test starts from
    fresh brokers as before and stops them.  Stopped here if the module never took them."""
    from tests import background
    if not background.selected(request, "test_log_dirs.py::test_describe_and_move_between_log_dirs"):
        yield None
        return
    previous = interbroker_kafka_answers_run

    def go(run):
        if previous is not None:
            previous.join()
        from .test_log_dirs import start_jbod
        return start_jbod(tmp_path_factory.mktemp("jbod"))
    run = background.Background(go, "jbod-brokers")
    run.taken = False
    yield run
    run.join()
    if not run.taken and not run.thread.is_alive():
        try:
            pyk, k = run.result(timeout=0)
        except BaseException:   # its failure was the module's to report
            return
        k.stop()
        pyk.stop()
