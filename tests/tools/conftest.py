"""Fixtures of the admin CLI tests: one pykbroker and one Apache Kafka (the oracle) per session.

The same fixtures as the differential suite (``tests/differential/conftest.py``: same settings on
both sides, a missing oracle is a failure, not a skip).  ``target`` runs a test once on each;
``both`` runs a scenario on both and the test compares the ``--json`` outputs.
``PYKBROKER_QUICK=1`` (everyday runs) keeps only the pykbroker side: no JVM is started.
"""
from __future__ import annotations

import os

import pytest

from tests.differential.conftest import both, kafka, pyk  # noqa: F401  (fixtures, reused)

QUICK = os.environ.get("PYKBROKER_QUICK") == "1"


@pytest.fixture(params=["pykbroker", pytest.param("kafka", marks=pytest.mark.skipif(
    QUICK, reason="PYKBROKER_QUICK=1: the Apache Kafka side runs in CI"))])
def target(request):
    """Each test once against pykbroker and once against Apache Kafka."""
    return request.getfixturevalue("pyk" if request.param == "pykbroker" else "kafka")


def pytest_collection_modifyitems(config, items):
    if not QUICK:
        return
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason="PYKBROKER_QUICK=1: comparisons with Apache Kafka run in CI")
    for item in items:
        if str(item.fspath).startswith(here) and "both" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)
