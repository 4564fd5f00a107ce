"""The ZooKeeper-mode controller's roles, composed by ``ZkController`` (cluster/zk_controller.py,
the import path every caller uses).  Each module owns one role and says what state it holds:

- ``znodes``: reading Kafka's pre-KRaft znode layout (cluster/zk.py holds the paths and JSON);
- ``events``: the one event task, in ZooKeeper's order, and the "this broker's cache changed" signal;
- ``listener``: every broker's watcher, ZooKeeper into ``MetadataCache`` records;
- ``admin``: the writes clients request through any broker;
- ``active``: the active controller's term and duties;
- ``membership``: this broker's registration, its session's states and its candidacy for
  ``/controller``.
"""
