"""An in-process broker (trio in a background thread) whose storage goes through a given
file system, so that real clients can talk to a broker while faults are injected."""
from __future__ import annotations

import threading

import trio

from pykbroker.broker import BrokerServer
from pykbroker.config import BrokerConfig


class InProcessBroker:
    def __init__(self, log_dirs: list[str], fs, overrides: dict | None = None, port: int = 0):
        self.log_dirs = log_dirs
        self.fs = fs
        self.overrides = dict(overrides or {})
        self.port = port
        self.broker: BrokerServer | None = None
        self._thread = None
        self._cancel = None
        self._token = None
        self.error = None

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:%d" % self.port

    def start(self, timeout: float = 30.0) -> "InProcessBroker":
        values = {"listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
                  "log.dirs": ",".join(self.log_dirs), "group.initial.rebalance.delay.ms": "0"}
        values.update(self.overrides)
        self.broker = BrokerServer(BrokerConfig(values))
        self.broker.storage_fs = self.fs
        # A broker whose every log dir failed halts the process (Kafka's Exit.halt); in-process
        # that would end pytest, so the halt is recorded instead and the broker keeps running.
        self.halts: list[tuple[int, str]] = []
        self.broker.halt_hook = lambda status, message: self.halts.append((status, message))
        ready = threading.Event()

        async def main():
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as n:
                self._cancel = n.cancel_scope
                b = await n.start(self.broker.run)
                self.port = b.bound[0].port
                ready.set()

        def target():
            try:
                trio.run(main)
            except BaseException as e:  # surfaced by start()/stop()
                self.error = e
                ready.set()

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self.error:
            raise RuntimeError("in-process broker failed to start: %r" % (self.error,))
        return self

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's trio thread (sync fn) and return its result."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is None:
            return
        trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        self._thread.join(timeout)
        self._thread = None
