import os
import shutil

import pytest

from pykbroker.local.broker_process import BrokerProcess
from tests import against, full_matrix
from tests.needs import MISSING, in_ci

# Group/consumer tests shorten Kafka's 3 s initial rebalance delay; everything else is default.
TEST_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One real broker process per test module (fresh data dir); stopped afterwards (killed
    if stopping fails), as BrokerProcess does when used as a context manager.
    ``PYKBROKER_AGAINST=kafka``: Apache Kafka's address instead (tests/against.py)."""
    yield from against.broker_fixture(tmp_path_factory, TEST_OVERRIDES)


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of its own for tests that restart or kill it."""
    if against.AGAINST_KAFKA:
        against.skip_pykbroker_only("fresh_broker (a pykbroker broker the test restarts or kills)")
    with BrokerProcess(str(tmp_path / "data"), TEST_OVERRIDES) as b:
        yield b


@pytest.fixture(autouse=True)
def _idle_segment_files_closed():
    """After each test, the process-wide pool of segment files (pykbroker/storage/fdpool.py)
    closes its idle files: in-process logs a test dropped without closing them (a LogManager
    abandoned after a simulated power cut, tests/durability) otherwise keep one descriptor a
    segment until the pool's budget, and a whole-suite run went past 1,024 descriptors (and
    select()'s limit) by tests/quotas and tests/security.  An idle file of a live in-process
    broker just opens again on its next use, as after the pool's own eviction."""
    yield
    from pykbroker.storage.fdpool import POOL
    POOL.close_idle()


@pytest.fixture
def no_fault_rules(broker):
    """The module's ``broker`` (an embedded one: it has ``faults``) without fault rules before
    and after the test: the rules are the broker's, shared by the module's tests."""
    broker.faults.clear()
    yield broker
    broker.faults.clear()


@pytest.fixture(scope="session")
def zk_blips_pykbroker_run(tmp_path_factory):
    """pykbroker's zk-blips failover run (tests/cluster/helpers.py), made once a session for the
    two tests that check it: tests/cluster/test_zk_blips.py and
    tests/differential/test_zk_blips_oracle.py (against Apache Kafka's)."""
    from tests.cluster.helpers import pykbroker_blip_failover
    return pykbroker_blip_failover(str(tmp_path_factory.mktemp("zk-blips-pyk")))


# -- missing tools fail in CI (tests/needs.py) ----------------------------------------------------
def _missing_tool_reason(rep) -> str | None:
    """The reason of a skip for a missing tool (tests.needs.MISSING), else None."""
    if not rep.skipped or hasattr(rep, "wasxfail") or not isinstance(rep.longrepr, tuple) or len(rep.longrepr) != 3:
        return None
    reason = str(rep.longrepr[2])
    return reason if MISSING in reason else None


def _fail_in_ci(rep) -> None:
    reason = _missing_tool_reason(rep) if in_ci() else None
    if reason is not None:
        rep.outcome = "failed"
        rep.longrepr = ("CI=true: %s -- tools/test.sh installs it; in CI a missing tool, oracle or "
                        "test dependency is a failure, not a skip" % reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_in_ci(outcome.get_result())


# A whole module skipped at collection: failing its collection would stop the whole run
# (pytest does not run tests after a collection error), so the skip stays, is listed at the
# end, and makes the run's exit status a failure.
_MISSING_AT_COLLECTION: list = []


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    rep = outcome.get_result()
    reason = _missing_tool_reason(rep) if in_ci() else None
    if reason is not None:
        _MISSING_AT_COLLECTION.append((rep.nodeid, reason))


def pytest_sessionfinish(session, exitstatus):
    against.stop_session_kafka()
    if _MISSING_AT_COLLECTION and exitstatus in (0, 5):
        session.exitstatus = 1


# -- cost markers, the fast lane, quick mode ------------------------------------------------------
# Each test gets one marker, the most expensive thing it starts (cheapest first):
#   unit     in-process code, no broker listening (sans-IO, storage on a temp dir)
#   process  one pykbroker broker (a process or embedded) and Python clients / client processes
#   jvm      a JVM client or application (Java kafka-clients, Kafka Streams, Spark, Kafka's jars)
#   cluster  several pykbroker brokers (ZooKeeper-backed processes or in-process replicas)
#   oracle   Apache Kafka itself running beside pykbroker (compat/kafka/oracle.py)
# Applied here by directory, then by file and by the fixtures a test asks for, not in the tests.
#   PYKBROKER_LANE=fast (= -m "(unit or process) and not slow")     the everyday lane
#   PYKBROKER_QUICK=1                          jvm, cluster and oracle tests skipped, with the reason
COSTS = ("unit", "process", "jvm", "cluster", "oracle")
DIR_COST = {
    "admin": "process", "bench": "process", "clients": "process", "cluster": "cluster",
    "configs": "process", "containers": "process", "data": "process", "differential": "oracle",
    "durability": "process", "embedding": "process", "groups": "process", "java": "jvm",
    "lifecycle": "process", "observability": "process", "protocol": "process",
    "replication": "cluster", "share": "process", "spark": "jvm", "storage": "unit",
    "tools": "process", "transactions": "process", "go": "process", "node": "process", "security": "process",
    "install": "process", "acl": "process", "chaos": "cluster", "quotas": "process",
}
FILE_COST = {
    "bench/test_smoke.py": "oracle",
    "clients/test_on_cluster.py": "cluster",
    "cluster/test_compose.py": "unit",
    "cluster/test_fetch_session_cache.py": "unit",
    "cluster/test_interbroker_versions.py": "unit",
    "configs/test_broker_config.py": "unit",            # the Kafka-jar tests: jvm (kafka_defs)
    "durability/test_atomic_write.py": "unit",
    "durability/test_storage_faults.py": "unit",
    "groups/test_assignors.py": "unit",
    "groups/test_classic_state_machine.py": "unit",
    "groups/test_classic_sync_interleavings.py": "unit",
    "groups/test_coordinator_runtime.py": "unit",
    "groups/test_kip848_persist.py": "unit",
    "groups/test_streams_persist.py": "unit",
    "groups/test_streams_topology.py": "unit",
    "groups/test_sync_persist.py": "unit",
    "install/test_layering.py": "unit",
    "java/test_on_cluster.py": "cluster",
    "protocol/test_codec_roundtrip.py": "unit",
    "protocol/test_dispatch.py": "unit",
    "protocol/test_faults_plan.py": "unit",
    "protocol/test_framing.py": "unit",
    "protocol/test_handlers_common.py": "unit",
    "protocol/test_spec_drift.py": "unit",
    "protocol/test_wire_client.py": "unit",
    "share/test_share_partition.py": "unit",
    "share/test_share_specs.py": "unit",
    "spark/test_pipeline.py": "cluster",
    "storage/test_recovery.py": "process",              # kills a writer process mid-write
    "transactions/test_log_txn.py": "unit",
    "transactions/test_state_log.py": "unit",
    "transactions/test_streams.py": "jvm",
}
TEST_COST = {
    "groups/test_kip848_persist.py::test_records_read_by_apache_kafka_deserializer": "jvm",
    "observability/test_trace.py::test_trace_against_apache_kafka_diffs_clean": "oracle",
}
# Files whose tests wait on real time (kill -9 loops, session timeouts, worker processes, 2000
# partitions): measured at 10-120 s per file on a loaded 2-core machine.  They keep their cost
# marker and also get ``slow``, which the fast lane leaves out.
SLOW_FILES = {
    "bench/test_loadgen_conns.py", "bench/test_scale.py", "clients/test_restart.py",
    "data/test_clients_roundtrip.py", "durability/test_broker_faults.py", "durability/test_halt.py",
    "groups/test_group_churn.py", "groups/test_group_clients.py", "groups/test_group_failures.py",
    "go/test_franz_go.py", "go/test_sarama_kafka_go.py", "node/test_kafkajs.py", "node/test_confluent.py",
    "groups/test_group_kip848.py", "groups/test_group_restart.py", "groups/test_kip848_restart.py",
    "lifecycle/test_shutdown_many_partitions.py", "transactions/test_confluent.py",
    "transactions/test_python_clients.py", "transactions/test_recovery.py",
}
ORACLE_FIXTURES = {"kafka", "kafka3", "_both_brokers"}
JVM_FIXTURES = {"kafka_defs", "java_classpath", "spark"}
CLUSTER_FIXTURES = {"cluster", "pyk3"}   # a pykbroker cluster (ZooKeeper or in-process replicas)
# directories whose conftest runs a pykbroker-only form of their oracle tests in quick mode
QUICK_HANDLED = {"tools"}
_TESTS = os.path.dirname(os.path.abspath(__file__))


def cost_of(item) -> str:
    rel = os.path.relpath(str(item.path), _TESTS).replace(os.sep, "/")
    base = item.nodeid.split("::", 1)[1].split("[", 1)[0] if "::" in item.nodeid else ""
    if "%s::%s" % (rel, base) in TEST_COST:
        return TEST_COST["%s::%s" % (rel, base)]
    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    if names & ORACLE_FIXTURES or params.get("target") == "kafka" or \
            ("both" in names and rel.startswith(("tools/", "differential/"))):
        return "oracle"
    # a parameter naming a cluster (java/test_transactions_v2's "tv2-cluster", tests/go's "cluster-...")
    if any(isinstance(v, str) and "cluster" in v for v in params.values()):
        return "cluster"
    cost = FILE_COST.get(rel) or DIR_COST.get(rel.split("/", 1)[0], "process")
    for fixtures, heavier in ((JVM_FIXTURES, "jvm"), (CLUSTER_FIXTURES, "cluster")):
        if names & fixtures and COSTS.index(cost) < COSTS.index(heavier):
            cost = heavier
    return cost


def pytest_configure(config):
    against.check_setting()
    if against.AGAINST_KAFKA:   # tests/against.py: no pykbroker started by a test while on
        against.guard_pykbroker_starts()
    for name, what in (("unit", "in-process code, no broker listening"),
                       ("process", "one pykbroker broker and Python clients"),
                       ("jvm", "a JVM client or application (Java clients, Streams, Spark, Kafka's jars)"),
                       ("cluster", "several pykbroker brokers (ZooKeeper or in-process replicas)"),
                       ("oracle", "Apache Kafka running beside pykbroker")):
        config.addinivalue_line("markers", "%s: cost class (tests/conftest.py): %s" % (name, what))
    config.addinivalue_line("markers", "slow: waits on real time for long (tests/conftest.py SLOW_FILES); "
                                       "left out of PYKBROKER_LANE=fast")


def _rel_nodeid(item) -> str:
    """``dir/file.py::test[params]``: the node id relative to tests/."""
    rel = os.path.relpath(str(item.path), _TESTS).replace(os.sep, "/")
    return rel + ("::" + item.nodeid.split("::", 1)[1] if "::" in item.nodeid else "")


def pytest_collection_modifyitems(config, items):
    lane = os.environ.get("PYKBROKER_LANE", "")
    quick = os.environ.get("PYKBROKER_QUICK") == "1"
    keep, dropped = [], []
    for item in items:
        cost = cost_of(item)
        item.add_marker(getattr(pytest.mark, cost))
        slow = os.path.relpath(str(item.path), _TESTS).replace(os.sep, "/") in SLOW_FILES
        if slow:
            item.add_marker(pytest.mark.slow)
        if lane == "fast" and (slow or cost not in ("unit", "process")):
            dropped.append(item)
            continue
        keep.append(item)
        rel_dir = os.path.relpath(str(item.path), _TESTS).split(os.sep, 1)[0]
        matrix_skip = full_matrix.skip_reason(_rel_nodeid(item))   # tests/full_matrix.py
        if matrix_skip:
            item.add_marker(pytest.mark.skip(reason=matrix_skip))
        if quick and cost not in ("unit", "process") and rel_dir not in QUICK_HANDLED:
            item.add_marker(pytest.mark.skip(reason="PYKBROKER_QUICK=1: a %s test (CI runs it)" % cost))
    if lane not in ("", "fast"):
        raise pytest.UsageError("PYKBROKER_LANE=%s: the only lane is 'fast' (unit and process tests, not slow)" % lane)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# -- time per directory (kept in every run's output, CI's included) -------------------------------
_TEST_TIME: dict = {}   # nodeid -> seconds (setup + call + teardown)


def _dir_of(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def pytest_runtest_logreport(report):
    _TEST_TIME[report.nodeid] = _TEST_TIME.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if _MISSING_AT_COLLECTION:
        terminalreporter.section("CI=true: modules skipped for a missing tool (a failure in CI)", red=True)
        for nodeid, reason in _MISSING_AT_COLLECTION:
            terminalreporter.write_line("%s: %s" % (nodeid, reason))
    dirs: dict = {}
    for nodeid, t in _TEST_TIME.items():
        total, n, slowest = dirs.get(_dir_of(nodeid), (0.0, 0, (0.0, "")))
        dirs[_dir_of(nodeid)] = (total + t, n + 1, max(slowest, (t, nodeid)))
    out = os.environ.get("PYKBROKER_DURATIONS_FILE")
    if out and _TEST_TIME:   # every test's seconds, as JSON, for keeping beside a CI run's log
        import json
        with open(out, "w") as fh:
            json.dump(dict(sorted(_TEST_TIME.items(), key=lambda kv: -kv[1])), fh, indent=0)
    if dirs:
        terminalreporter.section("time per directory (setup + call + teardown)")
        for d, (total, n, (s, test)) in sorted(dirs.items(), key=lambda kv: -kv[1][0]):
            terminalreporter.write_line("%8.1fs %5d tests  %-14s slowest %.1fs %s" % (total, n, d, s, test))
