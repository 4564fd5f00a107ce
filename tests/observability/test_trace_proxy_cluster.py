"""`pykbroker trace proxy` in front of a 3-broker cluster (ZooKeeper + 3 `pykbroker serve`): one
listener per broker, every broker address the clients are told rewritten to its listener, so an
admin client, a producer and a consumer (confluent-kafka) do everything through the proxy and
every exchange is in the trace, named by the broker it went to."""
from __future__ import annotations

import json

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.client_brokers import three_brokers

from .test_trace import Proxy

TOPIC = "proxied"


def test_a_cluster_behind_the_proxy_is_reached_only_through_it(tmp_path_factory, tmp_path):
    out = tmp_path / "cluster.jsonl"
    with three_brokers(tmp_path_factory, "proxy-cluster") as c:
        upstreams = c.bootstrap_servers.split(",")
        proxy = Proxy(c.bootstrap_servers, str(out))
        try:
            admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 3, 1)], operation_timeout=30)[TOPIC].result(60)
            md = None
            for _ in range(100):
                md = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
                if md is not None and md.error is None and len(md.partitions) == 3 and \
                        all(p.leader >= 0 for p in md.partitions.values()):
                    break
            assert md is not None
            leaders = {p.id: p.leader for p in md.partitions.values()}
            p = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": True, "linger.ms": 5})
            sent = {part: ["v%d-%d" % (part, i) for i in range(10)] for part in range(3)}
            for part, values in sent.items():
                for v in values:
                    p.produce(TOPIC, v.encode(), partition=part)
            assert p.flush(60) == 0
            cons = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "proxied-g",
                             "enable.auto.commit": False})
            cons.assign([TopicPartition(TOPIC, part, 0) for part in range(3)])
            got: dict = {part: [] for part in range(3)}
            for _ in range(120):
                for m in cons.consume(100, 0.5):
                    if m.error() is None:
                        got[m.partition()].append(m.value().decode())
                if sum(len(v) for v in got.values()) >= 30:
                    break
            cons.close()
        finally:
            proxy.stop()
        # the brokers' own addresses, asked of them directly
        direct = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(timeout=30).brokers
        brokers_by_id = {n: "%s:%d" % (b.host, b.port) for n, b in direct.items()}

    assert got == sent   # every record read back, in order, through the proxy
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # every broker address a client was told is one of the proxy's three listeners, never a broker
    told = set()
    for line in lines:
        if line["api"] in ("Metadata", "DescribeCluster") and line["response"]:
            told |= {(b["host"], b["port"]) for b in line["response"]["brokers"]}
        if line["api"] == "FindCoordinator" and line["response"]:
            told |= {(x["host"], x["port"]) for x in line["response"].get("coordinators") or () if x.get("host")}
    assert len({port for _h, port in told}) == 3, told
    assert ("127.0.0.1", proxy.port) in told
    assert not {"%s:%d" % t for t in told} & set(upstreams)
    # the produce went to each partition's leader, through that broker's listener
    produced_to = {line["broker"] for line in lines if line["api"] == "Produce"}
    assert len(produced_to) == len(set(leaders.values())) and produced_to <= set(upstreams)
    assert {line["broker"] for line in lines} == set(upstreams)   # every line says which broker
    assert produced_to == {brokers_by_id[n] for n in leaders.values()}
