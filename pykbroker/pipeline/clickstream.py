"""``pykbroker pipeline clickstream``: page visits → Spark Structured Streaming → per-site window stats.

Three parts run in one process:

1. **Generator** (a thread, kafka-python producer): page-visit events into the input topic at
   ``--rate`` events/s until ``--events`` or ``--duration`` is reached (or Ctrl-C).  One event is a
   JSON object ``{"type": "visit", "ts": <epoch ms>, "site": ..., "ip": ..., "url": ...}`` keyed by
   site, with the record timestamp equal to ``ts``.  ``ts`` is the wall clock minus up to
   ``--max-lateness`` (out-of-order arrival, always less than the watermark delay, so no visit is
   dropped as late while the cluster is healthy; a partition held up for longer than the
   watermark, e.g. by a leader failover, does make visits late, and the command then reports how
   many rows Spark dropped).  When generation stops, one ``{"type": "tick"}`` event per partition
   carries a timestamp past the last window's end plus the watermark delay: it advances Spark's
   watermark so the final windows close (in a live deployment, later traffic does that).
2. **Spark job** (PySpark, Spark's own ``spark-sql-kafka-0-10`` connector): ``readStream`` from the
   input topic starting at the offsets the topic had when the pipeline started (so a re-run on the
   same cluster aggregates only its own events), watermark ``--watermark`` seconds on the event
   time, tumbling windows of ``--window`` seconds grouped by site: visits and distinct visitors
   (exact: the size of the set of visitor IPs; Spark rejects COUNT(DISTINCT) in streaming
   aggregations).  Append output mode: a row is written once, when its window closes.  Rows go to
   the output topic (key = site, value = JSON ``{"window_start", "window_end", "site", "visits",
   "unique_visitors"}``, times in ISO-8601 UTC) through ``writeStream.format("kafka")``.
3. **Live summary** (a thread, kafka-python consumer on the output topic): prints each closed window
   as it arrives, and a per-site total at the end.

Ticks are filtered out by conditional aggregation (``count(CASE WHEN type = 'visit' ...)``), not by
a filter: Spark's optimizer pushes a filter that does not reference the event-time column below the
watermark operator, and a filtered tick would then no longer advance the watermark.

By default the pipeline starts its own pykbroker (in-process on a trio thread, on a free loopback
port, data in a temporary directory or ``--data-dir``); ``--bootstrap-servers`` points it at any Kafka
cluster instead.  Requires ``pip install '.[pipeline]'`` (in a pykbroker checkout) (PySpark, kafka-python) and Java 17+.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

SITES = [  # (site, weight, pages)
    ("shop.example.com", 5, ["/", "/cart", "/checkout", "/item/1", "/item/2", "/item/3", "/search"]),
    ("news.example.com", 3, ["/", "/world", "/tech", "/sport", "/article/42", "/article/7"]),
    ("docs.example.com", 2, ["/", "/install", "/quickstart", "/api", "/faq"]),
    ("blog.example.com", 1, ["/", "/post/hello", "/post/kafka", "/about"]),
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-servers", help="an existing Kafka cluster (default: start an embedded pykbroker)")
    p.add_argument("--data-dir", help="embedded broker's data directory (default: a temporary one, removed at exit)")
    p.add_argument("--input-topic", default="clickstream-visits")
    p.add_argument("--output-topic", default="clickstream-site-stats")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the topics when created (default 3)")
    p.add_argument("--events", type=int, default=0, help="stop after this many events (0 = no limit)")
    p.add_argument("--rate", type=float, default=50.0, help="events per second (default 50)")
    p.add_argument("--duration", type=float, default=0.0,
                   help="stop generating after this many seconds (0 = no limit; with neither --events "
                        "nor --duration, run until Ctrl-C)")
    p.add_argument("--window", type=int, default=10, help="tumbling window length in seconds (default 10)")
    p.add_argument("--watermark", type=int, default=5, help="watermark delay in seconds (default 5)")
    p.add_argument("--max-lateness", type=float, default=1.0,
                   help="events arrive up to this many seconds out of order (< --watermark; default 1)")
    p.add_argument("--visitors", type=int, default=200, help="size of the visitor IP pool (default 200)")
    p.add_argument("--seed", type=int, default=None, help="random seed for reproducible events")
    p.add_argument("--trigger", type=float, default=1.0, help="micro-batch interval in seconds (default 1)")
    p.add_argument("--checkpoint", help="Spark checkpoint directory (default: a temporary one)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="after generation stops, give up waiting for the last windows after this many seconds")


def _log(msg: str) -> None:
    print("[clickstream] " + msg, flush=True)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S")


def _ensure_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="pykbroker-clickstream")
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(n, partitions, 1) for n in names if n not in existing]
        if new:
            try:
                admin.create_topics(new, timeout_ms=15000)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 15
        parts = c.partitions_for_topic(topic)
        while not parts:
            if time.monotonic() > deadline:
                raise RuntimeError("topic %s has no partitions" % topic)
            time.sleep(0.2)
            parts = c.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        return {tp.partition: off for tp, off in c.end_offsets(tps).items()}
    finally:
        c.close()


class Generator(threading.Thread):
    """Produces page-visit events; ``stats`` counts what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, args: argparse.Namespace) -> None:
        super().__init__(name="clickstream-generator", daemon=True)
        self.bootstrap, self.topic, self.partitions, self.args = bootstrap, topic, partitions, args
        self.stop_event = threading.Event()
        self.produced = 0
        self.last_ts = 0
        self.last_window_end = 0   # set once the closing ticks are written
        self.error: BaseException | None = None
        self.done = threading.Event()

    def events(self) -> Iterator[dict[str, Any]]:
        a = self.args
        rng = random.Random(a.seed)
        weights = [w for _, w, _ in SITES]
        # A visitor pool with a few heavy visitors (Pareto-ish) so distinct < visits.
        pool = ["10.%d.%d.%d" % (rng.randrange(256), rng.randrange(256), rng.randrange(1, 255))
                for _ in range(a.visitors)]
        start = time.monotonic()
        n = 0
        while not self.stop_event.is_set():
            if a.events and n >= a.events:
                return
            if a.duration and time.monotonic() - start >= a.duration:
                return
            due = start + n / a.rate
            delay = due - time.monotonic()
            if delay > 0:
                if self.stop_event.wait(delay):
                    return
            site, _, pages = rng.choices(SITES, weights)[0]
            ip = pool[min(int(rng.paretovariate(1.2)) - 1, len(pool) - 1)] if rng.random() < 0.5 \
                else rng.choice(pool)
            ts = int(time.time() * 1000) - int(rng.random() * a.max_lateness * 1000)
            yield {"type": "visit", "ts": ts, "site": site, "ip": ip, "url": rng.choice(pages)}
            n += 1

    def run(self) -> None:
        from kafka import KafkaProducer

        a = self.args
        try:
            prod = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=20,
                                 client_id="pykbroker-clickstream-generator")
            for ev in self.events():
                prod.send(self.topic, key=ev["site"].encode(), value=json.dumps(ev).encode(),
                          timestamp_ms=ev["ts"])
                self.produced += 1
                self.last_ts = max(self.last_ts, ev["ts"])
            prod.flush(60)
            if self.produced == 0:
                self.last_window_end = 0
                prod.close(10)
                return
            # Close the last window: a tick past its end plus the watermark delay, on every
            # partition (Spark's watermark is global, one would do; all keep it partition-agnostic).
            w = a.window * 1000
            last_end = (self.last_ts // w + 1) * w
            tick_ts = last_end + a.watermark * 1000 + 1000
            for p in range(self.partitions):
                prod.send(self.topic, value=json.dumps({"type": "tick", "ts": tick_ts}).encode(),
                          partition=p, timestamp_ms=tick_ts)
            prod.flush(60)
            prod.close(10)
            self.last_window_end = last_end
        except BaseException as e:   # reported by the main thread
            self.error = e
        finally:
            self.done.set()


class Summary(threading.Thread):
    """Reads the output topic from where it ended at startup; prints each closed window."""

    def __init__(self, bootstrap: str, topic: str, start_offsets: dict[int, int]) -> None:
        super().__init__(name="clickstream-summary", daemon=True)
        self.bootstrap, self.topic, self.start_offsets = bootstrap, topic, start_offsets
        self.rows: list[dict] = []
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        try:
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                              client_id="pykbroker-clickstream-summary")
            tps = [TopicPartition(self.topic, p) for p in self.start_offsets]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, self.start_offsets[tp.partition])
            while not self.stop_event.is_set():
                for _tp, msgs in c.poll(timeout_ms=500).items():
                    for m in msgs:
                        row = json.loads(m.value)
                        self.rows.append(row)
                        print("  window %s → %s  %-18s visits %5d  unique visitors %4d" % (
                            row["window_start"][11:19], row["window_end"][11:19], row["site"],
                            row["visits"], row["unique_visitors"]), flush=True)
            c.close()
        except BaseException as e:
            self.error = e


def build_query(spark: Any, bootstrap: str, args: argparse.Namespace, starting_offsets: dict[int, int],
                checkpoint: str) -> Any:
    from pyspark.sql import functions as F

    schema = "type STRING, ts LONG, site STRING, ip STRING, url STRING"
    events = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", args.input_topic)
              .option("startingOffsets", json.dumps(
                  {args.input_topic: {str(p): o for p, o in starting_offsets.items()}}))
              .load()
              .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
              .select("e.*")
              .withColumn("event_time", F.timestamp_millis("ts")))
    is_visit = F.col("type") == "visit"
    stats = (events.withWatermark("event_time", "%d seconds" % args.watermark)
             .groupBy(F.window("event_time", "%d seconds" % args.window).alias("w"), "site")
             .agg(F.count(F.when(is_visit, 1)).alias("visits"),
                  F.size(F.collect_set(F.when(is_visit, F.col("ip")))).alias("unique_visitors"))
             .where(F.col("visits") > 0))
    out = stats.select(
        F.col("site").cast("binary").alias("key"),
        F.to_json(F.struct(
            F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("window_start"),
            F.date_format("w.end", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("window_end"),
            "site", "visits", "unique_visitors")).alias("value"))
    return (out.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", args.output_topic)
            .option("checkpointLocation", checkpoint)
            .outputMode("append")
            .queryName("clickstream_site_stats")
            .trigger(processingTime="%g seconds" % args.trigger)
            .start())


def _watermark_ms(progress: dict[str, Any] | None) -> int:
    wm = (progress or {}).get("eventTime", {}).get("watermark")
    if not wm:
        return 0
    return int(datetime.strptime(wm, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
               .timestamp() * 1000)


class LateRows:
    """Rows Spark's aggregation dropped as later than the watermark, summed over the query's
    progress reports (each batch counted once).  A visit can only be late when its partition
    stalled for longer than the watermark delay (a leader failover with a short watermark, say):
    the count explains a visit total below what was generated."""

    def __init__(self) -> None:
        self.by_batch: dict[int, int] = {}

    def update(self, query: Any) -> None:
        for prog in query.recentProgress or []:
            ops = prog.get("stateOperators") or []
            self.by_batch[prog.get("batchId", -1)] = sum(op.get("numRowsDroppedByWatermark", 0) for op in ops)

    @property
    def total(self) -> int:
        return sum(self.by_batch.values())


def run(args: argparse.Namespace) -> int:
    if args.max_lateness >= args.watermark:
        print("pykbroker: --max-lateness must be less than --watermark", file=sys.stderr)
        return 2
    if args.rate <= 0:
        print("pykbroker: --rate must be positive", file=sys.stderr)
        return 2
    try:
        import kafka  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        print("pykbroker: the pipeline needs the 'pipeline' extra (pip install '.[pipeline]' in a pykbroker checkout): %s"
              % e, file=sys.stderr)
        return 2

    broker = None
    tmp = tempfile.mkdtemp(prefix="pykbroker-clickstream-")
    try:
        bootstrap = args.bootstrap_servers
        if not bootstrap:
            # In-process rather than a child process so that Ctrl-C in a terminal (SIGINT to the
            # whole foreground process group) reaches only the pipeline: it can then stop
            # generating, close the last windows and only afterwards stop the broker.  (PySpark's
            # JVM ignores SIGINT for the same reason.)
            from ..embedded import Broker

            data_dir = args.data_dir or os.path.join(tmp, "broker-data")
            broker = Broker(log_dir=data_dir).start()
            bootstrap = broker.bootstrap_servers
            _log("embedded pykbroker on %s (data in %s)" % (bootstrap, data_dir))
        else:
            _log("using cluster %s" % bootstrap)
        return _run(args, bootstrap, tmp)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args: argparse.Namespace, bootstrap: str, tmp: str) -> int:
    from .spark import build_session

    _ensure_topics(bootstrap, [args.input_topic, args.output_topic], args.partitions)
    in_start = _end_offsets(bootstrap, args.input_topic)
    out_start = _end_offsets(bootstrap, args.output_topic)

    _log("starting Spark (%s) with the Kafka connector" % args.master)
    spark = build_session("pykbroker-clickstream", master=args.master)
    # PySpark's SIGINT handler cancels every running Spark job (the current micro-batch would fail
    # the query); Ctrl-C should instead stop the generator and let the last windows close.  The
    # first Ctrl-C only sets a flag: a KeyboardInterrupt raised in the middle of a Py4J call
    # (query.exception(), lastProgress) would leave its answer unread on the gateway socket and
    # the next call waiting forever.  A second Ctrl-C interrupts at once.
    interrupted = threading.Event()
    if threading.current_thread() is threading.main_thread():
        def on_sigint(signum: int, frame: object) -> None:
            interrupted.set()
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGINT, on_sigint)
    checkpoint = args.checkpoint or os.path.join(tmp, "checkpoint")
    query = build_query(spark, bootstrap, args, in_start, checkpoint)
    summary = Summary(bootstrap, args.output_topic, out_start)
    summary.start()
    gen = Generator(bootstrap, args.input_topic, len(in_start), args)
    _log("generating page visits into %r at %g/s; %ds windows, %ds watermark; stats into %r"
         % (args.input_topic, args.rate, args.window, args.watermark, args.output_topic))
    gen.start()
    late = LateRows()
    rc = 0
    try:
        while not gen.done.wait(0.5):
            if interrupted.is_set():
                _log("interrupted: stopping the generator, closing the last windows")
                gen.stop_event.set()
                gen.done.wait(60)
                break
            late.update(query)
            if query.exception() is not None:
                break
        if gen.error is not None:
            raise gen.error
        if query.exception() is None:
            _log("generated %d events; waiting for the windows up to %s to close"
                 % (gen.produced, _iso(gen.last_window_end)))
            deadline = time.monotonic() + args.timeout
            # A progress report whose watermark has passed the last window's end comes from a
            # batch that already wrote every window up to there (append mode emits on eviction).
            while _watermark_ms(query.lastProgress) < gen.last_window_end:
                late.update(query)
                if query.exception() is not None:
                    break
                if time.monotonic() > deadline:
                    _log("timed out waiting for the last windows to close")
                    rc = 1
                    break
                time.sleep(0.25)
        if query.exception() is not None:
            _log("the Spark query failed: %s" % query.exception())
            rc = 1
        # Let the summary reader catch up with everything the query wrote.
        out_end = _end_offsets(bootstrap, args.output_topic)
        deadline = time.monotonic() + 30
        expected = sum(out_end[p] - out_start.get(p, 0) for p in out_end)
        while len(summary.rows) < expected and time.monotonic() < deadline and summary.is_alive():
            time.sleep(0.1)
    finally:
        late.update(query)
        summary.stop_event.set()
        gen.stop_event.set()
        if query.isActive:
            query.stop()
        summary.join(10)
        spark.stop()

    totals: dict[str, list[int]] = {}
    for r in summary.rows:
        t = totals.setdefault(r["site"], [0, 0])
        t[0] += r["visits"]
        t[1] += 1
    _log("done: %d events generated, %d window aggregates written to %r"
         % (gen.produced, len(summary.rows), args.output_topic))
    for site, (visits, windows) in sorted(totals.items()):
        print("  %-18s visits %6d in %d windows" % (site, visits, windows), flush=True)
    if summary.error is not None:
        _log("summary reader failed: %r" % summary.error)
        rc = 1
    if rc == 0 and sum(v for v, _ in totals.values()) != gen.produced:
        _log("the aggregates count %d visits, %d were generated%s"
             % (sum(v for v, _ in totals.values()), gen.produced,
                "; Spark dropped %d row(s) as later than the %ds watermark" % (late.total, args.watermark)
                if late.total else ""))
        rc = 1
    return rc
