"""``BrokerProcess``: one real pykbroker in a child process, exactly as users run it.

``BrokerProcess`` starts ``python -m pykbroker serve`` on an ephemeral loopback port, waits for
the single "ready" log line (which names the bound listener) and exposes ``bootstrap``.  It can
stop the broker cleanly (SIGTERM), kill it (SIGKILL, for crash tests) and restart it on the
same data dir and port.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# the first listener, of any protocol (a secured broker listens on SASL_SSL://..., SSL://...)
_READY = re.compile(r"ready, listening on [A-Z_]+://([^:,\s]+|\[[^\]]+\]):(\d+)")
_CONTROL = re.compile(r"control endpoint on http://[^:\s]+:(\d+)")


class BrokerProcess:
    def __init__(self, data_dir: str, overrides: dict | None = None, port: int = 0,
                 log_level: str = "INFO", control_port: int | None = None, extra_args: Iterable[str] = (),
                 preexec_fn: Callable[[], Any] | None = None) -> None:
        """``control_port``: serve the HTTP control endpoint there (0: a free port, then
        ``control_port`` holds the bound one); None: no endpoint.  ``preexec_fn`` runs in the
        child before the broker starts (e.g. a lowered ``RLIMIT_NOFILE``)."""
        self.preexec_fn = preexec_fn
        self.data_dir = data_dir
        self.control_port = control_port
        self.extra_args = list(extra_args)   # more `pykbroker serve` options (e.g. --as-kafka)
        self.overrides = dict(overrides or {})
        self.port = port
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._ready_seen = False

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:%d" % self.port

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        cmd = [sys.executable, "-m", "pykbroker", "serve",
               "--listeners", "PLAINTEXT://127.0.0.1:%d" % self.port,
               "--log-dirs", self.data_dir, "--log-level", self.log_level]
        if self.control_port is not None:
            cmd += ["--control", "127.0.0.1:%d" % self.control_port]
        cmd += self.extra_args
        for k, v in self.overrides.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        self._ready.clear()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, preexec_fn=self.preexec_fn)
        threading.Thread(target=self._pump, args=(self.proc, self.control_port is not None),
                         daemon=True).start()
        # _pump sets _ready at the ready line or when the child's output ends (it exited):
        # a broker that refuses to start is reported at once, not after the whole timeout
        if not self._ready.wait(timeout) or not self._ready_seen:
            proc = self.proc
            rc = None
            if proc is not None and self._ready.is_set():   # output ended: reap the exit code
                try:
                    rc = proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            self.kill()
            if rc is not None:   # its own one-line error when it printed one (exit 2), else its output
                raise RuntimeError("broker exited with code %s: %s" % (rc, _last_error(self.lines)))
            raise RuntimeError("broker did not become ready:\n" + "".join(self.lines[-50:]))
        return self

    def _pump(self, proc: subprocess.Popen, want_control: bool = False) -> None:
        ready = control = False
        self._ready_seen = False
        for line in proc.stdout:   # type: ignore[union-attr]  # started with stdout=PIPE
            self.lines.append(line)
            c = _CONTROL.search(line)
            if c:   # logged once the broker listens (after its ready line)
                self.control_port = int(c.group(1))
                control = True
            m = _READY.search(line)
            if m:
                self.port = int(m.group(2))
                ready = True
            if ready and (control or not want_control):
                self._ready_seen = True
                self._ready.set()
            if os.environ.get("PYKBROKER_TEST_ECHO"):
                sys.stderr.write("[broker] " + line)
        if proc is self.proc:
            self._ready.set()   # the child's output ended: it exited (start() reports it)

    def stop(self, timeout: float = 20.0) -> int:
        """Clean shutdown (SIGTERM), as a service manager does."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            raise RuntimeError("broker did not stop within %ss on SIGTERM" % timeout)
        self.proc = None
        return rc

    def kill(self) -> None:
        """Crash: SIGKILL, no clean-shutdown marker, unflushed page cache kept by the OS."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self, clean: bool = True) -> "BrokerProcess":
        self.stop() if clean else self.kill()
        return self.start()

    def log_text(self) -> str:
        return "".join(self.lines)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        except Exception:
            self.kill()


def _last_error(lines: list[str]) -> str:
    """The child's own error: its one-line ``pykbroker: ...`` message, else its last lines."""
    mine = [ln.strip() for ln in lines if ln.startswith("pykbroker: ")]
    return mine[-1][len("pykbroker: "):] if mine else "\n" + "".join(lines[-50:])


def wait_until(pred: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, what: str = "condition") -> T:
    """``pred()``'s first true value, asked every ``interval`` s; AssertionError (naming ``what``
    and the last value) after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, v))
        time.sleep(interval)
