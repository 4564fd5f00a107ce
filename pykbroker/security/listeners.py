"""A listener's effective security settings, resolved once at start-up.

Kafka reads each ``ssl.*`` / ``sasl.*`` setting of a listener from
``listener.name.<listener name, lower case>.<key>`` first, then the broker-wide ``<key>``;
mechanism settings (the JAAS config) from ``listener.name.<l>.<mechanism, lower case>.<key>``
(Kafka's ListenerName.saslMechanismConfigPrefix).  ``ListenerSecurity.build`` reads them all and
raises ``ConfigError`` for anything the broker cannot serve, so a misconfigured listener stops
the start-up instead of failing its first client.
"""
from __future__ import annotations

import re
import ssl
from typing import TYPE_CHECKING, Any, Optional

from ..config import BROKER_CONFIGS, ConfigError

if TYPE_CHECKING:
    from ..config.broker import BrokerConfig
    from .kerberos import KerberosShortNamer
    from .tls import PrincipalMapper

# Mechanisms built (security/plain.py, scram.py, oauthbearer.py, kerberos.py: GSSAPI through
# the optional gssapi package, refused at start-up without it).
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in range(0, len(b := s.encode("utf-16-be")), 2):
        h = (31 * h + int.from_bytes(b[unit:unit + 2], "big")) & 0xFFFFFFFF
    return h


def java_hash_set_order(items: list[str]) -> list[str]:
    """The iteration order of ``new HashSet<>(items)`` in Java: buckets of a table of the
    default size (16, or the power of two above size/0.75), each in insertion order."""
    items = list(dict.fromkeys(items))
    cap = max(int(len(items) / 0.75) + 1, 16)
    size = 1
    while size < cap:
        size <<= 1
    keyed = []
    for i, x in enumerate(items):
        h = _java_string_hash(x)
        keyed.append(((h ^ (h >> 16)) & (size - 1), i, x))
    return [x for _, _, x in sorted(keyed)]


class ListenerSecurity:
    def __init__(self, config: BrokerConfig, name: str, protocol: str) -> None:
        self.config = config
        self.name = name
        self.protocol = protocol
        self.tls = protocol in ("SSL", "SASL_SSL")
        self.sasl = protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        self.ssl_context: Optional[ssl.SSLContext] = None          # TLS listeners, built by build()
        self.client_auth = "none"
        self.principal_rules: Optional[PrincipalMapper] = None
        self.mechanisms: list[str] = []
        self.plain_users: dict[str, str] = {}
        self.oauth_options: dict[str, str] = {}   # the unsecured validator's JAAS options
        self.gssapi_credentials: Any = None       # GSSAPI: the broker's service key (kerberos.py)
        self.kerberos_namer: Optional[KerberosShortNamer] = None   # sasl.kerberos.principal.to.local.rules
        # listener.name.<l>.ssl.keystore.* / ssl.truststore.* set through AlterConfigs (security/reload.py), raw;
        # read before the static settings, as Kafka's dynamic per-broker layer is
        self.dynamic: dict[str, str] = {}
        self.keystore_leaf: bytes | None = None   # the certificate served (DER), when readable

    # -- reading settings ------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """``listener.name.<l>.<key>`` (parsed as ``key`` is), else the broker-wide ``key``."""
        prefixed = "listener.name.%s.%s" % (self.name.lower(), key)
        raw = self.dynamic.get(prefixed)
        if raw is None:
            raw = self.config.listener_overrides.get(prefixed)
        if raw is not None:
            d = BROKER_CONFIGS.get(key)
            try:
                return d.parse(raw) if d is not None else raw
            except ConfigError as e:
                raise ConfigError(str(e).replace("configuration %s" % key, "configuration %s" % prefixed),
                                  prefixed) from None
        if key in BROKER_CONFIGS:
            return self.config[key]
        return None

    def mechanism_get(self, mechanism: str, key: str) -> Any:
        """A mechanism's setting: ``listener.name.<l>.<mechanism>.<key>``, else the listener's."""
        raw = self.config.listener_overrides.get("listener.name.%s.%s.%s" % (self.name.lower(), mechanism.lower(), key))
        return raw if raw is not None else self.get(key)

    # -- building --------------------------------------------------------------------------
    @classmethod
    def build(cls, config: BrokerConfig, name: str, protocol: str) -> "ListenerSecurity":
        self = cls(config, name, protocol)
        if self.tls:
            from .tls import PrincipalMapper, server_context
            self.client_auth = self.get("ssl.client.auth")
            self.ssl_context = server_context(self)
            self.principal_rules = PrincipalMapper(self.get("ssl.principal.mapping.rules"),
                                                   "listener.name.%s.ssl.principal.mapping.rules" % name.lower())
        if self.sasl:
            self._build_sasl()
        return self

    def _build_sasl(self) -> None:
        from .jaas import JaasError, login_module_options, plain_users
        mechs = [m.strip().upper() for m in self.get("sasl.enabled.mechanisms")]
        key = "listener.name.%s.sasl.enabled.mechanisms" % self.name.lower()
        if not mechs:
            raise ConfigError("Invalid value for configuration %s: listener %s (%s) needs at least one SASL "
                              "mechanism" % (key, self.name, self.protocol), key)
        unsupported = [m for m in mechs if m not in SUPPORTED_MECHANISMS]
        if unsupported:
            raise ConfigError("Invalid value %s for configuration %s: pykbroker serves only %s"
                              % (",".join(mechs), key, ", ".join(SUPPORTED_MECHANISMS)), key)
        # SaslHandshake lists them in Kafka's order: its authenticator copies the configured list
        # through a java.util.HashSet (checked against Apache Kafka 4.4, tests/differential)
        self.mechanisms = java_hash_set_order(mechs)
        if "PLAIN" in mechs:
            jaas = self.mechanism_get("PLAIN", "sasl.jaas.config")
            if jaas is None:
                raise ConfigError("listener %s enables PLAIN but sets no listener.name.%s.plain.sasl.jaas.config "
                                  "(PlainLoginModule with user_<name>=\"<password>\" options)"
                                  % (self.name, self.name.lower()), "sasl.jaas.config")
            try:
                self.plain_users = plain_users(jaas)
            except JaasError as e:
                raise ConfigError("Invalid value for configuration listener.name.%s.plain.sasl.jaas.config: %s"
                                  % (self.name.lower(), e), "sasl.jaas.config") from None
        if "OAUTHBEARER" in mechs:
            # Kafka's broker needs an OAuthBearerLoginModule entry; pykbroker reads only the
            # validator options from it, defaults when there is none
            jaas = self.mechanism_get("OAUTHBEARER", "sasl.jaas.config")
            if jaas is not None:
                try:
                    self.oauth_options = login_module_options(jaas, "OAuthBearerLoginModule")
                except JaasError as e:
                    raise ConfigError("Invalid value for configuration listener.name.%s.oauthbearer.sasl.jaas.config: "
                                      "%s" % (self.name.lower(), e), "sasl.jaas.config") from None
            from .oauthbearer import JwtValidator   # signed JWTs when Kafka's secured handler is set
            self.oauth_validator = JwtValidator.from_listener(self)
        if "GSSAPI" in mechs:
            self._build_gssapi()

    def _build_gssapi(self) -> None:
        """The broker's Kerberos service key from the listener's Krb5LoginModule options, as
        Kafka's broker logs in at start-up (a missing or unreadable keytab stops it there)."""
        from . import kerberos
        from .jaas import JaasError, login_module_options
        key = "listener.name.%s.gssapi.sasl.jaas.config" % self.name.lower()
        if kerberos.gssapi_module() is None:
            raise ConfigError("listener %s enables GSSAPI, which needs the gssapi package (MIT Kerberos' GSS-API): "
                              "pip install 'pykbroker[kerberos]' (it builds against libkrb5-dev)" % self.name, key)
        jaas = self.mechanism_get("GSSAPI", "sasl.jaas.config")
        if jaas is None:
            # Kafka's words when the broker finds no login for the listener
            raise ConfigError("listener %s enables GSSAPI but sets no %s: Could not find a 'KafkaServer' or "
                              "'%s.KafkaServer' entry in the JAAS configuration (a Krb5LoginModule with "
                              "useKeyTab=true keyTab=\"...\" principal=\"kafka/<host>@<REALM>\")"
                              % (self.name, key, self.name.lower()), key)
        try:
            opts = login_module_options(jaas, "Krb5LoginModule")
        except JaasError as e:
            raise ConfigError("Invalid value for configuration %s: %s" % (key, e), key) from None
        service = self.mechanism_get("GSSAPI", "sasl.kerberos.service.name") or opts.get("serviceName")
        if not service:
            raise ConfigError("No serviceName defined in either JAAS or Kafka config (sasl.kerberos.service.name)",
                              "sasl.kerberos.service.name")
        principal, keytab = opts.get("principal"), opts.get("keyTab")
        if str(opts.get("useKeyTab", "false")).lower() != "true" or not principal or not keytab:
            # a broker logs in from a keytab; a ticket cache would expire under it
            raise ConfigError("Invalid value for configuration %s: the broker's Krb5LoginModule needs useKeyTab=true, "
                              "keyTab and principal" % key, key)
        try:
            self.gssapi_credentials = kerberos.acceptor_credentials(principal, keytab)
            realm = kerberos.default_realm()
        except Exception as e:   # gssapi's errors: no such key in the keytab, no krb5.conf
            raise ConfigError("Invalid value for configuration %s: cannot log in as %s from %s: %s"
                              % (key, principal, keytab, kerberos._gss_text(e)), key) from None
        rules = self.mechanism_get("GSSAPI", "sasl.kerberos.principal.to.local.rules") or ["DEFAULT"]
        if isinstance(rules, str):
            rules = [r for r in rules.split(",") if r.strip()]
        try:
            self.kerberos_namer = kerberos.KerberosShortNamer(realm, rules)
        except (ValueError, re.error) as e:
            raise ConfigError("Invalid value %s for configuration sasl.kerberos.principal.to.local.rules: %s"
                              % (",".join(rules), e), "sasl.kerberos.principal.to.local.rules") from None
