"""What a user's tests import:

- ``pytest_plugin``: the ``kafka_broker``, ``kafka_bootstrap`` and ``kafka_topic`` fixtures
  (active once pykbroker is installed; the ``pytest11`` entry point);
- ``containers``: ``PyKBrokerContainer``, a drop-in for testcontainers' ``KafkaContainer``;
- ``memory_cluster``: ``MemoryCluster``, N brokers in one trio loop for replication tests.

Child-process launchers (``BrokerProcess``, ``Cluster``) are in :mod:`pykbroker.local`; the raw
wire client is :mod:`pykbroker.protocol.wire`; the fault tools (chaos runs, network partitions,
the fuzzer) are repository tools under ``compat/chaos`` and ``compat/fuzz``, not installed.
"""
