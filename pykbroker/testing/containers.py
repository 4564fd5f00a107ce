"""pykbroker in Docker through testcontainers, with ``testcontainers.kafka.KafkaContainer``'s
interface, so a test suite swaps one class for the other::

    from pykbroker.testing.containers import PyKBrokerContainer   # was: testcontainers.kafka.KafkaContainer

    with PyKBrokerContainer() as kafka:                            # image "pykbroker:latest"
        bootstrap = kafka.get_bootstrap_server()                   # e.g. "localhost:32771"

The image is the repository's Dockerfile: ``docker build -t pykbroker .`` in the checkout builds
it (the one command; no registry serves it).  Needs the
``testcontainers`` package (in the ``test`` extra) and a Docker engine; this module imports
without either and says what is missing when a container is created.

Advertised listener: Docker maps the container's port to a random host port known only once the
container exists, and clients must be told that host address (Metadata answers).  So, as
KafkaContainer does, the container first waits for a small start script; ``start()`` writes it
(``PYKBROKER_ADVERTISED_LISTENERS=PLAINTEXT://<host>:<mapped port>``) and the image's own
entrypoint then runs with it.  Test-friendly default, as KafkaContainer's:
``group.initial.rebalance.delay.ms=0`` (``with_override`` adds or replaces any broker config).
"""
from __future__ import annotations

import io
import re
import tarfile
import time
from typing import TYPE_CHECKING, Any

# The image's ENTRYPOINT (Dockerfile; pykbroker/container.py), run once the start script exists;
# tests/containers checks that the two agree.
IMAGE_ENTRYPOINT = ["python", "-m", "pykbroker.container"]
START_SCRIPT = "/tmp/pykbroker-tc-start.sh"
_READY = re.compile(r"ready, listening on PLAINTEXT://")

_MISSING = ("PyKBrokerContainer needs the 'testcontainers' package (pip install testcontainers, or "
            "pykbroker's 'test' extra) and a Docker engine")


def launch_args(overrides: dict, script: str = START_SCRIPT) -> tuple[list[str], list[str]]:
    """(entrypoint, command) of the container: wait for ``script``, source it (it exports the
    advertised listener), then exec the image's own entrypoint with ``--override key=value``
    arguments."""
    wait = 'while [ ! -f "%s" ]; do sleep 0.1; done; . "%s"; exec "$@"' % (script, script)
    command = []
    for k, v in overrides.items():
        command += ["--override", "%s=%s" % (k, v)]
    return ["sh", "-c", wait, "pykbroker-tc", *IMAGE_ENTRYPOINT], command


def start_script(advertised: str) -> str:
    return "export PYKBROKER_ADVERTISED_LISTENERS='%s'\n" % advertised


_IMPORT_ERROR: ImportError | None = None
if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer as _Base
else:
    try:   # optional: without it this module still imports, and PyKBrokerContainer() says why not
        from testcontainers.core.container import DockerContainer as _Base
    except ImportError as e:
        _Base, _IMPORT_ERROR = object, e


class PyKBrokerContainer(_Base):
    """``PyKBrokerContainer(image="pykbroker:latest", port=9092, **kwargs)``: ``kwargs`` go to
    testcontainers' DockerContainer (and from there to Docker).  ``start()``/``stop()``, a
    context manager, ``get_bootstrap_server()``, ``with_override(key, value)``."""

    def __init__(self, image: str = "pykbroker:latest", port: int = 9092, **kwargs: Any) -> None:
        if _IMPORT_ERROR is not None:
            raise ImportError("%s (%s)" % (_MISSING, _IMPORT_ERROR)) from _IMPORT_ERROR
        # DockerContainer passes its keyword arguments to Docker's run (testcontainers' public
        # way to set the entrypoint); the command (the overrides) is set by start()
        kwargs.setdefault("entrypoint", launch_args({})[0])
        super().__init__(image, **kwargs)
        self.port = port
        self.overrides: dict[str, str] = {"group.initial.rebalance.delay.ms": "0"}
        self.with_exposed_ports(self.port)
        self.with_env("PYKBROKER_LISTENERS", "PLAINTEXT://0.0.0.0:%d" % self.port)

    def with_override(self, key: str, value: object) -> "PyKBrokerContainer":
        """Any Kafka broker config, passed as ``--override key=value``."""
        self.overrides[key] = str(value)
        return self

    def get_bootstrap_server(self) -> str:
        return "%s:%s" % (self.get_container_host_ip(), self.get_exposed_port(self.port))

    def start(self, timeout: float = 30) -> "PyKBrokerContainer":
        self.with_command(launch_args(self.overrides)[1])
        super().start()
        try:
            self._put_file(START_SCRIPT, start_script("PLAINTEXT://%s" % self.get_bootstrap_server()))
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _put_file(self, path: str, text: str) -> None:
        data = text.encode()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
        self.get_wrapped_container().put_archive("/", buf.getvalue())

    def _wait_ready(self, timeout: float) -> None:
        """Until the broker logs its "ready" line; a container that exits (a bad override) fails
        at once with its logs instead of after the timeout."""
        container = self.get_wrapped_container()
        deadline = time.monotonic() + timeout
        while True:
            logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
            if _READY.search(logs):
                return
            container.reload()
            if container.status in ("exited", "dead") or time.monotonic() > deadline:
                raise RuntimeError("pykbroker container did not become ready (status %s):\n%s"
                                   % (container.status, logs))
            time.sleep(0.1)
