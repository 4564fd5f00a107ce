"""Throw-away certificates for tests and ``pykbroker.Broker(security=...)``: a CA, a server
certificate it signs (with the SANs clients check: the host names and addresses the broker is
reached by), and client certificates for mutual TLS.  Needs ``cryptography`` (the ``security``
extra); nothing here is meant for production keys."""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from typing import Any, Iterable


def _x509() -> tuple[Any, ...]:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as e:   # pragma: no cover - depends on the installation
        raise RuntimeError("throw-away certificates need the 'cryptography' package "
                           "(pip install 'pykbroker[security]')") from e
    return x509, hashes, serialization, ec, NameOID, ExtendedKeyUsageOID


@dataclass
class KeyPair:
    cert_pem: str     # the certificate (then the CA's, for a leaf: the chain)
    key_pem: str      # unencrypted PKCS#8 private key

    def write(self, directory: str, name: str) -> tuple[str, str]:
        """(cert file, key file) written under ``directory`` (the key readable by its owner only)."""
        cert, key = os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")
        with open(cert, "w") as fh:
            fh.write(self.cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.key_pem)
        return cert, key


class CertificateAuthority:
    def __init__(self, name: str = "pykbroker test CA") -> None:
        x509, hashes, serialization, ec, NameOID, _ = _x509()
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(hours=1))
                      .not_valid_after(now + datetime.timedelta(days=30))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, common_name: str, hosts: Iterable[str] = (), server: bool = True, subject: list | None = None) -> KeyPair:
        """A leaf certificate: ``hosts`` (names or IP addresses) as SANs; ``subject``: extra
        (OID name, value) pairs before the CN (e.g. [("O", "org")])."""
        x509, hashes, serialization, ec, NameOID, EKU = _x509()
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(getattr(NameOID, {"O": "ORGANIZATION_NAME", "OU": "ORGANIZATIONAL_UNIT_NAME",
                                                      "C": "COUNTRY_NAME", "L": "LOCALITY_NAME"}[k]), v)
                 for k, v in (subject or [])]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        sans = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(self._name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=30))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             # a server certificate is also a broker's client certificate towards the other
             # brokers (mTLS inter-broker listeners), as Kafka's keystores usually are
             .add_extension(x509.ExtendedKeyUsage([EKU.SERVER_AUTH, EKU.CLIENT_AUTH] if server else [EKU.CLIENT_AUTH]),
                            critical=False))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = b.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode() + self.cert_pem,
                       key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode())
