import pytest

from tests import against

from .helpers import GROUP_OVERRIDES, start_broker


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    """One broker per module, with short session timeouts allowed (group.min.session.timeout.ms=1000)."""
    if against.AGAINST_KAFKA:   # tests/against.py
        yield against.kafka_broker(tmp_path_factory, GROUP_OVERRIDES)
        return
    b = start_broker(str(tmp_path_factory.mktemp("gbroker") / "data"))
    yield b
    try:
        b.stop()
    except Exception:
        b.kill()
