"""ApiVersions (key 18), versions 0-5.

Behaviour (KIP-511, as Apache Kafka):
- Lists every API this broker serves with the version range its handler implements.  Telemetry
  APIs (71/72) are never advertised: clients would start calling them.  A handler may advertise
  a lower floor than it serves (``ADVERTISED_MIN_VERSION``): Produce is listed from v0 as Kafka 4
  does for librdkafka (KAFKA-18659) while v0-2 requests close the connection like any
  unsupported version.
- A request version above 5 is answered with a v0 body (UNSUPPORTED_VERSION plus the supported
  range) and a v0 response header, so the client can retry with a version both sides know.
- v3+: ClientSoftwareName/Version must match Kafka's pattern, else INVALID_REQUEST (librdkafka
  then falls back to v0).
- v3+ feature lists (tagged fields; what the Java Admin's describeFeatures returns and what Java
  clients read to pick protocol generations).  Supported: the Kafka features whose levels
  pykbroker implements, by the semantics behind them: ``group.version`` 0-1 (KIP-848 consumer
  groups are served); ``transaction.version`` 0-2 (transaction version 2, KIP-890 part 2);
  ``share.version`` 0-1 (KIP-932 share groups are served: ShareGroupHeartbeat, ShareFetch, ...;
  Kafka 4.4 supports and finalizes level 2, share group dead-letter queues, which pykbroker does
  not build; not finalized under an ``--as-kafka`` profile without ShareGroupHeartbeat);
  ``streams.version`` 0-1 (KIP-1071 streams groups are served; finalized at 1 as Kafka 4.4,
  which Kafka Streams' ``group.protocol=streams`` needs); ``eligible.leader.replicas.version``
  0-0 (ELR is not built, so clients stay on the old protocol).  ``metadata.version`` and
  ``kraft.version`` are not listed: they version KRaft's metadata log and quorum, which a
  ZooKeeper-era / single-node pykbroker does not have.  Finalized: the same features at their
  highest level, except ``transaction.version`` at the broker's ``transaction.version`` setting
  (default 2, as a freshly formatted Kafka 4; Java clients use transaction version 2 only when
  it is finalized at 2 or more), level 0 left out as Kafka does; epoch 0 (the levels never
  change while the broker runs: UpdateFeatures is not served).  In v3 a supported feature whose minimum
  is 0 is left out (Kafka's rule before KAFKA-17011, fixed in v4).
- v5 (KIP-1242): a client may name the cluster and node it means to reach; both given and either
  differs from this broker's: REBOOTSTRAP_REQUIRED, only one of them given: INVALID_REQUEST (both
  with an empty API list, as Kafka).
- The response header is always v0 (no tagged fields), even for flexible v3+, because a client
  must be able to parse it before it knows which versions the broker speaks.
Version notes: v1 adds throttle_time_ms; v3 is flexible and adds client software fields and the
feature lists; v4 lists features with minimum 0; v5 adds cluster_id/node_id.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from .support.services import BrokerServices

API_KEY = 18
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py

# (feature, min supported, max supported = finalized level): see the module docstring.
FEATURES = (("group.version", 0, 1), ("transaction.version", 0, 2), ("eligible.leader.replicas.version", 0, 0),
            ("share.version", 0, 1), ("streams.version", 0, 1))
# Features whose finalized level is a broker setting rather than the highest supported one.
_FINALIZED_FROM_CONFIG = {"transaction.version": "transaction.version"}
FINALIZED_FEATURES_EPOCH = 0

# Kafka's validation pattern for client software name and version (KIP-511).
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def api_keys(handlers: dict[int, Any]) -> list[dict]:
    # ADVERTISED_MIN_VERSION is an optional constant of a handler module (or its stand-in):
    # a module without one advertises its MIN_VERSION
    return [{"api_key": k, "min_version": getattr(h, "ADVERTISED_MIN_VERSION", h.MIN_VERSION),
             "max_version": h.MAX_VERSION}
            for k, h in sorted(handlers.items())]


def finalized_level(services: BrokerServices, name: str, hi: int) -> int:
    handlers = services.handlers
    if name == "share.version" and 76 not in handlers:
        return 0   # an --as-kafka profile of a release without share groups (before 4.1)
    if name == "streams.version" and 88 not in handlers:
        return 0   # an --as-kafka profile without StreamsGroupHeartbeat (before Kafka 4.1)
    key = _FINALIZED_FROM_CONFIG.get(name)
    if key is None:
        return hi
    level = min(services.config[key], hi)
    if name == "transaction.version":
        # an --as-kafka profile without EndTxn v5 (before Kafka 4.0) cannot serve version 2
        # clients, and such a release's broker finalized no transaction version by default
        end_txn = handlers.get(26)
        if end_txn is None or end_txn.MAX_VERSION < 5:
            level = 0
    return level


def _features(v: int, services: BrokerServices) -> dict:
    levels = [(n, finalized_level(services, n, hi)) for n, lo, hi in FEATURES]
    return {"supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                                   for n, lo, hi in FEATURES if v >= 4 or lo > 0],
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": [{"name": n, "max_version_level": lv, "min_version_level": lv}
                                   for n, lv in levels if lv > 0]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    if v >= 3:
        name, version = request["client_software_name"], request["client_software_version"]
        if not (_SOFTWARE.match(name or "") and _SOFTWARE.match(version or "")):
            return invalid_request_response(ctx)
    if v >= 5:
        cluster_id, node_id = request["cluster_id"], request["node_id"]
        if (cluster_id is None) != (node_id < 0):
            return invalid_request_response(ctx)
        if cluster_id is not None and (cluster_id != ctx.services.metadata_cache.cluster_id
                                       or node_id != ctx.services.node_id):
            return {"error_code": ErrorCode.REBOOTSTRAP_REQUIRED, "api_keys": [], "throttle_time_ms": 0}
    out = {"error_code": 0, "api_keys": api_keys(ctx.services.handlers), "throttle_time_ms": 0}
    if v >= 3:
        out.update(_features(v, ctx.services))
    return out


def unsupported_version_response(ctx: RequestContext) -> dict:
    return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_keys(ctx.services.handlers)}


def invalid_request_response(ctx: RequestContext) -> dict:
    return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}
