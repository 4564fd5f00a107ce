"""Probes shared by the cluster tests: real sockets, real processes."""
import os
import socket
import time

import pytest

from pykbroker.protocol.wire import WireClient
from tests import needs

_why = needs.zookeeper_missing()
# Java + the Debian 'zookeeper' jars (tools/test.sh installs them); without them nothing here
# runs (a failure in CI: tests/needs.py).
requires_zookeeper = pytest.mark.skipif(_why is not None, reason=needs.missing(_why or ""))


def api_versions(bootstrap: str, timeout: float = 10.0) -> dict:
    """ApiVersions v3 through the tests' wire client; the decoded answer."""
    with WireClient(bootstrap, timeout=timeout) as c:
        return c.request(18, 3, {"client_software_name": "pykbroker-tests",
                                 "client_software_version": "1"})


def assert_answers(bootstrap: str) -> None:
    r = api_versions(bootstrap)
    assert r["error_code"] == 0
    assert 18 in {k["api_key"] for k in r["api_keys"]}


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(pred, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(0.05)


def cmdline(pid: int) -> list:
    with open("/proc/%d/cmdline" % pid, "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0") if a]


def proc_state(pid: int) -> str:
    with open("/proc/%d/stat" % pid) as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


__all__ = ["requires_zookeeper", "api_versions", "assert_answers", "port_open", "pid_alive", "wait_for", "cmdline",
           "proc_state", "os"]
