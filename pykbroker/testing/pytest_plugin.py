"""pytest plugin: a real Kafka broker for your tests (registered through the ``pytest11`` entry
point, so installing pykbroker is enough).

Fixtures:

- ``kafka_broker``: one in-process :class:`pykbroker.Broker` for the whole session, started on
  first use on a free loopback port (introspection: ``records``, ``committed_offsets``,
  ``group``, ``wait_for_group_stable``, ``create_topic``).
- ``kafka_bootstrap``: its bootstrap string ("127.0.0.1:PORT") for any client, in any language.
- ``kafka_topic``: a fresh, uniquely named topic (1 partition) per test.
- ``kafka_topic_factory``: ``kafka_topic_factory(partitions=3, config={"cleanup.policy":
  "compact"}, prefix="orders")`` creates more, each uniquely named; returns the name.
- ``kafka_secure_broker``: a session broker with a SASL_SSL listener, users ``alice`` and
  ``admin`` (passwords ``alice-secret``, ``admin-secret``), SCRAM-SHA-512/256 and PLAIN; its
  ``client_config(user, mechanism)`` (confluent-kafka), ``kafka_python_config`` and
  ``aiokafka_config`` hand out the client settings (needs ``cryptography``).
- ``kafka_secure_cluster``: a session cluster of 3 brokers on ZooKeeper with SASL_SSL between
  clients and brokers and between the brokers themselves, the same users;
  ``client_config(user, mechanism)`` (needs ZooKeeper and Java, like ``pykbroker cluster up``).
- ``kafka_private_broker``: a broker of the test's own (started for it, stopped after it), for
  what must not leak into other tests: ``faults``, ``crash()``/``restart()``, ``clock`` moves
  (the session broker's clock, once advanced, stays ahead).  It serves the HTTP control
  endpoint (``control_url``) for tests in other languages.

Options:

- ``--kafka-bootstrap HOST:PORT``: use that cluster instead of starting a broker.  The fixtures
  then yield that bootstrap and create topics through the admin protocol (CreateTopics,
  replication factor 1); ``kafka_broker`` introspects it through the Kafka protocol (tested
  against Apache Kafka 4.4: tests/differential/test_scenarios_on_kafka.py).
- ``--kafka-keep-data DIR``: keep the broker's data in DIR (default: a temporary directory,
  removed at the end of the session), to look at after a failure.

The broker starts with Kafka's defaults except these test-friendly ones
(``pykbroker.embedded.TEST_CONFIG``): ``group.initial.rebalance.delay.ms=0`` (a consumer
group's first join is answered at once instead of after 3 s), ``log.segment.bytes`` and
``offsets.topic.segment.bytes`` 1 MiB, ``offsets.topic.num.partitions=1``.

The plugin defines nothing but these fixtures and options (no hooks that change other tests):
a session that does not request them starts no broker and does not import the broker.
"""
from __future__ import annotations

import itertools
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pykbroker.embedded import Broker, WireBroker
    from pykbroker.local.cluster import Cluster


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pykbroker", "Kafka broker fixtures (pykbroker)")
    group.addoption("--kafka-bootstrap", metavar="HOST:PORT", default=None,
                    help="use this Kafka cluster for the kafka_* fixtures instead of starting pykbroker")
    group.addoption("--kafka-keep-data", metavar="DIR", default=None,
                    help="keep the kafka_broker fixture's data in DIR (default: a temporary directory, removed)")


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[Broker | WireBroker]:
    """The session's broker (see the module docstring)."""
    from pykbroker.embedded import TEST_CONFIG, Broker, WireBroker

    external = request.config.getoption("--kafka-bootstrap")
    if external:
        yield WireBroker(external)
        return
    keep = request.config.getoption("--kafka-keep-data")
    if keep:
        os.makedirs(keep, exist_ok=True)
    with Broker(log_dir=keep, config=TEST_CONFIG) as broker:
        yield broker


@pytest.fixture
def kafka_private_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A broker for this test alone, with its HTTP control endpoint (module docstring)."""
    from pykbroker.embedded import TEST_CONFIG, Broker

    if request.config.getoption("--kafka-bootstrap"):
        pytest.skip("kafka_private_broker starts its own pykbroker (not available with --kafka-bootstrap)")
    with Broker(config=TEST_CONFIG, control_port=0) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_secure_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A session broker with a SASL_SSL listener (a throw-away CA and certificate), the users
    ``alice``/``alice-secret`` and ``admin``/``admin-secret``, PLAIN, SCRAM-SHA-256 and
    SCRAM-SHA-512: ``kafka_secure_broker.client_config("alice", "SCRAM-SHA-512")`` for
    confluent-kafka, ``kafka_python_config(...)`` / ``aiokafka_config(...)`` for the others."""
    from pykbroker.embedded import TEST_CONFIG, Broker

    if request.config.getoption("--kafka-bootstrap"):
        pytest.skip("kafka_secure_broker starts its own pykbroker (not available with --kafka-bootstrap)")
    with Broker(security="SASL_SSL", users={"alice": "alice-secret", "admin": "admin-secret"},
                mechanisms=["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"], config=TEST_CONFIG) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_secure_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A session cluster of 3 brokers on ZooKeeper (child processes) with SASL_SSL everywhere,
    between brokers too (SCRAM-SHA-512 as the user ``broker``), and the users
    ``alice``/``alice-secret`` and ``admin``/``admin-secret``:
    ``kafka_secure_cluster.client_config("alice", "SCRAM-SHA-512")`` for confluent-kafka.
    Needs ZooKeeper's jars and Java (pykbroker.local.zookeeper)."""
    from pykbroker.local.cluster import Cluster

    if request.config.getoption("--kafka-bootstrap"):
        pytest.skip("kafka_secure_cluster starts its own pykbroker cluster (not available with --kafka-bootstrap)")
    with Cluster(3, data_dir=str(tmp_path_factory.mktemp("secure-cluster")), security="SASL_SSL",
                 users={"alice": "alice-secret", "admin": "admin-secret"},
                 mechanisms=["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: Broker | WireBroker) -> str:
    """"host:port" of the session's broker (or of ``--kafka-bootstrap``)."""
    return kafka_broker.bootstrap_servers


_counter = itertools.count(1)


def _topic_name(request: pytest.FixtureRequest, prefix: str | None) -> str:
    """Unique (a run id and a counter) and readable (the test's name) within Kafka's limits:
    249 characters of [a-zA-Z0-9._-]."""
    base = prefix or re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:80] or "topic"
    return "%s-%s-%d" % (base, _RUN_ID, next(_counter))


_RUN_ID = uuid.uuid4().hex[:8]


@pytest.fixture
def kafka_topic_factory(kafka_broker: Broker | WireBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``create(partitions=1, config=None, prefix=None) -> name``: a new uniquely named topic."""
    def create(partitions: int = 1, config: dict | None = None, prefix: str | None = None) -> str:
        name = _topic_name(request, prefix)
        kafka_broker.create_topic(name, partitions=partitions, config=config)
        return name
    return create


@pytest.fixture
def kafka_topic(kafka_topic_factory: Callable[..., str]) -> str:
    """A fresh topic with one partition, named after the test."""
    return kafka_topic_factory()
