"""The chaos package's fixtures."""
from __future__ import annotations

import pytest

from tests import background


@pytest.fixture(scope="package", autouse=True)
def lossy_link(request):
    """test_relay.py's lossy-link transfers, started with the package: about 20 s of TCP
    retransmission timers on two network namespaces of their own (their own bridge and subnet,
    netns.Net), light on the CPU, overlapped with the package's first modules instead of run
    after them.  Its test checks the outcome."""
    from compat.chaos import netns
    if netns.unavailable() is not None or not background.selected(
            request, "test_relay.py::test_lossy_link_drops_packets_tcp_still_delivers"):
        yield None
        return
    from tests.chaos.test_relay import lossy_link_run
    run = background.Background(lossy_link_run, "lossy-link")
    yield run
    run.join()
