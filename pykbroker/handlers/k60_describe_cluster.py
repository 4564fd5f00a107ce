"""DescribeCluster (key 60), versions 0-2.

Behaviour (Apache Kafka AuthHelper.computeDescribeClusterResponse on a broker):
- From the MetadataCache: the registered brokers (advertised host/port, rack), ``controller_id``
  (a KRaft broker answers with a live broker id: clients cannot talk to the controllers; the
  single node reports itself), the cluster id.
- ``include_cluster_authorized_operations``: the CLUSTER operations the authorizer allows (every
  one without an authorizer; 0 to a client not allowed DESCRIBE on the cluster, as Kafka);
  otherwise the "not requested" value -2147483648.
Version notes: v2 adds ``include_fenced_brokers`` and ``is_fenced``: pykbroker's brokers are
registered (listed, not fenced) or gone (a ZooKeeper session ended; Kafka's KRaft controller
would list such a broker as fenced for a while), so the flag adds nothing and ``is_fenced`` is
false.  v1 adds ``endpoint_type``: BROKER (1) is served; CONTROLLER (2) is
MISMATCHED_ENDPOINT_TYPE (this is a broker endpoint), any other value UNSUPPORTED_ENDPOINT_TYPE.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..acl.check import cluster_operations
from ..protocol.acl import NOT_REQUESTED
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 60
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
_NAMES = {1: "BROKER", 2: "CONTROLLER"}


async def handle(ctx: RequestContext, request: dict) -> dict:
    services = ctx.services
    v = ctx.api_version
    et = request["endpoint_type"] if v >= 1 else BROKER_ENDPOINT
    if et not in _NAMES:
        return {"error_code": int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if v >= 1 else ErrorCode.INVALID_REQUEST),
                "error_message": "Unsupported endpoint type %d" % et, "endpoint_type": BROKER_ENDPOINT,
                "cluster_id": "", "brokers": []}
    if et != BROKER_ENDPOINT:
        return {"error_code": int(ErrorCode.MISMATCHED_ENDPOINT_TYPE if v >= 1 else ErrorCode.INVALID_REQUEST),
                "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an "
                                 "endpoint of type %s" % _NAMES[et],
                "endpoint_type": BROKER_ENDPOINT, "cluster_id": "", "brokers": []}
    md = services.metadata_cache
    ops = cluster_operations(ctx) if request["include_cluster_authorized_operations"] \
        else NOT_REQUESTED
    brokers = [{"broker_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack, "is_fenced": False}
               for b, e in md.live_endpoints(ctx.listener_name)]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": BROKER_ENDPOINT,
            "cluster_id": md.cluster_id, "controller_id": md.controller_id, "brokers": brokers,
            "cluster_authorized_operations": ops}
