"""Listener-prefixed broker configs at the cluster-default level (BROKER resource "") through
IncrementalAlterConfigs (44) and AlterConfigs (33): Apache Kafka 4.4 refuses the per-broker ones
(e.g. ``listener.name.<l>.ssl.keystore.location``) and accepts the cluster-level listener configs
(max.connections, max.connection.creation.rate, num.network.threads); pykbroker answers the same
error code and message (INVALID_REQUEST, "Cannot update these configs at default cluster level,
broker id must be specified: [...]").  validate_only keeps both brokers unchanged.

AlterConfigs (33) replaces the whole cluster-default set, so for the cluster-level keys Kafka 4.4
answers about min.insync.replicas and ELR instead: those combinations are left out here."""
import pytest

from .helpers import call, explain

KEYS = {
    "keystore": ("listener.name.plaintext.ssl.keystore.location", "/tmp/ks.jks"),
    "max_connections": ("listener.name.plaintext.max.connections", "100"),
    "creation_rate": ("listener.name.plaintext.max.connection.creation.rate", "100"),
    "network_threads": ("listener.name.plaintext.num.network.threads", "3"),
    "sasl_mechanisms": ("listener.name.external.sasl.enabled.mechanisms", "PLAIN"),
    "mechanism_prefixed": ("listener.name.plaintext.plain.sasl.jaas.config",
                           "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
}

CLUSTER_LEVEL = {"max_connections", "creation_rate", "network_threads"}


def inc(t, name, key, value):
    r = call(t, 44, 1, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
        {"name": key, "config_operation": 0, "value": value}]}], "validate_only": True})
    return [(x["error_code"], x["error_message"]) for x in r["responses"]]


def legacy(t, name, key, value):
    r = call(t, 33, 2, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
        {"name": key, "value": value}]}], "validate_only": True})
    return [(x["error_code"], x["error_message"]) for x in r["responses"]]


PARAMS = [pytest.param(api, case, resource, id="%s-%s-%s" % (resource or "default", case, api.__name__))
          for resource in ("", "1") for case in sorted(KEYS) for api in (inc, legacy)
          if not (api is legacy and resource == "" and case in CLUSTER_LEVEL)]


@pytest.mark.parametrize("api,case,resource", PARAMS)
def test_listener_configs_by_level(both, api, case, resource):
    key, value = KEYS[case]
    p, k = both(lambda t: api(t, resource, key, value))
    assert p == k, explain(p, k)
