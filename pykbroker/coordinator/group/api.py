"""Small helpers shared by the group handlers (kNN_*.py)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode as E, KafkaError


def coordinator(ctx):
    gc = ctx.broker.group_coordinator
    if gc is None:
        raise KafkaError(E.COORDINATOR_NOT_AVAILABLE)
    return gc


async def group_precheck(ctx, group_id, create_topic: bool = True):
    """Kafka's checks before a group request: coordinator present, offsets topic ready, and this
    broker coordinating the group.  Returns (coordinator, error code or 0)."""
    gc = coordinator(ctx)
    if create_topic:
        try:
            await gc.ensure_topic()
        except Exception:
            return gc, E.COORDINATOR_NOT_AVAILABLE
    if not gc.is_coordinator_for(group_id or ""):
        return gc, E.NOT_COORDINATOR
    return gc, 0


def client_host(ctx) -> str:
    """Kafka shows a member's host as InetAddress.toString(): "/127.0.0.1"."""
    peer = getattr(ctx.connection, "peer", "?")
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host
