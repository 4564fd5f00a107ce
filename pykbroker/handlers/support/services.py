"""What a request handler may use of the broker (``ctx.services``): the components, named and
typed, instead of the whole ``Broker`` (not a handler: ``load_handlers`` loads only ``kNN_*``).
A handler never reads ``ctx.broker`` nor probes a component with ``getattr``
(tests/install/test_handler_services.py keeps it so).

The broker builds it once, after every component exists and before any listener is bound, so a
handler never finds one missing.  The optional ones are None where this broker has none (no
token manager without ``delegation.token.secret.key``, no password encoder without
``password.encoder.secret``); what only a cluster's controller does (elections, reassignments)
is answered by the ``Controller`` interface's own defaults (cluster/controller.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from ...clock import BrokerClock
    from ...cluster.controller import Controller
    from ...cluster.metadata_cache import MetadataCache
    from ...cluster.replica_manager import ReplicaManager
    from ...config import BrokerConfig
    from ...coordinator.group.coordinator import GroupCoordinator
    from ...coordinator.share.coordinator import ShareCoordinator
    from ...coordinator.txn.coordinator import TransactionCoordinator
    from ...password_encoder import PasswordEncoder
    from ...quota.manager import ClientQuotaManager
    from ...security.delegation_tokens import DelegationTokenManager
    from ...security.listeners import ListenerSecurity
    from ...share.manager import SharePartitionManager
    from ...storage.manager import LogManager


def _no_share_partitions() -> Optional[SharePartitionManager]:
    return None


@dataclass(frozen=True)
class BrokerServices:
    node_id: int
    config: "BrokerConfig"
    clock: "BrokerClock"
    metadata_cache: "MetadataCache"   # the read-only view of the cluster metadata
    controller: "Controller"          # its only writer
    replica_manager: "ReplicaManager"  # the partitions hosted here: produce, fetch, offsets
    log_manager: "LogManager"          # the log dirs and their logs (DescribeLogDirs, AlterReplicaLogDirs)
    # api key -> handler module: the table the dispatcher serves (ApiVersions lists it); the
    # broker's own dict, so an --as-kafka profile or a test's replaced entry shows at once
    handlers: dict[int, Any]
    group_coordinator: "GroupCoordinator"              # __consumer_offsets: classic, consumer, streams groups
    transaction_coordinator: "TransactionCoordinator"  # __transaction_state
    share_coordinator: "ShareCoordinator"              # __share_group_state (KIP-932)
    # the client quotas (quota/manager.py): CreateTopics/DeleteTopics/CreatePartitions count
    # controller_mutation_rate against it
    client_quotas: "ClientQuotaManager"
    # delegation tokens (security/delegation_tokens.py); None without a secret key
    token_manager: Optional["DelegationTokenManager"] = None
    # password.encoder.secret's encoder for the dynamic password configs stored; None without one
    password_encoder: Optional["PasswordEncoder"] = None
    # listener name -> its TLS/SASL setup (security/listeners.py), empty when every listener is
    # PLAINTEXT: dynamic keystore updates are validated against it
    listener_security: dict[str, "ListenerSecurity"] = field(default_factory=dict)
    # the share partitions (KIP-932, share/manager.py) are built by their first use: this hands
    # out the broker's one instance, creating it then
    share_partitions: Callable[[], Optional["SharePartitionManager"]] = _no_share_partitions

    @property
    def share_partition_manager(self) -> Optional[SharePartitionManager]:
        """The share partitions and sessions, created at the first use (None: a broker built
        without share groups)."""
        return self.share_partitions()
