"""pykbroker's configuration: the broker config table (``broker.py``: every Kafka config
pykbroker understands, ``BrokerConfig``, topic configs, parsing and validation), the dynamic
broker configs (``dynamic.py``: ``DynamicBrokerConfig``, AlterConfigs on BROKER resources) and
the dynamic group configs (``group.py``: resource type GROUP).

``pykbroker.config`` re-exports ``broker.py``'s public names, the ones user code and the rest of
the package import (``from pykbroker.config import BrokerConfig``); the dynamic and group configs
are imported from their modules (``pykbroker.config.dynamic``, ``pykbroker.config.group``), so
reading the config table does not load them.
"""
from .broker import (AUTHORIZER_KEYS, BROKER_CONFIGS, BrokerConfig, CLUSTER_DEFAULTS, ConfigDef,
                     ConfigError, DYNAMIC_BROKER_CONFIGS, INT_MAX, LISTENER_DYNAMIC_SUFFIXES,
                     LONG_MAX, Listener, PER_BROKER_CONFIGS, SECURITY_PROTOCOLS, SOURCE_DEFAULT,
                     SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC_BROKER,
                     SOURCE_TOPIC, THREAD_POOL_CONFIGS, TOPIC_CONFIGS, TYPE_IDS, ZK_ERA_KEYS,
                     inter_broker_listener, is_password_key, parse_listeners, parse_properties,
                     parse_protocol_map, redacted, validate_ip_overrides, validate_topic_configs)

__all__ = [
    "AUTHORIZER_KEYS",
    "BROKER_CONFIGS",
    "BrokerConfig",
    "CLUSTER_DEFAULTS",
    "ConfigDef",
    "ConfigError",
    "DYNAMIC_BROKER_CONFIGS",
    "INT_MAX",
    "LISTENER_DYNAMIC_SUFFIXES",
    "LONG_MAX",
    "Listener",
    "PER_BROKER_CONFIGS",
    "SECURITY_PROTOCOLS",
    "SOURCE_DEFAULT",
    "SOURCE_DYNAMIC_BROKER",
    "SOURCE_DYNAMIC_DEFAULT",
    "SOURCE_STATIC_BROKER",
    "SOURCE_TOPIC",
    "THREAD_POOL_CONFIGS",
    "TOPIC_CONFIGS",
    "TYPE_IDS",
    "ZK_ERA_KEYS",
    "inter_broker_listener",
    "is_password_key",
    "parse_listeners",
    "parse_properties",
    "parse_protocol_map",
    "redacted",
    "validate_ip_overrides",
    "validate_topic_configs",
]
