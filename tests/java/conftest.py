import pytest

from compat.java import jvm


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
