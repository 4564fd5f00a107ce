"""pykbroker: a Kafka broker in Python.  ``pykbroker.Broker`` embeds one (see
:mod:`pykbroker.embedded`), ``pykbroker.BrokerClock`` is its controllable clock
(:mod:`pykbroker.clock`); both are imported on first use so that ``import pykbroker`` stays cheap."""

__all__ = ["Broker", "BrokerClock"]


def __getattr__(name):
    if name == "Broker":
        from .embedded import Broker

        return Broker
    if name == "BrokerClock":
        from .clock import BrokerClock

        return BrokerClock
    raise AttributeError("module 'pykbroker' has no attribute %r" % name)
