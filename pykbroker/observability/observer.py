"""The one hook between the broker's request path and observability.

``Connection`` (server/connection.py) calls, when ``broker.observer`` is set:

- ``connection_opened(conn)`` / ``connection_closed(conn)``;
- ``request_context(conn, ctx)``: a context manager around the handling of one request (the JSON
  log formatter reads it: connection, client id, API, correlation id);
- ``request_done(conn, event, response, parts, error, t_start, t_handled, t_sent)`` once the
  answer was written: ``event`` is the dispatcher's ``HandleRequest`` (``ctx``, ``spec``, the decoded
  ``request``), ``response`` the handler's body (``None`` for acks=0 or when it raised),
  ``parts`` the framed response written (bytes and file regions; ``None`` when nothing was sent),
  ``error`` the exception the handler raised, times from ``time.perf_counter()``.

``Observers`` fans these out to the parts that were asked for (metrics, trace, request log).
Exceptions in an observer are logged and swallowed: observing must never fail a request.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
from typing import TYPE_CHECKING, Any, Iterable, Iterator

if TYPE_CHECKING:
    from ..protocol.codec import ApiSpec
    from ..server.connection import Connection
    from ..server.dispatch import HandleRequest, RequestContext

log = logging.getLogger("pykbroker.observability")
request_log = logging.getLogger("pykbroker.request")

# What the current trio task is serving: (peer, client_id, api name, api_version, correlation_id).
# Set only while an observer is installed (--log-format json installs one).
CURRENT_REQUEST: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar("pykbroker_request",
                                                                                     default=None)


_NAMES: dict[int, str] = {}


def api_name(spec: ApiSpec) -> str:
    """Kafka's name of an API (``ApiKeys``: ``ListOffsets``), from the codec's ``list_offsets``."""
    n = _NAMES.get(spec.api_key)
    if n is None:
        n = _NAMES[spec.api_key] = "".join(w.capitalize() for w in spec.name.split("_"))
    return n


class RequestObserver:
    """One part of :class:`Observers` (metrics, trace, request log): it is told of every answered
    request; the connection events and the close are no-ops unless it needs them."""

    def connection_opened(self, conn: Connection) -> None:
        pass

    def connection_closed(self, conn: Connection) -> None:
        pass

    def request_done(self, conn: Connection, event: HandleRequest, response: dict[str, Any] | None,
                     parts: list[Any] | None, error: BaseException | None, t0: float, t1: float,
                     t2: float) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RequestLog(RequestObserver):
    """Kafka's request logger (``kafka.request.logger`` at DEBUG): one line per completed request,
    only built when ``pykbroker.request`` is enabled for DEBUG."""

    def request_done(self, conn: Connection, event: HandleRequest, response: dict[str, Any] | None,
                     parts: list[Any] | None, error: BaseException | None, t0: float, t1: float,
                     t2: float) -> None:
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("Completed request %s v%d from %s: totalTime=%.3fms handlerTime=%.3fms%s",
                              api_name(event.spec), event.ctx.api_version, conn.peer, (t2 - t0) * 1000.0,
                              (t1 - t0) * 1000.0, " error=%r" % error if error is not None else "")


class Observers:
    """The observer installed on the broker: fans each event out to ``parts``."""

    def __init__(self, parts: Iterable[RequestObserver]) -> None:
        self.parts = list(parts)

    def _each(self, event: str, conn: Connection) -> None:
        """``part.<event>(conn)`` for every part; a failing part is logged, the others still run."""
        for p in self.parts:
            try:
                getattr(p, event)(conn)
            except Exception:
                log.exception("observer %s failed", type(p).__name__)

    def connection_opened(self, conn: Connection) -> None:
        self._each("connection_opened", conn)

    def connection_closed(self, conn: Connection) -> None:
        self._each("connection_closed", conn)

    @contextlib.contextmanager
    def request_context(self, conn: Connection, ctx: RequestContext, spec: ApiSpec) -> Iterator[None]:
        token = CURRENT_REQUEST.set((conn.peer, ctx.client_id, api_name(spec), ctx.api_version, ctx.correlation_id))
        try:
            yield
        finally:
            CURRENT_REQUEST.reset(token)

    def request_done(self, conn: Connection, event: HandleRequest, response: dict[str, Any] | None,
                     parts: list[Any] | None, error: BaseException | None, t0: float, t1: float,
                     t2: float) -> None:
        for p in self.parts:
            try:
                p.request_done(conn, event, response, parts, error, t0, t1, t2)
            except Exception:
                log.exception("observer %s failed on %r", type(p).__name__, event)

    def close(self) -> None:
        for p in self.parts:
            p.close()
