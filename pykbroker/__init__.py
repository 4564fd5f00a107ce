"""pykbroker: a Kafka broker in Python.  ``pykbroker.Broker`` embeds one (see
:mod:`pykbroker.embedded`), ``pykbroker.BrokerClock`` is its controllable clock
(:mod:`pykbroker.clock`); both are imported on first use so that ``import pykbroker`` stays cheap."""

__all__ = ["Broker", "BrokerClock"]

# The one place the version is written (pyproject.toml reads it: `pykbroker --version`, the wheel).
__version__ = "0.1.0"


def __getattr__(name: str) -> type:
    if name == "Broker":
        from .embedded import Broker

        return Broker
    if name == "BrokerClock":
        from .clock import BrokerClock

        return BrokerClock
    raise AttributeError("module 'pykbroker' has no attribute %r" % name)
