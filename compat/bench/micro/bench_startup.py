#!/usr/bin/env python3
"""Start-up time of pykbroker, next to Apache Kafka's in the same run.

    python3 compat/bench/micro/bench_startup.py [--runs 7] [--no-kafka]

Columns (median of ``--runs`` runs, each on a fresh data directory, as a test suite starts one):

- ``spawn -> ApiVersions``: from ``Popen`` of ``python -m pykbroker serve`` to the first ApiVersions
  answered, seen by a client polling the port with a real ApiVersions request (the tests' wire
  client, ``pykbroker/protocol/wire.py``), the way a client waits for a broker; and the CPU time
  the broker used until then (all threads), which depends much less on the machine's load than
  the wall time does (on a shared machine, compare that one).
- ``floor``: a bare trio server spawned the same way (the interpreter, ``import trio``, one
  fixed ApiVersions answer), polled the same way: what any trio broker in Python pays before its
  first answer.  ``over the floor`` is pykbroker's own share, run by run (each pykbroker run is
  paired with the floor run next to it, so both see the same load); the target is 60 ms.
- ``python -c pass``: the interpreter alone (``site`` included), the floor of any Python process
  on this machine; ``import pykbroker.cli`` the CLI before it parses its arguments.
- ``in-process``: ``import pykbroker`` + ``pykbroker.Broker(port=0)`` started + one ApiVersions
  answered on a raw socket, in a fresh interpreter (measured from the first line of that
  interpreter, so without its own start-up).  Only when the in-process ``pykbroker.Broker``
  exists in this tree.  Its floor: the same with a bare trio server on a thread instead of
  pykbroker; ``warm``: a second ``Broker()`` started and answering in that same process.
- ``idle RSS``: the served broker's resident memory one second after its first answer.
- Apache Kafka: ``Popen`` of ``kafka.Kafka`` (a single KRaft broker+controller node, formatted
  beforehand, as ``compat/kafka/oracle.py`` runs it) to its first ApiVersions answer, when the
  jars are in the cache (``python3 compat/kafka/oracle.py fetch``); skipped with a line otherwise.

The children run with a bytecode cache (``PYTHONPYCACHEPREFIX`` in a temporary directory, after
one warm-up run), as an installed package does: without it every module is compiled from source
on each start, which measures the compiler, not the broker.  Numbers are printed, never asserted:
they depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from pykbroker.protocol.primitives import ProtocolError  # noqa: E402
from pykbroker.local.zookeeper import free_port  # noqa: E402
from pykbroker.protocol.wire import WireClient  # noqa: E402

from compat.bench.procstat import thread_cpu_seconds  # noqa: E402

POLL = 0.002   # seconds between connection attempts


def _api_versions_ok(port: int, version: int = 3) -> bool:
    """One real ApiVersions round trip; False while nobody listens (or answers) yet."""
    body = {"client_software_name": "bench", "client_software_version": "1"}
    try:
        with WireClient(("127.0.0.1", port), timeout=5.0, client_id="bench") as c:
            return c.request(18, version, body)["error_code"] == 0
    except (OSError, struct.error, ProtocolError):
        return False


def _wait_api_versions(proc: subprocess.Popen, port: int, t0: float, timeout: float) -> float:
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError("exited with %s before answering" % proc.returncode)
        if _api_versions_ok(port):
            return time.perf_counter() - t0
        time.sleep(POLL)
    raise RuntimeError("no ApiVersions answer within %ss" % timeout)


def _rss_kib(pid: int) -> int:
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def child_env(pycache: str, tree: Path = ROOT) -> dict:
    """The children import ``tree``'s pykbroker (they also run in it: ``-c``/``-m`` put the
    working directory first on sys.path)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def pykbroker_serve(env: dict, rss: bool, cwd: Path = ROOT) -> tuple[float, float, int]:
    """(seconds from spawn to the first ApiVersions answer, CPU seconds the broker used until
    then, idle RSS in KiB or 0)."""
    data = tempfile.mkdtemp(prefix="bench-startup-")
    port = free_port()
    cmd = [sys.executable, "-m", "pykbroker", "serve", "--listeners", "PLAINTEXT://127.0.0.1:%d" % port,
           "--log-dirs", data, "--log-level", "WARNING"]
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            took = _wait_api_versions(proc, port, t0, 30.0)
            cpu = thread_cpu_seconds(proc.pid)
            kib = 0
            if rss:
                time.sleep(1.0)
                kib = _rss_kib(proc.pid)
            return took, cpu, kib
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(data, ignore_errors=True)


# The floor: the interpreter, trio's import and one fixed answer (ApiVersions v3: error 0, one API
# key, throttle 0; its response header is v0 as every ApiVersions response's).  No pykbroker code.
_FLOOR_ANSWER = (b"\x00\x00" + b"\x02" + (18).to_bytes(2, "big") + b"\x00\x00\x00\x04" + b"\x00"
                 + b"\x00\x00\x00\x00" + b"\x00")
_FLOOR_SERVER = r"""
import trio

ANSWER = %r


async def handle(stream):
    buf = b""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
            n = int.from_bytes(buf[:4], "big")
            req, buf = buf[4:4 + n], buf[4 + n:]
            body = req[4:8] + ANSWER   # the request's correlation id
            await stream.send_all(len(body).to_bytes(4, "big") + body)
""" % (_FLOOR_ANSWER,)


def floor_serve(env: dict, cwd: Path = ROOT) -> tuple[float, float]:
    """(seconds from spawn to the first ApiVersions answer of a bare trio server, CPU seconds
    it used until then)."""
    port = free_port()
    code = _FLOOR_SERVER + "\ntrio.run(lambda: trio.serve_tcp(handle, %d, host='127.0.0.1'))\n" % port
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        return _wait_api_versions(proc, port, t0, 30.0), thread_cpu_seconds(proc.pid)
    finally:
        _stop(proc)


def _wall(cmd: list, env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


# In a fresh interpreter: import pykbroker, start Broker(port=0), one ApiVersions v0 on a raw
# socket (no client library to import), and print the seconds since the first line; then the
# same for a second Broker() in that process (the warm start).
_IN_PROCESS = r"""
import time
t0 = time.perf_counter()
import socket, struct
import pykbroker


def ask(b):
    host, port = b.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.sendall(struct.pack(">ihhih5s", 15, 18, 0, 1, 5, b"bench"))
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(n, socket.MSG_WAITALL)
        assert struct.unpack_from(">ih", body) == (1, 0), body[:6]


with pykbroker.Broker(port=0) as b:
    ask(b)
    took = time.perf_counter() - t0
t1 = time.perf_counter()
with pykbroker.Broker(port=0) as b:
    ask(b)
    warm = time.perf_counter() - t1
print(took, warm)
"""

# Its floor: the same interpreter, from its first line: import trio, a bare server (the spawned
# floor's) on a thread, one answer read on a raw socket.
_IN_PROCESS_FLOOR = r"""
import time
t0 = time.perf_counter()
import socket, struct, threading
%s

def serve(ready):
    async def main():
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        ready.append(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(handle, listeners)
    trio.run(main)

got = []
threading.Thread(target=serve, args=(got,), daemon=True).start()
while not got:
    time.sleep(0.0005)
with socket.create_connection(("127.0.0.1", got[0])) as s:
    s.sendall(struct.pack(">ihhih5s", 15, 18, 0, 1, 5, b"bench"))
    n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    body = s.recv(n, socket.MSG_WAITALL)
    assert struct.unpack_from(">ih", body) == (1, 0), body[:6]
print(time.perf_counter() - t0)
""" % (_FLOOR_SERVER,)


def has_in_process_broker(env: dict, cwd: Path) -> bool:
    probe = ("import inspect, pykbroker; B = getattr(pykbroker, 'Broker', None); "
             "raise SystemExit(0 if B is not None and 'port' in inspect.signature(B).parameters else 1)")
    return subprocess.run([sys.executable, "-c", probe], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def in_process(env: dict, cwd: Path) -> tuple[float, float]:
    """(first Broker() to its first answer, from the interpreter's first line; a second one)."""
    out = subprocess.run([sys.executable, "-c", _IN_PROCESS], env=env, cwd=cwd, check=True,
                         capture_output=True, text=True).stdout
    first, warm = out.strip().splitlines()[-1].split()
    return float(first), float(warm)


def in_process_floor(env: dict, cwd: Path) -> float:
    out = subprocess.run([sys.executable, "-c", _IN_PROCESS_FLOOR], env=env, cwd=cwd, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def kafka_serve(oracle_mod, workdir: Path) -> tuple[float, float]:
    """Spawn of a formatted single-node Apache Kafka to its first ApiVersions answer."""
    k = oracle_mod.KafkaOracle(workdir)
    cp = oracle_mod.classpath(oracle_mod.fetch(k.version))
    k.port, k.controller_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "server.properties"
    cfg.write_text("".join("%s=%s\n" % kv for kv in k.properties().items()))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # "--cluster-id=": an id may start with "-", which the tool's parser would take for an option
    subprocess.run(k._java(cp) + ["kafka.tools.StorageTool", "format", "--cluster-id=" + cluster_id, "-c", str(cfg)],
                   check=True, capture_output=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(k._java(cp) + ["kafka.Kafka", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return _wait_api_versions(proc, k.port, t0, 120.0), thread_cpu_seconds(proc.pid)
    finally:
        _stop(proc)


def _ms(xs: list) -> str:
    """Median (and minimum) in milliseconds."""
    return "%.0f (%.0f) ms" % (statistics.median(xs) * 1000, min(xs) * 1000) if xs else "n/a"


class Tree:
    """One pykbroker checkout being measured, with its own bytecode cache and results."""

    def __init__(self, path: Path):
        self.path = path
        self.pycache = tempfile.mkdtemp(prefix="bench-startup-pyc-")
        self.env = child_env(self.pycache, path)
        self.embed = False
        self.spawn, self.cpu, self.rss, self.interp, self.imp, self.inproc = [], [], [], [], [], []
        self.floor, self.over, self.warm, self.inproc_floor, self.inproc_over = [], [], [], [], []
        self.floor_cpu, self.cpu_over = [], []

    def warm_up(self) -> None:
        """Fills the bytecode cache (and the page cache)."""
        pykbroker_serve(self.env, rss=False, cwd=self.path)
        floor_serve(self.env, self.path)
        in_process_floor(self.env, self.path)
        self.embed = has_in_process_broker(self.env, self.path)
        if self.embed:
            in_process(self.env, self.path)

    def run_once(self, rss: bool) -> None:
        floor, floor_cpu = floor_serve(self.env, self.path)
        took, cpu, kib = pykbroker_serve(self.env, rss=rss, cwd=self.path)
        self.floor.append(floor)
        self.over.append(took - floor)
        self.floor_cpu.append(floor_cpu)
        self.cpu_over.append(cpu - floor_cpu)
        self.spawn.append(took)
        self.cpu.append(cpu)
        if kib:
            self.rss.append(kib)
        self.interp.append(_wall([sys.executable, "-c", "pass"], self.env, self.path))
        self.imp.append(_wall([sys.executable, "-c", "import pykbroker.cli"], self.env, self.path))
        if self.embed:
            fl = in_process_floor(self.env, self.path)
            first, warm = in_process(self.env, self.path)
            self.inproc_floor.append(fl)
            self.inproc.append(first)
            self.inproc_over.append(first - fl)
            self.warm.append(warm)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per measurement (median printed)")
    ap.add_argument("--kafka-runs", type=int, default=3, help="runs of Apache Kafka")
    ap.add_argument("--no-kafka", action="store_true", help="skip Apache Kafka")
    ap.add_argument("--tree", type=Path, action="append",
                    help="a pykbroker checkout to measure (default: this one); repeat it for a "
                         "before/after comparison: the trees' runs are interleaved, so they share "
                         "the machine's load")
    args = ap.parse_args(argv)

    trees = [Tree(p.resolve()) for p in (args.tree or [ROOT])]
    try:
        for t in trees:
            t.warm_up()
        for i in range(args.runs):
            for t in trees:
                t.run_once(rss=(i == 0 or i == args.runs - 1))
    finally:
        for t in trees:
            shutil.rmtree(t.pycache, ignore_errors=True)

    print("pykbroker start-up, median (minimum) of %d runs (Python %s, %d CPUs, load average %.2f)"
          % (args.runs, sys.version.split()[0], os.cpu_count() or 0, os.getloadavg()[0]))
    rows = [
        ("spawn -> first ApiVersions answered", lambda t: _ms(t.spawn)),
        ("  floor: bare trio server spawned the same way", lambda t: _ms(t.floor)),
        ("  pykbroker over the floor (target < 60 ms)", lambda t: _ms(t.over)),
        ("  CPU time the broker used until then", lambda t: _ms(t.cpu)),
        ("  CPU time the floor used until then", lambda t: _ms(t.floor_cpu)),
        ("  pykbroker's CPU over the floor's", lambda t: _ms(t.cpu_over)),
        ("in-process: import + Broker() + ApiVersions",
         lambda t: _ms(t.inproc) if t.embed else "n/a (no in-process pykbroker.Broker)"),
        ("  floor: import trio + bare server on a thread", lambda t: _ms(t.inproc_floor)),
        ("  pykbroker over the floor (target < 60 ms)", lambda t: _ms(t.inproc_over) if t.embed else "n/a"),
        ("  warm: a second Broker() (target < 20 ms)", lambda t: _ms(t.warm) if t.embed else "n/a"),
        ("idle RSS", lambda t: "%.1f MB" % (statistics.median(t.rss) / 1024) if t.rss else "n/a"),
        ("python -c 'import pykbroker.cli'", lambda t: _ms(t.imp)),
        ("python -c pass (the interpreter's floor)", lambda t: _ms(t.interp)),
    ]
    for i, t in enumerate(trees):
        print("  [%d] %s" % (i, t.path))
    width = max(len(r[0]) for r in rows)
    for label, cell in rows:
        print("  %-*s  %s" % (width, label, "  ".join("[%d] %-14s" % (i, cell(t)) if len(trees) > 1 else cell(t)
                                                   for i, t in enumerate(trees))))

    if args.no_kafka:
        print("Apache Kafka: skipped (--no-kafka)")
        return 0
    sys.path.insert(0, str(ROOT / "compat" / "kafka"))
    import oracle
    if not (oracle.cache_dir() / ".complete").exists() or shutil.which("java") is None:
        print("Apache Kafka: skipped (its jars are not in %s, or no java on PATH; "
              "`python3 compat/kafka/oracle.py fetch` gets them)" % (oracle.cache_dir() / "libs"))
        return 0
    ktimes, kcpu = [], []
    for _ in range(args.kafka_runs):
        work = Path(tempfile.mkdtemp(prefix="bench-startup-kafka-"))
        try:
            took, cpu = kafka_serve(oracle, work)
            ktimes.append(took)
            kcpu.append(cpu)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("Apache Kafka %s (KRaft broker+controller, formatted beforehand), median (minimum) of %d runs"
          % (oracle.kafka_version(), len(ktimes)))
    print("  %-*s  %s" % (width, "spawn -> first ApiVersions answered", _ms(ktimes)))
    print("  %-*s  %s" % (width, "  CPU time it used until then", _ms(kcpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
