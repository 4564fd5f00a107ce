"""Byte-rate quotas measured next to Apache Kafka (a measurement, not a timed test).

    python compat/bench/quota_compare.py [--seconds 25] [--rate 1048576] [--targets pykbroker kafka] [--out FILE]

For each target (a fresh single node, started as bench.py starts it: brokers.py), the same
client quotas are set with AlterClientQuotas (``producer_byte_rate`` on client id
``quota-bench-producer``, ``consumer_byte_rate`` on ``quota-bench-consumer``, Kafka's default
quota windows: 11 samples of 1 s), then:

* producer: a confluent-kafka producer with that client id sends 1 KiB values as fast as it can
  for ``--seconds``; the rate is the value bytes acknowledged per second;
* consumer: the topic is first filled, unthrottled, with more than the consumer can read in the
  time; a confluent-kafka consumer with its client id then reads for ``--seconds``; the rate is
  the value bytes received per second.

Printed per target and phase: the average over the whole run and over its part after the first
10 s (Kafka's rate is measured over at least ``(samples - 1) x window`` = 10 s, so a client's first
burst is averaged into 10 s before it is throttled: the steady state is after that), and the
largest ``throttle_time_ms`` librdkafka saw.  Value bytes only: the quota also counts the
batches' and requests' framing, so the payload rate sits a little under the quota.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import brokers  # noqa: E402
from pykbroker.protocol.wire import call, create_topic  # noqa: E402

PRODUCER_ID, CONSUMER_ID = "quota-bench-producer", "quota-bench-consumer"
VALUE = b"q" * 1024
WARMUP = 10.0   # (quota.window.num - 1) x quota.window.size.seconds with Kafka's defaults


def set_quotas(bootstrap: str, rate: int) -> None:
    entries = [{"entity": [{"entity_type": "client-id", "entity_name": cid}],
                "ops": [{"key": key, "value": float(rate), "remove": False}]}
               for cid, key in ((PRODUCER_ID, "producer_byte_rate"), (CONSUMER_ID, "consumer_byte_rate"))]
    r = call(bootstrap, 49, 1, {"validate_only": False, "entries": entries})
    codes = [e["error_code"] for e in r["entries"]]
    if any(codes):
        raise SystemExit("AlterClientQuotas on %s: %s" % (bootstrap, r))
    # every broker applies them from its metadata: wait until they are described
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = call(bootstrap, 48, 1, {"components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
                                    "strict": False})
        if len(d.get("entries") or []) >= 2:
            return
        time.sleep(0.2)
    raise SystemExit("quotas not described on %s" % bootstrap)


def _stats_cb(throttles: list):
    def cb(s):
        for b in json.loads(s)["brokers"].values():
            if b.get("nodeid", -1) >= 0:
                throttles.append(b["throttle"]["max"])
    return cb


def rates(events: list, t0: float, seconds: float) -> dict:
    """events: [(time, bytes)] -> the average rates (bytes/s) over the run and after WARMUP, and
    the bytes of each second."""
    total = sum(n for _, n in events)
    steady = sum(n for t, n in events if t - t0 >= WARMUP)
    per_s = [0] * int(seconds + 1)
    for t, n in events:
        i = int(t - t0)
        if 0 <= i < len(per_s):
            per_s[i] += n
    return {"avg": total / seconds, "steady": steady / max(seconds - WARMUP, 1e-9), "per_second": per_s[:int(seconds)]}


def produce_phase(ck, bootstrap: str, topic: str, seconds: float) -> dict:
    throttles: list = []
    events: list = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": PRODUCER_ID, "linger.ms": 5,
                     "acks": 1, "statistics.interval.ms": 500, "stats_cb": _stats_cb(throttles)})

    def delivered(err, msg):
        if err is None:
            events.append((time.monotonic(), len(msg.value())))

    p.produce(topic, VALUE, on_delivery=delivered)
    p.flush(30)   # connected and metadata known before the clock starts
    events.clear()
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            p.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    # what was acknowledged within the time counts; the rest is drained unmeasured
    out = rates([e for e in events if e[0] - t0 < seconds], t0, seconds)
    p.purge()
    p.flush(30)
    out["max_throttle_ms"] = max(throttles or [0])
    return out


def fill(ck, bootstrap: str, topic: str, nbytes: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "quota-bench-filler", "linger.ms": 20,
                     "acks": 1})
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(120):
        raise SystemExit("fill of %s did not finish" % topic)


def consume_phase(ck, bootstrap: str, topic: str, seconds: float) -> dict:
    throttles: list = []
    events: list = []
    c = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": CONSUMER_ID,
                     "group.id": "quota-bench-%s" % uuid.uuid4().hex[:8], "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "statistics.interval.ms": 500,
                     "stats_cb": _stats_cb(throttles)})
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
    out = rates(events, t0, seconds)
    out["max_throttle_ms"] = max(throttles or [0])
    return out


def run_target(name: str, seconds: float, rate: int) -> dict:
    import confluent_kafka as ck
    with tempfile.TemporaryDirectory(prefix="quota-bench-") as d:
        target = brokers.make(name, "single", d).start()
        try:
            bs = target.bootstrap
            create_topic(bs, "quota-produce", 1)
            create_topic(bs, "quota-consume", 1)
            time.sleep(1)
            set_quotas(bs, rate)
            produced = produce_phase(ck, bs, "quota-produce", seconds)
            # more than the consumer may read: its quota x (run + warm-up burst) x 2
            fill(ck, bs, "quota-consume", int(rate * (seconds + WARMUP) * 2))
            consumed = consume_phase(ck, bs, "quota-consume", seconds)
        finally:
            target.stop()
    return {"producer": produced, "consumer": consumed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--rate", type=int, default=1 << 20, help="the quota, bytes/s (both directions)")
    ap.add_argument("--targets", nargs="+", default=["pykbroker", "kafka"])
    ap.add_argument("--out", help="also write the markdown table here")
    a = ap.parse_args()
    results = {t: run_target(t, a.seconds, a.rate) for t in a.targets}
    q = a.rate / (1 << 20)
    lines = ["| broker | client | quota MiB/s | average MiB/s (%.0f s) | after %.0f s MiB/s | vs quota (after %.0f s) "
             "| max throttle_time_ms |" % (a.seconds, WARMUP, WARMUP),
             "|---|---|---|---|---|---|---|"]
    for t, r in results.items():
        for phase in ("producer", "consumer"):
            x = r[phase]
            lines.append("| %s | %s | %.2f | %.3f | %.3f | %+.1f %% | %d |" % (
                t, phase, q, x["avg"] / (1 << 20), x["steady"] / (1 << 20),
                (x["steady"] / a.rate - 1) * 100, x["max_throttle_ms"]))
    per_s = ["", "Per second (KiB), in order:", ""]
    for t, r in results.items():
        for phase in ("producer", "consumer"):
            per_s.append("- %s %s: %s" % (t, phase, " ".join("%d" % (n / 1024) for n in r[phase]["per_second"])))
    text = "\n".join(lines + per_s) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
