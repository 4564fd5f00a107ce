"""Prometheus metrics (``pykbroker serve --metrics HOST:PORT``), with the ``prometheus_client`` library.

Names follow what the Prometheus JMX exporter makes of Kafka's MBeans (its example Kafka rules:
``kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec, topic=T>`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}``), so dashboards built for Apache
Kafka find the same series.  Where Kafka has no MBean the name says ``pykbroker_``; consumer
group lag uses kafka_exporter's names (the usual source of lag series next to a Kafka).

Counted per request / per batch (``request_done``, on the broker's trio thread; never per record):

- ``kafka_server_brokertopicmetrics_bytesin_total{topic}``: record bytes of Produce requests
  appended (partitions answered with NONE), as Kafka's BytesInPerSec.
- ``kafka_server_brokertopicmetrics_messagesin_total{topic}``: records appended, from each
  batch header's ``recordsCount`` (MessagesInPerSec).
- ``kafka_server_brokertopicmetrics_bytesout_total{topic}``: record bytes sent to consumers
  (BytesOutPerSec; follower fetches excluded, as Kafka counts them as replication).
- ``pykbroker_server_brokertopicmetrics_messagesout_total{topic}``: records sent to consumers,
  from the header of each whole batch in the response (Kafka has no such MBean); a batch read
  from a file costs one 61-byte ``pread`` while metrics are on.
- ``kafka_server_brokertopicmetrics_replicationbytesout_total{topic}``: record bytes sent to followers.
- ``kafka_network_requestmetrics_requests_total{request,version}`` (RequestsPerSec).
- ``kafka_network_requestmetrics_errors_total{request,error}`` (ErrorsPerSec): each error code
  other than NONE in the response (top level and per partition), ``UNKNOWN_SERVER_ERROR`` when
  the handler raised.  Kafka also counts NONE; we do not (it would be a second requests counter).
- ``kafka_network_requestmetrics_totaltimems{request}``: histogram, ms from the request's
  dispatch to its answer written (TotalTimeMs; the JMX exporter shows it as quantiles, here
  buckets).
- ``kafka_log_logflushstats_logflushrateandtimems``: histogram, ms per log fsync (LogFlushRateAndTimeMs).
- ``kafka_server_socket_server_metrics_connection_creation_total{listener}``.

Computed at scrape time from the owners' state (``BrokerCollector``; the scrape runs on the
broker's trio thread, so it reads the state as its owners left it between two awaits):

- ``kafka_log_log_logstartoffset{topic,partition}``, ``kafka_log_log_logendoffset{topic,partition}``,
  ``kafka_log_log_size{topic,partition}`` (bytes): every local replica.
- ``pykbroker_cluster_partition_highwatermark{topic,partition}``, and
  ``kafka_cluster_partition_laststableoffsetlag{topic,partition}``: partitions led here.
- ``kafka_cluster_partition_underreplicated{topic,partition}`` (1 if the ISR is smaller than the
  replica set), ``kafka_cluster_partition_insyncreplicascount``, ``kafka_cluster_partition_replicascount``:
  partitions led here; ``kafka_server_replicamanager_underreplicatedpartitions``,
  ``kafka_server_replicamanager_partitioncount``, ``kafka_server_replicamanager_leadercount``.
- ``kafka_consumergroup_current_offset{consumergroup,topic,partition}`` (committed offset) and
  ``kafka_consumergroup_lag{consumergroup,topic,partition}`` = high watermark - committed offset
  (what the group has yet to read; the high watermark is the end a consumer can read, as
  ListOffsets latest answers): groups coordinated here, partitions led here.
- ``kafka_server_socket_server_metrics_connection_count{listener}``: open connections.
- ``kafka_server_socket_server_metrics_{successful,failed}_{authentication,reauthentication}_total
  {listener,mechanism}``: SASL authentications (security/stats.py; Kafka counts per listener only).
- ``pykbroker_server_up`` 1 while a broker runs (0 between a crash and a restart).
- Client quotas (quota/manager.py), per quota sensor (``user``, ``client_id``: the entity the
  quota applies to, "" for a level it does not name), as Kafka's ``kafka.server:type=Produce|Fetch,
  user=..,client-id=..`` MBeans: ``kafka_server_produce_byte_rate`` / ``kafka_server_fetch_byte_rate``
  (bytes/s over the quota window), ``kafka_server_produce_throttle_time`` /
  ``kafka_server_fetch_throttle_time`` (average throttle ms over the window); for
  ``request_percentage`` (``type=Request``) ``kafka_server_request_request_time`` (percent of the
  loop over the window), ``kafka_server_request_throttle_time`` and
  ``kafka_server_request_exempt_request_time``; and
  ``pykbroker_server_quota_throttled_requests_total{quota}`` (answers that carried a throttle).
"""
from __future__ import annotations

import logging
import os
import struct
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

import trio

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: F401

from ..protocol.codec import Chunks
from ..protocol.errors import ErrorCode
from .observer import RequestObserver, api_name

if TYPE_CHECKING:
    from ..quota.manager import ClientQuotaManager
    from ..security.stats import AuthenticationStats
    from ..server.connection import Connection
    from ..server.dispatch import HandleRequest

    # () -> the running broker's (ReplicaManager, GroupCoordinator or None), or None while none runs
    Owners = Callable[[], Optional[tuple[Any, Any]]]

log = logging.getLogger("pykbroker.metrics")

PRODUCE, FETCH = 0, 1
_BATCH_HEADER = 61          # magic v2 header size: recordsCount ends at byte 61
_LEN_COUNT = struct.Struct(">i")

# Request latency buckets in ms: from sub-millisecond answers to long-polling fetches (Kafka's
# fetch.max.wait.ms default 500 ms, consumer fetch waits up to the request timeout).
_LATENCY_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_FLUSH_MS = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def count_records(records: Any) -> tuple[int, int]:
    """(bytes, records) of a records value: ``bytes``/``memoryview``, or ``Chunks`` of bytes and
    file regions.  Records come from each whole batch's header (per batch, never per record)."""
    if records is None:
        return 0, 0
    if isinstance(records, Chunks):
        n = 0
        for part in records.parts:
            if hasattr(part, "fd"):
                n += _count_region(part.fd, part.position, part.length)
            else:
                n += _count_buffer(part)
        return len(records), n
    return len(records), _count_buffer(records)


def _count_buffer(buf: bytes | memoryview) -> int:
    n, pos, end = 0, 0, len(buf)
    while pos + _BATCH_HEADER <= end:
        size = 12 + _LEN_COUNT.unpack_from(buf, pos + 8)[0]
        if size < _BATCH_HEADER or pos + size > end:
            break   # a partial batch at the end of a fetch response is not counted (not delivered)
        n += _LEN_COUNT.unpack_from(buf, pos + 57)[0]
        pos += size
    return n


def _count_region(fd: int, position: int, length: int) -> int:
    n, pos = 0, 0
    while pos + _BATCH_HEADER <= length:
        head = os.pread(fd, _BATCH_HEADER, position + pos)
        if len(head) < _BATCH_HEADER:
            break
        size = 12 + _LEN_COUNT.unpack_from(head, 8)[0]
        if size < _BATCH_HEADER or pos + size > length:
            break
        n += _LEN_COUNT.unpack_from(head, 57)[0]
        pos += size
    return n


class BrokerMetrics(RequestObserver):
    """The request observer that counts, and the registry it exposes.  ``owners()`` returns the
    running broker's ``(replica_manager, group_coordinator)`` or ``None`` while none runs; the
    collector reads them at scrape time."""

    def __init__(self, owners: Owners, auth_stats: Callable[[], AuthenticationStats | None] | None = None,
                 quotas: Callable[[], ClientQuotaManager | None] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin", "Record bytes appended by Produce",
                                ["topic"], registry=r)
        self.messages_in = Counter("kafka_server_brokertopicmetrics_messagesin", "Records appended by Produce",
                                   ["topic"], registry=r)
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytesout", "Record bytes sent to consumers",
                                 ["topic"], registry=r)
        self.messages_out = Counter("pykbroker_server_brokertopicmetrics_messagesout",
                                    "Records sent to consumers (whole batches)", ["topic"], registry=r)
        self.replication_bytes_out = Counter("kafka_server_brokertopicmetrics_replicationbytesout",
                                             "Record bytes sent to followers", ["topic"], registry=r)
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests answered",
                                ["request", "version"], registry=r)
        self.errors = Counter("kafka_network_requestmetrics_errors", "Error codes (not NONE) in responses",
                              ["request", "error"], registry=r)
        self.total_time = Histogram("kafka_network_requestmetrics_totaltimems",
                                    "Request time from dispatch to answer written, ms", ["request"],
                                    buckets=_LATENCY_MS, registry=r)
        self.flush_time = Histogram("kafka_log_logflushstats_logflushrateandtimems", "Log fsync time, ms",
                                    buckets=_FLUSH_MS, registry=r)
        self.connections_created = Counter("kafka_server_socket_server_metrics_connection_creation",
                                           "Connections accepted", ["listener"], registry=r)
        self.open_connections: dict[str, int] = {}
        r.register(BrokerCollector(owners, self.open_connections, auth_stats, quotas))
        self._owners = owners

    # -- the observer interface (observer.py) -------------------------------------------------
    def connection_opened(self, conn: Connection) -> None:
        name = conn.listener_name
        self.open_connections[name] = self.open_connections.get(name, 0) + 1
        self.connections_created.labels(name).inc()

    def connection_closed(self, conn: Connection) -> None:
        self.open_connections[conn.listener_name] -= 1

    def observe_flush(self, seconds: float) -> None:
        self.flush_time.observe(seconds * 1000.0)

    def request_done(self, conn: Connection, event: HandleRequest, response: dict[str, Any] | None,
                     parts: list[Any] | None, error: BaseException | None, t0: float, t1: float,
                     t2: float) -> None:
        ctx, name = event.ctx, api_name(event.spec)
        self.requests.labels(name, str(ctx.api_version)).inc()
        self.total_time.labels(name).observe((t2 - t0) * 1000.0)
        if error is not None:
            code = getattr(error, "code", None)
            self.errors.labels(name, _error_name(int(code)) if code is not None else "UNKNOWN_SERVER_ERROR").inc()
        if not isinstance(response, dict):
            if ctx.api_key == PRODUCE and error is None and event.request.get("acks") == 0:
                self._produced(event.request, None)   # acks=0: no answer to read the outcome from
            return
        code = response.get("error_code")
        if code:
            self.errors.labels(name, _error_name(code)).inc()
        if ctx.api_key == PRODUCE:
            self._produced(event.request, response)
        elif ctx.api_key == FETCH:
            self._fetched(event.request, response)
        else:
            self._count_partition_errors(name, response)

    # -- per request, per partition, per batch ------------------------------------------------
    def _produced(self, request: dict[str, Any], response: dict[str, Any] | None) -> None:
        failed = set()
        if response is not None:
            for t in response.get("responses", ()):
                for p in t["partition_responses"]:
                    if p["error_code"]:
                        failed.add((t["name"], p["index"]))
                        self.errors.labels("Produce", _error_name(p["error_code"])).inc()
        for t in request["topic_data"]:
            topic = t["name"]
            size = count = 0
            for p in t["partition_data"]:
                if (topic, p["index"]) in failed:
                    continue
                b, n = count_records(p["records"])
                size += b
                count += n
            if size:
                self.bytes_in.labels(topic).inc(size)
                self.messages_in.labels(topic).inc(count)

    def _topic_name(self, t: dict[str, Any]) -> str:
        """A Fetch answer's topic: by name (v0-12) or by topic id (v13+, resolved through the
        broker's metadata; "unknown" for an id it does not know)."""
        if t.get("topic"):
            return t["topic"]
        owners = self._owners()
        tid = t.get("topic_id")
        md = getattr(owners[0], "metadata", None) if owners is not None else None
        name = md.name_of(bytes(tid)) if md is not None and tid else None
        return name or "unknown"

    def _fetched(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        # a follower: replica_id up to v14, replica_state.replica_id from v15
        state = request.get("replica_state") or {}
        replica = request.get("replica_id", -1) >= 0 or state.get("replica_id", -1) >= 0
        for t in response.get("responses", ()):
            size = count = 0
            for p in t["partitions"]:
                if p["error_code"]:
                    self.errors.labels("Fetch", _error_name(p["error_code"])).inc()
                recs = p.get("records")
                if recs is None or not len(recs):
                    continue
                if replica:
                    size += len(recs)
                else:
                    b, n = count_records(recs)
                    size += b
                    count += n
            if size:
                topic = self._topic_name(t)
                if replica:
                    self.replication_bytes_out.labels(topic).inc(size)
                else:
                    self.bytes_out.labels(topic).inc(size)
                    self.messages_out.labels(topic).inc(count)

    def _count_partition_errors(self, name: str, response: dict[str, Any]) -> None:
        # The common shapes of per-item errors (topics -> partitions, or a list of results):
        # enough for the error counter, without a walk of every possible field.
        for key in ("topics", "responses", "results", "groups", "coordinators"):
            items = response.get(key)
            if not isinstance(items, list):
                continue
            for it in items:
                if not isinstance(it, dict):
                    continue
                if it.get("error_code"):
                    self.errors.labels(name, _error_name(it["error_code"])).inc()
                for pkey in ("partitions", "partition_responses"):
                    for p in it.get(pkey) or ():
                        if isinstance(p, dict) and p.get("error_code"):
                            self.errors.labels(name, _error_name(p["error_code"])).inc()


class BrokerCollector:
    """Gauges computed at scrape time from the state of its owners (ReplicaManager's partitions,
    the GroupCoordinator's committed offsets)."""

    def __init__(self, owners: Owners, open_connections: dict[str, int],
                 auth_stats: Callable[[], AuthenticationStats | None] | None = None,
                 quotas: Callable[[], ClientQuotaManager | None] | None = None) -> None:
        self.owners = owners
        self.open_connections = open_connections
        self.auth_stats = auth_stats   # () -> security/stats.AuthenticationStats or None
        self.quotas = quotas           # () -> quota/manager.ClientQuotaManager or None

    def describe(self) -> list[Any]:
        return []   # computed series: nothing to check at registration

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily("pykbroker_server_up", "1 while a broker runs")
        conns = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open connections",
                                  labels=["listener"])
        for name, n in sorted(self.open_connections.items()):
            conns.add_metric([name], n)
        owners = self.owners()
        up.add_metric([], 1 if owners is not None else 0)
        yield up
        yield conns
        q = self.quotas() if self.quotas is not None else None
        if q is not None:
            yield from quota_metrics(q)
        stats = self.auth_stats() if self.auth_stats is not None else None
        if stats is not None:
            from ..security.stats import KINDS
            for kind in KINDS:
                fam = CounterMetricFamily("kafka_server_socket_server_metrics_%s" % kind,
                                          kind.replace("_", " ").capitalize() + "s",
                                          labels=["listener", "mechanism"])
                for (k, listener, mech), n in sorted(stats.counts.items()):
                    if k == kind:
                        fam.add_metric([listener, mech], n)
                yield fam
        if owners is None:
            return
        rm, gc = owners
        tp = ["topic", "partition"]
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=tp)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=tp)
        size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes", labels=tp)
        hwm = GaugeMetricFamily("pykbroker_cluster_partition_highwatermark", "High watermark (leader)", labels=tp)
        lso_lag = GaugeMetricFamily("kafka_cluster_partition_laststableoffsetlag",
                                    "High watermark - last stable offset (leader)", labels=tp)
        urp = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                "1 if the ISR is smaller than the replica set (leader)", labels=tp)
        isr_n = GaugeMetricFamily("kafka_cluster_partition_insyncreplicascount", "ISR size (leader)", labels=tp)
        rep_n = GaugeMetricFamily("kafka_cluster_partition_replicascount", "Replica count (leader)", labels=tp)
        hw_of = {}
        n_parts = n_leaders = n_urp = 0
        for (topic, p), part in list(rm.partitions.items()):
            labels = [topic, str(p)]
            try:
                lg = part.log
                start.add_metric(labels, part.log_start_offset)
                end.add_metric(labels, part.log_end_offset)
                size.add_metric(labels, lg.size_in_bytes)
            except Exception:   # a log taken offline meanwhile: no series for it
                continue
            n_parts += 1
            if not part.is_leader:
                continue
            n_leaders += 1
            hw = part.high_watermark
            hw_of[(topic, p)] = hw
            hwm.add_metric(labels, hw)
            lso_lag.add_metric(labels, hw - part.last_stable_offset)
            replicas = len(part.replicas) or 1
            isr = len(part.isr) or 1
            under = 1 if isr < replicas else 0
            n_urp += under
            urp.add_metric(labels, under)
            isr_n.add_metric(labels, isr)
            rep_n.add_metric(labels, replicas)
        yield from (start, end, size, hwm, lso_lag, urp, isr_n, rep_n)
        for name, help_, v in (
                ("kafka_server_replicamanager_underreplicatedpartitions", "Under-replicated partitions led here", n_urp),
                ("kafka_server_replicamanager_partitioncount", "Local replicas", n_parts),
                ("kafka_server_replicamanager_leadercount", "Partitions led here", n_leaders)):
            g = GaugeMetricFamily(name, help_)
            g.add_metric([], v)
            yield g
        gl = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset", labels=gl)
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark - committed offset", labels=gl)
        if gc is not None:
            for group, offsets in list(gc.offsets.items()):
                for (topic, p), om in list(offsets.items()):
                    labels = [group, topic, str(p)]
                    current.add_metric(labels, om.offset)
                    hw = hw_of.get((topic, p))
                    if hw is not None and om.offset >= 0:
                        lag.add_metric(labels, max(0, hw - om.offset))
        yield current
        yield lag


def quota_metrics(q: ClientQuotaManager) -> Iterator[Any]:
    """The client-quota series of one ClientQuotaManager (module docstring)."""
    try:
        now_ms = int(trio.current_time() * 1000)   # the quotas' clock: the broker's trio clock
    except RuntimeError:   # outside the broker's loop (an embedded broker read from a test)
        import time
        now_ms = int(time.perf_counter() * 1000)
    labels = ["user", "client_id"]
    fams = {}
    for qtype in ("Produce", "Fetch"):
        low = qtype.lower()
        fams[qtype] = (GaugeMetricFamily("kafka_server_%s_byte_rate" % low, "%s bytes/s of a client quota" % qtype,
                                         labels=labels),
                       GaugeMetricFamily("kafka_server_%s_throttle_time" % low,
                                         "Average %s throttle time (ms) of a client quota" % qtype, labels=labels))
    # Kafka's kafka.server:type=Request request-time (percent of a thread) and throttle-time
    fams["Request"] = (GaugeMetricFamily("kafka_server_request_request_time",
                                         "Request time of a request_percentage quota (percent of the loop)",
                                         labels=labels),
                       GaugeMetricFamily("kafka_server_request_throttle_time",
                                         "Average Request throttle time (ms) of a client quota", labels=labels))
    for qtype, user, client, rate, avg in q.metrics(now_ms):
        rate_f, thr_f = fams[qtype]
        rate_f.add_metric([user, client], rate)
        thr_f.add_metric([user, client], avg)
    for rate_f, thr_f in fams.values():
        yield rate_f
        yield thr_f
    if q.request_enabled:
        exempt = GaugeMetricFamily("kafka_server_request_exempt_request_time",
                                   "Request time of requests exempt from request quotas (percent of the loop)")
        exempt.add_metric([], q.exempt.measure(now_ms))
        yield exempt
    total = CounterMetricFamily("pykbroker_server_quota_throttled_requests", "Answers that carried a quota throttle",
                                labels=["quota"])
    for qtype, n in sorted(q.throttled_requests.items()):
        total.add_metric([qtype], n)
    yield total


async def serve_metrics(metrics: BrokerMetrics, host: str, port: int,
                        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """A minimal HTTP/1.0 server for ``GET /metrics`` (Prometheus' text format) on the broker's
    trio loop, so the collector reads the owners' state on their own thread.  One request per
    connection (``Connection: close``); anything but GET answers 405, other paths 404."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    task_status.started(listeners[0].socket.getsockname()[1])

    async def handle(stream: trio.SocketStream) -> None:
        try:
            data = b""
            with trio.move_on_after(10):   # a scraper that sends no request line is dropped
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
            line = data.split(b"\r\n", 1)[0].split()
            if len(line) < 2:
                return
            method, path = line[0], line[1].split(b"?", 1)[0]
            ctype = "text/plain; charset=utf-8"
            if method != b"GET":
                status, body = "405 Method Not Allowed", b"GET only\n"
            elif path in (b"/metrics", b"/"):
                status, body = "200 OK", generate_latest(metrics.registry)
                ctype = "text/plain; version=0.0.4; charset=utf-8"
            else:
                status, body = "404 Not Found", b"see /metrics\n"
            head = ("HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                    % (status, ctype, len(body))).encode()
            await stream.send_all(head + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            await stream.aclose()

    await trio.serve_listeners(handle, listeners)
