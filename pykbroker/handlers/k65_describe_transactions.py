"""DescribeTransactions (key 65), version 0 (KIP-664).

Behaviour (Apache Kafka 4.x): one entry per requested transactional id, in request order: its
state name (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), timeout,
start time (-1 when no transaction is open), producer id and epoch, and the partitions of the
open transaction grouped by topic.  An id this coordinator does not know ->
TRANSACTIONAL_ID_NOT_FOUND; an id whose ``__transaction_state`` partition is not led/loaded here
-> NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (the admin client looks the coordinator up
per id first).
"""
from __future__ import annotations

from typing import Any

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 65
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")


def _error(tid: Any, code: int) -> dict:
    return {"error_code": int(code), "transactional_id": tid, "transaction_state": "",
            "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
            "producer_epoch": -1, "topics": []}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"throttle_time_ms": 0, "transaction_states": [_error(t, code) for t in request["transactional_ids"]]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    tc = ctx.services.transaction_coordinator
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    return {"throttle_time_ms": 0, "transaction_states": [
        tc.describe(t) if permits(ctx, _TRANSACTIONAL_ID, t) else _denied(t)
        for t in request["transactional_ids"]]}


def _denied(txn_id: str) -> dict:
    """DESCRIBE on the transactional id is required; Kafka's entry has zeros where a missing id's
    has -1 (checked: tests/differential)."""
    return {"error_code": int(_TRANSACTIONAL_ID.denial), "transactional_id": txn_id,
            "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": 0,
            "producer_id": 0, "producer_epoch": 0, "topics": []}
