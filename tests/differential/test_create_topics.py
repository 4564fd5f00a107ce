"""CreateTopics v2-7: success shape (v5+ partitions, replication factor and configs; v7 topic id),
and the error code and message for every kind of bad request."""
import pytest

from .helpers import ZERO_UUID, call, explain, wait_for_topic

VERSIONS = [2, 3, 4, 5, 6, 7]


def topic(name, partitions=1, rf=1, configs=None, assignments=None):
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": assignments or [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def create(t, version, topics, validate_only=False):
    r = call(t, 19, version, {"topics": topics, "timeout_ms": 15000, "validate_only": validate_only})
    out = []
    for tp in r["topics"]:
        tp = dict(tp)
        tp["topic_id"] = "<zero>" if tp["topic_id"] == ZERO_UUID else "<uuid>"
        if tp.get("configs"):
            tp["configs"] = sorted(((c["name"], c["value"], c["read_only"], c["config_source"], c["is_sensitive"])
                                    for c in tp["configs"]))
        out.append(tp)
    return out


def short_configs(res):
    """Entries as returned, without configs (compared by their own test)."""
    return [{k: v for k, v in tp.items() if k != "configs"} for tp in res]


@pytest.mark.parametrize("version", VERSIONS)
def test_create_ok(both, version):
    name = "ct-ok-%d" % version

    def scenario(t):
        res = create(t, version, [topic(name, 3, configs={"retention.ms": "1000000"})])
        wait_for_topic(t, name, 3)
        return short_configs(res)
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_create_ok_configs_v7(both):
    """Every config key, value, flag and source; min.insync.replicas compared without its source
    (Kafka's is a cluster-level dynamic default written at format, see test_describe_configs)."""
    def scenario(t):
        cfg = create(t, 7, [topic("ct-cfg", 2, configs={"retention.ms": "1000000"})], validate_only=True)[0]["configs"]
        return [c[:3] + c[4:] if c[0] == "min.insync.replicas" else c for c in cfg]
    p, k = both(scenario)
    assert p == k, explain(p, k)


def test_create_ok_configs_v7_common_keys(both):
    """The configs both brokers know: same value, read-only flag, source and sensitivity."""
    p, k = both(lambda t: create(t, 7, [topic("ct-cfg", 2, configs={"retention.ms": "1000000"})],
                                 validate_only=True)[0]["configs"])
    common = {c[0] for c in p} & {c[0] for c in k}
    # min.insync.replicas: Kafka's source is a cluster-level dynamic default (see test_describe_configs)
    common.discard("min.insync.replicas")
    p = [c for c in p if c[0] in common]
    k = [c for c in k if c[0] in common]
    assert len(common) > 15
    assert p == k, explain(p, k)


CASES = {
    "exists": lambda: [topic("ct-exists")],
    "bad-name": lambda: [topic("bad name!")],
    "dot-name": lambda: [topic("..")],
    "long-name": lambda: [topic("x" * 250)],
    "empty-name": lambda: [topic("")],
    "one-dot-name": lambda: [topic(".")],
    "zero-partitions": lambda: [topic("ct-p0", partitions=0)],
    "negative-partitions": lambda: [topic("ct-pneg", partitions=-5)],
    "rf-too-high": lambda: [topic("ct-rf3", rf=3)],
    "rf-zero": lambda: [topic("ct-rf0", rf=0)],
    "defaults": lambda: [topic("ct-defaults", partitions=-1, rf=-1)],
    "bad-config-value": lambda: [topic("ct-badcfg", configs={"retention.ms": "abc"})],
    "unknown-config": lambda: [topic("ct-unkcfg", configs={"no.such.config": "1"})],
    "null-config-value": lambda: [{**topic("ct-nullcfg"), "configs": [{"name": "retention.ms", "value": None}]}],
    "bad-enum-config": lambda: [topic("ct-badenum", configs={"cleanup.policy": "shred"})],
    "duplicate": lambda: [topic("ct-dup"), topic("ct-dup")],
    "assignment-and-count": lambda: [topic("ct-both", partitions=2, assignments=[
        {"partition_index": 0, "broker_ids": [1]}])],
    "assignment-unknown-broker": lambda: [topic("ct-asg99", partitions=-1, rf=-1, assignments=[
        {"partition_index": 0, "broker_ids": [99]}])],
    "assignment-ok": lambda: [topic("ct-asgok", partitions=-1, rf=-1, assignments=[
        {"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}])],
    "assignment-gap": lambda: [topic("ct-asggap", partitions=-1, rf=-1, assignments=[
        {"partition_index": 0, "broker_ids": [1]}, {"partition_index": 2, "broker_ids": [1]}])],
    "assignment-dup-broker": lambda: [topic("ct-asgdup", partitions=-1, rf=-1, assignments=[
        {"partition_index": 0, "broker_ids": [1, 1]}])],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("version", [2, 4, 7])
def test_create_errors(both, version, case):
    if version < 4 and case in ("defaults", "assignment-unknown-broker", "assignment-ok", "assignment-gap",
                                "assignment-dup-broker"):
        pytest.skip("-1 partitions/replication factor need v4")

    def scenario(t):
        if case == "exists":
            create(t, version, [topic("ct-exists")])
        # validate_only keeps the names reusable across versions (and checks it answers the same)
        return short_configs(create(t, version, CASES[case](), validate_only=(case != "exists")))
    p, k = both(scenario)
    assert p == k, explain(p, k)


# Kafka 4.4's newer topic configs (compression levels, tiered storage, DLQ, throttled replicas):
# accepted values, validator messages, and remote.storage.enable=true refused while the broker
# has tiered storage disabled.
CONFIG_VALUES = [
    ("remote.storage.enable", "true"), ("remote.storage.enable", "false"), ("remote.storage.enable", "yes"),
    ("compression.gzip.level", "0"), ("compression.gzip.level", "10"), ("compression.gzip.level", "-1"),
    ("compression.gzip.level", "5"), ("compression.lz4.level", "0"), ("compression.lz4.level", "18"),
    ("compression.lz4.level", "17"), ("compression.zstd.level", "23"), ("compression.zstd.level", "-131073"),
    ("compression.zstd.level", "-131072"), ("compression.zstd.level", "x"),
    ("errors.deadletterqueue.group.enable", "true"), ("errors.deadletterqueue.group.enable", "maybe"),
    ("follower.replication.throttled.replicas", "0:1,1:1"), ("follower.replication.throttled.replicas", "*"),
    ("follower.replication.throttled.replicas", "bad"), ("leader.replication.throttled.replicas", "0:1"),
    ("leader.replication.throttled.replicas", "0-1"), ("local.retention.bytes", "-3"),
    ("local.retention.bytes", "100"), ("local.retention.ms", "-3"), ("local.retention.ms", "-2"),
    ("max.decompressed.message.bytes", "0"), ("max.decompressed.message.bytes", "1000"),
    ("remote.copy.lag.bytes", "-2"), ("remote.copy.lag.bytes", "0"), ("remote.copy.lag.ms", "-1"),
    ("remote.copy.lag.ms", "-2"), ("remote.log.copy.disable", "true"), ("remote.log.delete.on.disable", "true"),
    ("file.delete.delay.ms", "-1"), ("message.downconversion.enable", "true"),
]


@pytest.mark.parametrize("name,value", CONFIG_VALUES)
def test_topic_config_values(both, name, value):
    p, k = both(lambda t: short_configs(create(t, 7, [topic("ct-cfgval", configs={name: value})],
                                               validate_only=True)))
    assert p == k, explain(p, k)
