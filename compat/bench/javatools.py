"""Apache Kafka's own load generators (org.apache.kafka.tools from the kafka-tools artifact).

``fetch()`` copies kafka-tools and its runtime dependencies from Maven Central (through
``compat/bench/pom.xml``, offline first as compat/kafka/oracle.py does) into
``~/.cache/pykbroker/kafka-tools-<version>/libs``.  The three runners start one JVM each and
parse the tool's own summary line:

* ``ProducerPerformance``: records/s and the producer's send-to-ack latency p50/p99/p99.9 (ms);
* ``ConsumerPerformance``: the fetch phase's records/s (its ``fetch.nMsg.sec``: the group join
  is excluded, pykbroker and Kafka both coordinate the group but that is not throughput);
* ``EndToEndLatency``: one record at a time, produced then consumed back by a tailing consumer;
  p50/p99/p99.9 in whole milliseconds as the tool prints them.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
CACHE_ROOT = Path(os.environ.get("PYKBROKER_CACHE", Path.home() / ".cache" / "pykbroker"))

# The tools are clients; a small heap as kafka-run-class.sh gives them (256 MiB) is too small for
# 1,000-partition producers, 512 MiB is enough.  Logging at WARN: INFO lines are noise here.
CLIENT_JVM = ["-Xmx512m", "-XX:+UseG1GC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
              "-Djava.awt.headless=true"]


class ToolsUnavailable(RuntimeError):
    pass


def tools_version() -> str:
    m = re.search(r"<kafka\.tools\.version>([^<]+)<", POM.read_text())
    return m.group(1).strip()


def fetch() -> Path:
    version = tools_version()
    if shutil.which("java") is None or shutil.which("mvn") is None:
        raise ToolsUnavailable("Kafka's performance tools need java and mvn on PATH")
    root = CACHE_ROOT / ("kafka-tools-%s" % version)
    libs, stamp = root / "libs", root / ".complete"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return libs
        if libs.exists():
            shutil.rmtree(libs)
        cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM), "dependency:copy-dependencies",
               "-DincludeScope=runtime", "-DoutputDirectory=%s" % libs]
        r = subprocess.run(cmd[:1] + ["-o"] + cmd[1:], capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not (libs / ("kafka-tools-%s.jar" % version)).exists():
            raise ToolsUnavailable("could not fetch kafka-tools %s:\n%s\n%s" % (version, r.stdout[-3000:], r.stderr[-3000:]))
        stamp.write_text(version + "\n")
    return libs


def classpath() -> str:
    return os.pathsep.join(str(p) for p in sorted(fetch().glob("*.jar")))


def java_cmd(main: str, args: list, prefix=()) -> list:
    return list(prefix) + ["java"] + CLIENT_JVM + ["-cp", classpath(), "org.apache.kafka.tools." + main] + [str(a) for a in args]


_PP = re.compile(r"(\d+) (?:steady state )?records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                 r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def producer_perf_cmd(bootstrap, topic, records, size, acks="1", compression="none", linger_ms=5,
                      rate=-1, batch_size=65536, prefix=()) -> list:
    # The first fifth warms the JVM up (JIT, metadata, connections): --warmup-records makes the
    # tool print a second, steady-state summary, which parse_producer_perf takes.
    warm = ["--warmup-records", records // 5] if records >= 1000 else []
    return java_cmd("ProducerPerformance", warm + [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
        "--record-size", size, "--throughput", int(rate) if rate and rate > 0 else -1,
        "--command-property", "acks=%s" % acks, "linger.ms=%d" % linger_ms,
        "batch.size=%d" % batch_size, "compression.type=%s" % compression,
        "buffer.memory=67108864"], prefix)


def parse_producer_perf(out: str, size: int) -> dict:
    ms = _PP.findall(out)
    if not ms:
        raise RuntimeError("ProducerPerformance printed no summary:\n" + out[-3000:])
    n, rec_s, _mib_s, avg, mx, p50, p95, p99, p999 = ms[-1]
    return {"records": int(n), "rec_s": float(rec_s), "mb_s": float(rec_s) * size / 1e6,
            "bytes": int(n) * size,
            "ack": {"p50_ms": float(p50), "p99_ms": float(p99), "p999_ms": float(p999), "avg_ms": float(avg)}}


def consumer_perf_cmd(bootstrap, topic, records, prefix=()) -> list:
    return java_cmd("ConsumerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
        "--timeout", 60000, "--hide-header"], prefix)


def parse_consumer_perf(out: str) -> dict:
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    for line in reversed(out.strip().splitlines()):
        f = [x.strip() for x in line.split(",")]
        if len(f) >= 10:
            try:
                mib, n, fetch_ms = float(f[2]), int(f[4]), float(f[7])
            except ValueError:
                continue
            secs = max(fetch_ms / 1000.0, 1e-6)
            nbytes = mib * 1024 * 1024   # the tool counts in MiB
            return {"records": n, "bytes": nbytes, "seconds": secs, "rec_s": n / secs, "mb_s": nbytes / secs / 1e6}
    raise RuntimeError("ConsumerPerformance printed no summary:\n" + out[-3000:])


def e2e_cmd(bootstrap, topic, records, acks, size, prefix=()) -> list:
    return java_cmd("EndToEndLatency", ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
                                         "--producer-acks", acks, "--record-size", size], prefix)


def parse_e2e(out: str) -> dict:
    m = re.search(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)", out)
    a = re.search(r"Avg latency: ([\d.]+) ms", out)
    if not m:
        raise RuntimeError("EndToEndLatency printed no percentiles:\n" + out[-3000:])
    return {"e2e": {"p50_ms": float(m.group(1)), "p99_ms": float(m.group(2)), "p999_ms": float(m.group(3)),
                    "avg_ms": float(a.group(1)) if a else None}}
