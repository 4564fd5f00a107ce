"""ApiVersions (key 18), versions 0-4.

Behaviour (KIP-511, as Apache Kafka):
- Lists every API this broker serves with the version range its handler implements.  Telemetry
  APIs (71/72) are never advertised: clients would start calling them.  A handler may advertise
  a lower floor than it serves (``ADVERTISED_MIN_VERSION``): Produce is listed from v0 as Kafka 4
  does for librdkafka (KAFKA-18659) while v0-2 requests close the connection like any
  unsupported version.
- A request version above 4 is answered with a v0 body (UNSUPPORTED_VERSION plus the supported
  range) and a v0 response header, so the client can retry with a version both sides know.
- v3+: ClientSoftwareName/Version must match Kafka's pattern, else INVALID_REQUEST (librdkafka
  then falls back to v0).
- The response header is always v0 (no tagged fields), even for flexible v3+, because a client
  must be able to parse it before it knows which versions the broker speaks.
Version notes: v1 adds throttle_time_ms; v3 is flexible and adds client software fields and the
(tagged) feature lists, which pykbroker leaves empty.
"""
from __future__ import annotations

import re

from ..protocol.errors import ErrorCode

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

# Kafka's validation pattern for client software name and version (KIP-511).
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def api_keys(broker) -> list[dict]:
    return [{"api_key": k, "min_version": getattr(h, "ADVERTISED_MIN_VERSION", h.MIN_VERSION),
             "max_version": h.MAX_VERSION}
            for k, h in sorted(broker.handlers.items())]


async def handle(ctx, request):
    if ctx.api_version >= 3:
        name, version = request["client_software_name"], request["client_software_version"]
        if not (_SOFTWARE.match(name or "") and _SOFTWARE.match(version or "")):
            return invalid_request_response(ctx)
    return {"error_code": 0, "api_keys": api_keys(ctx.broker), "throttle_time_ms": 0}


def unsupported_version_response(ctx):
    return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_keys(ctx.broker)}


def invalid_request_response(ctx):
    return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}
