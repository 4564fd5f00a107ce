"""The floor under the closed-loop connection cells: what answering a small Produce costs a
Python server that does nothing else, beside what it costs pykbroker.

    python compat/bench/floor.py [--n 100,1000] [--seconds 8] [--runs 2] [--out FILE.json]

The connection cells ("conns-active": N raw connections, each a closed loop of one acks=1
Produce of 10 x 100 B records, compat/bench/loadgen.py) miss their target because of CPU per
request.  To show how much of that is the I/O layer and how much the Kafka work, the same load
generator runs against three servers in turn, on a fresh port each run:

* ``floor-trio``: the shape of pykbroker's connection (server/connection.py) with nothing
  behind it: one trio task per connection reading the non-blocking socket with ``os.read``,
  framing with pykbroker's ``FrameBuffer``, ``pwrite`` of the request's records to one file
  (the append's system call), a fixed Produce answer encoded by the generated codec, ``os.write``,
  one checkpoint per read.  No decoding, validation, offsets, indexes or state.
* ``floor-epoll``: the same work from one plain ``select.epoll`` loop (no trio): the cost of the
  interpreter and the system calls alone.
* ``floor-trio-poller`` (not run by default: ``--servers``): the epoll floor's loop inside
  trio, one task waiting on its own epoll set's descriptor: what trio's scheduling costs when
  it is paid once per batch of ready connections instead of once per connection.
* ``pykbroker``: ``pykbroker serve`` with a 4-partition topic.

For each run it prints records/s and ack p99 as the load generator saw them, the server's CPU
over the loaded phase per request (user and system, from ``/proc/PID/stat``) and in cores, and
the load generator's own CPU per request.  Nothing here is a target; docs/benchmarks.md quotes it.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from pykbroker.local.zookeeper import free_port  # noqa: E402

PARTITIONS = 4


def _answers():
    """The fixed answers: ApiVersions v0 (the load generator's first request on a connection)
    and a Produce v9 answer for partition 0, both encoded by pykbroker's generated codec."""
    from pykbroker.server.dispatch import APIS
    produce = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": []}]}], "throttle_time_ms": 0}
    versions = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 9}],
                "throttle_time_ms": 0}
    return (lambda corr: APIS[18].encode_framed(0, versions, corr, False)[0],
            lambda corr, v: APIS[0].encode_framed(v, produce, corr, True)[0])


def _answer(frame, log_fd, pos, versions, produce) -> tuple:
    """The answer to one request frame (a bytes-like without its size prefix), after the pwrite
    of a Produce's records (its last 1,100 bytes stand in for them); returns (answer, pos)."""
    key, ver, corr = struct.unpack_from(">hhi", frame)
    if key == 18:
        return versions(corr), pos
    rec = frame[-1100:]
    os.pwrite(log_fd, rec, pos)
    return produce(corr, ver), pos + len(rec)


def serve_trio(port: int, log_path: str) -> None:
    import trio
    from pykbroker.protocol.framing import FrameBuffer
    versions, produce = _answers()
    log_fd = os.open(log_path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    pos = [0]

    async def conn(stream):
        fd, sock = stream.socket.fileno(), stream.socket
        frames = FrameBuffer(100 << 20)
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)
                continue
            if not data:
                return
            frames.receive_data(data)
            while True:
                frame = frames.next_frame()
                if frame is None:
                    break
                out, pos[0] = _answer(frame, log_fd, pos[0], versions, produce)
                os.write(fd, out)
            await trio.lowlevel.checkpoint()   # one per read, as pykbroker's connection

    async def main():
        listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
        print("ready", flush=True)
        await trio.serve_listeners(conn, listeners)

    trio.run(main)


def _accept_all(ls: socket.socket, conns: dict, ep: "select.epoll") -> None:
    """Accept every pending connection of ``ls`` into ``conns`` and the epoll set."""
    from pykbroker.protocol.framing import FrameBuffer
    while True:
        try:
            s, _ = ls.accept()
        except BlockingIOError:
            return
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conns[s.fileno()] = (s, FrameBuffer(100 << 20))
        ep.register(s.fileno(), select.EPOLLIN)


def _serve_ready(fd: int, conns: dict, ep: "select.epoll", log_fd: int, pos: int, versions, produce) -> int:
    """The epoll floors' work for one readable connection: one read, every whole frame in it
    answered (one write each); returns the log position."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return pos
    s, frames = conns[fd]
    if not data:
        ep.unregister(fd)
        del conns[fd]
        s.close()
        return pos
    frames.receive_data(data)
    while True:
        frame = frames.next_frame()
        if frame is None:
            return pos
        out, pos = _answer(frame, log_fd, pos, versions, produce)
        os.write(fd, out)


def serve_epoll(port: int, log_path: str) -> None:
    versions, produce = _answers()
    log_fd = os.open(log_path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    pos = 0
    ls = socket.create_server(("127.0.0.1", port), backlog=4096)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    conns: dict = {}
    print("ready", flush=True)
    while True:
        for fd, _ev in ep.poll():
            if fd == ls.fileno():
                _accept_all(ls, conns, ep)
            else:
                pos = _serve_ready(fd, conns, ep, log_fd, pos, versions, produce)


def serve_trio_poller(port: int, log_path: str) -> None:
    """The floor of a different connection model inside trio: one task owns every connection
    through its own ``select.epoll`` set, waits with trio only on that set's descriptor (one
    wait per batch of ready connections, not one per connection) and then does the epoll
    floor's work for each ready socket.  Not pykbroker's model (a task per connection, which
    keeps a handler's awaits per connection and the answers in order without more machinery);
    here to measure what trio's per-connection scheduling costs on top of the work."""
    import trio
    versions, produce = _answers()
    log_fd = os.open(log_path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)

    async def main():
        pos = 0
        ls = socket.create_server(("127.0.0.1", port), backlog=4096)
        ls.setblocking(False)
        ep = select.epoll()
        conns: dict = {}

        async def acceptor():
            while True:
                await trio.lowlevel.wait_readable(ls)
                _accept_all(ls, conns, ep)

        print("ready", flush=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(acceptor)
            while True:
                await trio.lowlevel.wait_readable(ep.fileno())
                for fd, _ev in ep.poll(0):
                    pos = _serve_ready(fd, conns, ep, log_fd, pos, versions, produce)

    trio.run(main)


def start(server: str, tmp: str):
    """(pid, bootstrap, stop) of a running server."""
    if server == "pykbroker":
        from pykbroker.local.broker_process import BrokerProcess
        from pykbroker.protocol.wire import create_topic
        b = BrokerProcess(tempfile.mkdtemp(dir=tmp)).start(timeout=60)
        create_topic(b.bootstrap, "t", partitions=PARTITIONS)
        return b.proc.pid, b.bootstrap, b.stop
    port = free_port()
    p = subprocess.Popen([sys.executable, __file__, "serve", server, str(port), os.path.join(tmp, "floor.log")],
                         stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        raise RuntimeError("%s did not start" % server)

    def stop():
        p.kill()
        p.wait()
    return p.pid, "127.0.0.1:%d" % port, stop


def run_one(server: str, n: int, seconds: float, tmp: str) -> dict:
    sys.path.insert(0, str(HERE))
    from brokers import proc_cpu_split as _cpu   # here, not at import: the servers need none of it
    pid, bootstrap, stop = start(server, tmp)
    try:
        lg = subprocess.Popen([sys.executable, str(HERE / "loadgen.py"), "conns", "--bootstrap", bootstrap,
                               "--topic", "t", "--n", str(n), "--mode", "active", "--seconds", str(seconds),
                               "--size", "100", "--partitions", str(PARTITIONS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = lg.stdout.readline()
        if '"ready"' not in line:
            raise RuntimeError("loadgen did not get ready: %s%s" % (line, lg.communicate()[1][-2000:]))
        u0, s0 = _cpu(pid)
        out, err = lg.communicate(timeout=seconds + 120)
        u1, s1 = _cpu(pid)
        if lg.returncode != 0:
            raise RuntimeError("loadgen failed:\n%s" % err[-2000:])
        r = json.loads(out.strip().splitlines()[-1])
        if not r["produce_ok"] or not r["requests"]:
            raise RuntimeError("%s: the Produce answers were not all OK: %s" % (server, r))
    finally:
        stop()
    reqs = r["requests"]
    return {"server": server, "connections": n, "rec_s": r["rec_s"], "ack_p99_ms": r["ack"]["p99_ms"],
            "requests": reqs, "server_cores": (u1 - u0 + s1 - s0) / r["seconds"],
            "server_user_us_per_req": (u1 - u0) / reqs * 1e6, "server_sys_us_per_req": (s1 - s0) / reqs * 1e6,
            "client_us_per_req": r["cpu_seconds"] / reqs * 1e6}


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "serve":
        {"floor-trio": serve_trio, "floor-epoll": serve_epoll, "floor-trio-poller": serve_trio_poller}[
            sys.argv[2]](int(sys.argv[3]), sys.argv[4])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="100,1000", help="connection counts, comma-separated")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--runs", type=int, default=2, help="runs of each server per connection count (interleaved)")
    ap.add_argument("--servers", default="floor-trio,floor-epoll,pykbroker")
    ap.add_argument("--out", default=None, help="write the runs as JSON here")
    a = ap.parse_args(argv)
    servers = a.servers.split(",")
    rows = []
    print("| server | connections | records/s | ack p99 ms | server cores | server user us/req | "
          "server sys us/req | load gen us/req |\n|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(prefix="pyk-floor-") as tmp:
        for n in (int(x) for x in a.n.split(",")):
            for i in range(a.runs):
                for server in (servers if i % 2 == 0 else servers[::-1]):
                    r = run_one(server, n, a.seconds, tmp)
                    rows.append(r)
                    print("| %s | %d | %.0f | %.1f | %.2f | %.1f | %.1f | %.1f |" % (
                        server, n, r["rec_s"], r["ack_p99_ms"], r["server_cores"], r["server_user_us_per_req"],
                        r["server_sys_us_per_req"], r["client_us_per_req"]), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"loadavg": os.getloadavg(), "runs": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
