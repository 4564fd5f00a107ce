"""`pykbroker serve --metrics`: scraped over HTTP after real confluent-kafka traffic."""
from __future__ import annotations

import re
import urllib.request

import pytest

from pykbroker.local.broker_process import BrokerProcess, wait_until

from .session import consume, create_topic, produce

_METRICS = re.compile(r"metrics endpoint on http://([^:\s]+):(\d+)/metrics")


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("metrics")
    # log.flush.interval.messages=1: every append is fsynced, so the flush-time histogram has data
    b = BrokerProcess(str(d / "data"), {"group.initial.rebalance.delay.ms": "0", "log.flush.interval.messages": "1"},
                      extra_args=["--metrics", "127.0.0.1:0", "--log-format", "json"])
    with b:
        m = wait_until(lambda: _METRICS.search(b.log_text()), timeout=30, what="metrics endpoint")
        b.metrics_url = "http://127.0.0.1:%s/metrics" % m.group(2)
        yield b


def scrape(url: str) -> dict:
    """{(name, frozenset(labels)): value} from the Prometheus text format."""
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples, name, **labels):
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def test_metrics_after_produce_and_consume(metrics_broker):
    bootstrap = metrics_broker.bootstrap
    topic = "metrics-t"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, 20)
    got = consume(bootstrap, topic, "metrics-g", 20, commit_upto=15)
    assert [o for o, _, _ in got] == list(range(20))

    s = scrape(metrics_broker.metrics_url)
    # records in: from the batch headers; bytes in: the record batches' sizes (> 20 small records)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 20
    bytes_in = value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert 20 * 10 < bytes_in < 20 * 200
    # the consumer read every record once (maybe re-reading nothing): out >= in
    assert value(s, "pykbroker_server_brokertopicmetrics_messagesout_total", topic=topic) >= 20
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    assert value(s, "kafka_log_log_logendoffset", topic=topic, partition=0) == 20
    assert value(s, "kafka_log_log_logstartoffset", topic=topic, partition=0) == 0
    assert value(s, "pykbroker_cluster_partition_highwatermark", topic=topic, partition=0) == 20
    assert value(s, "kafka_cluster_partition_underreplicated", topic=topic, partition=0) == 0
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    # the group committed 15 of 20
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="metrics-g", topic=topic, partition=0) == 15
    assert value(s, "kafka_consumergroup_lag", consumergroup="metrics-g", topic=topic, partition=0) == 5
    # requests and latency per API
    produce_requests = sum(v for (n, lab), v in s.items()
                           if n == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in lab)
    assert produce_requests >= 1
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="OffsetCommit") >= 1
    # this scrape is no Kafka connection; the clients closed theirs
    assert value(s, "kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT") >= 3
    assert value(s, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") is not None
    assert value(s, "pykbroker_server_up") == 1
    assert value(s, "kafka_log_logflushstats_logflushrateandtimems_count") >= 1
    assert value(s, "kafka_log_logflushstats_logflushrateandtimems_sum") > 0


def test_errors_counted(metrics_broker):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    # an OffsetCommit for a partition that does not exist: UNKNOWN_TOPIC_OR_PART in the answer
    c = Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": "metrics-err",
                  "enable.auto.commit": False})
    try:
        with pytest.raises(KafkaException):
            c.commit(offsets=[TopicPartition("metrics-none", 0, 1)], asynchronous=False)
    finally:
        c.close()
    s = scrape(metrics_broker.metrics_url)
    errs = {dict(lab)["error"]: v for (n, lab), v in s.items()
            if n == "kafka_network_requestmetrics_errors_total" and dict(lab).get("request") == "OffsetCommit"}
    assert errs.get("UNKNOWN_TOPIC_OR_PARTITION", 0) >= 1, errs


def test_json_log_lines(metrics_broker):
    lines = [ln for ln in metrics_broker.lines if ln.startswith("{")]
    assert lines, metrics_broker.log_text()[-2000:]
    import json
    ready = [json.loads(ln) for ln in lines if "ready, listening on" in ln]
    assert ready and set(ready[0]) >= {"time", "level", "logger", "message"}
    assert ready[0]["level"] == "INFO" and ready[0]["logger"] == "pykbroker.broker"
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", ready[0]["time"])
    for ln in lines:
        json.loads(ln)   # every line of the broker's output is one JSON object
    # a line logged while serving a request names it (test_metrics_after_produce_and_consume created the topic)
    created = [json.loads(ln) for ln in lines if "created topic metrics-t " in ln]
    assert created, lines
    assert created[0]["api"] == "CreateTopics" and created[0]["client_id"] == "rdkafka"
    assert re.match(r"127\.0\.0\.1:\d+$", created[0]["connection"])
    assert isinstance(created[0]["correlation_id"], int) and isinstance(created[0]["api_version"], int)


def test_dashboard_uses_only_exported_metrics(metrics_broker):
    """Every series the Grafana dashboard queries is one the broker exports."""
    import json
    from pathlib import Path
    dash = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana-pykbroker.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {re.sub(r"_bucket$", "", n) for e in exprs for n in re.findall(r"\b((?:kafka|pykbroker)_\w+)", e)}
    with urllib.request.urlopen(metrics_broker.metrics_url, timeout=30) as r:
        text = r.read().decode()
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    exported = families | {f + "_total" for f in families}
    assert used and used <= exported, used - exported
