"""Kafka's quota rate and throttle time, computed by Kafka's own classes, for pykbroker's tests.

    python compat/kafka/quota/rate_oracle.py            # rewrite tests/quotas/data/kafka_rate_oracle.json
    python compat/kafka/quota/rate_oracle.py --simulate # a client sending as fast as it may, per request size

Scenarios of (time ms, value, check) events are fed to QuotaRate.java, which records them in a
quota sensor built as Kafka 4.4's ClientQuotaManager builds one (kafka-clients' Sensor and Rate,
kafka-server-common's QuotaUtils.throttleTime) and prints the throttle, the measured rate and
the window of each.  The answers are stored with the events; tests/quotas/test_rate_oracle.py
replays the events through pykbroker's ``Rate`` and compares every value, without a JVM.

Most scenarios are closed loops: a client that sends its next request as soon as the previous
one's throttle is over (plus a small gap), the loop driven by pykbroker's throttles; Kafka's must
equal them at every event for the stored answers to match, so a difference anywhere (a sample
boundary, the first window, a purge, the rounding) shows at the first event it changes.

``--simulate`` runs the same closed loop long (pykbroker's Rate, which the stored answers show
equal to Kafka's) and prints the long-run rate a client gets per request size: the rate a
quota holds depends on how much one request carries.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent))

from pykbroker.quota.rate import Rate  # noqa: E402

FIXTURE = ROOT / "tests" / "quotas" / "data" / "kafka_rate_oracle.json"
MIB = 1 << 20


def closed_loop(samples: int, window_ms: int, bound: float, request: int, ms: int, seed: int,
                idle: tuple = ()) -> list:
    """A client sending ``request`` bytes as soon as its throttle is over (1-30 ms later), for
    ``ms``; ``idle``: (from, to) spans in which it sends nothing."""
    rnd = random.Random(seed)
    r = Rate(samples, window_ms)
    t, events = 0, []
    while t < ms:
        if any(a <= t < b for a, b in idle):
            t = next(b for a, b in idle if a <= t < b)
            continue
        size = request if rnd.random() < 0.8 else rnd.randint(request // 4, request)
        r.record(size, t)
        throttle = r.throttle_ms(bound, t)
        events.append((t, size, 1))
        t += throttle + rnd.randint(1, 30)
    return events


def boundaries(samples: int, window_ms: int) -> list:
    """Events exactly on sample boundaries and on the expiry age, equal times, a negative value
    recorded unchecked (Kafka's unrecordQuotaSensor), and long idle gaps."""
    w, n = window_ms, samples
    ev = [(0, 5000, 1), (0, 5000, 1), (w - 1, 100, 1), (w, 100, 1), (w, 2000, 0), (w, -2000, 0), (w, 1, 1),
          (2 * w, 7000, 1), (2 * w + 1, 1, 1)]
    last = 2 * w + 1
    ev += [(last + n * w - 1, 1, 1), (last + n * w - 1 + n * w, 1, 1), (last + 3 * n * w, 50_000, 1)]
    t = ev[-1][0]
    for k in range(1, 3 * n + 3):
        ev.append((t + k * w, 3000 * k, 1))
    t = ev[-1][0]
    ev += [(t + w // 2, 10, 1), (t + n * w, 10, 1), (t + n * w + w, -5, 0), (t + n * w + w, 0, 1)]
    return ev


def scenarios() -> dict:
    return {
        # Kafka's defaults (quota.window.num 11, quota.window.size.seconds 1) and a 1 MiB/s quota
        "default-1MB-requests": (11, 1000, MIB, closed_loop(11, 1000, MIB, 1_000_000, 120_000, 1)),
        "default-64KiB-requests": (11, 1000, MIB, closed_loop(11, 1000, MIB, 65536, 40_000, 2)),
        "default-1MB-with-idle": (11, 1000, MIB, closed_loop(11, 1000, MIB, 1_000_000, 90_000, 3,
                                                             idle=((20_000, 31_500), (50_000, 50_800)))),
        # the test brokers' quota.window.num=2, and windows of 700 ms
        "two-samples": (2, 1000, 50_000, closed_loop(2, 1000, 50_000, 40_000, 30_000, 4)),
        "odd-window": (5, 700, 200_000, closed_loop(5, 700, 200_000, 150_000, 30_000, 5, idle=((9_000, 13_000),))),
        # quota.window.num=1 (Kafka's least): a window can be empty, measured as 1 ms
        "one-sample": (1, 1000, 100_000, closed_loop(1, 1000, 100_000, 30_000, 20_000, 6)),
        "boundaries-one-sample": (1, 1000, 1000.0, boundaries(1, 1000)),
        "boundaries-default": (11, 1000, 1000.0, boundaries(11, 1000)),
        "boundaries-two-samples": (2, 1000, 1000.0, boundaries(2, 1000)),
    }


def kafka_answers(samples: int, window_ms: int, bound: float, events: list) -> list:
    import oracle   # compat/kafka/oracle.py: the Kafka 4.4 jars from Maven Central
    libs = oracle.fetch()
    cp = ":".join(str(p) for p in sorted(libs.glob("*.jar"))
                  if p.name.startswith(("kafka-clients-", "kafka-server-common-", "slf4j-api-")))
    text = "".join("%d %r %d\n" % e for e in events)
    r = subprocess.run(["java", "-cp", cp, str(HERE / "QuotaRate.java"), str(samples), str(window_ms), repr(bound)],
                       input=text, capture_output=True, text=True, check=True)
    out = []
    for line in r.stdout.split("\n"):
        if line.strip():
            th, measured, window = line.split()
            out.append((int(th), None if measured == "NaN" else float(measured), int(window)))
    if len(out) != len(events):
        raise SystemExit("QuotaRate answered %d lines for %d events:\n%s" % (len(out), len(events), r.stderr))
    return out


def write_fixture() -> None:
    data = {}
    for name, (samples, window_ms, bound, events) in scenarios().items():
        answers = kafka_answers(samples, window_ms, bound, events)
        data[name] = {"samples": samples, "window_ms": window_ms, "bound": bound,
                      "events": [list(e) + list(a) for e, a in zip(events, answers)]}
        print("%s: %d events, %d throttled" % (name, len(events), sum(1 for a in answers if a[0] > 0)))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps({"_": "events [time ms, value, check] with Kafka 4.4's answers [throttle ms, "
                                        "measured rate, window ms]: compat/kafka/quota/rate_oracle.py",
                                   **data}, separators=(",", ":")) + "\n")


def simulate(seconds: int = 600, bound: float = MIB) -> None:
    """The long-run rate of a client sending (or fetching) as fast as its throttles allow (1 ms
    gap).  A Produce is appended whatever its throttle; a Fetch over the quota is answered empty
    and its bytes taken back out of the rate (Kafka's unrecordQuotaSensor)."""
    for kind, request in (("produce", 1_000_000), ("produce", 262_144), ("produce", 65_536), ("produce", 16_384),
                          ("fetch", MIB), ("fetch", 65_536)):
        r = Rate(11, 1000)
        t, per_s = 0, [0] * seconds
        while t < seconds * 1000:
            r.record(request, t)
            throttle = r.throttle_ms(bound, t)
            if kind == "fetch" and throttle > 0:
                r.record(-request, t)
            else:
                per_s[t // 1000] += request
            t += throttle + 1
        after = per_s[10:]
        win = [sum(after[i:i + 30]) / 30 / bound for i in range(len(after) - 29)]
        print("%s %7d B: %.3f x quota after the first 10 s; 30 s windows %.3f .. %.3f; first 40 s (KiB): %s"
              % (kind, request, sum(after) / len(after) / bound, min(win), max(win),
                 " ".join(str(n // 1024) for n in per_s[:40])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulate", action="store_true")
    a = ap.parse_args()
    if a.simulate:
        simulate()
    else:
        write_fixture()


if __name__ == "__main__":
    main()
