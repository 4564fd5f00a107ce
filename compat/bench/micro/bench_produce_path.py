"""The Kafka work of one small Produce, in process and without sockets (prints numbers; not a test).

    python compat/bench/micro/bench_produce_path.py [--requests 4000] [--reps 7] [--profile] [--path both]

The closed-loop connection cells (``conns-active``: each connection one acks=1 Produce v9 of
10 x 100 B records in flight, compat/bench/loadgen.py) are bounded by the broker's CPU per
request.  ``compat/bench/floor.py`` measures the I/O layer's share of it (a bare trio server);
this measures the rest, the steps the connection loop calls between its read and its write, on
a real ``BrokerServer`` (a 4-partition topic, its own temporary log dir):

- ``decode``: framing, the request header, the generated codec's decode (Dispatcher.next_event);
- ``handle``: the Produce handler, validation, the append and its ``pwrite``;
- ``encode``: the answer encoded and framed (Dispatcher.finish);
- ``total``: the repetition's wall time per request, ``cpu``: its process CPU time (user +
  system) per request, the figure to compare on a loaded machine.

Each repetition runs ``--requests`` requests round-robin over the 4 partitions; the minimum
over ``--reps`` repetitions is printed (the least disturbed by other processes on a shared
machine), in µs per request.  ``--profile`` prints a cProfile of one more repetition
(``PROFILE_LINES``: its length); ``--steps`` times decode and handle+encode again in separate loops by process CPU alone.
``--append-steps`` times each step of the fast path's handler alone, call by call.
``--path``: ``fast`` (what the broker does: these requests take the Produce fast path,
handlers/support/produce_fast.py), ``general`` (a dispatcher that never takes it: the path
every Produce took before it), or ``both``, alternating the two repetition by repetition so
that both see the same machine load.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))

import trio  # noqa: E402

from pykbroker.broker import BrokerServer  # noqa: E402
from pykbroker.config import BrokerConfig  # noqa: E402
from pykbroker.local.zookeeper import free_port  # noqa: E402
from pykbroker.protocol.wire import make_batch, request_frame  # noqa: E402
from pykbroker.server.dispatch import Dispatcher, HandleRequest  # noqa: E402


class _GeneralOnly(Dispatcher):
    """A dispatcher that never takes the Produce fast path (the general path's cost)."""

    def _fast_produce_ok(self) -> bool:
        return False


async def _run(args: argparse.Namespace, log_dir: str) -> None:
    broker = BrokerServer(BrokerConfig({"log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:%d" % free_port()}))
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        disp = Dispatcher(broker.handlers, 100 << 20, broker, None, "bench", getattr(broker, "faults", None))
        general = _GeneralOnly(broker.handlers, 100 << 20, broker, None, "bench", getattr(broker, "faults", None))
        disp.receive_data(request_frame(19, 4, 1, {
            "topics": [{"name": "t", "num_partitions": 4, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 30000, "validate_only": False}))
        ev = disp.next_event()
        assert isinstance(ev, HandleRequest)
        await ev.handler.handle(ev.ctx, ev.request)
        await trio.sleep(0.5)   # the partitions' leadership
        # the load generator's requests (compat/bench/loadgen.py cmd_conns)
        frames = [request_frame(0, 9, 1, {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                                          "topic_data": [{"name": "t", "partition_data": [
                                              {"index": i, "records": make_batch([b"x" * 100] * 10)}]}]},
                                client_id="bench-conns") for i in range(4)]
        pc = time.perf_counter
        cpu = time.process_time
        paths = {"fast": [disp], "general": [general], "both": [disp, general]}[args.path]
        best: dict = {}
        for _ in range(args.reps):
            for d in paths:
                dec = han = enc = 0.0
                c0 = cpu()
                t0 = pc()
                for i in range(args.requests):
                    a = pc()
                    d.receive_data(frames[i & 3])
                    ev = d.next_event()
                    b = pc()
                    resp = await ev.handler.handle(ev.ctx, ev.request)
                    c = pc()
                    out = d.finish(ev, resp)
                    e = pc()
                    assert out is not None and out.__class__.__name__ == "SendResponse"
                    dec += b - a
                    han += c - b
                    enc += e - c
                total = pc() - t0
                cpu_total = cpu() - c0
                row = best.setdefault("fast" if d is disp else "general", {})
                for k, v in (("decode", dec), ("handle", han), ("encode", enc), ("total", total),
                             ("cpu", cpu_total)):
                    row[k] = min(row.get(k, float("inf")), v / args.requests * 1e6)
        for name, row in best.items():
            print("%s path, µs per request (min of %d x %d): %s" % (
                name, args.reps, args.requests, ", ".join("%s %.1f" % kv for kv in row.items())))
        disp = paths[0]
        if args.steps:
            # the steps in separate loops, each timed by process CPU alone (no clock read per
            # request): all the requests decoded first, then all handled and encoded
            cpu_steps: dict = {}
            for _ in range(args.reps):
                c0 = cpu()
                events = []
                for i in range(args.requests):
                    disp.receive_data(frames[i & 3])
                    events.append(disp.next_event())
                c1 = cpu()
                for ev in events:
                    disp.finish(ev, await ev.handler.handle(ev.ctx, ev.request))
                c2 = cpu()
                for k, v in (("decode", c1 - c0), ("handle+encode", c2 - c1)):
                    cpu_steps[k] = min(cpu_steps.get(k, float("inf")), v / args.requests * 1e6)
            print("%s path by steps, µs of process CPU per request (min of %d x %d): %s" % (
                "general" if args.path == "general" else "fast", args.reps,
                args.requests, ", ".join("%s %.1f" % kv for kv in cpu_steps.items())))
        if args.append_steps:
            _time_append_steps(broker, frames[0], args)
        if args.profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
            for i in range(args.requests):
                disp.receive_data(frames[i & 3])
                ev = disp.next_event()
                disp.finish(ev, await ev.handler.handle(ev.ctx, ev.request))
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(int(os.environ.get("PROFILE_LINES", "30")))
        nursery.cancel_scope.cancel()


def _time_append_steps(broker: BrokerServer, frame: bytes, args: argparse.Namespace) -> None:
    """Each step of the fast path's handler alone, in a loop of ``--requests`` (process CPU per
    call, the minimum over ``--reps``): the validation, the partition's append, the log's, the
    segment's, the ``pwrite`` alone, the answer, the clock, the dispatcher's decode, and the
    whole ``FastPath.handle``.  The appends go to partition 0 of the benchmark's topic."""
    from pykbroker.handlers.support import produce_fast
    from pykbroker.storage.log_validator import validate_single_batch
    cpu = time.process_time
    n = args.requests
    disp = Dispatcher(broker.handlers, 100 << 20, broker, None, "bench", None)
    disp.receive_data(frame)
    ev = disp.next_event()
    req = ev.request
    part = broker.services.replica_manager.partitions[("t", 0)]
    lg = part.log
    best: dict = {}

    def timed(name, fn, items):
        t = cpu()
        for x in items:
            fn(x)
        best[name] = min(best.get(name, float("inf")), (cpu() - t) / n * 1e6)

    def views():   # fresh copies: an append patches its batch's offset in place
        return [memoryview(bytearray(req.records)) for _ in range(n)]

    for _ in range(args.reps):
        vs = views()
        timed("validate_single_batch", lambda v: validate_single_batch(v, 1 << 20, 9, 1, None), vs)
        vals = [validate_single_batch(v, 1 << 20, 9, 1, None) for v in views()]
        timed("Partition.append_records_as_leader", lambda v: part.append_records_as_leader(v, 1), vals)
        vals = [validate_single_batch(v, 1 << 20, 9, 1, None) for v in views()]
        timed("Log.append", lambda v: lg.append(v, 0, None, auto_flush=False, time_type_read=True), vals)
        seg = lg._segments[-1]
        bufs = [bytearray(req.records) for _ in range(n)]
        timed("LogSegment.append", lambda b: seg.append(b, seg.next_offset + 9, 5, seg.next_offset + 9,
                                                         [(0, len(b), seg.next_offset + 9, 5)]), bufs)
        fd = seg._fdh.acquire()
        seg._fdh.unpin()
        timed("os.pwrite", lambda b: os.pwrite(fd, b, 0), bufs)
        timed("_success", lambda _: produce_fast._success(1, 9, req, "t", 5, -1, 0), range(n))
        clock = broker.services.clock
        timed("BrokerClock.time_ms", lambda _: clock.time_ms(), range(n))

        def decode(_):
            disp.receive_data(frame)
            return disp.next_event()
        timed("decode (Dispatcher.next_event)", decode, range(n))
        evs = [decode(None) for _ in range(n)]

        def handle(e):
            c = e.handler.handle(e.ctx, e.request)
            try:
                c.send(None)   # the fast path does not suspend here (no flush.messages)
            except StopIteration:
                pass
        timed("FastPath.handle", handle, evs)
    print("fast path's steps, µs of process CPU per call (min of %d x %d):" % (args.reps, n))
    for k, v in best.items():
        print("  %-36s %.2f" % (k, v))


def main() -> None:
    ap = argparse.ArgumentParser(description="The Kafka work of one small Produce, in process")
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--steps", action="store_true",
                    help="also time decode and handle+encode in separate loops by process CPU")
    ap.add_argument("--path", choices=("fast", "general", "both"), default="both")
    ap.add_argument("--append-steps", action="store_true",
                    help="also time each step of the fast path's handler alone (validation, the appends, pwrite, ...)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        trio.run(_run, args, d)


if __name__ == "__main__":
    main()
