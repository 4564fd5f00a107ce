"""Builds the broker's request observer from ``pykbroker serve`` options (imported only when one
of --metrics, --trace, --log-format json is given)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .observer import Observers, RequestLog, RequestObserver

if TYPE_CHECKING:
    from ..broker import BrokerServer
    from .metrics import BrokerMetrics


def build_observer(observe: dict, current_broker: Callable[[], BrokerServer | None]) -> tuple[Observers, BrokerMetrics | None]:
    """``observe``: ``{"metrics": (host, port), "trace": path, "log_context": True}`` (any of them);
    ``current_broker()``: the running Broker or None.  Returns ``(observer, metrics or None)``."""
    parts: list[RequestObserver] = []
    metrics = None
    if "metrics" in observe:
        from ..storage.log import Log
        from .metrics import BrokerMetrics

        def owners() -> tuple[Any, Any] | None:
            b = current_broker()
            if b is None or b.replica_manager is None:
                return None
            return b.replica_manager, b.group_coordinator

        def auth_stats() -> Any:
            b = current_broker()
            return getattr(b, "auth_stats", None) if b is not None else None

        def quotas() -> Any:
            b = current_broker()
            return getattr(b, "client_quotas", None) if b is not None else None

        metrics = BrokerMetrics(owners, auth_stats, quotas)
        Log.flush_listener = metrics.observe_flush
        parts.append(metrics)
    if "trace" in observe:
        from .trace import TraceWriter
        parts.append(TraceWriter(observe["trace"]))
    parts.append(RequestLog())
    return Observers(parts), metrics
