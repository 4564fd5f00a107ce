"""One broker and one 3-broker cluster for the whole directory (package scope): each client's
module runs its Node processes against them, with topic and group names of its own."""
import pytest

from tests.client_brokers import single_broker, three_brokers


@pytest.fixture(scope="package")
def node_broker(tmp_path_factory):
    with single_broker(tmp_path_factory, "node-single") as b:
        yield b


@pytest.fixture(scope="package")
def node_cluster(tmp_path_factory):
    with three_brokers(tmp_path_factory, "node-cluster") as c:
        yield c


@pytest.fixture(scope="package")
def node_secure(tmp_path_factory):
    """The secured broker of tests/node/secure.py (TLS, mutual TLS, SASL listeners), shared by
    the TLS / SASL tests of both Node clients."""
    from tests import needs
    needs.module("cryptography")
    from .secure import SecureBroker
    with SecureBroker(str(tmp_path_factory.mktemp("node-secure"))) as b:
        yield b
