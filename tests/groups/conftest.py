import pytest

from .helpers import start_broker


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    """One broker per module, with short session timeouts allowed (group.min.session.timeout.ms=1000)."""
    b = start_broker(str(tmp_path_factory.mktemp("gbroker") / "data"))
    yield b
    try:
        b.stop()
    except Exception:
        b.kill()
