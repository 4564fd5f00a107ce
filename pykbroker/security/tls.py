"""TLS of a listener: the server ``ssl.SSLContext`` and the principal of a client certificate.

Keys and certificates are PEM (Kafka's ``ssl.keystore.type=PEM``): ``ssl.keystore.location``
names one file holding the private key and the certificate chain, or the inline configs
``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` hold them (Kafka's
DefaultSslEngineFactory PEM support); ``ssl.key.password`` decrypts an encrypted key.  Trusted
CAs for client certificates: ``ssl.truststore.location`` (PEM file) or
``ssl.truststore.certificates`` (inline).  JKS and PKCS12 stores are refused (SKIPPED.md).
``ssl.client.auth`` none / requested / required map to CERT_NONE / CERT_OPTIONAL / CERT_REQUIRED.
"""
from __future__ import annotations

import os
import re
import ssl
import tempfile

from ..config import ConfigError

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _err(sec, key: str, why: str) -> ConfigError:
    # never the value: keys and passwords are secrets
    return ConfigError("listener %s: %s: %s" % (sec.name, key, why), key)


def server_context(sec) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # TLS versions: Kafka's ssl.enabled.protocols (TLSv1.2,TLSv1.3 by default); older ones are
    # not offered by any supported client and stay off.
    versions = [v for v in sec.get("ssl.enabled.protocols")]
    known = [_TLS_VERSIONS[v] for v in versions if v in _TLS_VERSIONS]
    if not known:
        raise _err(sec, "ssl.enabled.protocols", "none of %s is supported (TLSv1.2, TLSv1.3)" % versions)
    ctx.minimum_version, ctx.maximum_version = min(known), max(known)
    ciphers = sec.get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise _err(sec, "ssl.cipher.suites", "no cipher suite OpenSSL knows (OpenSSL names, e.g. "
                       "ECDHE-RSA-AES128-GCM-SHA256)") from None
    _load_keystore(sec, ctx)
    auth = sec.get("ssl.client.auth")
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[auth]
    if auth != "none":
        _load_truststore(sec, ctx)
    return ctx


def _check_type(sec, key: str, has_store: bool) -> None:
    t = (sec.get(key) or "").upper()
    if has_store and t != "PEM":
        raise _err(sec, key, "%s stores are not supported: set %s=PEM (see SKIPPED.md)" % (t or "JKS", key))


def _load_keystore(sec, ctx: ssl.SSLContext) -> None:
    location = sec.get("ssl.keystore.location")
    chain, key = sec.get("ssl.keystore.certificate.chain"), sec.get("ssl.keystore.key")
    password = sec.get("ssl.key.password") or sec.get("ssl.keystore.password")
    if location is None and chain is None:
        raise _err(sec, "ssl.keystore.location", "an SSL listener needs a key and certificate "
                   "(ssl.keystore.location or ssl.keystore.certificate.chain + ssl.keystore.key)")
    _check_type(sec, "ssl.keystore.type", True)
    try:
        if location is not None:
            ctx.load_cert_chain(location, password=password)
            return
        if key is None:
            raise _err(sec, "ssl.keystore.key", "ssl.keystore.certificate.chain needs ssl.keystore.key")
        # ssl loads keys from files only: a private temporary file, removed at once
        fd, path = tempfile.mkstemp(prefix="pykbroker-key-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(key.strip() + "\n" + chain.strip() + "\n")
            ctx.load_cert_chain(path, password=password)
        finally:
            os.unlink(path)
    except (ssl.SSLError, OSError) as e:
        raise _err(sec, "ssl.keystore.location" if location else "ssl.keystore.key",
                   "cannot load the key and certificate chain (%s)" % type(e).__name__) from None


def _load_truststore(sec, ctx: ssl.SSLContext) -> None:
    location, certs = sec.get("ssl.truststore.location"), sec.get("ssl.truststore.certificates")
    if location is None and certs is None:
        # Kafka (JSSE) falls back to the JVM's CAs; here the system's
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    _check_type(sec, "ssl.truststore.type", True)
    try:
        if location is not None:
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(cadata=certs)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise _err(sec, "ssl.truststore.location" if location else "ssl.truststore.certificates",
                   "cannot load the trusted certificates (%s)" % type(e).__name__) from None


# ------------------------------------------------------------------ principals

_RULE = re.compile(r"\s*(?:DEFAULT|RULE:((?:\\.|[^/\\])*)/((?:\\.|[^/\\])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules`` (SslPrincipalMapper): comma-separated rules,
    the first that matches the whole DN wins; ``DEFAULT`` is the DN itself;
    ``RULE:<regex>/<replacement>/[L|U]`` rewrites it (``$1``: group 1), lower or upper case."""

    def __init__(self, text: str, key: str = "ssl.principal.mapping.rules"):
        self.rules = []
        pos, text = 0, (text or "DEFAULT").strip()
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError("Invalid value %s for configuration %s: not Kafka's rule syntax "
                                  "(DEFAULT or RULE:pattern/replacement/[LU])" % (text, key), key)
            pos = m.end()
            if m.group(1) is None:
                self.rules.append(None)
            else:
                try:
                    rx = re.compile(m.group(1).replace("\\/", "/"))
                except re.error:
                    raise ConfigError("Invalid value %s for configuration %s: bad regular expression"
                                      % (text, key), key) from None
                repl = re.sub(r"\$(\d)", r"\\\1", m.group(2).replace("\\/", "/"))
                self.rules.append((rx, repl, m.group(3)))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            rx, repl, case = rule
            if rx.fullmatch(dn):
                out = rx.sub(repl, dn, count=1)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        # Kafka: no rule matched -> NoMatchingRule, the connection fails
        raise ValueError("no ssl.principal.mapping.rules rule matches the certificate's DN")


def certificate_dn(der: bytes) -> str:
    """The subject DN of a DER certificate in RFC 2253 order, as Java's
    X500Principal.getName() gives it (most specific first: ``CN=alice,O=org,C=US``)."""
    from cryptography import x509
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
