"""SASL/GSSAPI (Kerberos V5, RFC 4752) as Kafka's broker serves it, through the ``gssapi``
package (MIT Kerberos' GSS-API; the ``kerberos`` extra).  Sans-IO: a context step is a local
computation with the service key (no KDC is asked on the acceptor side).

The exchange, as the JDK's GSSAPI SaslServer that Kafka runs (GssKrb5Server):
1. the client's tokens go to the acceptor's security context until it is established; its last
   output token (the AP-REP of mutual authentication) is answered;
2. the client then sends an empty token; the server answers RFC 4752's security-layer offer,
   wrapped (integrity, no confidentiality): one octet of offered layers, ``0x01`` (no security
   layer: Kafka's ``javax.security.sasl.qop`` default ``auth``, so TLS, not SASL, protects the
   data), then the largest message it takes, 65536 in three octets (the JDK's default);
3. the client answers, wrapped: the layer it chose (it must be "none"), its own largest message,
   and an optional authorization id, which Kafka ignores: the principal is always the
   authenticated Kerberos name.
The principal is ``User:<short name>``, the client's Kerberos name mapped by
``sasl.kerberos.principal.to.local.rules`` (:class:`KerberosShortNamer`, Kafka's rules:
``DEFAULT`` gives the first component of a name in the default realm; ``RULE:[n:fmt](re)s/a/b/g/L``).
Any failure (a ticket the service key cannot read, a bad wrap, a refused layer, a name no rule
maps) is SASL_AUTHENTICATION_FAILED with Kafka's generic text.

The broker's key: the listener's ``gssapi.sasl.jaas.config`` with the JDK's Krb5LoginModule
options ``useKeyTab=true keyTab="..." principal="kafka/host@REALM"``; ``sasl.kerberos.service.name``
must be set (Kafka refuses to start without it).  The Kerberos configuration (realm, KDC) is
MIT's: ``KRB5_CONFIG`` or /etc/krb5.conf (the JVM's ``java.security.krb5.conf``).
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional

from .errors import AuthenticationFailed

_GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"
# RFC 4752 security layers (first octet): 1 none, 2 integrity, 4 confidentiality
NO_SECURITY_LAYER = 0x01
# the JDK's default largest message a SASL server takes (javax.security.sasl.maxbuffer)
MAX_BUFFER = 65536

# Kafka's KerberosName.NAME_PARSER: service[/host]@REALM
_NAME = re.compile(r"^([^/@]*)(/([^/@]*))?@([^/@]*)$")
# Kafka's KerberosShortNamer.RULE_PARSER (one rule)
_RULE = re.compile(r"\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L)?))")
_PARAM = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


class NoMatchingRule(Exception):
    pass


def parse_name(name: str) -> tuple:
    """(service, host or None, realm or None) of a Kerberos name, as Kafka's KerberosName.parse."""
    m = _NAME.match(name)
    if m is None:
        if "@" in name:
            raise ValueError("Malformed Kerberos name: %s" % name)
        return name, None, None
    return m.group(1), m.group(3), m.group(4)


class _Rule:
    def __init__(self, default_realm: str, default: bool, n: int = 0, fmt: str = "", match: Optional[str] = None,
                 frm: Optional[str] = None, to: str = "", repeat: bool = False, lower: bool = False) -> None:
        self.default_realm, self.default = default_realm, default
        self.n, self.fmt = n, fmt
        self.match = re.compile(match) if match is not None else None
        self.frm = re.compile(frm) if frm is not None else None
        # Java's replacement syntax ($1) to Python's (\1)
        self.to = re.sub(r"\$(\d)", r"\\\1", to)
        self.repeat, self.lower = repeat, lower

    def apply(self, params: list) -> Optional[str]:
        result = None
        if self.default:
            if self.default_realm == params[0]:
                result = params[1]
        elif len(params) - 1 == self.n:
            base = self._format(params)
            if self.match is None or self.match.fullmatch(base):
                result = base if self.frm is None else self.frm.sub(self.to, base, count=0 if self.repeat else 1)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule("Non-simple name %s after auth_to_local rule" % result)
        if result is not None and self.lower:
            result = result.lower()
        return result

    def _format(self, params: list) -> str:
        out, start = [], 0
        while start < len(self.fmt):
            m = _PARAM.match(self.fmt, start)
            if m is None or m.end() == start:
                break
            out.append(m.group(1))
            if m.group(3):
                i = int(m.group(3))
                if i >= len(params):
                    raise NoMatchingRule("index %d from %s is outside of the valid range 0 to %d"
                                         % (i, self.fmt, len(params) - 1))
                out.append(params[i])
            start = m.end()
        return "".join(out)


class KerberosShortNamer:
    """Kafka's ``sasl.kerberos.principal.to.local.rules`` (a list; default ``DEFAULT``)."""

    def __init__(self, default_realm: str, rules: Iterable[str] = ("DEFAULT",)) -> None:
        self.rules = []
        for text in rules:
            text = text.strip()
            m = _RULE.fullmatch(text)
            if m is None:
                raise ValueError("Invalid rule: %s" % text)
            if m.group(2):
                self.rules.append(_Rule(default_realm, True))
            else:
                self.rules.append(_Rule(default_realm, False, int(m.group(4) or 0), m.group(5), m.group(7),
                                        m.group(9), m.group(10) or "", m.group(11) == "g", m.group(12) == "L"))

    def short_name(self, name: str) -> str:
        service, host, realm = parse_name(name)
        if host is None:
            if realm is None:
                return service   # already simple
            params = [realm, service]
        else:
            params = [realm, service, host]
        for r in self.rules:
            out = r.apply(params)
            if out is not None:
                return out
        raise NoMatchingRule("No rules apply to %s" % name)


def gssapi_module() -> Any:
    try:
        import gssapi
    except ImportError:
        return None
    return gssapi


def default_realm() -> str:
    """The realm of MIT's configuration (KRB5_CONFIG), as the JDK reads krb5.conf's default_realm."""
    gssapi = gssapi_module()
    name = gssapi.Name("x", gssapi.NameType.user).canonicalize(gssapi.MechType.kerberos)
    return str(name).partition("@")[2]


def acceptor_credentials(principal: str, keytab: str) -> Any:
    """The broker's service credentials (its key from ``keytab``), checked at start-up."""
    gssapi = gssapi_module()
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
    creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})
    creds.inquire()   # a keytab without the principal's key fails here, not at the first client
    return creds


class GssapiServer:
    mechanism = "GSSAPI"

    def __init__(self, creds: Any, namer: KerberosShortNamer) -> None:
        gssapi = gssapi_module()
        self._gssapi = gssapi
        self._ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        self._namer = namer
        self._stage = 0   # 0: context, 1: awaiting the empty token, 2: awaiting the layer choice
        self._peer: Optional[str] = None
        self.complete = False
        self.authorization_id: Optional[str] = None

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if self.complete:
            raise AuthenticationFailed(_GENERIC, internal=True)
        try:
            if self._stage == 0:
                out = self._ctx.step(token)
                if not self._ctx.complete:
                    return out or b""
                self._peer = str(self._ctx.initiator_name)
                self._stage = 1
                if out:
                    return out   # the AP-REP; the client answers it with an empty token
                token = b""
            if self._stage == 1:
                if token:
                    raise AuthenticationFailed(_GENERIC, detail="GSSAPI: a token where the final handshake expects none")
                offer = bytes([NO_SECURITY_LAYER]) + MAX_BUFFER.to_bytes(3, "big")
                self._stage = 2
                return self._ctx.wrap(offer, False).message
            answer = self._ctx.unwrap(token).message
        except AuthenticationFailed:
            raise
        except Exception as e:   # gssapi's GSSError family: a ticket this key cannot read, a bad wrap
            raise AuthenticationFailed(_GENERIC, detail="GSSAPI: %s" % _gss_text(e)) from None
        if len(answer) < 4:
            raise AuthenticationFailed(_GENERIC, detail="GSSAPI: a security-layer answer of %d bytes" % len(answer))
        if answer[0] != NO_SECURITY_LAYER:
            raise AuthenticationFailed(_GENERIC, detail="GSSAPI: the client chose security layer %#x (only none is offered)"
                                       % answer[0])
        assert self._peer is not None
        try:
            self.authorization_id = self._namer.short_name(self._peer)
        except (NoMatchingRule, ValueError) as e:
            raise AuthenticationFailed(_GENERIC, detail="GSSAPI: no principal for %s: %s" % (self._peer, e)) from None
        self.complete = True
        return b""


def _gss_text(e: Exception) -> str:
    text = getattr(e, "gen_message", None)
    try:
        return text() if callable(text) else str(e)
    except Exception:
        return type(e).__name__
