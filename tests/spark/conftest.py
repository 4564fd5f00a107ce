import pytest

from pykbroker.testing import BrokerProcess

from .util import QUICK


@pytest.fixture(scope="module")
def spark():
    """One SparkSession per test module (local[2]); the JVM is reused by later modules."""
    if QUICK:
        pytest.skip("PYKBROKER_QUICK=1")
    from pykbroker.pipeline.spark import build_session

    s = build_session("pykbroker-tests")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def bootstrap(broker):
    return broker.bootstrap
