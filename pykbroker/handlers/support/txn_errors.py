"""How the transactional producer's APIs answer errors (not a handler: ``load_handlers`` loads
only ``kNN_*``): InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28).

PRODUCER_FENCED (KIP-588) is answered only from one version of each API on; older clients do not
know it and Kafka answers them INVALID_PRODUCER_EPOCH instead.  The version differs per API (22:
v4, 24/25/26: v2, 28: v3), hence ``fenced_since``.

- :func:`client_error_code`: an error code as a client of that version is answered it.
- :func:`top_level_error_response`: the ``error_response`` of the APIs answering one top-level
  error code (22, 25, 26).
"""
from __future__ import annotations

from ...protocol.errors import ErrorCode as E


def client_error_code(code, api_version: int, fenced_since: int) -> int:
    """``code``, or INVALID_PRODUCER_EPOCH for PRODUCER_FENCED below version ``fenced_since``."""
    if code == E.PRODUCER_FENCED and api_version < fenced_since:
        return int(E.INVALID_PRODUCER_EPOCH)
    return int(code)


def top_level_error_response(fenced_since: int, **fields):
    """An ``error_response`` answering the error in the top-level ``error_code`` (downgraded by
    :func:`client_error_code`); ``fields``: the response's other fields as Kafka fills them on
    an error (e.g. producer_id=-1)."""
    def error_response(ctx, request, code) -> dict:
        return {"throttle_time_ms": 0, "error_code": client_error_code(code, ctx.api_version, fenced_since),
                **fields}
    return error_response
