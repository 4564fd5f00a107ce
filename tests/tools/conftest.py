"""Fixtures of the admin CLI tests: one pykbroker and one Apache Kafka (the oracle) per session.

The same fixtures as the differential suite (``tests/differential/conftest.py``: same settings on
both sides, a missing oracle is a failure, not a skip).  ``target`` runs a test once on each;
``both`` runs a scenario on both and the test compares the ``--json`` outputs.
``PYKBROKER_QUICK=1`` (everyday runs) keeps only the pykbroker side and starts no JVM: ``target``
tests run on pykbroker only (the Kafka ids are skipped) and ``both`` runs the scenario on
pykbroker alone and hands ``helpers.KAFKA_NOT_RUN`` as Kafka's answer: the test's assertions on
pykbroker's answers run, then ``helpers.same_as_kafka`` reports the test as skipped (never a
comparison of pykbroker's answer with itself).
"""
from __future__ import annotations

import os

import pytest

from tests.differential.conftest import both as _both_brokers  # noqa: F401  (a fixture, by name)
from tests.differential.conftest import kafka, pyk  # noqa: F401  (fixtures, reused)

from .helpers import KAFKA_NOT_RUN

QUICK = os.environ.get("PYKBROKER_QUICK") == "1"


@pytest.fixture(params=["pykbroker", pytest.param("kafka", marks=pytest.mark.skipif(
    QUICK, reason="PYKBROKER_QUICK=1: the Apache Kafka side runs in CI"))])
def target(request):
    """Each test once against pykbroker and once against Apache Kafka."""
    return request.getfixturevalue("pyk" if request.param == "pykbroker" else "kafka")


@pytest.fixture(scope="session")
def both(request):
    """``both(fn)`` -> (fn on pykbroker, fn on Kafka); in quick mode (fn on pykbroker, KAFKA_NOT_RUN)."""
    if not QUICK:
        return request.getfixturevalue("_both_brokers")   # the differential suite's, imported above
    pyk_target = request.getfixturevalue("pyk")

    def run(fn, *args, **kw):
        return fn(pyk_target, *args, **kw), KAFKA_NOT_RUN
    return run
