"""``EventTask``: ZooKeeper events handled one at a time, in ZooKeeper's order, by one trio task
(Kafka's ControllerEventManager), and the signal that this broker's cache may have changed.

Watch callbacks and the roles post ``(kind, *args)``; the task calls the handler of that kind
(the table ``ZkController`` composes) and then wakes every waiter.  Admin requests wait for
their own broker to see what they wrote (``wait_until``), bounded by ``APPLY_TIMEOUT_S``.

Owns the event channel and the changed signal; nothing else.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Awaitable, Callable

import trio

from ...protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("pykbroker.controller")

# How long an admin request waits for its own broker to see the change it wrote (Kafka's
# CreateTopics waits up to the request's timeout for the new leaders; clients default to 30 s).
APPLY_TIMEOUT_S = 30.0


class EventTask:
    def __init__(self) -> None:
        self._send, self._recv = trio.open_memory_channel(math.inf)
        # waiters for this broker's cache to reach a condition (admin requests)
        self._changed = trio.Event()

    def post(self, event: tuple) -> None:
        try:
            self._send.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def run(self, handlers: dict[str, Callable[..., Awaitable[Any]]]) -> None:
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError
        async for event in self._recv:
            kind = event[0]
            try:
                await handlers[kind](*event[1:])
            except (ConnectionLoss, SessionExpiredError) as e:
                # the connection dropped under this event: the reconnection (CONNECTED, always
                # posted after it) re-reads what it was about
                log.info("handling ZooKeeper event %s interrupted (%s); redone on the reconnection",
                         kind, type(e).__name__)
            except Exception:
                log.exception("handling ZooKeeper event %s failed", kind)
            self.notify_changed()

    def notify_changed(self) -> None:
        ev, self._changed = self._changed, trio.Event()
        ev.set()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    async def wait_until(self, predicate: Callable[[], bool], what: str) -> None:
        with trio.move_on_after(APPLY_TIMEOUT_S):
            while not predicate():
                await self.wait_changed()
            return
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for %s." % what)
