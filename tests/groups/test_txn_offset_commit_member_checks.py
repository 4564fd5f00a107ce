"""TxnOffsetCommit v3 (KIP-447 member fields; what sarama sends) against a classic group, as
Apache Kafka 4.4 answers (ClassicGroup.validateOffsetCommit with isTransactional, compared with
a real 4.4 broker by tests/differential/test_transactions.py::test_txn_offset_commit_group_states):
the group's state is not checked for a transactional commit, so a member that has joined but
whose group has not synced yet (CompletingRebalance) commits, where an OffsetCommit gets
REBALANCE_IN_PROGRESS; a commit without member id and generation is taken whatever the state;
a wrong generation and an unknown member are refused in every state.  The committed
transaction's offset reads back."""
import time

from pykbroker.protocol.wire import WireClient

from .helpers import create_topic, txn_offset_commit_v3, unique


def _join_body(group, member_id=""):
    return {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}], "reason": None}


def test_txn_offset_commit_during_completing_rebalance(gbroker):
    topic, group, tid = unique("tocm"), unique("tocm-g"), unique("tocm-t")
    create_topic(gbroker.bootstrap, topic, 1)
    with WireClient(gbroker.bootstrap) as c:
        assert c.request(10, 3, {"key": tid, "key_type": 1})["error_code"] == 0
        init = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
                                 "producer_epoch": -1})
        pid, epoch = init["producer_id"], init["producer_epoch"]
        mid = c.request(11, 7, _join_body(group))["member_id"]
        j = c.request(11, 7, _join_body(group, mid))
        gen = j["generation_id"]
        assert (j["error_code"], j["leader"]) == (0, mid)
        assert c.request(25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                 "group_id": group})["error_code"] == 0

        def txn_commit(offset, generation, member):
            r = c.request(28, 3, txn_offset_commit_v3(tid, group, pid, epoch, generation, member, topic, offset))
            return r["topics"][0]["partitions"][0]["error_code"]

        def plain_commit(offset):
            r = c.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": mid,
                                 "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
                                     "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                     "committed_metadata": ""}]}]})
            return r["topics"][0]["partitions"][0]["error_code"]

        d = c.request(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        assert d["group_state"] == "CompletingRebalance"
        assert plain_commit(2) == 27            # OffsetCommit: REBALANCE_IN_PROGRESS
        assert txn_commit(3, gen, mid) == 0     # TxnOffsetCommit: the state is not checked
        assert txn_commit(4, -1, "") == 0
        assert txn_commit(5, gen + 1, mid) == 22    # ILLEGAL_GENERATION
        assert txn_commit(5, gen, "nobody") == 25   # UNKNOWN_MEMBER_ID
        s = c.request(14, 5, {"group_id": group, "generation_id": gen, "member_id": mid, "group_instance_id": None,
                              "protocol_type": "consumer", "protocol_name": "range",
                              "assignments": [{"member_id": mid, "assignment": b""}]})
        assert s["error_code"] == 0
        assert txn_commit(6, gen, mid) == 0 and txn_commit(7, -1, "") == 0
        assert c.request(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                 "committed": True})["error_code"] == 0
        deadline = time.monotonic() + 10
        while True:   # UNSTABLE_OFFSET_COMMIT until the marker is written
            f = c.request(9, 7, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                                 "require_stable": True})
            p = f["topics"][0]["partitions"][0]
            if p["error_code"] != 88 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (p["error_code"], p["committed_offset"]) == (0, 7)
