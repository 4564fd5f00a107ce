"""Small helpers shared by the group handlers (kNN_*.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ...protocol.errors import ErrorCode as E, KafkaError

if TYPE_CHECKING:   # annotations only: the group package does not import the server layer
    from ...server.dispatch import RequestContext
    from .coordinator import GroupCoordinator

# What Kafka reports as a group's authorized operations when nothing is denied (as pykbroker,
# which has no authorizer): READ(3), DELETE(6), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11).
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
assert GROUP_AUTHORIZED_OPERATIONS == 3400


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    gc = ctx.services.group_coordinator
    if gc is None:
        raise KafkaError(E.COORDINATOR_NOT_AVAILABLE)
    return gc


async def group_precheck(ctx: RequestContext, group_id: Optional[str],
                         create_topic: bool = True) -> tuple[GroupCoordinator, Any]:   # code: ErrorCode or int
    """Kafka's checks before a group request: coordinator present, offsets topic ready, and this
    broker coordinating the group (its shard loaded).  Returns (coordinator, error code or 0)."""
    gc = coordinator(ctx)
    if create_topic:
        try:
            await gc.ensure_topic()
        except Exception:
            return gc, E.COORDINATOR_NOT_AVAILABLE
    # NOT_COORDINATOR when this broker does not lead the group's offsets partition,
    # COORDINATOR_LOAD_IN_PROGRESS while it replays it.
    return gc, gc.coordinator_error(group_id or "")


def client_host(ctx: RequestContext) -> str:
    """Kafka shows a member's host as InetAddress.toString(): "/127.0.0.1"."""
    conn = ctx.connection
    peer = conn.peer if conn is not None else "?"
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host
