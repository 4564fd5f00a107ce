"""Admin APIs through aiokafka 0.14 (older, non-flexible versions: CreateTopics/DeleteTopics v3,
CreatePartitions v1, DescribeConfigs v1-2, Metadata v5)."""
import asyncio
import uuid

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType


def _name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_aiokafka_admin_roundtrip(broker):
    t = _name("aio")

    async def scenario():
        a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
        await a.start()
        try:
            r = await a.create_topics([NewTopic(t, 2, 1, topic_configs={"retention.ms": "3333"})])
            created = [(x[0], x[1]) for x in r.topic_errors]
            dup = await a.create_topics([NewTopic(t, 2, 1)])
            dup_err = [x[1] for x in dup.topic_errors]
            topics = await a.list_topics()
            (desc,) = await a.describe_topics([t])
            cp = await a.create_partitions({t: NewPartitions(3)})
            (cfg,) = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
            cluster = await a.describe_cluster()
            d = await a.delete_topics([t])
            after = await a.list_topics()
            return created, dup_err, topics, desc, cp, cfg, cluster, d, after
        finally:
            await a.close()

    created, dup_err, topics, desc, cp, cfg, cluster, d, after = _run(scenario())
    assert created == [(t, 0)]
    assert dup_err == [36]  # TOPIC_ALREADY_EXISTS
    assert t in topics
    assert desc["topic"] == t and len(desc["partitions"]) == 2
    assert [(x[0], x[1]) for x in cp.topic_errors] == [(t, 0)]
    (res,) = cfg.resources
    configs = {c[0]: c[1] for c in res[4]}
    assert res[0] == 0 and configs["retention.ms"] == "3333" and configs["cleanup.policy"] == "delete"
    assert cluster["controller_id"] == 1 and cluster["brokers"][0]["node_id"] == 1
    assert [(x[0], x[1]) for x in d.topic_error_codes] == [(t, 0)]
    assert t not in after
