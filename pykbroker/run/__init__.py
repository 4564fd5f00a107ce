"""Running one broker in-process: ``runner.BrokerRunner`` (a broker in a trio nursery that can be
crashed, restarted, have partitions taken offline and its clock moved; what ``pykbroker serve``
and the embedded ``pykbroker.Broker`` run) and ``control``, its HTTP control endpoint.

Above ``broker`` and ``server`` (it builds the one and serves the other's fault plan), below the
front ends (``cli``, ``embedded``).
"""
