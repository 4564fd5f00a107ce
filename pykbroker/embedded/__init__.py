"""pykbroker embedded in a program or a test: ``pykbroker.Broker``.

    with pykbroker.Broker() as broker:                # its own thread and trio loop
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        assert [r.value for r in broker.records("t")] == [b"v"]

    async with pykbroker.Broker() as broker:          # trio: runs in the caller's loop
        ...

    with pykbroker.Broker.subprocess() as broker:     # a child process, same interface
        ...

A real broker on a real TCP listener (``port=0``: a free loopback port), so any client in any
language can use ``bootstrap_servers``.  ``log_dir=None`` means a temporary directory, removed
when the broker stops; ``config`` holds broker settings (``server.properties`` keys) on top of
Kafka's defaults (:data:`TEST_CONFIG` holds the test-friendly ones the pytest plugin uses).

Introspection, for tests to assert on what the broker holds: :meth:`records`,
:meth:`committed_offsets`, :meth:`group`, :meth:`wait_for_group_stable`, :meth:`create_topic`.
In-process they read the broker's own objects on its trio thread (``trio.from_thread``), never
from another thread; over a subprocess or an external cluster (:class:`WireBroker`) they go
through the Kafka protocol (Fetch, OffsetFetch, DescribeGroups or ConsumerGroupDescribe,
CreateTopics), so they see what a client would see; there ``group().generation`` is -1 for a
classic group (DescribeGroups does not carry it).

Faults, crashes and time (docs/testing-and-faults.md): ``broker.faults`` (errors,
latency, dropped connections, lost responses, offline partitions), ``broker.crash()`` /
``broker.restart()``, and ``broker.clock`` (pykbroker/clock.py).  In-process they act on the
``BrokerRunner`` (pykbroker/run/runner.py) through the same ``run/control.py`` logic the HTTP
endpoint serves; a subprocess broker is driven over that endpoint (``crash`` there is a real
``kill -9``).

The in-process broker is the same code as ``pykbroker serve``: one trio loop, nothing mocked.

The package, one module per back-end: ``inprocess.py`` (:class:`Broker`), ``process.py``
(:class:`SubprocessBroker`), ``wire.py`` (:class:`WireBroker`); what they share in ``base.py``
(the front, the secured-client settings, :data:`TEST_CONFIG`), ``introspection.py`` (what
introspection answers with, and its decoding) and ``control.py`` (``faults``, the remote clock,
:func:`http_control`).
"""
from .base import TEST_CONFIG
# Faults, RemoteClock and http_control are read from here too (tests/embedding)
from .control import Faults, RemoteClock, http_control  # noqa: F401
from .inprocess import Broker
from .introspection import GroupDescription, GroupMember, Record
from .process import SubprocessBroker
from .wire import WireBroker

__all__ = ["Broker", "SubprocessBroker", "WireBroker", "Record", "GroupDescription", "GroupMember",
           "TEST_CONFIG"]
