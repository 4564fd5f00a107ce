"""A listener's connection poller: the requests that never suspend, carried out without waking
the connection's task.

A connection's task (server/connection.py) that finds its socket empty would wait in
``trio.lowlevel.wait_readable``: trio then registers the socket, wakes the task when it is
readable, runs it for the read and the request, and the task checkpoints before reading on.
With many connections each holding one small request in flight (100 producers, each a closed
loop of one acks=1 Produce), that per-connection scheduling costs about as much as the request
itself (compat/bench/floor.py: the same work served by one task over an epoll set costs 15 µs
per request against 25-28 µs with a task per connection;
compat/bench/results/conns-100-per-request.md).

So a plain connection's task parks here instead (``park``).  The poller owns one
``select.epoll`` set of the parked connections' sockets, and its one task waits with trio on that
set's descriptor: one wake-up for every connection ready at once, not one per connection.  For
each readable socket it reads once and carries out, in order, the requests that complete
without suspending: those whose handler has a ``handle_now`` (server/dispatch.py) that answers
at once, today a Produce of the fast path (handlers/support/produce_fast.py), each answered
with one write.  Anything else is handed back to
the connection's task (``_hand_back``), which takes over exactly where the bytes are:

- a request whose handler may await (any other request, a Produce of the general path, a
  flush.messages fsync after an append), a ``Delayed`` (fault injection) or ``Close`` decision,
  an answer that is not one buffer: the event itself, carried out first by the task;
- an answer the socket did not take whole: the rest, which the task writes with ``send_all``;
- a client quota that became active or an observer: ``BUFFERED`` (the task carries out what
  is buffered the general way, then reads);
- a large frame's body (read by the task straight into its buffer), the peer's end of the
  stream, a read error: what the task would have met itself.

Why this keeps a connection's guarantees:

- One owner at a time (principle 6).  While a connection is parked its task is suspended in
  ``park`` and only the poller touches its socket, dispatcher and frame buffer; from
  ``_hand_back`` on (the socket unregistered first, the task rescheduled last) only the task
  does, and it touches the poller again only by parking anew.  The dispatcher's frame buffer is
  the connection's, so whatever the poller read and did not carry out is still there, in order.
- Request order: the poller carries out a connection's requests one after the other and stops
  at the first it cannot; that one is the task's first.
- Back-pressure: one read per readiness, as the task reads; an answer not taken whole hands
  the connection back, so a client that does not read its answers holds one answer, in its task.
- Cancellation: a parked task's abort (its connection closed by the connection quotas, the
  listener's shutdown) unregisters the socket before the task goes on to close it.  Should the
  poller itself be carrying out that connection's requests at that moment (a cancellation
  raised by one of them), the abort is refused and the poller hands the connection back as
  soon as it is done with it; the cancellation then reaches the task at its next checkpoint.
  The poller's own end (the listener's) hands back every parked connection.
- Nothing held across an await: the poller's work on a connection is synchronous, between two
  waits of its task.
"""
from __future__ import annotations

import logging
import os
import select
import time
from typing import TYPE_CHECKING, Any, Optional

import outcome
import trio

from .dispatch import NOT_NOW, HandleRequest, Remainder, SendResponse

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("pykbroker.connection")


class Ended:
    """Handed back: the peer ended the stream (or the dispatcher closed it); the task returns."""

    __slots__ = ()


ENDED = Ended()


class Buffered:
    """Handed back: the poller read bytes it did not carry out (a client quota became active or
    an observer was installed): the task carries out what is buffered before reading again."""

    __slots__ = ()


BUFFERED = Buffered()


class WriteRest:
    """Handed back: the rest of an answer the socket did not take whole, for ``send_all``."""

    __slots__ = ("data",)

    def __init__(self, data: memoryview) -> None:
        self.data = data


class Poller:
    """One listener's poller; ``run`` is its task (in the listener's nursery)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        # fd -> the Connection whose task is parked on it; the poller's alone while parked
        self._parked: dict[int, Connection] = {}
        self._tasks: dict[int, trio.lowlevel.Task] = {}
        # the connection whose requests the poller is carrying out (see _abort)
        self._running: Optional[Connection] = None
        self._abort_refused = False
        self._now = 0.0
        self.closed = False

    async def run(self) -> None:
        ep = self._epoll
        parked = self._parked
        try:
            while True:
                await trio.lowlevel.wait_readable(ep.fileno())
                # one clock read per batch: last_active is for idle expiry (milliseconds)
                self._now = time.monotonic()
                for fd, _ev in ep.poll(0):
                    conn = parked.get(fd)
                    if conn is None:
                        continue   # handed back or aborted earlier in this batch
                    self._running = conn
                    try:
                        self._serve(conn, fd)
                    except Exception as e:
                        # a bug ends that connection only, in its own task (Connection.run logs it)
                        if fd in parked:
                            self._hand_back(fd, outcome.Error(e))
                        else:
                            log.exception("connection poller failed after handing %s back", conn.peer)
                    finally:
                        self._running = None
                    if self._abort_refused:
                        self._abort_refused = False
                        if fd in parked:
                            self._hand_back(fd, outcome.Value(None))
        finally:
            # the listener is ending: every parked task goes on by itself (its next checkpoint
            # delivers the cancellation); no connection parks here again
            self.closed = True
            for fd in list(parked):
                self._hand_back(fd, outcome.Value(None))
            trio.lowlevel.notify_closing(ep.fileno())   # trio waited on it: told before it closes
            ep.close()

    async def park(self, conn: Connection) -> Any:
        """Wait, in ``conn``'s task, until the poller hands the connection back: ``None`` (read
        on: nothing whole is buffered), ``BUFFERED`` (carry out what is buffered first), an
        event to carry out first, a ``WriteRest``, or ``ENDED``; raises what the task would
        have met reading (a reset)."""
        fd = conn._fd
        self._epoll.register(fd, select.EPOLLIN)
        self._parked[fd] = conn
        self._tasks[fd] = trio.lowlevel.current_task()

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            if self._running is conn:
                self._abort_refused = True
                return trio.lowlevel.Abort.FAILED
            self._unpark(fd)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def _unpark(self, fd: int) -> trio.lowlevel.Task:
        del self._parked[fd]
        task = self._tasks.pop(fd)
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):   # (ValueError: the set already closed, at the poller's end)
            pass
        return task

    def _hand_back(self, fd: int, result: outcome.Outcome) -> None:
        trio.lowlevel.reschedule(self._unpark(fd), result)

    def _serve(self, conn: Connection, fd: int) -> None:
        """One read of ``conn``'s socket, and every request in the buffer that completes without
        suspending; hands the connection back at the first that does not."""
        dispatcher = conn.dispatcher
        frames = dispatcher.frames
        if frames.read_target() is not None:
            self._hand_back(fd, outcome.Value(None))   # a large frame's body: read by the task into its buffer
            return
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError as e:
            self._hand_back(fd, outcome.Error(trio.BrokenResourceError(str(e))))
            return
        if not data:
            self._hand_back(fd, outcome.Value(ENDED))
            return
        conn.last_active = self._now
        frames.receive_data(data)
        quotas = conn.quotas
        while True:
            # checked before each request, as the task's loop checks it
            if (quotas is not None and quotas.active) or conn.observer is not None:
                self._hand_back(fd, outcome.Value(BUFFERED))
                return
            event = dispatcher.next_event()
            if event is None:
                if dispatcher.closed:
                    self._hand_back(fd, outcome.Value(ENDED))
                return   # stays parked: the rest of the next request is still to come
            # (class identity, as the task's loop tells events apart)
            req = event if event.__class__ is HandleRequest else None
            handle_now = getattr(req.handler, "handle_now", None) if req is not None else None
            if req is None or handle_now is None:
                self._hand_back(fd, outcome.Value(event))
                return
            try:
                got = handle_now(req.ctx, req.request)
            except Exception as e:   # a handler bug must still answer the client (as the task does)
                out = dispatcher.fail(req, e)
            else:
                if got.__class__ is bytearray:   # the common case: the framed answer
                    if not self._write(conn, fd, got):
                        return
                    continue
                if got is None:
                    continue   # acks=0: Kafka sends nothing back
                if got is NOT_NOW:
                    self._hand_back(fd, outcome.Value(event))   # the general path, which may await
                    return
                if isinstance(got, Remainder):   # (a flush.messages fsync after an append)
                    self._hand_back(fd, outcome.Value(HandleRequest(req.ctx, got, req.spec, req.request)))
                    return
                out = dispatcher.finish(req, got)   # a refused append's answer (a dict)
            if out is None:
                continue
            if out.__class__ is SendResponse and len(out.parts) == 1 and not hasattr(out.parts[0], "length"):
                if not self._write(conn, fd, out.parts[0]):
                    return
                continue
            self._hand_back(fd, outcome.Value(out))   # a Close, or an answer of several parts
            return

    def _write(self, conn: Connection, fd: int, data: Any) -> bool:
        """``data`` written straight to the socket; False when it did not take it whole (the rest
        handed back to the task) or failed."""
        conn.last_active = self._now
        try:
            n = os.write(fd, data)
        except BlockingIOError:
            n = 0
        except OSError as e:
            self._hand_back(fd, outcome.Error(trio.BrokenResourceError(str(e))))
            return False
        if n < len(data):
            self._hand_back(fd, outcome.Value(WriteRest(memoryview(data)[n:])))
            return False
        return True
