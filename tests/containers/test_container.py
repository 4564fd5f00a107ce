"""The container image and PyKBrokerContainer.

With a Docker engine and the ``testcontainers`` package: build the image from the Dockerfile,
start ``PyKBrokerContainer`` and produce/consume with confluent-kafka through the host port it
advertises (skipped, with the reason, where either is missing).

Everywhere (no Docker needed): what the image runs is run here as a subprocess with the exact
command lines the Dockerfile holds, only the listener (loopback, ephemeral port) and the data dir
changed through the same environment variables a user would set: the ENTRYPOINT is accepted by
``pykbroker serve``, answers, advertises what the documented variables/arguments say and stops
cleanly on SIGTERM; the HEALTHCHECK command passes against a live broker and fails against a
closed port or a silent listener; PyKBrokerContainer's launch chain (wait for the start script,
then the image's entrypoint) starts a broker advertising what the script says; the compose file
parses and builds from the Dockerfile.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests import needs

from pykbroker.protocol import wire
from pykbroker.testing.containers import IMAGE_ENTRYPOINT, launch_args, start_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the first listener of the ready line (PLAINTEXT, or a named one such as EXTERNAL)
READY = re.compile(r"ready, listening on [A-Z][A-Z0-9_]*://([^:,\s]+|\[[^\]]+\]):(\d+)")


# -- the Dockerfile, read as Docker reads it (enough of it for this file) --------------------
def dockerfile() -> list[tuple[str, str]]:
    """[(INSTRUCTION, arguments)]: comments dropped, backslash continuations joined."""
    out, cur = [], ""
    with open(os.path.join(ROOT, "Dockerfile")) as fh:
        for line in fh:
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            cur += s
            word, _, rest = cur.partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def instruction(name: str) -> list[str]:
    return [args for word, args in dockerfile() if word == name]


def last(name: str) -> str:
    found = instruction(name)
    assert found, "Dockerfile has no %s" % name
    return found[-1]


def image_env() -> dict[str, str]:
    env = {}
    for args in instruction("ENV"):
        for item in shlex.split(args):
            k, _, v = item.partition("=")
            env[k] = v
    return env


def exec_form(args: str) -> list[str]:
    """A JSON (exec form) ENTRYPOINT/CMD; the shell form would not pass arguments through."""
    assert args.startswith("["), "not in exec form: %s" % args
    return json.loads(args)


def healthcheck_command() -> list[str]:
    args = last("HEALTHCHECK")
    _, _, cmd = args.partition("CMD ")
    return exec_form(cmd.strip())


# -- running the image's commands here -------------------------------------------------------
@pytest.fixture(scope="module")
def image_path(tmp_path_factory):
    """PATH whose ``pykbroker`` is this checkout (the console script pip puts in the image)."""
    d = tmp_path_factory.mktemp("bin")
    shim = d / "pykbroker"
    shim.write_text('#!/bin/sh\nexec "%s" -m pykbroker "$@"\n' % sys.executable)
    shim.chmod(0o755)
    return str(d) + os.pathsep + os.environ.get("PATH", "")


def run_env(image_path, **overrides) -> dict[str, str]:
    """The environment of the container: the process's own, the image's ENV, then ``overrides``."""
    env = dict(os.environ)
    env.update(image_env())
    env["PATH"] = image_path
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(overrides)
    return env


class Launched:
    """A broker started by an arbitrary command line; ready when it logs its listener."""

    def __init__(self, argv, env):
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.port = None
        # its own process group: kill() also reaches a broker a shell left behind
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, start_new_session=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            m = READY.search(line)
            if m:
                self.port = int(m.group(2))
                self.ready.set()

    def wait_ready(self, timeout=30.0) -> "Launched":
        if not self.ready.wait(timeout):
            self.kill()
            raise AssertionError("not ready; exit %s, output:\n%s" % (self.proc.poll(), "".join(self.lines)))
        return self

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:%d" % self.port

    def terminate(self, timeout=20.0) -> int:
        """SIGTERM, as ``docker stop`` sends to the container's PID 1."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def advertised(bootstrap) -> list[tuple[str, int]]:
    m = wire.metadata(bootstrap, [])
    return [(b["host"], b["port"]) for b in m["brokers"]]


def loopback_env(image_path, tmp_path, **overrides):
    """The image's environment with the listener on an ephemeral loopback port and a temporary
    data dir (both through the variables the Dockerfile documents)."""
    return run_env(image_path, PYKBROKER_LISTENERS="PLAINTEXT://127.0.0.1:0",
                   PYKBROKER_LOG_DIRS=str(tmp_path / "data"), **overrides)


# -- the Dockerfile itself -------------------------------------------------------------------
def test_dockerfile_small_non_root_volume_port():
    assert last("FROM") == "python:3.11-slim"
    user = last("USER")
    assert user.split(":")[0] not in ("root", "0")
    volume = last("VOLUME")
    assert volume == "/var/lib/pykbroker"
    # the package with the admin CLI's client library ([tools])
    assert any('pip install --no-cache-dir ".[tools]"' in r for r in instruction("RUN"))
    env = image_env()
    assert env["PYKBROKER_LOG_DIRS"] == volume               # the data lands in the volume
    assert env["PYKBROKER_LISTENERS"] == "PLAINTEXT://0.0.0.0:%s" % last("EXPOSE")   # reachable from outside
    assert exec_form(last("CMD")) == []
    # what the build copies must not be excluded by .dockerignore (a whitelist)
    with open(os.path.join(ROOT, ".dockerignore")) as fh:
        kept = {ln.strip()[1:].rstrip("/") for ln in fh if ln.strip().startswith("!")}
    for args in instruction("COPY"):
        for src in shlex.split(args)[:-1]:
            assert src.rstrip("/") in kept, src


def test_container_module_runs_the_image_entrypoint():
    assert exec_form(last("ENTRYPOINT")) == IMAGE_ENTRYPOINT


# -- the ENTRYPOINT, run here ---------------------------------------------------------------
def test_entrypoint_serves_and_advertises_localhost_by_default(image_path, tmp_path):
    b = Launched(IMAGE_ENTRYPOINT + exec_form(last("CMD")), loopback_env(image_path, tmp_path)).wait_ready()
    try:
        r = wire.call(b.bootstrap, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert r["error_code"] == 0 and any(a["api_key"] == 0 for a in r["api_keys"])
        assert advertised(b.bootstrap) == [("localhost", 9092)]   # the documented default
        assert (tmp_path / "data" / "meta.properties").exists()   # PYKBROKER_LOG_DIRS is the data dir
        rc = b.terminate()
    finally:
        b.kill()
    # 0: SIGTERM reached pykbroker itself (exec), which stopped cleanly; a shell still in
    # between would have died of the signal (-15) and left the broker running.
    assert rc == 0, "".join(b.lines)


@pytest.mark.parametrize("env_value,args,expected", [
    ("PLAINTEXT://broker.example:29092", [], ("broker.example", 29092)),
    # arguments come after the entrypoint's own --override: the later one wins
    ("PLAINTEXT://broker.example:29092",
     ["--override", "advertised.listeners=PLAINTEXT://203.0.113.5:19092"], ("203.0.113.5", 19092)),
])
def test_entrypoint_advertised_listeners_overridable(image_path, tmp_path, env_value, args, expected):
    env = loopback_env(image_path, tmp_path, PYKBROKER_ADVERTISED_LISTENERS=env_value)
    b = Launched(IMAGE_ENTRYPOINT + args, env).wait_ready()
    try:
        assert advertised(b.bootstrap) == [expected]
    finally:
        b.kill()


def test_kafka_environment_names_read_as_the_apache_kafka_image_does():
    from pykbroker.container import config_key, env_config
    assert config_key("KAFKA_ADVERTISED_LISTENERS") == "advertised.listeners"
    assert config_key("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR") == "offsets.topic.replication.factor"
    assert config_key("KAFKA_ABC__DEF") == "abc_def"
    assert config_key("KAFKA_ABC___DEF") == "abc-def"
    assert config_key("KAFKA_LISTENER_NAME_CLIENT_SSL_KEYSTORE___TYPE") == "listener.name.client.ssl.keystore-type"
    assert env_config({"KAFKA_NUM_PARTITIONS": "3", "KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_LOG4J_LOGGERS": "x=INFO",
                       "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg", "PATH": "/bin", "KAFKA_": "x"}) == {
        "num.partitions": "3", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}


def test_entrypoint_takes_broker_settings_from_kafka_variables(image_path, tmp_path):
    """A compose file written for apache/kafka: KAFKA_LISTENERS, KAFKA_ADVERTISED_LISTENERS,
    KAFKA_LOG_DIRS win over the image's PYKBROKER_* defaults; any other KAFKA_<KEY> is that
    config; the image's JVM variables are not configs (no warning about them)."""
    env = run_env(image_path, KAFKA_LISTENERS="PLAINTEXT://127.0.0.1:0",
                  KAFKA_ADVERTISED_LISTENERS="PLAINTEXT://broker.example:29092",
                  KAFKA_LOG_DIRS=str(tmp_path / "kdata"), KAFKA_NUM_PARTITIONS="3",
                  KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS="0", KAFKA_HEAP_OPTS="-Xmx1G -Xms1G",
                  KAFKA_NUM_PARTITION="2")
    b = Launched(IMAGE_ENTRYPOINT + exec_form(last("CMD")), env).wait_ready()
    try:
        assert advertised(b.bootstrap) == [("broker.example", 29092)]
        assert (tmp_path / "kdata" / "meta.properties").exists()
        r = wire.call(b.bootstrap, 19, 5, {"topics": [{
            "name": "t-" + uuid.uuid4().hex[:8], "num_partitions": -1, "replication_factor": -1,
            "assignments": [], "configs": []}], "timeout_ms": 15000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0 and r["topics"][0]["num_partitions"] == 3
        text = "".join(b.lines)
        assert "heap" not in text.lower()
        # a misspelt variable is the unknown-config warning, with the key it was meant to be
        assert "ignoring config 'num.partition': not a broker config pykbroker knows or uses; did you mean " \
               "'num.partitions'?" in text
        assert b.terminate() == 0, text
    finally:
        b.kill()


def test_healthcheck_finds_the_broker_through_kafka_listeners(broker, image_path):
    env = run_env(image_path, PYKBROKER_LISTENERS="PLAINTEXT://0.0.0.0:1",
                  KAFKA_LISTENERS="PLAINTEXT://0.0.0.0:%d" % broker.port)
    r = subprocess.run(healthcheck_command(), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "127.0.0.1:%d healthy" % broker.port in r.stdout


def test_container_class_uses_only_testcontainers_public_api():
    """PyKBrokerContainer reaches no underscored attribute it does not define itself (the
    entrypoint goes through DockerContainer's keyword arguments, not its private _kwargs)."""
    import ast
    import inspect

    from pykbroker.testing import containers
    tree = ast.parse(inspect.getsource(containers))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PyKBrokerContainer")
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    own |= {t.attr for n in ast.walk(cls) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Attribute)}
    used = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
            and not n.attr.startswith("__")}
    assert used <= own, used - own


# -- the HEALTHCHECK, run here --------------------------------------------------------------
def run_healthcheck(image_path, listeners):
    return subprocess.run(healthcheck_command(), env=run_env(image_path, PYKBROKER_LISTENERS=listeners),
                          capture_output=True, text=True, timeout=60)


def test_healthcheck_passes_against_a_live_broker(broker, image_path):
    # as in the image: the listener variable names the wildcard address, probed on loopback
    r = run_healthcheck(image_path, "PLAINTEXT://0.0.0.0:%d" % broker.port)
    assert r.returncode == 0, r.stderr
    assert "127.0.0.1:%d healthy" % broker.port in r.stdout


def test_healthcheck_fails_against_a_closed_port(image_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # bound, not listening: connections are refused
        r = run_healthcheck(image_path, "PLAINTEXT://0.0.0.0:%d" % port)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "unhealthy" in r.stderr


def test_healthcheck_fails_against_a_listener_that_does_not_answer(image_path):
    """An open port is not health: a peer that accepts and closes without an ApiVersions answer
    fails the check."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)

        def read_and_close():
            conn, _ = srv.accept()
            conn.recv(1024)
            conn.close()

        t = threading.Thread(target=read_and_close, daemon=True)
        t.start()
        r = run_healthcheck(image_path, "PLAINTEXT://127.0.0.1:%d" % srv.getsockname()[1])
        t.join(10)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "unhealthy" in r.stderr


# -- PyKBrokerContainer's launch chain, run here --------------------------------------------
def test_container_launch_chain_waits_for_its_start_script(image_path, tmp_path):
    """What PyKBrokerContainer makes Docker run: nothing starts until the start script exists
    (it is written once the mapped host port is known); then the image's entrypoint runs with
    the advertised listener the script exports and the overrides as arguments."""
    script = tmp_path / "start.sh"
    entrypoint, command = launch_args({"num.partitions": "3"}, script=str(script))
    b = Launched(entrypoint + command, loopback_env(image_path, tmp_path))
    try:
        assert not b.ready.wait(0.5) and b.proc.poll() is None   # waiting for the script
        tmp = tmp_path / "start.tmp"
        tmp.write_text(start_script("PLAINTEXT://docker-host.example:32771"))
        tmp.rename(script)
        b.wait_ready()
        assert advertised(b.bootstrap) == [("docker-host.example", 32771)]
        # the override reached the broker: a topic created with the default partition count
        r = wire.call(b.bootstrap, 19, 5, {"topics": [{
            "name": "t-" + uuid.uuid4().hex[:8], "num_partitions": -1, "replication_factor": -1,
            "assignments": [], "configs": []}], "timeout_ms": 15000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0 and r["topics"][0]["num_partitions"] == 3
    finally:
        b.kill()


def test_module_imports_without_testcontainers():
    code = ("import sys; sys.modules['testcontainers'] = None\n"
            "from pykbroker.testing.containers import PyKBrokerContainer\n"
            "try:\n    PyKBrokerContainer()\nexcept ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert r.returncode == 0, r.stderr
    assert "needs the 'testcontainers' package" in r.stdout


# -- docker-compose.yml ---------------------------------------------------------------------
def compose() -> dict:
    yaml = needs.module("yaml", "PyYAML (the test extra): docker-compose.yml not parsed")
    with open(os.path.join(ROOT, "docker-compose.yml")) as fh:
        return yaml.safe_load(fh)


def listener_map(value: str) -> dict[str, tuple[str, int]]:
    """``NAME://host:port,...`` -> {NAME: (host, port)}."""
    out = {}
    for item in value.split(","):
        name, _, addr = item.strip().partition("://")
        host, _, port = addr.rpartition(":")
        out[name] = (host, int(port))
    return out


def test_compose_service_builds_from_the_dockerfile():
    doc = compose()
    svc = doc["services"]["pykbroker"]
    build = svc["build"]
    context = os.path.join(ROOT, build["context"])
    assert os.path.samefile(os.path.join(context, build.get("dockerfile", "Dockerfile")),
                            os.path.join(ROOT, "Dockerfile"))
    volumes = [v.split(":") for v in svc["volumes"]]
    assert [v[1] for v in volumes] == [last("VOLUME")]
    assert volumes[0][0] in doc["volumes"]   # a named volume, declared


@pytest.mark.parametrize("service", ["pykbroker", "broker-1", "broker-2", "broker-3"])
def test_compose_listeners_one_for_the_network_one_for_the_host(service):
    """Every broker service: INTERNAL advertised under its service name (what containers on the
    compose network resolve) and used between brokers; EXTERNAL published on the host under the
    same port and advertised as localhost there (no /etc/hosts entry needed)."""
    env = compose()["services"][service]["environment"]
    bound = listener_map(env["KAFKA_LISTENERS"])
    adv = listener_map(env["KAFKA_ADVERTISED_LISTENERS"])
    assert set(bound) == set(adv) == {"INTERNAL", "EXTERNAL"}
    assert dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")) == {
        "INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert all(host == "0.0.0.0" for host, _ in bound.values())   # reachable from outside the container
    assert adv["INTERNAL"] == (service, bound["INTERNAL"][1])
    assert adv["EXTERNAL"] == ("localhost", bound["EXTERNAL"][1])
    ports = compose()["services"][service]["ports"]
    assert ports == ["%d:%d" % (bound["EXTERNAL"][1], bound["EXTERNAL"][1])]   # only EXTERNAL is published
    # the healthcheck probes the first listener of KAFKA_LISTENERS, on loopback
    from pykbroker.healthcheck import default_address
    assert default_address(env) == ("127.0.0.1", bound["EXTERNAL"][1])


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# A client in another container of the compose network: Docker's DNS resolves the service name.
# Here the client's own resolver is given that one name (kafka-python resolves through
# socket.getaddrinfo), and it runs in its own process, as it would in its own container.
NETWORK_CLIENT = r"""
import socket, sys
_real = socket.getaddrinfo
def getaddrinfo(host, *a, **k):
    return _real("127.0.0.1" if host == sys.argv[1] else host, *a, **k)
socket.getaddrinfo = getaddrinfo
from kafka import KafkaConsumer, KafkaProducer
bootstrap, topic = sys.argv[2], sys.argv[3]
p = KafkaProducer(bootstrap_servers=bootstrap)
p.send(topic, key=b"from-network", value=b"internal").get(30)
p.close()
c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=20000)
got = []
for m in c:
    got.append((m.key, m.value))
    if len(got) == 2:
        break
c.close()
print(sorted(got))
"""


def test_compose_service_environment_through_the_entrypoint(image_path, tmp_path):
    """The compose file's single-node environment, run with the image's entrypoint: only the
    ports (free ones) and the bind address (loopback) changed.  A host client on EXTERNAL is
    told localhost, a network client on INTERNAL the service name, and each produces and reads
    back the other's record."""
    svc = compose()["services"]["pykbroker"]
    env = {k: str(v) for k, v in svc["environment"].items()}
    bound, adv = listener_map(env["KAFKA_LISTENERS"]), listener_map(env["KAFKA_ADVERTISED_LISTENERS"])
    ports = dict(zip(bound, free_ports(len(bound))))
    env["KAFKA_LISTENERS"] = ",".join("%s://127.0.0.1:%d" % (n, ports[n]) for n in bound)
    env["KAFKA_ADVERTISED_LISTENERS"] = ",".join("%s://%s:%d" % (n, adv[n][0], ports[n]) for n in adv)
    env["KAFKA_LOG_DIRS"] = str(tmp_path / "data")
    env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] = "0"
    b = Launched(IMAGE_ENTRYPOINT + exec_form(last("CMD")), run_env(image_path, **env)).wait_ready()
    try:
        external = "127.0.0.1:%d" % ports["EXTERNAL"]
        internal = "127.0.0.1:%d" % ports["INTERNAL"]
        assert advertised(external) == [("localhost", ports["EXTERNAL"])]
        assert advertised(internal) == [("pykbroker", ports["INTERNAL"])]
        # the image's healthcheck, with the compose environment
        r = subprocess.run(healthcheck_command(), env=run_env(image_path, **env), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr

        from confluent_kafka import Consumer, Producer
        topic = "compose-" + uuid.uuid4().hex[:8]
        host_bootstrap = "localhost:%d" % ports["EXTERNAL"]
        p = Producer({"bootstrap.servers": host_bootstrap})
        p.produce(topic, key=b"from-host", value=b"external")
        assert p.flush(30) == 0

        r = subprocess.run([sys.executable, "-c", NETWORK_CLIENT, "pykbroker",
                            "pykbroker:%d" % ports["INTERNAL"], topic],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.strip() == str([(b"from-host", b"external"), (b"from-network", b"internal")])

        c = Consumer({"bootstrap.servers": host_bootstrap, "group.id": "g-" + topic,
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got, deadline = [], time.monotonic() + 60
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.key(), m.value()))
        c.close()
        assert sorted(got) == [(b"from-host", b"external"), (b"from-network", b"internal")]
        assert b.terminate() == 0, "".join(b.lines)
    finally:
        b.kill()


# -- in Docker ------------------------------------------------------------------------------
def _docker_missing() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command"
    try:
        r = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "`docker info` failed: %s" % e
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        return "no Docker engine (`docker info` failed: %s)" % (lines[-1] if lines else "exit %d" % r.returncode)
    try:
        import testcontainers.core.container  # noqa: F401
    except ImportError as e:   # a declared test dependency: a failure in CI (tests/needs.py)
        return needs.missing("the testcontainers package (the test extra): %s" % e)
    return None


@pytest.fixture(scope="module")
def image():
    why = _docker_missing()
    if why:
        pytest.skip(why)
    tag = "pykbroker:test-%s" % uuid.uuid4().hex[:8]
    r = subprocess.run(["docker", "build", "-t", tag, ROOT], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


@pytest.mark.timeout(900)
def test_produce_consume_through_pykbroker_container(image):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from pykbroker.testing.containers import PyKBrokerContainer

    with PyKBrokerContainer(image) as kafka:
        bootstrap = kafka.get_bootstrap_server()
        # the image's own healthcheck, inside the container
        rc, out = kafka.exec(["pykbroker", "healthcheck"])
        assert rc == 0, out
        topic = "c-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        sent = [(b"k%d" % i, bytes([i]) * (i + 1) + b"\x00\xff") for i in range(20)]
        for k, v in sent:
            p.produce(topic, value=v, key=k)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.key(), m.value()))
        c.close()
        assert sorted(got) == sorted(sent)
