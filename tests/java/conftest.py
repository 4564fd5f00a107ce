import pytest

from compat.java import jvm
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


# Modules that set JAVA_SHARED_BROKER = True get one session broker (:func:`shared_broker`) instead
# of one each, and their JAVA_BATCH scenarios all run in one JVM per profile (:func:`shared_batches`),
# every module's at once: these modules' scenarios use topics and groups of their own, and nothing
# they check is broker-wide (a module that lists every group or config resource of the broker,
# or changes broker configs, keeps a broker of its own).


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory):
    """The broker of the JAVA_SHARED_BROKER modules (the same settings as :func:`broker`)."""
    yield from against.broker_fixture(tmp_path_factory, JAVA_OVERRIDES, "shared-broker")


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """tests/conftest.py's module broker with :data:`GROUP_HEARTBEATS` (the session's
    :func:`shared_broker` for a JAVA_SHARED_BROKER module)."""
    if getattr(request.module, "JAVA_SHARED_BROKER", False):
        yield request.getfixturevalue("shared_broker")
        return
    yield from against.broker_fixture(tmp_path_factory, JAVA_OVERRIDES)


@pytest.fixture(scope="session", autouse=True)
def runs_ahead(request, tmp_path_factory):
    """node id -> Background of the run of a selected test its module lists in ``AHEAD`` (test
    name -> fn(bg, tmp_path) doing everything the test checks, assertions included), started
    with the first test of tests/java: runs that mostly wait, on brokers of their own, overlap
    the tests before theirs; the test calls ``result()`` (raising what the run raised)."""
    started = {}
    for item in request.session.items:
        fn = getattr(getattr(item, "module", None), "AHEAD", {}).get(getattr(item, "originalname", None))
        if fn is not None and item.nodeid not in started:
            d = tmp_path_factory.mktemp("ahead")
            started[item.nodeid] = Background(lambda bg, fn=fn, d=d: fn(bg, d), "ahead " + item.nodeid)
    yield started
    for bg in started.values():
        bg.join()


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


def _profiles_selected(session, module) -> set | None:
    """The client profiles the session's tests of ``module`` are parametrized with; None when
    one of them has no ``profile`` parameter (then it may need any of the module's scenarios)."""
    out = set()
    for item in session.items:
        if getattr(item, "module", None) is not module:
            continue
        profile = getattr(getattr(item, "callspec", None), "params", {}).get("profile")
        if profile is None:
            return None
        out.add(profile)
    return out


def _declared(session, module, extra_args) -> list:
    """(profile, scenario, args) of ``module``'s JAVA_BATCH that its selected tests may use."""
    wanted = _profiles_selected(session, module)
    return [(p, name, {**extra_args, **args}) for p, name, args in getattr(module, "JAVA_BATCH", [])
            if wanted is None or p in wanted]


def _start_batches(declared, bootstrap, java_classpath) -> dict:
    """profile -> (Background running that profile's scenarios in one JVM, their keys); every
    profile's JVM starts at once."""
    by_profile: dict = {}
    for profile, name, args in declared:
        specs = by_profile.setdefault(profile, {})
        if _key(profile, name, args) not in {_key(profile, n, a) for n, a in specs.values()}:
            specs["r%d" % len(specs)] = (name, args)
    batches = {}
    for profile, specs in by_profile.items():
        classpath = java_classpath(profile)   # built here, one profile at a time
        # the scenarios run at once: the longest one's watchdog, and time to start the JVM
        timeout = max(int(a.get("timeout_s", 150)) for _, a in specs.values()) + 60

        def go(bg, profile=profile, classpath=classpath, specs=specs, timeout=timeout):
            reports = jvm.run_batch(classpath, bootstrap, specs, timeout_s=timeout)
            return {_key(profile, name, args): reports[rid] for rid, (name, args) in specs.items()}

        batches[profile] = (Background(go, "java batch " + profile), {_key(profile, n, a) for n, a in specs.values()})
    return batches


@pytest.fixture(scope="session")
def shared_batches(request, java_classpath):
    """The JAVA_BATCH scenarios of every JAVA_SHARED_BROKER module of the session, started (on
    the shared broker) when the first of those modules asks for one."""
    started: dict = {}

    def get(broker):
        if not started:
            modules = []
            for item in request.session.items:
                m = getattr(item, "module", None)
                if getattr(m, "JAVA_SHARED_BROKER", False) and m not in modules:
                    modules.append(m)
            declared = [d for m in modules for d in _declared(request.session, m, {})]
            started.update(_start_batches(declared, broker.bootstrap, java_classpath))
        return started

    yield get
    for bg, _ in started.values():
        bg.join()


@pytest.fixture(scope="module")
def scenario(request, broker, java_classpath, scenario_args):
    """Run a scenario once per module and profile against the module's broker; cached by arguments.

    A module that lists its scenarios in ``JAVA_BATCH`` ((profile, scenario, args) tuples) gets
    them all from one JVM per profile (``jvm.run_batch``: concurrently, every profile's JVM at
    once, started with the module; for a JAVA_SHARED_BROKER module, the session's batch of every
    such module), each scenario's events split back into a Report of its own, exactly what its
    own JVM would have printed; any other scenario gets a JVM of its own."""
    runs = {}
    shared = getattr(request.module, "JAVA_SHARED_BROKER", False)
    if shared:
        assert not scenario_args, "a module with scenario_args has a broker of its own"
        batches = request.getfixturevalue("shared_batches")(broker)
    else:
        batches = _start_batches(_declared(request.session, request.module, scenario_args),
                                 broker.bootstrap, java_classpath)

    def get(profile, name, **args):
        args = {**scenario_args, **args}
        key = _key(profile, name, args)
        if key not in runs:
            if profile in batches and key in batches[profile][1]:
                # every profile's batch: none may still run when a later test of the module
                # changes the broker (test_on_cluster.py kills one)
                for bg, _ in batches.values():
                    runs.update(bg.result())
            else:
                runs[key] = jvm.run(java_classpath(profile), name, broker.bootstrap, **args)
        return runs[key]

    yield get
    if not shared:
        for bg, _ in batches.values():
            bg.join()
