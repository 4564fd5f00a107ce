"""Client quotas (Kafka's KIP-13/KIP-55/KIP-124/KIP-219) and the broker's connection limits.

- ``entities.py`` (sans-IO): quota entities (``user``, ``client-id``, ``ip``; a null name is the
  default entity), the validation of AlterClientQuotas and the filters of DescribeClientQuotas,
  with Apache Kafka 4.4's error codes and messages.
- ``rate.py`` (sans-IO): Kafka's sampled-window ``Rate`` (``quota.window.num`` samples of
  ``quota.window.size.seconds``) and ``QuotaUtils.throttleTime``; the ``TokenBucket`` of the
  controller mutation quota.
- ``manager.py``: ``ClientQuotaManager``, the enforcement of ``producer_byte_rate``,
  ``consumer_byte_rate``, ``request_percentage`` (the connection's quota paths) and
  ``controller_mutation_rate`` (``MutationQuota``, used by CreateTopics / DeleteTopics /
  CreatePartitions) with Kafka's precedence; it follows the quotas the controller stores
  (``controller.add_client_quota_listener``).
- ``connections.py``: ``ConnectionQuotas``: ``max.connections``, ``max.connections.per.ip``,
  ``max.connections.per.ip.overrides`` and the ip entities' ``connection_creation_rate`` at
  accept time.

The controller owns the stored quotas (the metadata file on one node, Kafka's ``/config/users``,
``/config/clients``, ``/config/ips`` znodes on a ZooKeeper cluster); see docs/quotas.md.
"""
