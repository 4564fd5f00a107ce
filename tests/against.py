"""``PYKBROKER_AGAINST=kafka``: the scenario suites with hand-written expectations
(``tests/clients``, ``tests/groups``, ``tests/transactions``, ``tests/java``, and any test that
takes the shared ``broker`` fixture) run against Apache Kafka 4.4 instead of pykbroker, to show
that their expectations are Kafka's and not only pykbroker's.  ``tests/spark`` has its own switch
(``PYKBROKER_SPARK_AGAINST=kafka``).

    PYKBROKER_AGAINST=kafka python -m pytest tests/clients/test_confluent.py

- The broker fixtures (``broker`` in tests/conftest.py, ``gbroker`` and ``kbroker`` in
  tests/groups) hand out a :class:`KafkaBroker`: the bootstrap of one Apache Kafka node (KRaft,
  combined broker+controller, compat/kafka/oracle.py) started once per session with
  :data:`ORACLE_OVERRIDES`, or the one named by ``PYKBROKER_AGAINST_BOOTSTRAP=host:port`` (an
  Apache Kafka already running; CI's sample in tests/differential/test_scenarios_on_kafka.py
  passes the one it started, and its log.dirs as ``PYKBROKER_AGAINST_LOG_DIRS``).
- A fixture asking for broker settings the Kafka under test does not have (read back with
  DescribeConfigs) skips, naming the setting.
- What only pykbroker has skips the test visibly with the reason: an attribute of the broker
  object other than its address (``kill``, ``stop``, ``restart``, logs, ``faults``, ``clock``...),
  and any pykbroker broker or cluster the test starts itself (BrokerProcess, ``pykbroker.Broker``,
  ``Broker.subprocess``, ``Cluster``): those are patched to skip while the switch is on, so no
  test silently checks pykbroker while claiming to check Kafka.
"""
from __future__ import annotations

import os

import pytest

AGAINST = os.environ.get("PYKBROKER_AGAINST", "pykbroker").strip().lower() or "pykbroker"
AGAINST_KAFKA = AGAINST == "kafka"
EXTERNAL_BOOTSTRAP = os.environ.get("PYKBROKER_AGAINST_BOOTSTRAP") or None
# that Kafka's log.dirs, when known (the broker object's ``data_dir``)
EXTERNAL_LOG_DIRS = os.environ.get("PYKBROKER_AGAINST_LOG_DIRS") or None

# The union of the broker settings the switched fixtures ask for (tests/conftest.py
# TEST_OVERRIDES, tests/groups/helpers.py GROUP_OVERRIDES), with a single node's replication
# factors; the session's Kafka starts with them.
ORACLE_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
    # the group heartbeat intervals of tests/java's brokers (tests/java/conftest.py); Kafka
    # refuses an interval below its minimum, so the minimum is lowered with it
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500",
}

PREFIX = "PYKBROKER_AGAINST=kafka: "


def check_setting() -> None:
    if AGAINST not in ("pykbroker", "kafka"):
        raise pytest.UsageError("PYKBROKER_AGAINST=%s: 'pykbroker' (the default) or 'kafka'" % AGAINST)


def skip_pykbroker_only(what: str):
    pytest.skip(PREFIX + "needs %s, a pykbroker-only facility" % what)


class KafkaBroker:
    """Where a test expects a pykbroker broker object: its address only (``bootstrap``,
    ``host``, ``port``, and ``data_dir``: its log.dirs when known); every other attribute
    skips the test (module docstring)."""

    name = "kafka"   # what the wire client names it in its errors

    def __init__(self, bootstrap: str, data_dir: str | None = None):
        self.bootstrap = bootstrap
        if data_dir is not None:   # log.dirs, as a pykbroker BrokerProcess's data_dir
            self.data_dir = data_dir
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.host, self.port = host, int(port)

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        skip_pykbroker_only("broker.%s" % name)

    def __repr__(self):
        return "<Apache Kafka %s>" % self.bootstrap


def broker_configs(bootstrap: str) -> dict:
    """The broker's configuration as DescribeConfigs (v4) answers it: name -> value."""
    from pykbroker.protocol.wire import WireClient

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with WireClient((host, int(port)), timeout=20, client_id="against-kafka") as c:
        md = c.request(3, 1, {"topics": []})
        node = md["brokers"][0]["node_id"]
        r = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": str(node),
                                             "configuration_keys": None}],
                              "include_synonyms": False, "include_documentation": False})
    res = r["results"][0]
    if res["error_code"]:
        raise RuntimeError("DescribeConfigs of broker %s: error %d" % (node, res["error_code"]))
    return {c["name"]: c["value"] for c in res["configs"]}


class _Session:
    """The session's Apache Kafka (started on first use), its settings read back once."""
    oracle = None
    bootstrap: str | None = None
    log_dirs: str | None = None
    configs: dict | None = None

    @classmethod
    def get(cls, tmp_path_factory) -> str:
        if cls.bootstrap is None:
            if EXTERNAL_BOOTSTRAP:
                cls.bootstrap, cls.log_dirs = EXTERNAL_BOOTSTRAP, EXTERNAL_LOG_DIRS
            else:
                from tests.differential.conftest import _load_oracle
                oracle = _load_oracle()
                k = oracle.KafkaOracle(tmp_path_factory.mktemp("against-kafka"), ORACLE_OVERRIDES)
                try:
                    k.start()
                except Exception as e:   # never a skip: the switch asked for Kafka
                    pytest.fail(PREFIX + "Apache Kafka could not be started: %s" % e, pytrace=False)
                cls.oracle, cls.bootstrap, cls.log_dirs = k, k.bootstrap, k.properties()["log.dirs"]
        return cls.bootstrap

    @classmethod
    def stop(cls) -> None:
        if cls.oracle is not None:
            cls.oracle.stop()
            cls.oracle = None


def kafka_broker(tmp_path_factory, overrides: dict | None = None) -> KafkaBroker:
    """The Kafka under test as a broker fixture's value; skips when it lacks a setting in
    ``overrides`` (what the pykbroker broker of that fixture would have been started with)."""
    bootstrap = _Session.get(tmp_path_factory)
    if overrides:
        if _Session.configs is None:
            _Session.configs = broker_configs(bootstrap)
        wrong = {k: (v, _Session.configs.get(k)) for k, v in overrides.items()
                 if str(_Session.configs.get(k)) != str(v)}
        if wrong:
            pytest.skip(PREFIX + "needs broker settings the Apache Kafka under test does not have: %s"
                        % ", ".join("%s=%s (it has %s)" % (k, v, have) for k, (v, have) in sorted(wrong.items())))
    return KafkaBroker(bootstrap, _Session.log_dirs)


def broker_fixture(tmp_path_factory, overrides: dict, name: str = "broker"):
    """A broker fixture's body (``yield from`` it): a real ``BrokerProcess`` with ``overrides`` on a
    fresh data directory, stopped afterwards (killed if stopping fails); with
    ``PYKBROKER_AGAINST=kafka``, the Kafka under test instead."""
    if AGAINST_KAFKA:
        yield kafka_broker(tmp_path_factory, overrides)
        return
    from pykbroker.local.broker_process import BrokerProcess
    d = tmp_path_factory.mktemp(name)
    with BrokerProcess(str(d / "data"), overrides) as b:
        yield b


def stop_session_kafka() -> None:
    _Session.stop()


def guard_pykbroker_starts() -> None:
    """While the switch is on, starting a pykbroker broker or cluster in a test skips it."""
    from pykbroker import embedded
    from pykbroker.local import broker_process, cluster

    def guarded(what):
        def start(*a, **kw):
            skip_pykbroker_only("a pykbroker broker of its own (%s)" % what)
        return start

    def guarded_async(what):
        async def start(*a, **kw):
            skip_pykbroker_only("a pykbroker broker of its own (%s)" % what)
        return start

    broker_process.BrokerProcess.start = guarded("BrokerProcess")
    embedded.Broker.start = guarded("pykbroker.Broker")
    embedded.Broker.__aenter__ = guarded_async("pykbroker.Broker")
    embedded.SubprocessBroker.start = guarded("Broker.subprocess")
    cluster.Cluster.start = guarded("pykbroker.local.cluster.Cluster")
