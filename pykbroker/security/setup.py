"""A broker's security set up from its configuration, in one place: every secured listener's
server side (listeners.py) and, on a cluster, the broker's own client side of the inter-broker
listener (client.py).  Kept apart from both so neither imports the other's builder."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import parse_listeners, parse_protocol_map

if TYPE_CHECKING:
    from ..config.broker import BrokerConfig
    from .listeners import ListenerSecurity

# client.py and listeners.py (ssl contexts, SCRAM, the SASL mechanisms) are imported only when a
# listener is secured or the broker is in a cluster: a plain single node starts without them


def build_all(config: BrokerConfig, listeners: Any) -> dict[str, ListenerSecurity]:
    """Listener name -> its security, for the listeners that have any (PLAINTEXT: none).  On a
    cluster, also this broker's own side of the inter-broker listener (security/client.py: the
    trust, the mechanism and the broker's credentials), checked here so a broker that could not
    reach the others stops at start-up."""
    if config["zookeeper.connect"]:
        from .client import InterBrokerSecurity
        InterBrokerSecurity.from_config(config)
    secured = [li for li in listeners if li.protocol != "PLAINTEXT"]
    if not secured:
        return {}
    from .listeners import ListenerSecurity
    return {li.name: ListenerSecurity.build(config, li.name, li.protocol) for li in secured}


def check_config(config: BrokerConfig) -> None:
    """Build every secured listener's settings once (ConfigError says what is wrong)."""
    build_all(config, parse_listeners(config["listeners"], parse_protocol_map(config["listener.security.protocol.map"])))
