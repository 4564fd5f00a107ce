"""What a tests/java module declares to have its scenarios run by the batch JVMs of
tests/java/conftest.py: its ``JAVA_BATCH`` (profile, scenario, args) and the module fixture that
hands its tests the Reports."""
from __future__ import annotations

from typing import Callable, Optional

import pytest

PROFILES = ("kafka39", "kafka4")


def batch(name: str, args_of: Callable[[str], dict], profiles=PROFILES) -> list:
    """``JAVA_BATCH`` rows: scenario ``name`` for each profile, with ``args_of(profile)``."""
    return [(p, name, args_of(p)) for p in profiles]


def reports(fixture: str, name: str, args_of: Callable[[str], dict], profile: Optional[str] = None):
    """A module fixture ``fixture`` (bind it at the module's top level): ``fn(profile)`` -> the
    Report of scenario ``name`` run with ``args_of(profile)``; with ``profile``, that profile's
    Report itself."""
    @pytest.fixture(scope="module", name=fixture)
    def runs(scenario):
        if profile is not None:
            return scenario(profile, name, **args_of(profile))
        return lambda p: scenario(p, name, **args_of(p))
    return runs
