import pytest

from . import gobuild


@pytest.fixture(scope="session")
def gobin(tmp_path_factory):
    """The directory of the built compat/go scenario programs (franzgo, sarama, kafkago)."""
    if gobuild.go_binary() is None:
        pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go)")
    try:
        return gobuild.build(tmp_path_factory.mktemp("gobin"))
    except Exception as e:   # a failed build fails every test (never a skip)
        pytest.fail(str(e), pytrace=False)
