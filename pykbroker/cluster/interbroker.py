"""The versions of the requests one broker sends another (follower Fetch and its ListOffsets,
WriteTxnMarkers, AddPartitionsToTxn verification), negotiated as Kafka's NetworkClient does.

A Kafka broker asks each broker it connects to for its ApiVersions and sends every request at
the highest version both know: its own code's newest (what that release builds) and what the
receiver advertises.  pykbroker's "own code" is the broker's handler table: the versions it
serves itself, limited by ``--as-kafka`` (pykbroker/profiles.py), so a broker run as Kafka 4.0
sends what a Kafka 4.0 broker sends (WriteTxnMarkers v1, Fetch up to v17) whatever the other
brokers offer, and any broker stays within what the receiving broker offers (a cluster mixing
profiles, or a rolling upgrade).  No common version: ``usable`` answers None and the caller
does what Kafka does then (verification skipped, markers retried).

Sans-IO apart from :func:`api_versions`, which asks one connection.
"""
from __future__ import annotations

from typing import Optional

API_VERSIONS = 18
ApiRanges = dict   # api key -> (min, max) as one broker advertises them


class InterBrokerVersions:
    """What this broker's own code sends: for each API, the range it serves itself."""

    def __init__(self, handlers: dict):
        self._own = {key: (h.MIN_VERSION, h.MAX_VERSION) for key, h in handlers.items()}

    def own(self, api_key: int) -> Optional[tuple]:
        return self._own.get(api_key)

    def usable(self, api_key: int, theirs: ApiRanges, lo: int = 0, hi: int = 1 << 15) -> Optional[int]:
        """The highest version within [lo, hi] (the range the caller can build) that this broker
        and the receiver (``theirs``) both know; None when there is none."""
        ranges = [(lo, hi), theirs.get(api_key)]
        own = self._own.get(api_key)
        ranges.append(own)
        if None in ranges:
            return None
        low = max(r[0] for r in ranges)
        high = min(r[1] for r in ranges)
        return high if low <= high else None


async def api_versions(chan, software_name: str) -> ApiRanges:
    """The receiver's advertised ranges, asked on ``chan`` (any object with ``call``) as the first
    request of a connection, as Kafka's clients do (ConnectionError if it refuses)."""
    resp = await chan.call(API_VERSIONS, 3, {"client_software_name": software_name, "client_software_version": "1"})
    if resp["error_code"]:
        raise ConnectionError("ApiVersions refused: error %d" % resp["error_code"])
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]}


async def open_channel(host: str, port: int, client_id: str, max_frame: int, security=None):
    """A connection to another broker's inter-broker listener: TCP, then (``security``:
    security/client.py ``InterBrokerSecurity``, None on a PLAINTEXT listener) TLS with the
    listener's trust and the SASL exchange with the broker's own credentials, as Kafka's
    inter-broker NetworkClient does before its first request.  Returns ``(stream, chan)``; the
    caller closes the stream.  ``AuthenticationFailed`` (a ConnectionError here) names the
    refusal; the stream is closed then."""
    import trio

    from ..security.errors import AuthenticationFailed
    from .replica_fetcher import _Channel
    stream = await trio.open_tcp_stream(host, port)
    try:
        if security is not None and security.ssl_context is not None:
            stream = trio.SSLStream(stream, security.ssl_context,
                                    server_hostname=host if security.check_hostname else None)
            await stream.do_handshake()
        chan = _Channel(stream, client_id, max_frame)
        if security is not None and security.mechanism is not None:
            from ..security.client import authenticate
            try:
                await authenticate(chan, security)
            except AuthenticationFailed as e:
                raise InterBrokerAuthenticationError(
                    "authentication as %s with %s on listener %s of %s:%d failed: %s"
                    % (security.principal, security.mechanism, security.listener, host, port, e)) from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return stream, chan


class InterBrokerAuthenticationError(ConnectionError):
    """The other broker refused this broker's credentials (logged as a warning by callers)."""
