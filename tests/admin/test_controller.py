"""The controller seam in-process: LocalController publishes to a MetadataCache, with a fake
ReplicaManager (no sockets, no logs).  Behaviour seen by clients is covered by the other tests
in this folder; these pin the seam itself: staging, rollback, persistence of partition state,
loading files written before partition state existed, AlterPartition compare-and-set."""
import json
import os

import pytest
import trio

from pykbroker.cluster.local_controller import METADATA_FILE, LocalController
from pykbroker.cluster.metadata_cache import Endpoint, MetadataCache, PartitionState
from pykbroker.config import BrokerConfig
from pykbroker.protocol.errors import ErrorCode, KafkaError

NODE = 1


class FakeReplicaManager:
    def __init__(self, cache):
        self.cache = cache
        self.made, self.deleted, self.config_changes = [], [], []
        self.seen_during_make = None
        self.fail = False

    async def make_partitions(self, info, ids):
        # what the ReplicaManager can see while it creates the logs
        self.seen_during_make = (self.cache.get(info.name), self.cache.effective_config(info.name),
                                 [self.cache.partition_state(info.name, p) for p in ids])
        await trio.lowlevel.checkpoint()
        if self.fail:
            raise OSError("disk full")
        self.made.append((info.name, list(ids)))

    async def delete_partitions(self, info):
        self.deleted.append(info.name)

    def on_config_change(self, info):
        self.config_changes.append((info.name, dict(info.configs)))


async def _start(tmp_path, **cfg):
    config = BrokerConfig({"node.id": str(NODE), **cfg})
    cache = MetadataCache(NODE, "cid", config.effective_topic_config)
    ctl = LocalController(cache, config, NODE, str(tmp_path))
    rm = FakeReplicaManager(cache)
    ctl.set_replica_manager(rm)
    await ctl.load()
    await ctl.register_broker(NODE, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),), None)
    return ctl, cache, rm


def test_create_is_staged_then_published(tmp_path):
    async def main():
        ctl, cache, rm = await _start(tmp_path)
        info = await ctl.create_topic("t", 2, 1, {"retention.ms": "1000"})
        visible, cfg, states = rm.seen_during_make
        assert visible is None                     # not visible to clients before its logs exist
        assert cfg["retention.ms"] == 1000          # but its configs are, to the ReplicaManager
        assert states == [PartitionState(NODE, 0, 0, (NODE,), (NODE,))] * 2
        assert cache.get("t") is info and info.num_partitions == 2
        assert cache.leader_of("t", 1) == NODE and cache.leader_of("t", 2) == -1
        assert cache.controller_id == NODE
        assert [b.broker_id for b in cache.alive_brokers()] == [NODE]
        await ctl.create_partitions("t", 3)
        assert rm.made == [("t", [0, 1]), ("t", [2])]
        assert cache.partition_state("t", 2).leader == NODE
    trio.run(main)


def test_failed_creation_rolls_back(tmp_path):
    async def main():
        ctl, cache, rm = await _start(tmp_path)
        rm.fail = True
        with pytest.raises(OSError):
            await ctl.create_topic("t", 1, 1)
        assert cache.get("t") is None and cache.effective_config("t")["retention.ms"] != 1000
        assert json.loads(open(tmp_path / METADATA_FILE).read())["topics"] == []
        rm.fail = False
        await ctl.create_topic("t", 1, 1)
        rm.fail = True
        with pytest.raises(OSError):
            await ctl.create_partitions("t", 2)
        assert cache.get("t").num_partitions == 1 and cache.partition_state("t", 1) is None
    trio.run(main)


def test_validation_messages(tmp_path):
    async def main():
        ctl, cache, rm = await _start(tmp_path)
        with pytest.raises(KafkaError) as e:
            await ctl.create_topic("t", 1, 2)
        assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
        with pytest.raises(KafkaError) as e:
            await ctl.create_topic("t", -1, -1, assignments=[(0, [2])])
        assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert "broker 2, but no such broker is registered" in e.value.message
    trio.run(main)


def test_partition_state_persisted_and_legacy_file_loads(tmp_path):
    legacy = {"version": 1, "topics": [{"name": "old", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                                         "num_partitions": 2, "replica_assignment": {"0": [1], "1": [1]},
                                         "configs": {"retention.ms": "5"}, "internal": False}]}
    (tmp_path / METADATA_FILE).write_text(json.dumps(legacy))

    async def main():
        ctl, cache, rm = await _start(tmp_path)
        assert cache.partition_state("old", 1) == PartitionState(NODE, 0, 0, (NODE,), (NODE,))
        assert cache.effective_config("old")["retention.ms"] == 5
        with pytest.raises(KafkaError) as e:
            await ctl.alter_partition("old", 0, partition_epoch=7, isr=[NODE])
        # a proposal newer than the controller's state: Kafka answers NOT_CONTROLLER (stale ones:
        # tests/replication/test_partition_change_contract.py)
        assert e.value.code == ErrorCode.NOT_CONTROLLER
        with pytest.raises(KafkaError):
            await ctl.alter_partition("old", 0, partition_epoch=0, isr=[])   # the leader must stay in the ISR
        changes = []
        ctl.add_partition_change_listener(lambda t, p, st: changes.append((t, p, st)))
        st = await ctl.alter_partition("old", 0, partition_epoch=0, leader=-1, isr=[NODE])
        assert (st.leader, st.leader_epoch, st.partition_epoch) == (-1, 1, 1)
        assert changes == [("old", 0, st)] and cache.partition_state("old", 0) == st
        data = json.loads(open(tmp_path / METADATA_FILE).read())["topics"][0]
        assert data["partition_states"] == {"0": {"leader": -1, "leader_epoch": 1, "partition_epoch": 1,
                                                  "isr": [NODE]}}
        # an offline replica (Kafka's rule): no leader, the ISR keeps its last member, both epochs
        # move; the offline mark itself is not persisted (a restart checks the dirs again)
        ctl.replicas_offline(NODE, [("old", 1)])
        assert cache.partition_state("old", 1) == PartitionState(-1, 1, 1, (NODE,), (NODE,), (NODE,))
        assert changes[-1] == ("old", 1, cache.partition_state("old", 1))
        await ctl.alter_topic_configs("old", {})
        assert rm.config_changes == [("old", {})]

        # the broker registering again leads the partitions left without a leader, at new epochs
        # (epochs never go back: clients ignore metadata older than what they saw)
        ctl2, cache2, _ = await _start(tmp_path)
        assert cache2.partition_state("old", 0) == PartitionState(NODE, 2, 2, (NODE,), (NODE,))
        assert cache2.partition_state("old", 1) == PartitionState(NODE, 2, 2, (NODE,), (NODE,))
        assert cache2.effective_config("old")["retention.ms"] != 5
    trio.run(main)


def test_delete_notifies_listeners(tmp_path):
    async def main():
        ctl, cache, rm = await _start(tmp_path)
        deleted = []
        ctl.add_topic_deleted_listener(deleted.append)
        ctl.add_topic_deleted_listener(lambda n: 1 / 0)   # a failing listener is logged, not fatal
        info = await ctl.create_topic("t", 1, 1)
        await ctl.delete_topic("t")
        assert rm.deleted == ["t"] and deleted == ["t"]
        assert cache.get("t") is None and cache.by_id.get(info.topic_id) is None
        assert cache.partition_state("t", 0) is None
        assert not os.path.exists(str(tmp_path / METADATA_FILE) + ".tmp")
    trio.run(main)


def test_failed_metadata_write_undoes_the_change_in_memory(tmp_path, monkeypatch):
    """A change whose metadata-file write fails is taken back in memory before the failure
    reaches the caller: memory never holds what the file does not.  (The controller's file
    system is the process-wide default: the failing write is patched for this test only.)"""
    async def main():
        ctl, cache, rm = await _start(tmp_path)
        await ctl.create_topic("t", 1, 1, {"retention.ms": "1000"})
        await ctl.alter_group_configs("g", {"consumer.session.timeout.ms": "50000"})

        def fail(*a, **kw):
            raise OSError("disk full")
        monkeypatch.setattr(ctl.fs, "write_file_atomic", fail)
        with pytest.raises(OSError):
            await ctl.alter_topic_configs("t", {"retention.ms": "5"})
        assert cache.get("t").configs == {"retention.ms": 1000} and rm.config_changes == []
        with pytest.raises(OSError):
            await ctl.alter_group_configs("g", {})
        assert ctl.group_configs("g") == {"consumer.session.timeout.ms": "50000"}
        with pytest.raises(OSError):
            await ctl.alter_broker_configs("", {"log.retention.ms": "5"})
        assert ctl.broker_configs("") == {}
    trio.run(main)


def test_metadata_file_acls_follow_every_change(tmp_path, monkeypatch):
    """The metadata file's ACL list is encoded once per change of the bindings and reused by the
    writes between (a topic created...): the file stays what encoding everything at once writes,
    after an add, a removal, a failed write's undo, and a reload."""
    from pykbroker.acl.bindings import ALLOW, LITERAL, PREFIXED, READ, TOPIC, AclBinding

    def b(name, pattern=LITERAL, principal="User:alice"):
        return AclBinding(TOPIC, name, pattern, principal, "*", READ, ALLOW)

    def file_json():
        with open(os.path.join(str(tmp_path), METADATA_FILE), "rb") as f:
            raw = f.read()
        data = json.loads(raw)
        assert raw == json.dumps(data, indent=1).encode()   # the same bytes as one plain encoding
        return data

    async def main():
        ctl, cache, rm = await _start(tmp_path)
        await ctl.alter_acls(added=[b("t\u00e9"), b("p-", PREFIXED), b("x", principal="User:b\"q")])
        await ctl.create_topic("t", 1, 1, {})
        assert file_json()["acls"] == sorted(x.to_json() for x in ctl.acls()) and len(ctl.acls()) == 3
        await ctl.alter_acls(removed=[b("p-", PREFIXED)])
        await ctl.create_topic("u", 1, 1, {})
        assert file_json()["acls"] == sorted([b("t\u00e9").to_json(), b("x", principal="User:b\"q").to_json()])

        def fail(*a, **kw):
            raise OSError("disk full")
        real = ctl.fs.write_file_atomic
        monkeypatch.setattr(ctl.fs, "write_file_atomic", fail)
        with pytest.raises(OSError):
            await ctl.alter_acls(added=[b("y")])
        monkeypatch.setattr(ctl.fs, "write_file_atomic", real)
        await ctl.create_topic("v", 1, 1, {})
        data = file_json()
        assert len(data["acls"]) == 2 and [t["name"] for t in data["topics"]] == ["t", "u", "v"]
        await ctl.alter_acls(removed=list(ctl.acls()))
        assert "acls" not in file_json()
        await ctl.alter_acls(added=[b("z")])

        again, _, _ = await _start(tmp_path)
        assert again.acls() == {b("z")}
        await again.create_topic("w", 1, 1, {})
        assert file_json()["acls"] == [b("z").to_json()]
    trio.run(main)
