"""pykbroker: a Kafka broker in Python.  ``pykbroker.Broker`` embeds one (see
:mod:`pykbroker.embedded`); it is imported on first use so that ``import pykbroker`` stays cheap."""

__all__ = ["Broker"]


def __getattr__(name):
    if name == "Broker":
        from .embedded import Broker

        return Broker
    raise AttributeError("module 'pykbroker' has no attribute %r" % name)
