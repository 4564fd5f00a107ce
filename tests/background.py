"""A test's long run started ahead of its test, in a thread beside the tests before it.

For runs that mostly wait (fault schedules, timers, a client's polls) on processes and brokers of
their own, sharing nothing with the tests they overlap: a module fixture starts the run when the
module starts and the test that checks it calls ``result()``, which waits for it and returns what
it returned or raises what it raised (a skip included).  Whatever the run logs goes to ``lines``
(the test prints them, so a failure shows them, seeds included), not into the output of whichever
test is running meanwhile.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, Optional


class Background:
    def __init__(self, fn: Callable[["Background"], Any], name: str = "background run"):
        self.lines: list[str] = []
        self._out: Any = None
        self._err: BaseException | None = None
        self.thread = threading.Thread(target=self._go, args=(fn,), name=name, daemon=True)
        self.thread.start()

    def log(self, line: str) -> None:
        self.lines.append(line)

    def _go(self, fn: Callable[["Background"], Any]) -> None:
        try:
            self._out = fn(self)
        except BaseException as e:   # re-raised by result(), in the test that checks this run
            self._err = e

    def result(self, timeout: float = 900.0) -> Any:
        self.thread.join(timeout)
        for line in self.lines:
            print(line)
        assert not self.thread.is_alive(), "the run did not end within %.0f s" % timeout
        if self._err is not None:
            raise self._err
        return self._out

    def join(self, timeout: float = 900.0) -> None:
        """At the fixture's teardown: nothing it started outlives the module."""
        self.thread.join(timeout)


def selected(request, test: str) -> bool:
    """Whether this session runs ``test``, a node id's end (``test_mod.py::test_name``, parameters
    aside): ``-k`` or a node id may leave it out, and then its run is not started at all."""
    return any(item.nodeid.split("[")[0].endswith(test) for item in request.session.items)


def ahead(request, test: str, fn: Callable[["Background"], Any], name: str) -> Iterator[Optional[Background]]:
    """A fixture's body (``yield from background.ahead(...)``): ``fn`` started as a
    :class:`Background` run when this session runs ``test`` (else None), joined at teardown."""
    if not selected(request, test):
        yield None
        return
    run = Background(fn, name)
    yield run
    run.join()
