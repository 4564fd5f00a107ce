"""The embedded broker in a child process: :class:`SubprocessBroker` (``pykbroker.Broker.subprocess()``),
``pykbroker serve`` run by :class:`pykbroker.local.broker_process.BrokerProcess`; introspection through
the Kafka protocol (:class:`WireBroker`), faults, clock, crash and restart through its HTTP control
endpoint."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, cast

from .base import SecurableFront
from .control import Faults, RemoteClock, checked, http_control
from .wire import WireBroker

if TYPE_CHECKING:
    import os

    from ..local.broker_process import BrokerProcess

class SubprocessBroker(SecurableFront, WireBroker):
    """``pykbroker serve`` in a child process (:class:`pykbroker.local.broker_process.BrokerProcess`), with
    :class:`Broker`'s interface; introspection through the Kafka protocol."""

    def __init__(self, port: int = 0, log_dir: Optional[str | os.PathLike[str]] = None, config: Optional[dict] = None, host: str = "127.0.0.1",
                 control_port: Optional[int] = 0, as_kafka: Optional[str] = None, security: Optional[str] = None,
                 users: Optional[dict] = None, mechanisms: Optional[list] = None) -> None:
        # security=...: as Broker's (local/secure_setup.py); the SCRAM users are written into the
        # new log dir's metadata file before the child starts (it has no in-process controller)
        self._init_security(security, users, mechanisms, host, as_kafka)
        if host != "127.0.0.1":
            raise ValueError("the subprocess broker listens on 127.0.0.1")
        self.host, self.port = host, int(port)
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self._given_log_dir = log_dir
        self._tmp = None
        self.log_dir = None
        self.process: Optional[BrokerProcess] = None
        self.control_port = control_port
        self.control_url: Optional[str] = None

    def start(self, timeout: float = 30.0) -> "SubprocessBroker":
        self._own_log_dir(self._given_log_dir)
        try:
            self._spawn(timeout)
        except BaseException:
            self._remove_tmp()
            raise
        return self

    def _spawn(self, timeout: float) -> None:
        from ..local.broker_process import BrokerProcess

        log_dir = cast(str, self.log_dir)   # made by start()
        config = dict(self.config)
        if self._secure is not None:
            config = {"listeners": "%s://127.0.0.1:%d" % (self._secure.protocol, self.port),
                      **self._secure.broker_config(), **config}
            self._secure.seed_metadata_file(log_dir)
        self.process = p = BrokerProcess(log_dir, config, port=self.port, control_port=self.control_port,
                                         extra_args=["--as-kafka", self.as_kafka] if self.as_kafka else [])
        p.start(timeout)
        # a restart (after kill -9) binds the same ports
        self.port = p.port
        if self.control_port is not None:
            # the bound port (BrokerProcess read it from the child's log)
            self.control_port = cport = cast(int, p.control_port)
            self.control_url = "http://127.0.0.1:%d" % cport

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is not None:
            try:
                self.process.stop(timeout)
            except Exception:
                self.process.kill()
            self.process = None
        self._remove_tmp()

    # -- faults, clock, crash: the HTTP control endpoint (and the process itself) ----------------
    def _control_url(self) -> str:
        if self.control_url is None:
            raise RuntimeError("started without a control endpoint (control_port=None)")
        return self.control_url

    def _control(self, method: str, path: str, req: Optional[dict] = None) -> dict:
        return checked(*http_control(self._control_url(), method, path, req))

    @property
    def faults(self) -> Faults:
        self._control_url()
        return Faults(self)

    @property
    def clock(self) -> RemoteClock:
        self._control_url()
        return RemoteClock(self)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.proc is not None and self.process.proc.poll() is None

    def crash(self) -> None:
        """``kill -9`` the broker process (faults set over HTTP die with it)."""
        if self.process is not None:
            self.process.kill()

    def restart(self, clean: bool = True, timeout: float = 30.0) -> "SubprocessBroker":
        """Stop it (SIGTERM, or ``kill -9`` with ``clean=False``; nothing once crashed) and
        start a new process on the same data dir and ports."""
        p = self.process
        if p is not None and self.running:
            if clean:
                p.stop()
            else:
                p.kill()
        self._spawn(timeout)
        return self
