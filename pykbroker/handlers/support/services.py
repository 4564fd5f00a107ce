"""What a request handler may use of the broker (``ctx.services``): the components, named and
typed, instead of the whole ``Broker`` (not a handler: ``load_handlers`` loads only ``kNN_*``).

The broker builds it once, after every component exists and before any listener is bound, so a
handler never finds one missing.  The optional ones are None where this broker has none (no
transaction coordinator in a tree built without it, a controller without reassignments is told
by its own defaults: cluster/controller.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from ...clock import BrokerClock
    from ...cluster.controller import Controller
    from ...cluster.metadata_cache import MetadataCache
    from ...cluster.replica_manager import ReplicaManager
    from ...config import BrokerConfig


@dataclass(frozen=True)
class BrokerServices:
    node_id: int
    config: "BrokerConfig"
    clock: "BrokerClock"
    metadata_cache: "MetadataCache"   # the read-only view of the cluster metadata
    controller: "Controller"          # its only writer
    replica_manager: "ReplicaManager"  # the partitions hosted here: produce, fetch, offsets
    group_coordinator: Optional[Any] = None
    transaction_coordinator: Optional[Any] = None
    share_coordinator: Optional[Any] = None
