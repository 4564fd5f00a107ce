"""Local process launchers: pykbroker brokers and ZooKeeper run as child processes on this
machine, exactly as a user starts them.

- ``broker_process``: ``BrokerProcess``, one ``pykbroker serve`` on a loopback port (the
  process back-end of the embedded ``pykbroker.Broker``, and the tests' broker);
- ``cluster``: ``Cluster``, ZooKeeper and N brokers (``pykbroker cluster up`` as a library);
- ``zookeeper``: ``ZooKeeperServer``, a standalone ZooKeeper in a child JVM, and the child-process
  helpers the launchers share;
- ``relay``: ``TcpRelay``, a loopback TCP relay that can drop or hold the links through it
  (between a cluster's brokers and its ZooKeeper).

These modules start processes and read their logs; they import the broker's code only through
its public faces (``healthcheck``, ``protocol.wire``), never its internals.
"""
