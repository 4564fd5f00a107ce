"""``pykbroker.Broker(security=..., users=..., mechanisms=...)``: a secured test broker in one line.

``SecureSetup`` makes what a secured listener needs and what its clients need to reach it: a
throw-away CA and a server certificate (SANs: localhost, 127.0.0.1, ::1 and the bind host) in
a private temporary directory removed with the broker object, the PLAIN users as a JAAS config,
the SCRAM credentials (salted, stored through the controller as AlterUserScramCredentials
would), and client settings for confluent-kafka, kafka-python and aiokafka.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import TYPE_CHECKING, Any

from ..security.scram import MECHANISMS as SCRAM_MECHANISMS
from ..security.scram import new_credential

if TYPE_CHECKING:
    import ssl
    from collections.abc import Iterable

    from ..broker import BrokerServer
    from ..protocol.wire import WireClient

PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# A SASL broker with no users given gets this one, so client_config() always works.
DEFAULT_USERS = {"admin": "admin-secret"}


def _jaas_quote(s: str) -> str:
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


class SecureSetup:
    def __init__(self, security: str, users: dict[str, str] | None = None, mechanisms: Iterable[str] | None = None,
                 host: str = "127.0.0.1") -> None:
        self.protocol = str(security).upper()
        if self.protocol not in PROTOCOLS:
            raise ValueError("security must be one of %s, not %r" % (", ".join(PROTOCOLS), security))
        self.tls = "SSL" in self.protocol
        self.sasl = self.protocol.startswith("SASL")
        self.users = dict(users if users else (DEFAULT_USERS if self.sasl else {}))
        self.mechanisms = [m.upper() for m in (mechanisms or (DEFAULT_MECHANISMS if self.sasl else ()))]
        # OAUTHBEARER against listeners validating signed JWTs: user -> a token they accept,
        # used by the harness's own connections (wire_client) instead of an unsecured token
        self.oauth_token = None
        self.dir = tempfile.mkdtemp(prefix="pykbroker-security-")
        weakref.finalize(self, shutil.rmtree, self.dir, True)
        self.ca_file = self.keystore = None
        if self.tls:
            from ..security.certs import CertificateAuthority
            self.ca = CertificateAuthority()
            hosts = ["localhost", "127.0.0.1", "::1"] + ([host] if host not in ("localhost", "127.0.0.1", "::1", "", "0.0.0.0", "::") else [])
            pair = self.ca.issue("localhost", hosts)
            self.ca_file = os.path.join(self.dir, "ca.pem")
            with open(self.ca_file, "w") as fh:
                fh.write(self.ca.cert_pem)
            self.keystore = os.path.join(self.dir, "server.pem")   # Kafka's PEM keystore: key, then chain
            fd = os.open(self.keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(pair.key_pem + pair.cert_pem)

    def broker_config(self) -> dict:
        """Broker settings (server.properties keys) for the listener named after the protocol."""
        out = {}
        lname = self.protocol.lower()
        if self.tls:
            out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": self.keystore})
        if self.sasl:
            out["sasl.enabled.mechanisms"] = ",".join(self.mechanisms)
            if "PLAIN" in self.mechanisms:
                users = " ".join("user_%s=%s" % (u, _jaas_quote(p)) for u, p in sorted(self.users.items()))
                out["listener.name.%s.plain.sasl.jaas.config" % lname] = (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required %s;" % users)
        return out

    # -- a cluster of such brokers -------------------------------------------------------------
    # The brokers authenticate to each other as this user (Kafka's usual "broker principal"),
    # with the first SCRAM mechanism enabled, else PLAIN, else OAUTHBEARER (an unsecured token
    # naming it); its password is made per setup.
    BROKER_USER = "broker"

    def _inter_broker_mechanism(self) -> str | None:
        if not self.sasl:
            return None
        return next((m for m in self.mechanisms if m in SCRAM_MECHANISMS),
                    next((m for m in ("PLAIN", "OAUTHBEARER") if m in self.mechanisms), None))

    def cluster_broker_config(self, overrides: dict | None = None) -> dict:
        """Broker settings of a cluster member: the listener of :meth:`broker_config` is also the
        inter-broker one (``security.inter.broker.protocol``), the brokers trust the setup's CA,
        and authenticate as ``BROKER_USER`` with ``sasl.mechanism.inter.broker.protocol`` and
        the credentials in ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (Kafka's keys).
        With an authorizer in ``overrides`` the broker principal joins ``super.users`` (what
        gives it CLUSTER_ACTION, as Kafka's brokers need)."""
        overrides = dict(overrides or {})
        out = self.broker_config()
        lname = self.protocol.lower()
        out["security.inter.broker.protocol"] = self.protocol
        if self.tls:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file})
        mech = self._inter_broker_mechanism()
        if mech is not None:
            if not hasattr(self, "broker_password"):
                import secrets
                self.broker_password = secrets.token_urlsafe(18)
            out["sasl.mechanism.inter.broker.protocol"] = mech
            creds = "username=%s password=%s" % (_jaas_quote(self.BROKER_USER), _jaas_quote(self.broker_password))
            if mech == "PLAIN":
                key = "listener.name.%s.plain.sasl.jaas.config" % lname
                users = dict(self.users, **{self.BROKER_USER: self.broker_password})
                out[key] = ("org.apache.kafka.common.security.plain.PlainLoginModule required %s %s;"
                            % (creds, " ".join("user_%s=%s" % (u, _jaas_quote(p)) for u, p in sorted(users.items()))))
            elif mech == "OAUTHBEARER":
                # Kafka's unsecured login: the broker's own token names it (the listener runs the
                # unsecured validator, which accepts it)
                out["listener.name.%s.oauthbearer.sasl.jaas.config" % lname] = (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                    "unsecuredLoginStringClaim_sub=%s;" % _jaas_quote(self.BROKER_USER))
            else:
                out["listener.name.%s.%s.sasl.jaas.config" % (lname, mech.lower())] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required %s;" % creds)
        if overrides.get("authorizer.class.name") and mech is not None:
            principal = "User:%s" % self.BROKER_USER
            supers = [p for p in (overrides.get("super.users") or "").split(";") if p]
            if principal not in supers:
                out["super.users"] = ";".join(supers + [principal])
        return out

    def scram_credentials(self) -> list:
        """[(user, mechanism, stored text)] of every SCRAM user, the broker's own included."""
        users = dict(self.users)
        if getattr(self, "broker_password", None):
            users[self.BROKER_USER] = self.broker_password
        return [(user, mech, new_credential(mech, password).to_text())
                for mech in self.mechanisms if mech in SCRAM_MECHANISMS
                for user, password in sorted(users.items())]

    def seed_zookeeper(self, connect: str, timeout: float = 15.0) -> None:
        """The SCRAM users written into ZooKeeper before any broker starts, as Kafka's
        ``kafka-configs.sh --zookeeper ... --alter --add-config 'SCRAM-SHA-512=[...]'`` does
        (the brokers need the broker user's credential to replicate from their first fetch)."""
        creds = self.scram_credentials()
        if not creds:
            return
        from kazoo.client import KazooClient

        from ..cluster.zk import split_connect
        from ..cluster.zookeeper.security_store import (decode_entity_config, encode_config_change,
                                                        encode_entity_config, sanitize, user_path)
        hosts, chroot = split_connect(connect)
        zk = KazooClient(hosts=hosts + chroot, timeout=timeout)
        zk.start(timeout=timeout)
        try:
            zk.ensure_path("/config/changes")
            by_user: dict = {}
            for user, mech, text in creds:
                by_user.setdefault(user, {})[mech] = text
            for user, mechs in by_user.items():
                path = user_path(user)
                zk.ensure_path(path)
                data, stat = zk.get(path)
                cfg = decode_entity_config(data)
                cfg.update(mechs)
                zk.set(path, encode_entity_config(cfg), version=stat.version)
                zk.create("/config/changes/config_change_", encode_config_change("users/%s" % sanitize(user)),
                          sequence=True)
        finally:
            zk.stop()
            zk.close()

    def seed_metadata_file(self, log_dir: str) -> None:
        """The SCRAM users of a single node started as a child process, written into its metadata
        file (cluster/local_controller.py LocalController: ``user_scram_credentials``) before its first
        start, where AlterUserScramCredentials would have stored them; an existing file is left
        as it is (a restart keeps what the broker stored)."""
        import json
        from ..cluster.local_controller import METADATA_FILE
        path = os.path.join(log_dir, METADATA_FILE)
        creds = self.scram_credentials()
        if not creds or os.path.exists(path):
            return
        users: dict = {}
        for user, mech, text in creds:
            users.setdefault(user, {})[mech] = text
        os.makedirs(log_dir, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"user_scram_credentials": users}, fh)

    def client_ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        import ssl
        ctx = ssl.create_default_context(cafile=self.ca_file)
        # the harness's own connections (readiness, cluster view) present the brokers'
        # certificate: accepted by a listener with ssl.client.auth=required too
        ctx.load_cert_chain(self.keystore)   # type: ignore[arg-type]  # a TLS setup has its keystore
        return ctx

    def wire_client(self, host: str, port: int, user: str | None = None, password: str | None = None,
                    mechanism: str | None = None, timeout: float = 10.0) -> WireClient:
        """An authenticated blocking wire client (pykbroker.protocol.wire.WireClient); the
        broker's own identity unless ``user`` is given."""
        from ..protocol.wire import WireClient
        from ..security.client import authenticate_sync
        c = WireClient((host, port), timeout=timeout, ssl_context=self.client_ssl_context())
        try:
            if self.sasl:
                if user is None and getattr(self, "broker_password", None):
                    user, password, mechanism = self.BROKER_USER, self.broker_password, self._inter_broker_mechanism()
                u, pw, mech = self._user(user, mechanism, password)
                client = None
                if mech == "OAUTHBEARER" and self.oauth_token is not None:
                    from ..security.client import BearerTokenClient
                    client = BearerTokenClient(("n,,\x01auth=Bearer %s\x01\x01" % self.oauth_token(u)).encode())
                authenticate_sync(c.request, mech, u, pw, client=client)
        except BaseException:
            c.close()
            raise
        return c

    def probe(self, host: str, port: int, timeout: float = 1.0) -> None:
        """ApiVersions (allowed before authentication, Kafka's rule) over the listener's TLS:
        OSError/ValueError when the broker does not answer it yet."""
        import ssl
        from ..protocol.wire import WireClient
        try:
            with WireClient((host, port), timeout=timeout, ssl_context=self.client_ssl_context()) as c:
                resp = c.request(18, 0, {})
        except (ssl.SSLError, ConnectionError) as e:
            raise OSError(str(e)) from None
        if resp.get("error_code"):
            raise ValueError("ApiVersions error %s" % resp["error_code"])

    async def install(self, broker: BrokerServer) -> None:
        """The SCRAM users, stored through the broker's controller (salted keys only)."""
        changes = []
        for mech in self.mechanisms:
            if mech in SCRAM_MECHANISMS:
                for user, password in sorted(self.users.items()):
                    changes.append((user, mech, new_credential(mech, password).to_text()))
        if changes:
            await broker.controller.alter_scram_credentials(changes)   # type: ignore[union-attr]  # a started broker

    # -- client settings -----------------------------------------------------------------------
    def _user(self, user: str | None, mechanism: str | None,
              password: str | None = None) -> tuple[Any, Any, Any]:   # all None without SASL, else str
        """The user (the first one unless named), its password (``password`` when given, else the
        user's own) and the mechanism (the first one unless named)."""
        if not self.sasl:
            return None, None, None
        user = user if user is not None else sorted(self.users)[0]
        mech = (mechanism or self.mechanisms[0]).upper()
        return user, password if password is not None else self.users.get(user, ""), mech

    def client_config(self, bootstrap: str, user: str | None = None, mechanism: str | None = None,
                      password: str | None = None) -> dict:
        """confluent-kafka / librdkafka settings."""
        user, pw, mech = self._user(user, mechanism, password)
        out: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": self.protocol}
        if self.tls:
            out["ssl.ca.location"] = self.ca_file
        if self.sasl and mech == "OAUTHBEARER":
            # librdkafka's unsecured JWT (the broker runs Kafka's unsecured validator)
            out.update({"sasl.mechanism": mech, "enable.sasl.oauthbearer.unsecure.jwt": True,
                        "sasl.oauthbearer.config": "principal=%s" % user})
        elif self.sasl:
            out.update({"sasl.mechanism": mech, "sasl.username": user, "sasl.password": pw})
        return out

    def java_properties(self, bootstrap: str, user: str | None = None, mechanism: str | None = None,
                        password: str | None = None) -> dict:
        """Java client (and Spark ``kafka.``-prefixed) settings; the truststore as PEM."""
        user, pw, mech = self._user(user, mechanism, password)
        out: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": self.protocol}
        if self.tls:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file})
        if self.sasl:
            module = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                      "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"}.get(
                mech, "org.apache.kafka.common.security.scram.ScramLoginModule")
            if mech == "OAUTHBEARER":
                jaas = "%s required unsecuredLoginStringClaim_sub=%s;" % (module, _jaas_quote(user))
            else:
                jaas = "%s required username=%s password=%s;" % (module, _jaas_quote(user), _jaas_quote(pw))
            out.update({"sasl.mechanism": mech, "sasl.jaas.config": jaas})
        return out

    def kafka_python_config(self, bootstrap: str, user: str | None = None, mechanism: str | None = None,
                            password: str | None = None) -> dict:
        """kafka-python keyword arguments (KafkaProducer(**cfg), ...)."""
        user, pw, mech = self._user(user, mechanism, password)
        if mech == "OAUTHBEARER":
            raise ValueError("OAUTHBEARER needs a token provider object in kafka-python/aiokafka "
                             "(sasl_oauth_token_provider); client_config() covers librdkafka")
        out: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": self.protocol}
        if self.tls:
            out["ssl_cafile"] = self.ca_file
        if self.sasl:
            out.update({"sasl_mechanism": mech, "sasl_plain_username": user, "sasl_plain_password": pw})
        return out

    def aiokafka_config(self, bootstrap: str, user: str | None = None, mechanism: str | None = None,
                        password: str | None = None) -> dict:
        """aiokafka keyword arguments (an ``ssl_context`` instead of a CA file)."""
        out = self.kafka_python_config(bootstrap, user, mechanism, password)
        cafile = out.pop("ssl_cafile", None)
        if cafile is not None:
            import ssl
            out["ssl_context"] = ssl.create_default_context(cafile=cafile)
        return out
