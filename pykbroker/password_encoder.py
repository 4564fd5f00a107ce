"""Kafka's PasswordEncoder: PASSWORD-type dynamic broker configs (keystore and truststore
passwords, inline PEM keys, JAAS configs set through AlterConfigs) stored encrypted with
``password.encoder.secret`` instead of in clear, in Kafka's format, so a store written by
pykbroker reads back in Kafka and the other way round.

Kafka's EncryptingPasswordEncoder (server-common ``org.apache.kafka.security``): a key of
``password.encoder.key.length`` bits (128) derived from the secret by PBKDF2
(``password.encoder.keyfactory.algorithm``, PBKDF2WithHmacSHA512 by default) over a random 256-byte
salt and ``password.encoder.iterations`` (4096); the password's UTF-8 bytes encrypted with
``password.encoder.cipher.algorithm`` (AES/CBC/PKCS5Padding, a random IV); stored as the
comma-separated ``key:value`` pairs of a java.util.HashMap (its iteration order: Kafka joins the
map's entries as they come) of ``keyFactoryAlgorithm``, ``cipherAlgorithm``, ``keyLength``,
``salt``, ``iterations``, ``encryptedPassword``, ``passwordLength`` (Java characters) and
``initializationVector`` (standard base64 with padding).  Decoding checks the length, as Kafka's
sanity check does.

Where it applies is Kafka's DynamicBrokerConfig: with a secret, every PASSWORD-type value set on a
broker resource is stored encoded and decoded when read back (a value that does not decode, a
wrong or lost secret, is logged and left out, as Kafka ignores it); ``password.encoder.old.secret``
is tried when the secret does not decode a value, and at start-up the broker's own stored values
that the old secret decodes are encoded again with the current one and stored back
(:func:`reencode_layer`, Kafka's DynamicBrokerConfig.maybeReEncodePasswords), so the old secret
can be dropped at the next restart.  Without a secret, a ZooKeeper cluster refuses a password config
("Password encoder secret not configured", Kafka 3.x's ZooKeeper mode) and a single node stores it
as it is (Kafka's KRaft mode keeps passwords in its metadata log unencoded).  A password config at
the cluster default is refused ("Password config can be defined only at broker level").

Only AES in CBC mode is built (``AES/CBC/PKCS5Padding``, Kafka's default); another cipher is
refused at start-up (SKIPPED.md).
"""
from __future__ import annotations

import base64
import hashlib
import logging
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

from .config import BrokerConfig, ConfigError, is_password_key

log = logging.getLogger("pykbroker.configs")

_KEYS = ("keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "salt", "iterations", "encryptedPassword",
         "passwordLength", "initializationVector")
# javax.crypto's PBKDF2 names -> hashlib's digests
_KDF = {"PBKDF2WITHHMACSHA512": "sha512", "PBKDF2WITHHMACSHA256": "sha256", "PBKDF2WITHHMACSHA1": "sha1",
        "PBKDF2WITHHMACSHA384": "sha384", "PBKDF2WITHHMACSHA224": "sha224"}
_CIPHERS = ("AES/CBC/PKCS5PADDING",)


def _java_hash_map_order(keys: Iterable[str]) -> list[str]:
    from .config.dynamic import java_set_str   # the same bucket order as a java.util.HashSet
    return java_set_str(keys)[1:-1].split(", ")



class PasswordEncodingError(ValueError):
    pass


class PasswordEncoder:
    """Encrypts and decrypts with one secret (``old_secret``: a second one tried on decoding)."""

    def __init__(self, secret: str, key_factory: str | None = None, cipher: str = "AES/CBC/PKCS5Padding",
                 key_length: int = 128, iterations: int = 4096, old_secret: str | None = None) -> None:
        self.secret = secret
        self.old_secret = old_secret
        self.key_factory = key_factory or "PBKDF2WithHmacSHA512"
        self.cipher = cipher
        self.key_length = int(key_length)
        self.iterations = int(iterations)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> "PasswordEncoder | None":
        """The broker's encoder, None without ``password.encoder.secret``; a setting pykbroker
        cannot honour is a ConfigError (start-up)."""
        secret = config["password.encoder.secret"]
        if not secret:
            return None
        try:
            import cryptography  # noqa: F401  (AES: the security extra)
        except ImportError:
            raise ConfigError("password.encoder.secret needs the cryptography package: pip install "
                              "'pykbroker[security]'", "password.encoder.secret") from None
        kf, cipher = config["password.encoder.keyfactory.algorithm"], config["password.encoder.cipher.algorithm"]
        if kf and kf.upper() not in _KDF:
            raise ConfigError("Invalid value %s for configuration password.encoder.keyfactory.algorithm: pykbroker "
                              "knows PBKDF2WithHmacSHA1/224/256/384/512" % kf, "password.encoder.keyfactory.algorithm")
        if cipher.upper() not in _CIPHERS:
            raise ConfigError("Invalid value %s for configuration password.encoder.cipher.algorithm: pykbroker "
                              "knows AES/CBC/PKCS5Padding" % cipher, "password.encoder.cipher.algorithm")
        key_length = config["password.encoder.key.length"]
        if key_length not in (128, 192, 256):
            raise ConfigError("Invalid value %s for configuration password.encoder.key.length: AES takes 128, 192 "
                              "or 256" % key_length, "password.encoder.key.length")
        return cls(secret, kf, cipher, key_length, config["password.encoder.iterations"],
                   config["password.encoder.old.secret"])

    def _key(self, secret: str, kf: str, key_length: int, salt: bytes, iterations: int) -> bytes:
        digest = _KDF.get(kf.upper())
        if digest is None:
            raise PasswordEncodingError("unknown key factory %s" % kf)
        # Java's PBEKeySpec takes the secret's chars; its PBKDF2 uses their UTF-8 bytes
        return hashlib.pbkdf2_hmac(digest, secret.encode("utf-8"), salt, iterations, key_length // 8)

    def encode(self, password: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        salt, iv = os.urandom(256), os.urandom(16)
        key = self._key(self.secret, self.key_factory, self.key_length, salt, self.iterations)
        padder = padding.PKCS7(128).padder()
        data = padder.update(password.encode("utf-8")) + padder.finalize()
        enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = enc.update(data) + enc.finalize()
        b64 = lambda b: base64.b64encode(b).decode()   # noqa: E731
        values = {"keyFactoryAlgorithm": self.key_factory, "cipherAlgorithm": self.cipher,
                  "keyLength": str(self.key_length), "salt": b64(salt), "iterations": str(self.iterations),
                  "encryptedPassword": b64(encrypted),
                  "passwordLength": str(len(password.encode("utf-16-le")) // 2),   # Java chars
                  "initializationVector": b64(iv)}
        return ",".join("%s:%s" % (k, values[k]) for k in _java_hash_map_order(values))

    def decode(self, encoded: str) -> str:
        """The password; PasswordEncodingError when neither secret decodes it."""
        params = parse_encoded(encoded)
        if params is None:
            raise PasswordEncodingError("not an encoded password")
        for secret in (self.secret, self.old_secret):
            if secret:
                try:
                    return self._decode(secret, params)
                except PasswordEncodingError:
                    continue
        raise PasswordEncodingError("Password could not be decoded")

    def _decode(self, secret: str, p: dict) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        try:
            if p.get("cipherAlgorithm", "").upper() not in _CIPHERS:
                raise PasswordEncodingError("cipher %s not supported" % p.get("cipherAlgorithm"))
            key = self._key(secret, p.get("keyFactoryAlgorithm") or "PBKDF2WithHmacSHA512", int(p["keyLength"]),
                            base64.b64decode(p["salt"]), int(p["iterations"]))
            dec = Cipher(algorithms.AES(key), modes.CBC(base64.b64decode(p["initializationVector"]))).decryptor()
            data = dec.update(base64.b64decode(p["encryptedPassword"])) + dec.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(data) + unpadder.finalize()).decode("utf-8")
        except PasswordEncodingError:
            raise
        except Exception:   # a wrong key: bad padding or bytes that are no UTF-8
            raise PasswordEncodingError("Password could not be decoded") from None
        if len(password.encode("utf-16-le")) // 2 != int(p["passwordLength"]):
            raise PasswordEncodingError("Password could not be decoded, sanity check of length failed")
        return password


def parse_encoded(value: str) -> dict | None:
    """The parameters of an encoded password (Kafka's Csv.parseCsvMap), or None when ``value``
    is not one (a password stored in clear)."""
    if not isinstance(value, str) or "encryptedPassword:" not in value:
        return None
    out = {}
    for item in value.split(","):
        k, sep, v = item.partition(":")
        if not sep:
            return None
        out[k.strip()] = v.strip()
    return out if "encryptedPassword" in out and "salt" in out else None


def encode_changed(encoder: "PasswordEncoder | None", per_broker: bool, cluster: bool,
                   changed: dict[str, str]) -> dict[str, str]:
    """The values to store for the configs ``changed`` by a request (Kafka's
    DynamicBrokerConfig.toPersistentProps): password configs encoded.  ConfigError with Kafka's
    text for a password at the cluster default, or on a ZooKeeper cluster without a secret."""
    out = dict(changed)
    if encoder is None and not cluster:
        return out   # a single node without a secret: stored as they are (Kafka's KRaft mode)
    for key, value in changed.items():
        if value is None or not is_password_key(key):
            continue
        if not per_broker:
            raise ConfigError("Password config can be defined only at broker level", key)
        if encoder is not None:
            out[key] = encoder.encode(value)
        elif cluster:
            raise ConfigError("Password encoder secret not configured", key)
    return out


def reencode_layer(encoder: "PasswordEncoder | None", raw: dict[str, str]) -> dict[str, str] | None:
    """Kafka's maybeReEncodePasswords: a broker's stored dynamic set with every password config
    that ``password.encoder.old.secret`` decodes encoded again with ``password.encoder.secret``;
    None when there is nothing to re-encode (no old secret, or no value it decodes: those are
    left as they are, as Kafka ignores the old secret's decoding errors, since it may simply
    not have been removed after an earlier rotation)."""
    if encoder is None or not encoder.old_secret:
        return None
    out, changed = dict(raw), False
    for key, value in raw.items():
        params = parse_encoded(value)
        if params is None or not is_password_key(key):
            continue
        try:
            password = encoder._decode(encoder.old_secret, params)
        except PasswordEncodingError:
            continue   # encoded with the current secret already, or with neither
        out[key] = encoder.encode(password)
        changed = True
    return out if changed else None


def decode_layer(encoder: "PasswordEncoder | None", entity: str, raw: dict[str, str]) -> dict[str, str]:
    """A stored dynamic set with its encoded passwords decoded (Kafka's fromPersistentProps); a
    password that does not decode is left out with one log line (never its value)."""
    out = {}
    for key, value in raw.items():
        if parse_encoded(value) is None:
            out[key] = value   # not encoded (a single node without a secret stores passwords as they are)
            continue
        if encoder is None:
            log.error("Dynamic password config %s of %s could not be decoded (no password.encoder.secret), ignoring",
                      key, entity or "the cluster default")
            continue
        try:
            out[key] = encoder.decode(value)
        except PasswordEncodingError as e:
            log.error("Dynamic password config %s of %s could not be decoded (%s), ignoring",
                      key, entity or "the cluster default", e)
    return out
