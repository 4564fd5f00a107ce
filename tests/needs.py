"""Skips for something the tests need that is not installed: a tool (kcat, ZooKeeper, Java), an
oracle (Apache Kafka's jars) or a declared test dependency (a Python package of the ``test``
extra).

Outside CI such a test is skipped with a reason starting with :data:`MISSING`.  In CI
(``CI=true``, exported by ``.ci/run``) the hook in ``tests/conftest.py`` turns exactly those skips
into failures: ``tools/test.sh`` installs every one of these things, so a missing one means the
proof the test gives is missing, not that the platform cannot give it.  A platform feature that
is genuinely absent (no Docker engine, a C library without ``mallopt``) is a plain
``pytest.skip`` and stays a skip, counted in the summary (``-rs``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

MISSING = "missing tool: "
ROOT = Path(__file__).resolve().parents[1]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(what: str) -> str:
    """The skip reason for ``what`` not being installed here."""
    return MISSING + what


def skip_missing(what: str, allow_module_level: bool = False):
    pytest.skip(missing(what), allow_module_level=allow_module_level)


def module(name: str, what: str | None = None):
    """``pytest.importorskip`` for a declared dependency: the module, or a missing-tool skip."""
    return pytest.importorskip(name, reason=missing(what or "the Python module %s (pip install -e '.[test]')"
                                                    % name))


def zookeeper_missing() -> str | None:
    """Why no ZooKeeper can be started here (Java and the Debian 'zookeeper' jars), or None."""
    from pykbroker.local.zookeeper import available
    why = available()
    return None if why is None else "ZooKeeper (Java + Debian's zookeeper jars): %s" % why


def require_zookeeper(allow_module_level: bool = False) -> None:
    why = zookeeper_missing()
    if why is not None:
        skip_missing(why, allow_module_level=allow_module_level)


def require_kerberos() -> None:
    """A real MIT KDC (pykbroker/testing/kdc.py) and python-gssapi, or a missing-tool skip."""
    from pykbroker.testing.kdc import Kdc
    why = Kdc.missing()
    if why is None:
        try:
            import gssapi  # noqa: F401
        except ImportError:
            why = "the gssapi package (pip install 'pykbroker[kerberos]'; it builds against libkrb5-dev)"
    if why:
        skip_missing(why)


def kafka_libs() -> Path:
    """The cached Apache Kafka jars (compat/kafka/oracle.py fetch) and Java, or a missing-tool skip."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("pykbroker_kafka_oracle_needs", ROOT / "compat" / "kafka" / "oracle.py")
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    root = oracle.cache_dir()
    if shutil.which("java") is None or not (root / ".complete").exists():
        skip_missing("Java or Apache Kafka's jars in %s (python3 compat/kafka/oracle.py fetch)" % root)
    return root / "libs"


def kcat_skipif(kcat_path) -> pytest.MarkDecorator:
    """A skipif mark for tests that run kcat (librdkafka's CLI; Debian package kcat)."""
    return pytest.mark.skipif(kcat_path is None, reason=missing("kcat (Debian package kcat)"))
