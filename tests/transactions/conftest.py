"""The transactions package's fixtures."""
from __future__ import annotations

import functools

import pytest

from tests import background


@pytest.fixture(scope="package", autouse=True)
def streams_kill9(request, tmp_path_factory):
    """test_streams.py's exactly-once word count through kill -9s (its own broker, topics and
    Streams JVMs; no timing bound, only waits of minutes), started with the package and
    overlapped with the modules before it instead of run after them (21.4 s of call in CI)."""
    from tests.transactions.test_streams import word_count_through_kill9_run
    yield from background.ahead(request, "test_streams.py::test_streams_word_count_exactly_once_through_kill9",
                                functools.partial(word_count_through_kill9_run, tmp_path_factory.mktemp("streams-kill9")),
                                "streams-kill9")
