"""A loopback port for a listener a test starts itself: tests pick free ports, never fixed ones,
so that they run beside others."""
from __future__ import annotations

# one implementation for the package's launchers, the oracle, the benchmarks and the tests: a
# port free on 127.0.0.1 right now (the kernel's pick; another process may still take it before
# the test binds it)
from pykbroker.local.zookeeper import free_port

__all__ = ["free_port"]
