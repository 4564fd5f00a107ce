"""How the transactional producer's APIs answer errors (not a handler: ``load_handlers`` loads
only ``kNN_*``): InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28).

An error code newer than the client's version of the API is answered as the code that version
knows, as Kafka does; the table below holds, per API, each such code, the first version that
knows it and what older versions get:

- PRODUCER_FENCED (KIP-588) exists from a different version of each API (22: v4, 24/25/26: v2,
  28: v3); older clients get INVALID_PRODUCER_EPOCH.
- TxnOffsetCommit below v4 gets INVALID_TXN_STATE for TRANSACTION_ABORTABLE (KIP-890), and
  below v6 ILLEGAL_GENERATION for STALE_MEMBER_EPOCH (Kafka's group coordinator maps it for
  clients that predate KIP-1319).

- :func:`client_error_code`: an error code as the client of the request being served is
  answered it.
- :func:`top_level_error_response`: the ``error_response`` of the APIs answering one top-level
  error code (22, 25, 26).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol.errors import ErrorCode as E
from ...server.dispatch import RequestContext

# api key -> {code: (first version that knows it, the code older versions are answered)}
_DOWNGRADES: dict[int, dict[int, tuple[int, int]]] = {
    22: {E.PRODUCER_FENCED: (4, E.INVALID_PRODUCER_EPOCH)},
    24: {E.PRODUCER_FENCED: (2, E.INVALID_PRODUCER_EPOCH)},
    25: {E.PRODUCER_FENCED: (2, E.INVALID_PRODUCER_EPOCH)},
    26: {E.PRODUCER_FENCED: (2, E.INVALID_PRODUCER_EPOCH)},
    28: {E.PRODUCER_FENCED: (3, E.INVALID_PRODUCER_EPOCH),
         E.TRANSACTION_ABORTABLE: (4, E.INVALID_TXN_STATE),
         E.STALE_MEMBER_EPOCH: (6, E.ILLEGAL_GENERATION)},
}


def client_error_code(ctx: RequestContext, code: int) -> int:
    """``code`` as the client of ``ctx`` (the API being served and its version) knows it."""
    down = _DOWNGRADES[ctx.api_key].get(code)
    if down is not None and ctx.api_version < down[0]:
        return int(down[1])
    return int(code)


def top_level_error_response(**fields: Any) -> Callable[[RequestContext, dict, int], dict]:
    """An ``error_response`` answering the error in the top-level ``error_code`` (as
    :func:`client_error_code` downgrades it); ``fields``: the response's other fields as Kafka
    fills them on an error (e.g. producer_id=-1)."""
    def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
        return {"throttle_time_ms": 0, "error_code": client_error_code(ctx, code), **fields}
    return error_response
