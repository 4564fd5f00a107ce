"""Kafka's dynamic keystore and truststore updates: ``listener.name.<l>.ssl.keystore.location``
(and the keystore's ``.password``, ``.type`` and ``ssl.key.password``) or
``listener.name.<l>.ssl.truststore.location`` (``.password``, ``.type``, ``.certificates``) set on
this broker's BROKER resource through IncrementalAlterConfigs / AlterConfigs reloads the
listener's certificate or the CAs its mTLS clients are checked against, for new connections,
without a restart; connections already open keep theirs (Kafka's SslFactory reconfiguration:
the keys of SslConfigs.RECONFIGURABLE_CONFIGS pykbroker reads from files).

- ``validate(broker, per_broker, values)``: before anything is stored, the listener's keystore
  is built with the new values over the current ones (tls.load_keystore, the start-up path).  A
  keystore that cannot be read fails the request with INVALID_REQUEST (Kafka's
  ConfigAdminManager turns the SslFactory's validation ConfigException into an
  InvalidRequestException, KAFKA-13609) and the listener keeps its keystore; so is a keystore
  whose certificate has another subject DN or drops a SAN (Kafka's SslFactory check), and so is
  a truststore that does not load (checked even when ``ssl.client.auth=none`` leaves it unused,
  as Kafka's engine factory loads it) or one set on a listener that started without any (Kafka:
  "Cannot add SSL truststore to an existing listener for which no truststore was configured.").
  On a cluster member's inter-broker listener the new stores must also keep inter-broker TLS
  working, checked as Kafka's SslFactory checks them there (its SslEngineValidator, the
  listener's ``keystoreVerifiableUsingTruststore``): two TLS handshakes in memory, the current
  keystore (server) against the new truststore (client), and the new keystore (server) against
  the current truststore (client), with the listener's ``ssl.client.auth`` and the keystore as
  the client's certificate, without host name verification.  An update that fails one of them
  (say, a truststore that no longer holds the CA of the certificates the brokers present, or a
  certificate from a CA the others do not trust yet) is INVALID_REQUEST with the handshake's
  error, and nothing changes.  On a single node (no broker peers) only a listener named as the
  inter-broker one in its configuration is checked so.  Kafka makes these
  configs per broker only: at the cluster default they are refused with its text.
- ``apply(listener_security, raw, on_reloaded)``: the broker's stored dynamic set (config/dynamic.py's
  on_change, at start-up too) becomes each TLS listener's ``dynamic`` layer and a new
  ``ssl_context``; server/secure.py reads ``sec.ssl_context`` for each new connection, and
  ``on_reloaded(sec)`` lets the broker's own inter-broker client take the new stores too (Kafka
  reconfigures its replica fetchers' channel builders alike).  A stored
  keystore that no longer loads (the file gone) is logged and the listener keeps the one it has.
"""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from ..config import ConfigError
from ..config.dynamic import DynamicConfigError, java_set_str

if TYPE_CHECKING:
    from .listeners import ListenerSecurity

log = logging.getLogger("pykbroker.security")

KEYSTORE_KEYS = ("ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.key.password")
TRUSTSTORE_KEYS = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
                   "ssl.truststore.certificates")
_KEY = re.compile(r"^listener\.name\.([^.]+)\.(%s)$" % "|".join(re.escape(k) for k in KEYSTORE_KEYS + TRUSTSTORE_KEYS))


class KeystoreUpdateError(DynamicConfigError):
    """A dynamic keystore update Kafka refuses (INVALID_REQUEST, as every DynamicConfigError)."""


def _by_listener(values: dict[str, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for k, v in values.items():
        m = _KEY.match(k)
        if m:
            out.setdefault(m.group(1), {})[k] = v
    return out


def _tls_listener(listener_security: Mapping[str, ListenerSecurity], lower: str) -> Optional[ListenerSecurity]:
    for sec in listener_security.values():
        if sec.name.lower() == lower and sec.tls:
            return sec
    return None


def _check_compatible(old: bytes | None, new: bytes | None) -> None:
    """Kafka's SslFactory refuses a new keystore whose certificate has another subject DN, or
    drops one of the old certificate's subject alternative names: clients pinned to them (host
    name checks, principals in ACLs on the other brokers) would break."""
    if old is None or new is None:
        return
    from cryptography import x509

    def names(der: bytes) -> tuple[Any, set]:
        cert = x509.load_der_x509_certificate(der)
        try:
            sans = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
        except x509.ExtensionNotFound:
            sans = set()
        return cert.subject.rfc4514_string(), sans
    (old_dn, old_sans), (new_dn, new_sans) = names(old), names(new)
    if old_dn.lower() != new_dn.lower():
        raise ConfigError("Keystore DistinguishedName does not match: existing DN=%s, new DN=%s" % (old_dn, new_dn))
    if not new_sans >= old_sans:
        raise ConfigError("Keystore SubjectAltNames do not match: the new certificate lacks %s"
                          % sorted(str(getattr(n, "value", n)) for n in old_sans - new_sans))


def _has_truststore(sec: ListenerSecurity) -> bool:
    return sec.get("ssl.truststore.location") is not None or sec.get("ssl.truststore.certificates") is not None


def _candidate(sec: ListenerSecurity, layer: dict[str, str]) -> Any:
    import ssl

    from .listeners import ListenerSecurity
    from .tls import load_truststore, server_context
    new = ListenerSecurity(sec.config, sec.name, sec.protocol)
    new.dynamic = layer
    if not _has_truststore(sec) and _has_truststore(new):
        raise ConfigError("Cannot add SSL truststore to an existing listener for which no truststore was configured.")
    ctx = server_context(new)
    if new.get("ssl.client.auth") == "none" and _has_truststore(new):
        # unused without client certificates, yet Kafka's engine factory loads it: a bad one is refused
        load_truststore(new, ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    _check_compatible(sec.keystore_leaf, new.keystore_leaf)
    return ctx, new.keystore_leaf


def _is_inter_broker(sec: ListenerSecurity) -> bool:
    """The listener other brokers of a cluster connect to; on a single node, only a listener
    configured as the inter-broker one by name (``inter.broker.listener.name`` or
    ``security.inter.broker.protocol``, as Kafka's combined node must name it): pykbroker's
    fallback to the first listener names one that no broker connects to."""
    from ..config import inter_broker_listener
    config = sec.config
    if config["zookeeper.connect"]:
        return inter_broker_listener(config).name.lower() == sec.name.lower()
    for key in ("inter.broker.listener.name", "security.inter.broker.protocol"):
        if config.is_explicit(key):
            return str(config[key]).lower() == sec.name.lower()
    return False


def _handshake(server_ctx: Any, client_ctx: Any) -> None:
    """One TLS handshake between the two contexts through memory buffers (no socket); the
    ssl.SSLError of the side that refused."""
    import ssl
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
    done = [False, False]
    # a TLS 1.2 or 1.3 handshake takes 2-3 flights each way; the bound only stops a loop
    for _ in range(16):
        for i, (end, out, peer_in) in enumerate(((client, c_out, s_in), (server, s_out, c_in))):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
            data = out.read()
            if data:
                peer_in.write(data)
        if all(done):
            return
    raise ssl.SSLError("the handshake did not complete")


def _check_handshakes(sec: ListenerSecurity, layer: dict[str, str], new_server_ctx: Any) -> None:
    """Kafka's SslEngineValidator.validate(old, new) on the inter-broker listener (module docstring)."""
    import ssl

    from .client import client_context
    from .listeners import ListenerSecurity
    new = ListenerSecurity(sec.config, sec.name, sec.protocol)
    new.dynamic = layer
    old_client, new_client = client_context(sec)[0], client_context(new)[0]
    for ctx in (old_client, new_client):
        ctx.check_hostname = False   # Kafka's validation engines have no host name to check
    for server, client, what in ((sec.ssl_context, new_client, "the current keystore and the new truststore"),
                                 (new_server_ctx, old_client, "the new keystore and the current truststore")):
        try:
            _handshake(server, client)
        except ssl.SSLError as e:
            raise ConfigError("the inter-broker listener %s would refuse the brokers: a TLS handshake between %s "
                              "failed (%s)" % (sec.name, what, getattr(e, "verify_message", None) or e.reason or e))


def validate(listener_security: Mapping[str, ListenerSecurity], per_broker: bool, values: dict[str, str]) -> None:
    changes = _by_listener(values)
    if not changes:
        return
    if not per_broker:
        raise KeystoreUpdateError("Cannot update these configs at default cluster level, broker id must be "
                                  "specified: %s" % java_set_str([k for c in changes.values() for k in c]))
    for lower, layer in changes.items():
        sec = _tls_listener(listener_security, lower)
        if sec is None:
            continue   # not a TLS listener of this broker: stored and unused, as Kafka does
        try:
            merged = {**sec.dynamic, **layer}
            ctx, _ = _candidate(sec, merged)
            if _is_inter_broker(sec):
                _check_handshakes(sec, merged, ctx)
        except ConfigError as e:
            # never a value: the ConfigError names the setting only
            raise KeystoreUpdateError("Validation of dynamic config update of SSLFactory failed: %s" % e) from None


def apply(listener_security: Mapping[str, ListenerSecurity], raw: dict[str, str],
          on_reloaded: Optional[Callable[[ListenerSecurity], None]] = None) -> None:
    """This broker's whole stored dynamic set -> each TLS listener's keystore/truststore layer;
    ``on_reloaded(sec)`` after a listener took new stores."""
    changes = _by_listener(raw)
    for sec in listener_security.values():
        if not sec.tls:
            continue
        layer = changes.get(sec.name.lower(), {})
        if layer == sec.dynamic:
            continue
        try:
            ctx, leaf = _candidate(sec, layer)
        except ConfigError as e:
            log.error("listener %s keeps its keystore and truststore: the dynamic ones do not load (%s)", sec.name, e)
            continue
        # the context and the settings change together: new connections take the new certificate
        sec.dynamic, sec.ssl_context, sec.keystore_leaf = layer, ctx, leaf
        log.info("listener %s: keystore and truststore reloaded for new connections", sec.name)
        if on_reloaded is not None:
            on_reloaded(sec)
