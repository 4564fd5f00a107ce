import os
import shutil

import pytest

from pykbroker.testing import BrokerProcess

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
