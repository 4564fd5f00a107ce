"""A pykbroker running inside the pipeline's own process, on a trio thread.

In-process rather than a child process so that Ctrl-C in a terminal (SIGINT to the whole foreground
process group) reaches only the pipeline: it can then stop generating, close the last windows
and only afterwards stop the broker.  (PySpark's JVM ignores SIGINT for the same reason.)
"""
from __future__ import annotations

import threading

import trio


class EmbeddedBroker:
    def __init__(self, data_dir: str, overrides: dict | None = None):
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        self.bootstrap = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token = None
        self._cancel = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> "EmbeddedBroker":
        self._thread = threading.Thread(target=self._main, name="pykbroker-embedded", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            raise RuntimeError("embedded broker did not start: %r" % (self._error,))
        return self

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as e:   # reported by start()
            self._error = e
            self._ready.set()

    async def _run(self) -> None:
        from ..broker import Broker
        from ..config import BrokerConfig

        values = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": self.data_dir}
        values.update(self.overrides)
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            broker = await nursery.start(Broker(BrokerConfig(values)).run)
            li = broker.advertised_listener()
            self.bootstrap = "%s:%d" % (li.host, li.port)
            self._ready.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Clean shutdown (logs flushed, clean-shutdown marker written)."""
        if self._thread is None or not self._thread.is_alive():
            return
        trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        self._thread.join(timeout)
