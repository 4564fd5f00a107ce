"""ListTransactions (key 66), versions 0-2 (KIP-664).

Behaviour (Apache Kafka 4.x): every transactional id this broker coordinates, with its producer id
and state, filtered by ``state_filters`` (state names; names Kafka does not know are echoed in
``unknown_state_filters`` and match nothing), ``producer_id_filters`` and (v1, KIP-994)
``duration_filter`` (only transactions running for at least that many ms; -1: no filter).  While
a ``__transaction_state`` partition loads: COORDINATOR_LOAD_IN_PROGRESS.  v2 (KIP-1152)
``transactional_id_pattern``: null or empty lists every id, otherwise only the ids the regular
expression matches as a whole (Kafka's RE2/J ``matches``; Python's ``re.fullmatch`` here, which
agrees on the usual syntax); a pattern that does not compile: INVALID_REGULAR_EXPRESSION.
Version notes: v1 adds duration_filter; v2 transactional_id_pattern.
"""
from __future__ import annotations

import re

from ..acl.check import permits
from ..acl.requirements import need
from ..coordinator.txn.state_log import STATES_BY_NAME
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 66
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "unknown_state_filters": [], "transaction_states": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    tc = ctx.services.transaction_coordinator
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    pattern = request["transactional_id_pattern"] if ctx.api_version >= 2 else None
    matches = None
    if pattern:
        try:
            matches = re.compile(pattern).fullmatch
        except re.error:
            return error_response(ctx, request, E.INVALID_REGULAR_EXPRESSION)
    states = request["state_filters"] or []
    unknown = [s for s in states if s not in STATES_BY_NAME]
    code, found = tc.list_transactions(states, set(request["producer_id_filters"] or ()),
                                       request["duration_filter"] if ctx.api_version >= 1 else -1)
    return {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": t, "producer_id": p, "transaction_state": s}
                                   for t, p, s in found if (matches is None or matches(t))
                                   and permits(ctx, _TRANSACTIONAL_ID, t)]}
