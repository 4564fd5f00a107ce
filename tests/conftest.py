import os
import shutil

import pytest

from pykbroker.testing import BrokerProcess
from tests.needs import MISSING, in_ci

# Group/consumer tests shorten Kafka's 3 s initial rebalance delay; everything else is default.
TEST_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One real broker process per test module (fresh data dir); stopped afterwards (killed
    if stopping fails), as BrokerProcess does when used as a context manager."""
    d = tmp_path_factory.mktemp("broker")
    with BrokerProcess(str(d / "data"), TEST_OVERRIDES) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of its own for tests that restart or kill it."""
    with BrokerProcess(str(tmp_path / "data"), TEST_OVERRIDES) as b:
        yield b


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


def pytest_terminal_summary(terminalreporter):
    if _MISSING_AT_COLLECTION:
        terminalreporter.section("CI=true: modules skipped for a missing tool (a failure in CI)", red=True)
        for nodeid, reason in _MISSING_AT_COLLECTION:
            terminalreporter.write_line("%s: %s" % (nodeid, reason))


def pytest_sessionfinish(session, exitstatus):
    if _MISSING_AT_COLLECTION and exitstatus in (0, 5):
        session.exitstatus = 1
