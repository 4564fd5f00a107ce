import pytest

from compat.java import jvm
from pykbroker.local.broker_process import BrokerProcess
from tests import against
from tests.background import Background
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


def _key(profile, name, args):
    return (profile, name, tuple(sorted((k, str(v)) for k, v in args.items())))


def _profiles_selected(request) -> set | None:
    """The client profiles the session's tests of this module are parametrized with; None when
    one of them has no ``profile`` parameter (then it may need any of the module's scenarios)."""
    out = set()
    for item in request.session.items:
        if item.module is not request.module:
            continue
        profile = getattr(getattr(item, "callspec", None), "params", {}).get("profile")
        if profile is None:
            return None
        out.add(profile)
    return out


@pytest.fixture(scope="module")
def scenario(request, broker, java_classpath, scenario_args):
    """Run a scenario once per module and profile against the module's broker; cached by arguments.

    A module that lists its scenarios in ``JAVA_BATCH`` ((profile, scenario, args) tuples) gets
    them all from one JVM per profile (``jvm.run_batch``: concurrently, every profile's JVM at
    once, started with the module), each scenario's events split back into a Report of its own,
    exactly what its own JVM would have printed; any other scenario gets a JVM of its own."""
    runs = {}
    declared = getattr(request.module, "JAVA_BATCH", [])
    wanted = _profiles_selected(request) if declared else set()
    by_profile: dict = {}
    for profile, name, args in declared:
        if wanted is None or profile in wanted:
            args = {**scenario_args, **args}
            by_profile.setdefault(profile, {})["r%d" % len(by_profile.get(profile, {}))] = (name, args)
    batches = {}
    for profile, specs in by_profile.items():
        classpath = java_classpath(profile)   # built here, one profile at a time
        timeout = max(int(a.get("timeout_s", 150)) for _, a in specs.values()) + 60

        def go(bg, profile=profile, classpath=classpath, specs=specs, timeout=timeout):
            reports = jvm.run_batch(classpath, broker.bootstrap, specs, timeout_s=timeout)
            return {_key(profile, name, args): reports[rid] for rid, (name, args) in specs.items()}

        batches[profile] = (Background(go, "java batch " + profile), {_key(profile, n, a) for n, a in specs.values()})

    def get(profile, name, **args):
        args = {**scenario_args, **args}
        key = _key(profile, name, args)
        if key not in runs:
            if profile in batches and key in batches[profile][1]:
                runs.update(batches[profile][0].result())
            else:
                runs[key] = jvm.run(java_classpath(profile), name, broker.bootstrap, **args)
        return runs[key]

    yield get
    for bg, _ in batches.values():
        bg.join()
