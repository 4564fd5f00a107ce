"""StreamsGroupTopologyDescriptionUpdate (key 93), version 0 (KIP-1331).

What it is: a streams group member pushes the full description of its topology (subtopologies
with their source/processor/sink nodes and stores, global stores) so that the broker can hand it
to a pluggable store (Kafka 4.4's topology description plugin) and show it in
StreamsGroupDescribe v1.  The broker asks for it with TopologyDescriptionRequired in the
heartbeat response, which it only sets when a plugin is configured.

Behaviour (as a default Apache Kafka 4.4 broker, which has no plugin configured): every request
is answered UNSUPPORTED_VERSION with "The broker has no streams group topology description
plugin configured.", before any group or member check (Kafka answers so for an unknown group or
member too).  pykbroker has no plugin interface (SKIPPED.md).  With an authorizer READ on the group
comes first, as Kafka: GROUP_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 93
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")

NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def _err(code: int, msg: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _GROUP, request["group_id"]):
        return _err(_GROUP.denial)   # no message (checked against Kafka 4.4)
    return _err(E.UNSUPPORTED_VERSION, NO_PLUGIN)


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _err(code)
