"""TLS of a listener: the server ``ssl.SSLContext`` and the principal of a client certificate.

Keystores (the listener's key and certificate chain), as Kafka's DefaultSslEngineFactory reads
them, by ``ssl.keystore.type``:
- ``PEM``: ``ssl.keystore.location`` names one file holding the private key and the chain, or the
  inline configs ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` hold them;
  ``ssl.key.password`` decrypts an encrypted key.
- ``PKCS12`` (through ``cryptography``) and ``JKS`` / ``JCEKS`` (through ``pyjks``):
  ``ssl.keystore.location`` with ``ssl.keystore.password`` (the store's integrity and, for
  PKCS12, its encryption) and ``ssl.key.password`` (a JKS key entry's; Kafka's default: the
  keystore password).  The store must hold exactly one private key entry.
Truststores (the CAs trusted for client certificates, and for the broker's own connections to
the other brokers), by ``ssl.truststore.type``: ``PEM`` (``ssl.truststore.location`` or inline
``ssl.truststore.certificates``), ``PKCS12`` or ``JKS`` (their certificate entries, with
``ssl.truststore.password``).  ``JKS`` is Kafka's default type of both (SslConfigs).
A store that cannot be read (wrong password, wrong type, missing file) is a ``ConfigError``
naming the setting: the listener fails at start-up, as Kafka's does.
``ssl.client.auth`` none / requested / required map to CERT_NONE / CERT_OPTIONAL / CERT_REQUIRED.
"""
from __future__ import annotations

import os
import re
import ssl
import tempfile
from typing import TYPE_CHECKING, Any, Optional

from ..config import ConfigError

if TYPE_CHECKING:
    from .listeners import ListenerSecurity

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _err(sec: ListenerSecurity, key: str, why: str) -> ConfigError:
    # never the value: keys and passwords are secrets
    return ConfigError("listener %s: %s: %s" % (sec.name, key, why), key)


def server_context(sec: ListenerSecurity) -> ssl.SSLContext:
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
    sec.keystore_leaf = load_keystore(sec, ctx)
    auth = sec.get("ssl.client.auth")
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[auth]
    if auth != "none":
        load_truststore(sec, ctx)
    return ctx


# The first bytes of a store file tell its format.  Java (keystore.type.compat, on by default
# since JDK 8) reads a JKS file through the PKCS12 type and a PKCS12 file through JKS, so Kafka
# listeners with either binary type accept either file: so does pykbroker.
_JKS_MAGIC, _JCEKS_MAGIC = b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce"
_BINARY_TYPES = ("PKCS12", "JKS", "JCEKS")


def _store_type(sec: ListenerSecurity, key: str) -> str:
    t = (sec.get(key) or "JKS").upper()   # JKS: Kafka's default (SslConfigs)
    if t != "PEM" and t not in _BINARY_TYPES:
        raise _err(sec, key, "%s stores are not supported (PEM, PKCS12, JKS or JCEKS; see SKIPPED.md)" % t)
    return t


def _read_store(sec: ListenerSecurity, kind: str, location: str, stype: str) -> tuple[bytes, str]:
    """(the file's bytes, its format: JKS / PKCS12) of a binary store; ConfigError when the file
    is missing or is PEM under a binary type."""
    try:
        with open(location, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise _err(sec, "ssl.%s.location" % kind, "cannot read the %s file (%s)" % (kind, type(e).__name__)) from None
    if data.lstrip()[:5] == b"-----":
        raise _err(sec, "ssl.%s.type" % kind, "ssl.%s.location is a PEM file but ssl.%s.type is %s: set "
                   "ssl.%s.type=PEM" % (kind, kind, stype, kind))
    return data, ("JKS" if data[:4] in (_JKS_MAGIC, _JCEKS_MAGIC) else "PKCS12")


def _needs(module: str, package: str, what: str) -> Any:
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:   # pragma: no cover - depends on the installation
        raise ConfigError("%s stores need the '%s' package (pip install 'pykbroker[security]')" % (what, package),
                          "ssl.keystore.type") from None


def _jks() -> Any:
    return _needs("jks", "pyjks", "JKS")


def _keystore_der(sec: ListenerSecurity, location: str, stype: str) -> tuple[bytes, list[bytes]]:
    """(PKCS#8 DER private key, [DER certificates, leaf first]) of a PKCS12 or JKS keystore."""
    data, fmt = _read_store(sec, "keystore", location, stype)
    store_pw = sec.get("ssl.keystore.password")
    if store_pw is None:
        # Kafka: "SSL key store is specified, but key store password is not specified."
        raise _err(sec, "ssl.keystore.password", "a %s keystore needs its password" % stype)
    key_pw = sec.get("ssl.key.password") or store_pw
    if fmt == "PKCS12":
        _needs("cryptography", "cryptography", "PKCS12")
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(data, store_pw.encode())
        except ValueError:
            # cryptography cannot tell a wrong password from a damaged file: name the password,
            # the usual cause, and the file
            raise _err(sec, "ssl.keystore.password", "cannot open the PKCS12 keystore at ssl.keystore.location "
                       "(wrong password, or not a PKCS12 file)") from None
        if key is None or cert is None:
            raise _err(sec, "ssl.keystore.location", "the PKCS12 keystore holds no private key entry")
        der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        enc = serialization.Encoding.DER
        return der, [cert.public_bytes(enc)] + [c.public_bytes(enc) for c in extra or ()]
    jks = _jks()
    try:
        ks = jks.KeyStore.loads(data, store_pw, try_decrypt_keys=False)
    except jks.util.KeystoreSignatureException:
        raise _err(sec, "ssl.keystore.password", "the JKS keystore's integrity check failed: wrong password") from None
    except Exception as e:   # pyjks raises assorted errors on a damaged file
        raise _err(sec, "ssl.keystore.location", "not a readable JKS keystore (%s)" % type(e).__name__) from None
    entries = list(ks.private_keys.values())
    if len(entries) != 1:
        raise _err(sec, "ssl.keystore.location", "the JKS keystore holds %d private key entries; a listener "
                   "needs exactly one" % len(entries))
    entry = entries[0]
    try:
        entry.decrypt(key_pw)
    except Exception:
        raise _err(sec, "ssl.key.password", "cannot decrypt the JKS keystore's private key: wrong password") from None
    return entry.pkey_pkcs8, [der for _type, der in entry.cert_chain]


def _truststore_der(sec: ListenerSecurity, location: str, stype: str) -> list[bytes]:
    """The DER certificates of a PKCS12 or JKS truststore's entries."""
    data, fmt = _read_store(sec, "truststore", location, stype)
    pw = sec.get("ssl.truststore.password")
    if fmt == "PKCS12":
        _needs("cryptography", "cryptography", "PKCS12")
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12
        try:
            store = pkcs12.load_pkcs12(data, pw.encode() if pw is not None else None)
        except ValueError:
            raise _err(sec, "ssl.truststore.password", "cannot open the PKCS12 truststore at "
                       "ssl.truststore.location (wrong password, or not a PKCS12 file)") from None
        certs = ([store.cert] if store.cert else []) + list(store.additional_certs)
        return [c.certificate.public_bytes(Encoding.DER) for c in certs]
    jks = _jks()
    try:
        # no password: no integrity check, as Java loads a truststore without one
        ks = jks.KeyStore.loads(data, pw, try_decrypt_keys=False)
    except jks.util.KeystoreSignatureException:
        raise _err(sec, "ssl.truststore.password", "the JKS truststore's integrity check failed: wrong password") from None
    except Exception as e:
        raise _err(sec, "ssl.truststore.location", "not a readable JKS truststore (%s)" % type(e).__name__) from None
    return [entry.cert for entry in ks.certs.values()]


def _load_der_chain(ctx: ssl.SSLContext, key_der: bytes, chain: list[bytes]) -> None:
    # ssl loads keys from files only: a private temporary file, removed at once, the key in it
    # encrypted with a one-time password so no plain key touches the disk
    import secrets
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    once = secrets.token_bytes(24)
    key = serialization.load_der_private_key(key_der, None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(once))
    for der in chain:
        pem += x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
    fd, path = tempfile.mkstemp(prefix="pykbroker-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        ctx.load_cert_chain(path, password=once)
    finally:
        os.unlink(path)


def _first_pem_cert(text: str) -> Optional[bytes]:
    start = text.find("-----BEGIN CERTIFICATE-----")
    end = text.find("-----END CERTIFICATE-----", start)
    if start < 0 or end < 0:
        return None
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import Encoding
        pem = text[start:end + len("-----END CERTIFICATE-----")].encode()
        return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    except (ImportError, ValueError):
        return None


def load_keystore(sec: ListenerSecurity, ctx: ssl.SSLContext) -> Optional[bytes]:
    """The listener's key and certificate chain into ``ctx`` (module docstring).  Returns the
    leaf certificate (DER) when it can be read, else None: a dynamic keystore update compares
    it with the new one (security/reload.py)."""
    location = sec.get("ssl.keystore.location")
    chain, key = sec.get("ssl.keystore.certificate.chain"), sec.get("ssl.keystore.key")
    if location is None and chain is None:
        raise _err(sec, "ssl.keystore.location", "an SSL listener needs a key and certificate "
                   "(ssl.keystore.location or ssl.keystore.certificate.chain + ssl.keystore.key)")
    stype = _store_type(sec, "ssl.keystore.type")
    if location is not None and stype != "PEM":
        key_der, certs = _keystore_der(sec, location, stype)
        try:
            _load_der_chain(ctx, key_der, certs)
        except (ssl.SSLError, ValueError) as e:
            raise _err(sec, "ssl.keystore.location", "the key does not match the certificate chain (%s)"
                       % type(e).__name__) from None
        return certs[0] if certs else None
    if stype != "PEM":
        # Kafka: the inline configs are PEM only
        raise _err(sec, "ssl.keystore.type", "ssl.keystore.certificate.chain / ssl.keystore.key need ssl.keystore.type=PEM")
    password = sec.get("ssl.key.password") or sec.get("ssl.keystore.password")
    try:
        if location is not None:
            ctx.load_cert_chain(location, password=password)
            with open(location, errors="replace") as fh:
                return _first_pem_cert(fh.read())
        if key is None:
            raise _err(sec, "ssl.keystore.key", "ssl.keystore.certificate.chain needs ssl.keystore.key")
        fd, path = tempfile.mkstemp(prefix="pykbroker-key-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(key.strip() + "\n" + chain.strip() + "\n")
            ctx.load_cert_chain(path, password=password)
        finally:
            os.unlink(path)
        return _first_pem_cert(chain)
    except (ssl.SSLError, OSError) as e:
        raise _err(sec, "ssl.keystore.location" if location else "ssl.keystore.key",
                   "cannot load the key and certificate chain (%s)" % type(e).__name__) from None


_load_keystore = load_keystore


def load_truststore(sec: ListenerSecurity, ctx: ssl.SSLContext) -> None:
    location, certs = sec.get("ssl.truststore.location"), sec.get("ssl.truststore.certificates")
    if location is None and certs is None:
        # Kafka (JSSE) falls back to the JVM's CAs; here the system's
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    stype = _store_type(sec, "ssl.truststore.type")
    if location is not None and stype != "PEM":
        ders = _truststore_der(sec, location, stype)
        if not ders:
            raise _err(sec, "ssl.truststore.location", "the truststore holds no certificate")
        try:
            ctx.load_verify_locations(cadata=b"".join(ders))
        except (ssl.SSLError, ValueError) as e:
            raise _err(sec, "ssl.truststore.location", "cannot load the trusted certificates (%s)"
                       % type(e).__name__) from None
        return
    if stype != "PEM":
        raise _err(sec, "ssl.truststore.type", "ssl.truststore.certificates needs ssl.truststore.type=PEM")
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

    def __init__(self, text: str, key: str = "ssl.principal.mapping.rules") -> None:
        # (pattern, replacement, case) per RULE; None for DEFAULT
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
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
