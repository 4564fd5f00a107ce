"""The log directory of the storage-level durability tests and the fault-injecting file system
over it (test_atomic_write has its own, over a bare directory)."""
import pytest

from pykbroker.storage.faultfs import FaultFS


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "logs")


@pytest.fixture
def fs(root):
    return FaultFS(root)
