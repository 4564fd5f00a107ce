"""Fixtures of the Spark suite.

``PYKBROKER_SPARK_AGAINST=kafka`` runs the same tests against real Apache Kafka (the oracle in
``compat/kafka/oracle.py``) instead of pykbroker, to confirm that Spark observes the same thing on
both; tests that restart pykbroker itself are skipped then.  CI runs them against pykbroker.
"""
import importlib.util
import os
from pathlib import Path

import pytest

from .util import QUICK

AGAINST_KAFKA = os.environ.get("PYKBROKER_SPARK_AGAINST") == "kafka"


@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2]) for every module that uses it: starting a SparkContext again
    per module cost 5-12 s each on 2 loaded cores, and the JVM (py4j's gateway, with its
    connector's consumer pools) outlived each module's session before anyway.  Each test uses
    topics, groups and checkpoints of its own; none changes the session's configuration."""
    if QUICK:
        pytest.skip("PYKBROKER_QUICK=1")
    from pykbroker.pipeline.spark import build_session

    s = build_session("pykbroker-tests")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def bootstrap(request, tmp_path_factory):
    if not AGAINST_KAFKA:
        yield request.getfixturevalue("broker").bootstrap
        return
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("pykbroker_kafka_oracle",
                                                  root / "compat" / "kafka" / "oracle.py")
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    k = oracle.KafkaOracle(tmp_path_factory.mktemp("kafka"))
    k.start()
    yield k.bootstrap
    k.stop()


@pytest.fixture
def fresh_broker(fresh_broker):
    if AGAINST_KAFKA:
        pytest.skip("restarts pykbroker itself")
    return fresh_broker
