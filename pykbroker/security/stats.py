"""Authentication counters of a broker, per listener and mechanism (one owner: the BrokerServer; each
secured connection adds to it once per authentication, never per request).  Exported by the
metrics endpoint under the names the JMX exporter gives Kafka's socket-server metrics
(``kafka_server_socket_server_metrics_successful_authentication_total{listener}`` ...), with a
``mechanism`` label added (Kafka counts per listener only)."""
from __future__ import annotations

KINDS = ("successful_authentication", "failed_authentication",
         "successful_reauthentication", "failed_reauthentication")


class AuthenticationStats:
    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}   # (kind, listener, mechanism) -> n

    def record(self, kind: str, listener: str, mechanism: str) -> None:
        key = (kind, listener, mechanism)
        self.counts[key] = self.counts.get(key, 0) + 1

    def get(self, kind: str, listener: str, mechanism: str) -> int:
        return self.counts.get((kind, listener, mechanism), 0)
