import pytest

from compat.java import jvm
from pykbroker.local.broker_process import BrokerProcess
from tests import against
from tests.conftest import TEST_OVERRIDES

# KIP-848 consumer and KIP-932 share group members learn a new assignment (and give up revoked
# partitions) at their next heartbeat, at the interval the broker answers: Kafka's default 5 s
# made each rebalance of the groups and share scenarios wait up to 5 s per round.  The interval
# is configuration, not what these scenarios check (tests/configs checks the setting itself).
# Apache Kafka under PYKBROKER_AGAINST=kafka has the same values (tests/against.py).
GROUP_HEARTBEATS = {"group.consumer.heartbeat.interval.ms": "500", "group.share.heartbeat.interval.ms": "500"}
JAVA_OVERRIDES = {**TEST_OVERRIDES, **GROUP_HEARTBEATS}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """tests/conftest.py's module broker with :data:`GROUP_HEARTBEATS`."""
    if against.AGAINST_KAFKA:
        yield against.kafka_broker(tmp_path_factory, JAVA_OVERRIDES)
        return
    d = tmp_path_factory.mktemp("broker")
    with BrokerProcess(str(d / "data"), JAVA_OVERRIDES) as b:
        yield b


@pytest.fixture(scope="session")
def java_classpath():
    """profile -> classpath of the built scenarios; builds at most once per session per profile.

    Missing Java or Maven, or a failed build, FAILS the tests (never skips): the Java matrix is
    part of what pykbroker promises.
    """
    cache = {}

    def get(profile):
        if profile not in cache:
            try:
                cache[profile] = jvm.build(profile)[0]
            except Exception as e:   # reported on every test of that profile
                cache[profile] = e
        if isinstance(cache[profile], Exception):
            pytest.fail(str(cache[profile]), pytrace=False)
        return cache[profile]

    return get


@pytest.fixture(scope="module")
def scenario_args():
    """Arguments every scenario of the module gets (a cluster module sets replication_factor)."""
    return {}


@pytest.fixture(scope="module")
def scenario(broker, java_classpath, scenario_args):
    """Run a scenario once per module and profile against the module's broker; cached by arguments."""
    runs = {}

    def get(profile, name, **args):
        args = {**scenario_args, **args}
        key = (profile, name, tuple(sorted(args.items())))
        if key not in runs:
            runs[key] = jvm.run(java_classpath(profile), name, broker.bootstrap, **args)
        return runs[key]

    return get
