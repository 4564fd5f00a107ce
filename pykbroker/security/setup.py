"""A broker's security set up from its configuration, in one place: every secured listener's
server side (listeners.py) and, on a cluster, the broker's own client side of the inter-broker
listener (client.py).  Kept apart from both so neither imports the other's builder."""
from __future__ import annotations

from ..config import parse_listeners, parse_protocol_map
from .client import InterBrokerSecurity
from .listeners import ListenerSecurity


def build_all(config, listeners) -> dict[str, ListenerSecurity]:
    """Listener name -> its security, for the listeners that have any (PLAINTEXT: none).  On a
    cluster, also this broker's own side of the inter-broker listener (security/client.py: the
    trust, the mechanism and the broker's credentials), checked here so a broker that could not
    reach the others stops at start-up."""
    if config["zookeeper.connect"]:
        InterBrokerSecurity.from_config(config)
    return {li.name: ListenerSecurity.build(config, li.name, li.protocol)
            for li in listeners if li.protocol != "PLAINTEXT"}


def check_config(config) -> None:
    """Build every secured listener's settings once (ConfigError says what is wrong)."""
    build_all(config, parse_listeners(config["listeners"], parse_protocol_map(config["listener.security.protocol.map"])))
