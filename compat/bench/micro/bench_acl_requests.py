#!/usr/bin/env python3
"""What the authorizer adds to one request, in CPU time, with no socket and no client: pykbroker
with Kafka's StandardAuthorizer and the bench's 10,000 bindings against the same broker without
it (prints a table; not a test).

    python compat/bench/micro/bench_acl_requests.py [--blocks 40] [--block 300]

Two worker processes, each running one in-process ``pykbroker.Broker`` (the ``on`` one with
``authorizer.class.name`` and the ``acl`` topology's bindings of compat/bench/brokers.py, created
through the controller as CreateAcls creates them), each with its own heap and garbage collector,
as the two brokers of bench.py's ``acl`` cells.  Each serves requests through the broker's own
path: the connection's ``Dispatcher`` (frame, header, decode, the decision log's ``begin``), the
handler, the encoder, every check of a real connection's ``AuthSession``; the Fetch answers'
file regions are released unsent (sendfile costs the same on and off).  The parent runs the two
workers in lockstep, ``--block`` requests of one kind on one, then on the other, alternating who
goes first, and takes the worker's thread CPU time per request (time.thread_time: a worker
descheduled on a shared machine is not charged).  Kinds:

* ``fetch``: Fetch v12 by topic name, sessionless, one partition, 1 MiB, walking the log;
* ``fetch_session``: Fetch v16 by topic id with a fetch session (librdkafka's and the Java
  consumer's): incremental requests naming the partition at its next offset;
* ``fetch_idle``: the same session's incremental Fetch with nothing new (``max_wait_ms`` 0);
* ``fetch_100p``: Fetch v12 of the 100 partitions of another topic (one small batch each);
* ``produce``: Produce v9, acks=1, one 16 KiB batch of 1 KiB records;
* ``metadata``: Metadata v12 for the topic.

``--same-process``: one worker only, with the authorizer, serving its blocks alternately with the
connection's checks and without them (the connection of a broker without an authorizer): the
same heap and process, so only the checks' own cost differs.

The table has per kind the medians of the blocks' microseconds per request on and off, and the
median of the per-block differences (on - off) with its interquartile range.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _boot  # noqa: F401  (compat/bench and the repository root on sys.path)

TOPIC = "bench-acl-requests"
KINDS = ("fetch", "fetch_session", "fetch_idle", "fetch_100p", "produce", "metadata")
MANY = 100   # partitions of the second topic (fetch_100p)


# ---------------------------------------------------------------------------------- the worker
class _Conn:
    """What a handler reads of its connection (server/connection.py's Connection), without the
    socket: the principal of a PLAINTEXT connection, its address, its AuthSession."""
    principal = "User:ANONYMOUS"
    authenticated_principal = None
    listener_name = "PLAINTEXT"
    peer = "127.0.0.1:40000"
    authz = None
    quota_session = None

    def __init__(self, broker) -> None:
        from pykbroker.server.dispatch import Dispatcher
        self.broker = broker
        if broker.authorizer is not None:
            from pykbroker.acl.check import AuthSession
            self.authz = AuthSession(broker.authorizer, self)
        self.dispatcher = Dispatcher(broker.handlers, broker.config["socket.request.max.bytes"], broker, self,
                                     self.peer, getattr(broker, "faults", None))
        self.corr = 0

    async def call(self, api_key: int, version: int, body: dict):
        """The request's framed answer parts (file regions released), as the connection gets them."""
        from pykbroker.protocol.wire import request_frame
        self.corr += 1
        frame = request_frame(api_key, version, self.corr, body)
        return await self.serve(frame)

    async def serve(self, frame: bytes):
        from pykbroker.server.dispatch import HandleRequest, SendResponse
        d = self.dispatcher
        d.receive_data(frame)
        ev = d.next_event()
        assert ev.__class__ is HandleRequest, ev
        out = d.finish(ev, await ev.handler.handle(ev.ctx, ev.request))
        assert out.__class__ is SendResponse, out
        for p in out.parts:
            unpin = getattr(p, "unpin", None)
            if unpin is not None:
                unpin()
        return out.parts


def _bindings(n: int) -> list:
    import brokers as B
    from pykbroker.acl.bindings import AclBinding
    return [AclBinding(b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
                       b.operation.value, b.permission_type.value) for b in B.acl_bindings(n)]


async def _worker(mode: str, n_bindings: int, mb: int) -> None:
    import trio

    import brokers as B
    from pykbroker import Broker
    from pykbroker.protocol.wire import make_batch

    config = dict(B.ACL_CONFIG) if mode == "on" else {}
    with tempfile.TemporaryDirectory(prefix="pykbroker-acl-req-") as d:
        async with Broker(log_dir=d, config=config) as emb:
            b = emb.broker
            if mode == "on":
                await b.controller.alter_acls(added=_bindings(n_bindings))
            await b.controller.create_topic(TOPIC, 1, 1, {})
            await b.controller.create_topic(TOPIC + "-many", MANY, 1, {})
            while any(b.replica_manager.partitions.get(tp) is None or not b.replica_manager.partitions[tp].is_leader
                      for tp in [(TOPIC, 0)] + [(TOPIC + "-many", p) for p in range(MANY)]):
                await trio.sleep(0.01)
            topic_id = b.metadata_cache.topics[TOPIC].topic_id
            conn = _Conn(b)
            batch = make_batch([os.urandom(1024)] * 16)
            produce = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                       "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
            for _ in range(mb * 64):   # 16 KiB a batch
                await conn.call(0, 9, produce)
            end = b.replica_manager.partitions[(TOPIC, 0)].log_end_offset
            small = make_batch([b"x" * 100] * 10)
            for p in range(MANY):
                await conn.call(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
                    {"name": TOPIC + "-many", "partition_data": [{"index": p, "records": small}]}]})
            many = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                    "topics": [{"topic": TOPIC + "-many", "partitions": [
                        {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                         "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(MANY)]}]}

            def fetch_body(offset: int, sid: int = 0, epoch: int = -1, by_id: bool = False, wait: int = 0) -> dict:
                t = {"topic_id": topic_id} if by_id else {"topic": TOPIC}
                t["partitions"] = [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                                    "last_fetched_epoch": -1, "log_start_offset": -1,
                                    "partition_max_bytes": 1 << 20}]
                return {"replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
                        "max_wait_ms": wait, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
                        "session_id": sid, "session_epoch": epoch, "topics": [t], "forgotten_topics_data": [],
                        "rack_id": ""}

            # (offset, session id, epoch) of each fetch kind; the next offset is the answer's
            # high watermark share: 1 MiB of 1 KiB records in 16-record batches is 1008 records
            per_answer = ((1 << 20) // (16 * 1052)) * 16
            state = {"fetch": 0, "session": [0, 0, 0]}

            async def one(kind: str) -> None:
                if kind == "fetch":
                    off = state["fetch"]
                    await conn.call(1, 12, fetch_body(off))
                    state["fetch"] = off + per_answer if off + 2 * per_answer < end else 0
                elif kind == "fetch_idle":
                    await conn.call(1, 16, fetch_body(end, idle["sid"], idle["epoch"], by_id=True))
                    idle["epoch"] += 1
                elif kind == "fetch_100p":
                    await conn.call(1, 12, many)
                elif kind == "produce":
                    await conn.call(0, 9, produce)
                else:
                    await conn.call(3, 12, {"topics": [{"topic_id": None, "name": TOPIC}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})

            # sessions: read the session id from the answer's fixed header (v16: correlation id,
            # header tags, throttle_time_ms, error_code, session_id)
            async def open_session(offset: int) -> tuple[int, int]:
                parts = await conn.call(1, 16, fetch_body(offset, 0, 0, by_id=True))
                head = bytes(parts[0])[:64]
                # framed: 4-byte size, then correlation id (4), tags (1), throttle (4), error (2)
                err, sid = struct.unpack_from(">hi", head, 4 + 4 + 1 + 4)
                assert err == 0, err
                return sid, 1

            async def one_session() -> None:
                s = state["session"]
                off, sid, epoch = s
                if epoch == 0:
                    s[1], s[2] = await open_session(off)
                else:
                    await conn.call(1, 16, fetch_body(off, sid, epoch, by_id=True))
                    s[2] = epoch + 1
                s[0] = off + per_answer
                if s[0] + 2 * per_answer >= end:
                    s[0], s[2] = 0, 0

            authz = conn.authz
            sid, epoch = await open_session(end)
            idle = {"sid": sid, "epoch": epoch}

            async def run(kind: str) -> None:
                if kind == "fetch_session":
                    await one_session()
                else:
                    await one(kind)

            for kind in KINDS:   # warm-up
                for _ in range(50):
                    await run(kind)
            gc_time = [0.0, 0.0, 0.0]
            gc_t0 = [0.0]

            def on_gc(phase: str, info: dict) -> None:
                if phase == "start":
                    gc_t0[0] = time.thread_time()
                else:
                    gc_time[info["generation"]] += time.thread_time() - gc_t0[0]
            gc.callbacks.append(on_gc)
            print(json.dumps({"ready": mode, "objects": len(gc.get_objects()), "end": end, "bindings": len(b.authorizer.bindings())
                              if b.authorizer is not None else 0}), flush=True)
            while True:
                line = await trio.to_thread.run_sync(sys.stdin.readline)
                if not line.strip():
                    break
                kind, n, *checks = line.split()
                n = int(n)
                # --same-process: "off" serves the block as a broker without an authorizer does
                # (no AuthSession on the connection), on the same heap and broker
                conn.authz = None if checks == ["off"] else authz
                g0 = list(gc_time)
                t0 = time.thread_time()
                for _ in range(n):
                    await run(kind)
                dt = time.thread_time() - t0
                print(json.dumps({"kind": kind, "us": dt / n * 1e6,
                                  "gc_us": [(x - y) / n * 1e6 for x, y in zip(gc_time, g0)]}), flush=True)


# ---------------------------------------------------------------------------------- the parent
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--blocks", type=int, default=40, help="blocks of each kind on each broker")
    ap.add_argument("--block", type=int, default=300, help="requests a block")
    ap.add_argument("--bindings", type=int, default=10000)
    ap.add_argument("--mb", type=int, default=32, help="MiB in the topic")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--same-process", action="store_true",
                    help="one worker with the authorizer, its blocks served with and without the connection's checks")
    ap.add_argument("--out", help="write the blocks' JSON here")
    ap.add_argument("--worker", choices=("on", "off"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        import trio
        trio.run(_worker, a.worker, a.bindings, a.mb)
        return 0
    kinds = a.kinds.split(",")
    procs = {}
    for mode in (("on",) if a.same_process else ("on", "off")):
        procs[mode] = subprocess.Popen([sys.executable, __file__, "--worker", mode, "--bindings", str(a.bindings),
                                        "--mb", str(a.mb)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True, bufsize=1)
    try:
        for mode, p in procs.items():
            ready = json.loads(p.stdout.readline())
            print("# worker %s ready: %s" % (mode, ready), flush=True)
        blocks: dict = {k: {"on": [], "off": []} for k in kinds}
        gcs: dict = {k: {"on": [], "off": []} for k in kinds}
        load0 = os.getloadavg()
        for i in range(a.blocks):
            for kind in kinds:
                for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
                    p = procs["on" if a.same_process else mode]
                    p.stdin.write("%s %d %s\n" % (kind, a.block, mode))
                    p.stdin.flush()
                    r = json.loads(p.stdout.readline())
                    blocks[kind][mode].append(r["us"])
                    gcs[kind][mode].append(r["gc_us"])
        for p in procs.values():
            p.stdin.write("\n")
            p.stdin.flush()
    finally:
        for p in procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    print("| request | on, us | off, us | on - off, us: median of blocks (IQR) | of which GC (gen 0/1/2), on - off, mean us |")
    print("|---|---|---|---|---|")
    for kind in kinds:
        on, off = blocks[kind]["on"], blocks[kind]["off"]
        diffs = sorted(x - y for x, y in zip(on, off))
        q = statistics.quantiles(diffs, n=4)
        g = [statistics.mean(x[i] for x in gcs[kind]["on"]) - statistics.mean(x[i] for x in gcs[kind]["off"])
             for i in range(3)]
        print("| %s | %.1f | %.1f | %+.1f (%+.1f to %+.1f) | %+.2f / %+.2f / %+.2f |" % (
            kind, statistics.median(on), statistics.median(off), statistics.median(diffs), q[0], q[2], *g))
    print("load average %s -> %s; %d blocks of %d requests per kind and broker"
          % (tuple(round(x, 1) for x in load0), tuple(round(x, 1) for x in os.getloadavg()), a.blocks, a.block))
    if a.out:
        Path(a.out).write_text(json.dumps({"us": blocks, "gc_us": gcs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
