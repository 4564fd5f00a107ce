"""A loopback port for a listener a test starts itself: tests pick free ports, never fixed ones,
so that they run beside others."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the kernel's pick; another process may still take it
    before the test binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
