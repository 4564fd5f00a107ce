"""FindCoordinator (key 10), versions 0-6.

Behaviour (as Apache Kafka):
- key_type 0 (group): the coordinator is the leader of the group's ``__consumer_offsets``
  partition in the MetadataCache (a single node leads them all); no leader is
  COORDINATOR_NOT_AVAILABLE.  In a cluster any broker answers with that leader, whether or not
  it is this broker or has loaded the partition yet.  The first lookup creates
  ``__consumer_offsets`` (Kafka auto-creates it on first FindCoordinator too); while that fails
  the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
- key_type 1 (transaction): the leader of the id's ``__transaction_state`` partition; the first
  lookup creates the topic (``transaction.state.log.num.partitions``, compacted), as Kafka does.
  While that fails: COORDINATOR_NOT_AVAILABLE.
- key_type 2 (share, KIP-932): the key is ``groupId:topicId:partition`` (a malformed one is
  INVALID_REQUEST); the leader of its ``__share_group_state`` partition (the topic is created on
  first use).
- any other key type: INVALID_REQUEST, as Kafka answers an unknown coordinator type.
- errors carry node_id -1, host "", port -1.  error_message is the error's text ("NONE" on
  success, as Kafka's Errors.message() renders it).
Version notes: v1 adds key_type, throttle_time_ms and error_message; v3 is flexible; v4 batches
lookups (coordinator_keys in, one ``coordinators`` entry per key out, no top-level fields);
v5/v6 only widen the errors a client may see (v6 adds share key type 2).
"""
from __future__ import annotations

from ..acl.bindings import CLUSTER, CLUSTER_NAME
from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..coordinator.group.offsets import OFFSETS_TOPIC
from ..coordinator.share.records import SHARE_STATE_TOPIC
from ..coordinator.txn.state_log import TRANSACTION_STATE_TOPIC
from ..protocol.errors import DEFAULT_MESSAGES
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 10
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py



def _share_key(key: str) -> tuple | None:
    """(group, topic id bytes, partition) of a share coordinator key, None if malformed."""
    import base64
    parts = (key or "").rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        tid = base64.urlsafe_b64decode(parts[1] + "==")
        p = int(parts[2])
    except ValueError:
        return None
    if len(tid) != 16 or p < 0:
        return None
    return parts[0], tid, p


# what each key type needs from the authorizer (acl/requirements.py)
_NEEDS = {0: need(API_KEY, "group"), 1: need(API_KEY, "transactional_id"), 2: need(API_KEY, "share")}


async def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict:
    services = ctx.services
    md = services.metadata_cache
    code = E.NONE
    node = md.node_id
    az = session(ctx)
    if az is not None:
        # Kafka: DESCRIBE on the group / transactional id, CLUSTER_ACTION on the cluster for the
        # share coordinator (brokers only), before any other check
        needed = _NEEDS.get(key_type)
        if needed is not None and not az.permits(needed, key if needed.resource_type != CLUSTER else CLUSTER_NAME):
            # Kafka 4.4 answers these with an empty message (checked: tests/differential)
            assert needed.error is not None
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": int(needed.error),
                    "error_message": ""}
    if key_type == 0:
        gc, code = await group_precheck(ctx, key)
        if code in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS) and not gc.leads_every_partition:
            # a cluster: the group's coordinator is whichever broker leads its offsets
            # partition, loaded or not (Kafka's FindCoordinator never asks the coordinator)
            code = E.NONE
        if not code:
            # the leader of the group's __consumer_offsets partition, as the controller published it
            node = md.leader_of(OFFSETS_TOPIC, gc.partition_for(key))
    elif key_type == 1:
        tc = services.transaction_coordinator
        if tc is None or not key:
            # no coordinator; an empty transactional id is refused as Kafka does (INVALID_REQUEST)
            code = E.COORDINATOR_NOT_AVAILABLE if tc is None else E.INVALID_REQUEST
        else:
            try:
                await tc.ensure_topic()   # created on first use, as Kafka does
                node = md.leader_of(TRANSACTION_STATE_TOPIC, tc.partition_for(key))
            except Exception:
                code = E.COORDINATOR_NOT_AVAILABLE
    elif key_type == 2:
        # share coordinator (KIP-932): the key is "groupId:topicId:partition"
        sc = services.share_coordinator
        parsed = _share_key(key)
        if sc is None or parsed is None:
            code = E.COORDINATOR_NOT_AVAILABLE if sc is None else E.INVALID_REQUEST
        else:
            try:
                await sc.ensure_topic()   # created on first use, as Kafka does
                node = md.leader_of(SHARE_STATE_TOPIC, sc.partition_for(*parsed))
            except Exception:
                code = E.COORDINATOR_NOT_AVAILABLE
    else:
        code = E.INVALID_REQUEST
    reg = md.broker(node) if not code else None
    li = reg.endpoint(ctx.listener_name) if reg is not None else None
    if li is None:
        code = code or E.COORDINATOR_NOT_AVAILABLE  # no leader / not registered (yet)
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": int(code),
                "error_message": DEFAULT_MESSAGES.get(code, E(code).name)}
    return {"key": key, "node_id": node, "host": li.host, "port": li.port,
            "error_code": 0, "error_message": "NONE"}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version >= 4:
        out = [await _lookup(ctx, k, request["key_type"]) for k in request["coordinator_keys"]]
        return {"throttle_time_ms": 0, "coordinators": out}
    r = await _lookup(ctx, request["key"], request["key_type"])
    r.pop("key")
    r["throttle_time_ms"] = 0
    return r


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    msg = DEFAULT_MESSAGES.get(code, E(code).name)
    if ctx.api_version >= 4:
        return {"coordinators": [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": int(code),
                                  "error_message": msg} for k in request["coordinator_keys"]]}
    return {"error_code": int(code), "error_message": msg, "node_id": -1, "host": "", "port": -1}
