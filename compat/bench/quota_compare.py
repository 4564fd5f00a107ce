"""Byte-rate quotas measured next to Apache Kafka (a measurement, not a timed test).

    python compat/bench/quota_compare.py [--seconds 90] [--rate 1048576] [--targets pykbroker kafka]
                                         [--clients ...] [--out FILE.md] [--json FILE.json]

For each target (a fresh single node, started as bench.py starts it: brokers.py) the same client
quotas are set with AlterClientQuotas, one per client id (so that no client's samples are in
another's rate): ``producer_byte_rate`` on each producer's client id, ``consumer_byte_rate`` on
each consumer's, Kafka's default quota windows (11 samples of 1 s).  Then, one client at a time,
each for ``--seconds``:

* ``ck-default``: a confluent-kafka producer with librdkafka's defaults (``batch.size`` 1,000,000,
  so a ProduceRequest carries up to ~1 MB), ``linger.ms=5``, ``acks=1``, sending 1 KiB values as
  fast as it may;
* ``ck-64k``: the same with ``batch.size=65536`` (what a user who caps a producer at 1 MB/s
  would set: a request is then a small part of one second's quota);
* ``perf-producer``: Kafka's ProducerPerformance (kafka-producer-perf-test.sh) with
  ``--throughput -1 --record-size 1024`` and the Java producer's defaults (``batch.size`` 16384,
  ``linger.ms`` 5, ``acks=all``), only ``client.id`` set;
* ``ck-consumer``: a confluent-kafka consumer (librdkafka's defaults: fetches of up to 1 MiB per
  partition) reading a topic filled beforehand by an unthrottled client;
* ``perf-consumer``: Kafka's ConsumerPerformance (kafka-consumer-perf-test.sh, the Java
  consumer's defaults) on the same topic, ``--show-detailed-stats --reporting-interval 1``;
* ``ck-consumer-64k`` / ``perf-consumer-64k``: the same two with fetches of 64 KiB
  (``max.partition.fetch.bytes=65536``; ``--fetch-size 65536``).  A Fetch over the quota is
  answered empty, so a consumer is only given a fetch that fits under it: with 1 MiB fetches it
  stays up to one fetch per window under the quota, about -9 %.

Producers are measured on the broker: a sampler (its own connection, a client id without quota)
asks the partition's end offset with ListOffsets every 100 ms, so every producer is measured the
same way: value bytes appended (1 KiB a record) per second.  The clock starts at the last sample
before the first append.  Consumers are measured by the client: the confluent-kafka consumer
counts the value bytes it receives (the clock starts at the first records); ConsumerPerformance
prints its cumulative record count at the first record of every poll that returns some (a report
interval of 1 ms), with millisecond times: the rest of a poll's records, counted in the next line,
are put at the time of the line that poll printed (the clock starts at the first line).

Reported per target and client: the average over the whole run, over the run after the first
10 s (Kafka's rate is measured over at least ``(samples - 1) x window`` = 10 s, so a client's first
burst is averaged into 10 s before it is throttled), and the lowest and highest average over any
30 s window after those 10 s (in whole seconds), plus the bytes of each second.  Value bytes
only: the quota also counts the batches' and requests' framing, so a held quota shows as a
payload rate a little under it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import brokers  # noqa: E402
import javatools  # noqa: E402
from pykbroker.protocol.wire import WireClient, call, create_topic, list_offsets  # noqa: E402

VALUE = b"q" * 1024
RECORD = len(VALUE)
WARMUP = 10   # (quota.window.num - 1) x quota.window.size.seconds with Kafka's defaults
WINDOW = 30   # the claim's window

PRODUCERS = {
    "ck-default": "confluent-kafka producer, librdkafka defaults (batch.size 1000000), linger.ms=5, acks=1",
    "ck-64k": "confluent-kafka producer, batch.size=65536, linger.ms=5, acks=1",
    "perf-producer": "ProducerPerformance --throughput -1 --record-size 1024 (Java defaults: batch.size 16384, "
                     "linger.ms 5, acks=all)",
}
CONSUMERS = {
    "ck-consumer": "confluent-kafka consumer, librdkafka defaults (max.partition.fetch.bytes 1048576)",
    "ck-consumer-64k": "confluent-kafka consumer, max.partition.fetch.bytes=65536, fetch.max.bytes=65536 (and message.max.bytes=65536, which librdkafka requires)",
    "perf-consumer": "ConsumerPerformance (Java defaults: max.partition.fetch.bytes 1048576, max.poll.records 500)",
    "perf-consumer-64k": "ConsumerPerformance --fetch-size 65536 (max.partition.fetch.bytes)",
}


def client_id(name: str) -> str:
    return "quota-bench-" + name


def set_quotas(bootstrap: str, rate: int, clients: list) -> None:
    entries = [{"entity": [{"entity_type": "client-id", "entity_name": client_id(c)}],
                "ops": [{"key": "producer_byte_rate" if c in PRODUCERS else "consumer_byte_rate",
                         "value": float(rate), "remove": False}]}
               for c in clients]
    r = call(bootstrap, 49, 1, {"validate_only": False, "entries": entries})
    if any(e["error_code"] for e in r["entries"]):
        raise SystemExit("AlterClientQuotas on %s: %s" % (bootstrap, r))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = call(bootstrap, 48, 1, {"components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
                                    "strict": False})
        if len(d.get("entries") or []) >= len(clients):
            return
        time.sleep(0.2)
    raise SystemExit("quotas not described on %s" % bootstrap)


class EndOffsets(threading.Thread):
    """The partition's end offset every ``period`` s: [(monotonic time, offset)]."""

    def __init__(self, bootstrap: str, topic: str, period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.period = bootstrap, topic, period
        self.samples: list = []
        self.stop = threading.Event()

    def run(self) -> None:
        with WireClient(self.bootstrap, client_id="quota-bench-sampler") as c:
            while not self.stop.is_set():
                p = list_offsets(c, self.topic, 0, -1)
                self.samples.append((time.monotonic(), p["offset"]))
                self.stop.wait(self.period)

    def started_at(self) -> float | None:
        """The last sample before the first append after the first sample, or None."""
        s = self.samples
        for i in range(1, len(s)):
            if s[i][1] > s[0][1]:
                return s[i - 1][0]
        return None

    def events(self) -> list:
        s = self.samples
        return [(s[i][0], (s[i][1] - s[i - 1][1]) * RECORD) for i in range(1, len(s)) if s[i][1] > s[i - 1][1]]


def analyse(events: list, t0: float, seconds: int, rate: float) -> dict:
    per_s = [0] * seconds
    for t, n in events:
        i = int(t - t0)
        if 0 <= i < seconds:
            per_s[i] += n
    win = [sum(per_s[i:i + WINDOW]) / WINDOW for i in range(WARMUP, seconds - WINDOW + 1)]
    starts = burst_starts(per_s, rate)
    steady = [b for b in starts if b >= WARMUP]
    cycles = None
    if len(steady) >= 2:
        a, b = steady[0], steady[-1]
        cycles = {"from": a, "to": b, "n": len(steady) - 1, "rate": sum(per_s[a:b]) / (b - a)}
    return {"avg": sum(per_s) / seconds, "steady": sum(per_s[WARMUP:]) / (seconds - WARMUP),
            "win_min": min(win) if win else None, "win_max": max(win) if win else None,
            "bursts": starts, "cycles": cycles, "per_second": per_s}


def burst_starts(per_s: list, rate: float) -> list:
    """The seconds in which a burst begins.  Kafka's windowed rate lets a client through in
    bursts: once the samples of its last burst leave the window (``samples`` windows after them)
    the measured rate falls, and the client sends up to ``(samples - 1) x window`` seconds' worth
    of quota at once before its throttle starts again.  A burst: a second with more than 2.5 x
    the quota; it begins at the earliest of the seconds before it with more than 1.2 x."""
    out: list = []
    for i, n in enumerate(per_s):
        if n > 2.5 * rate and (not out or i - out[-1] > 3):
            j = i
            while j > 0 and per_s[j - 1] > 1.2 * rate and (not out or j - 1 > out[-1] + 3):
                j -= 1
            out.append(j)
    return out


def _wait_start(sampler: EndOffsets, limit: float) -> float:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        t0 = sampler.started_at()
        if t0 is not None:
            return t0
        time.sleep(0.05)
    raise SystemExit("nothing appended to %s" % sampler.topic)


def ck_producer(ck, bootstrap: str, topic: str, name: str, seconds: int, rate: float) -> dict:
    conf = {"bootstrap.servers": bootstrap, "client.id": client_id(name), "linger.ms": 5, "acks": 1}
    if name == "ck-64k":
        conf["batch.size"] = 65536
    p = ck.Producer(conf)
    p.produce(topic, VALUE)
    p.flush(30)   # connected and metadata known before the clock starts
    sampler = EndOffsets(bootstrap, topic)
    sampler.start()
    time.sleep(0.3)
    start = time.monotonic()
    t0 = None
    while True:
        now = time.monotonic()
        if t0 is None and now - start > 0.5:
            t0 = _wait_start(sampler, 10)
        if t0 is not None and now - t0 > seconds + 0.3:
            break
        try:
            p.produce(topic, VALUE)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    sampler.stop.set()
    sampler.join()
    p.purge()
    p.flush(30)
    return analyse(sampler.events(), t0, seconds, rate)


def perf_producer(bootstrap: str, topic: str, name: str, seconds: int, rate: float) -> dict:
    sampler = EndOffsets(bootstrap, topic)
    sampler.start()
    time.sleep(0.3)
    cmd = javatools.java_cmd("ProducerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", 10 ** 9, "--record-size", RECORD,
        "--throughput", -1, "--command-property", "client.id=%s" % client_id(name)])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = _wait_start(sampler, 60)
        while time.monotonic() - t0 < seconds + 0.3:
            if proc.poll() is not None:
                raise SystemExit("ProducerPerformance exited: %s" % (proc.stderr.read() if proc.stderr else "")[-3000:])
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
        sampler.stop.set()
        sampler.join()
    return analyse(sampler.events(), t0, seconds, rate)


def fill(ck, bootstrap: str, topic: str, nbytes: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "quota-bench-filler", "linger.ms": 20,
                     "acks": 1})
    for _ in range(nbytes // RECORD):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(180):
        raise SystemExit("fill of %s did not finish" % topic)


def ck_consumer(ck, bootstrap: str, topic: str, name: str, seconds: int, rate: float) -> dict:
    events: list = []
    c = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": client_id(name),
                     "group.id": "quota-bench-%s" % uuid.uuid4().hex[:8], "auto.offset.reset": "earliest",
                     "enable.auto.commit": False,
                     **({"max.partition.fetch.bytes": 65536, "fetch.max.bytes": 65536, "message.max.bytes": 65536} if name.endswith("-64k") else {})})
    c.subscribe([topic])
    t0 = None
    deadline = time.monotonic() + 60
    while t0 is None or time.monotonic() - t0 < seconds:
        msgs = c.consume(1000, 0.1)
        now = time.monotonic()
        if msgs and t0 is None:
            t0 = now   # the clock starts with the first records (the group join is not measured)
        if t0 is None and now > deadline:
            raise SystemExit("consumer on %s received nothing" % bootstrap)
        n = sum(len(m.value() or b"") for m in msgs if m.error() is None)
        if n:
            events.append((now, n))
    c.close()
    return analyse(events, t0, seconds, rate)


# ConsumerPerformance's detailed line: time, thread id, MB so far, MB/s, records so far, records/s, ...
DATE_FORMAT = "yyyy-MM-dd HH:mm:ss.SSS Z"


def perf_consumer(bootstrap: str, topic: str, name: str, seconds: int, rate: float) -> dict:
    cmd = javatools.java_cmd("ConsumerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", 10 ** 9, "--timeout", 60000,
        "--show-detailed-stats", "--reporting-interval", 1, "--hide-header", "--date-format", DATE_FORMAT,
        "--group", "quota-bench-perf-%s" % uuid.uuid4().hex[:8],
        "--command-property", "client.id=%s" % client_id(name)]
        + (["--fetch-size", 65536] if name.endswith("-64k") else []))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list = []   # (wall time, records so far)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            f = [x.strip() for x in line.split(",")]
            if len(f) >= 6:
                try:
                    t = datetime.datetime.strptime(f[0], "%Y-%m-%d %H:%M:%S.%f %z").timestamp()
                    lines.append((t, int(f[4])))
                except ValueError:
                    pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.time() + 90
    try:
        while not lines or time.time() - lines[0][0] < seconds + 1.5:
            if proc.poll() is not None or (not lines and time.time() > deadline):
                raise SystemExit("ConsumerPerformance: no progress lines\n%s" % (proc.stderr.read() if proc.stderr else "")[-3000:])
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
        reader.join(5)
    # A line is printed at the first record of a poll (the interval is 1 ms, so nearly every
    # poll with records prints one), counting that record: the rest of that poll's records are in
    # the next line's count, but were received at this line's time.
    t0 = lines[0][0]
    events = [(lines[0][0], lines[0][1] * RECORD)]
    for i in range(1, len(lines)):
        delta = lines[i][1] - lines[i - 1][1]
        events += [(lines[i - 1][0], (delta - 1) * RECORD), (lines[i][0], RECORD)]
    return analyse(events, t0, seconds, rate)


def run_target(name: str, clients: list, seconds: int, rate: int) -> dict:
    import confluent_kafka as ck
    out = {}
    with tempfile.TemporaryDirectory(prefix="quota-bench-") as d:
        target = brokers.make(name, "single", d).start()
        try:
            bs = target.bootstrap
            for c in clients:
                if c in PRODUCERS:
                    create_topic(bs, "quota-" + c, 1)
            create_topic(bs, "quota-consume", 1)
            time.sleep(1)
            set_quotas(bs, rate, clients)
            for c in clients:
                if c in PRODUCERS:
                    print("%s %s ..." % (name, c), file=sys.stderr, flush=True)
                    fn = perf_producer if c == "perf-producer" else (lambda *a: ck_producer(ck, *a))
                    out[c] = fn(bs, "quota-" + c, c, seconds, rate)
            consumers = [c for c in clients if c in CONSUMERS]
            if consumers:
                # more than any consumer may read: its quota x (run + the first burst) x 1.5
                fill(ck, bs, "quota-consume", int(rate * (seconds + 2 * WARMUP) * 1.5))
            for c in consumers:
                print("%s %s ..." % (name, c), file=sys.stderr, flush=True)
                fn = perf_consumer if c.startswith("perf-") else (lambda *a: ck_consumer(ck, *a))
                out[c] = fn(bs, "quota-consume", c, seconds, rate)
        finally:
            target.stop()
    return out


def table(results: dict, clients: list, seconds: int, rate: int) -> str:
    mib = float(1 << 20)

    def pct(x: float) -> str:
        return "%+.1f %%" % ((x / rate - 1) * 100)

    lines = ["| client | broker | whole run (%d s) MiB/s | after %d s MiB/s | vs quota | whole cycles after %d s "
             "MiB/s (cycles) | vs quota | %d s windows after %d s: lowest .. highest |"
             % (seconds, WARMUP, WARMUP, WINDOW, WARMUP),
             "|---|---|---|---|---|---|---|---|"]
    for c in clients:
        for t, r in results.items():
            x = r[c]
            cy = x["cycles"]
            lo, hi = x["win_min"], x["win_max"]
            lines.append("| %s | %s | %.3f | %.3f | %s | %s | %s | %s |" % (
                c, t, x["avg"] / mib, x["steady"] / mib, pct(x["steady"]),
                "%.3f (%d)" % (cy["rate"] / mib, cy["n"]) if cy else "-", pct(cy["rate"]) if cy else "-",
                "%s .. %s" % (pct(lo), pct(hi)) if lo is not None else "-"))
    per_s = ["", "Per second (KiB; a burst begins at the seconds in brackets):", ""]
    for c in clients:
        for t, r in results.items():
            b = set(r[c]["bursts"])
            per_s.append("- %s on %s: %s" % (c, t, " ".join(("[%d]" if i in b else "%d") % (n / 1024)
                                                            for i, n in enumerate(r[c]["per_second"]))))
    return "\n".join(lines + per_s) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=90)
    ap.add_argument("--rate", type=int, default=1 << 20, help="the quota, bytes/s (both directions)")
    ap.add_argument("--targets", nargs="+", default=["pykbroker", "kafka"])
    ap.add_argument("--clients", nargs="+", default=list(PRODUCERS) + list(CONSUMERS),
                    choices=list(PRODUCERS) + list(CONSUMERS))
    ap.add_argument("--out", help="also write the markdown table here")
    ap.add_argument("--json", help="also write the raw figures here")
    a = ap.parse_args()
    if a.seconds < WARMUP + WINDOW:
        print("(fewer than %d s: no %d s window is reported)" % (WARMUP + WINDOW, WINDOW), file=sys.stderr)
    load = os.getloadavg()
    results = {t: run_target(t, a.clients, a.seconds, a.rate) for t in a.targets}
    text = table(results, a.clients, a.seconds, a.rate)
    text += "\nload average before / after: %.2f %.2f %.2f / %.2f %.2f %.2f\n" % (load + os.getloadavg())
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
