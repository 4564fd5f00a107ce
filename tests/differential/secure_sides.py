"""Two brokers secured alike for the Go and Node clients' ``secure`` scenarios: Apache Kafka 4.4
(compat/kafka/oracle.py) and pykbroker, each with the listeners of the pykbroker secure brokers
of tests/go and tests/node, from the same server.properties keys and the same files:

- SASL_SSL: PLAIN (alice, bob: bob's password has a quote and a backslash, JAAS escaping),
  SCRAM-SHA-256 and SCRAM-SHA-512 (the same users, stored through AlterUserScramCredentials),
  OAUTHBEARER with Kafka's unsecured JWT validator;
- SSL: the server certificate only;
- MTLS: SSL with ``ssl.client.auth=required``, trusting a second CA that issued the clients'
  certificate;
- PLAINTEXT: the inter-broker listener, and the test's own reads (what was stored, read with a
  raw Fetch; a topic made for a refused client to aim at).

One server certificate (SANs localhost and 127.0.0.1) of one CA for both brokers: a client is
given the same files on both sides and only the address differs.
"""
from __future__ import annotations

import os
import secrets
import struct
import time

from pykbroker.protocol import wire
from pykbroker.protocol.wire import WireClient
from tests.ports import free_port

USERS = {"alice": "alice-Pa55word!", "bob": 'b"o\\b-secret'}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
SECURE_LISTENERS = ("SASL_SSL", "SSL", "MTLS")


def _jaas_quote(s: str) -> str:
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


class Material:
    """The certificates and the broker settings both sides share (files under ``directory``)."""

    def __init__(self, directory: str):
        from pykbroker.security.certs import CertificateAuthority
        self.dir = directory
        ca, clients_ca, other_ca = (CertificateAuthority("pykbroker differential CA"),
                                    CertificateAuthority("pykbroker differential clients CA"),
                                    CertificateAuthority("a CA neither broker uses"))
        server = ca.issue("localhost", ["localhost", "127.0.0.1"])
        client = clients_ca.issue("secure-client", server=False)
        self.ca = self._write("ca.pem", ca.cert_pem)
        self.clients_ca = self._write("clients-ca.pem", clients_ca.cert_pem)
        self.other_ca = self._write("other-ca.pem", other_ca.cert_pem)
        self.keystore = self._write("server.pem", server.key_pem + server.cert_pem)   # Kafka's PEM keystore
        self.cert = self._write("client.pem", client.cert_pem)
        self.key = self._write("client-key.pem", client.key_pem)

    def _write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return path

    def config(self) -> dict:
        """The security settings, server.properties keys (listeners and ports apart)."""
        users = " ".join("user_%s=%s" % (u, _jaas_quote(p)) for u, p in sorted(USERS.items()))
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return {
            "ssl.keystore.type": "PEM", "ssl.keystore.location": self.keystore,
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.truststore.type": "PEM",
            "listener.name.mtls.ssl.truststore.location": self.clients_ca,
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required %s;" % users,
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            # Kafka's unsecured JWT validator (its default OAUTHBEARER server callback)
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="admin";',
        }


PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL"


class Side:
    """One broker: its name and the address of each listener."""

    def __init__(self, name: str, ports: dict):
        self.name, self.ports = name, dict(ports)

    def address(self, listener: str) -> str:
        return "127.0.0.1:%d" % self.ports[listener]

    @property
    def plain(self) -> tuple:
        return ("127.0.0.1", self.ports["PLAINTEXT"])

    def __repr__(self):
        return "<%s %s>" % (self.name, self.ports)


def start_kafka(oracle_module, directory, material: Material):
    """Apache Kafka with the shared listeners; (its KafkaOracle, its Side)."""
    secure = material.config()

    class SecureOracle(oracle_module.KafkaOracle):
        def properties(self):
            p = super().properties()
            self.secure_ports = {name: free_port() for name in SECURE_LISTENERS}
            extra = ",".join("%s://127.0.0.1:%d" % kv for kv in self.secure_ports.items())
            p["listeners"] += "," + extra
            p["advertised.listeners"] += "," + extra
            p["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT," + PROTOCOL_MAP
            # server.properties is a Java properties file: a backslash escapes the next character
            p.update({k: v.replace("\\", "\\\\") for k, v in secure.items()})
            return p

    k = SecureOracle(directory, {"group.initial.rebalance.delay.ms": "0"})
    k.start()
    return k, Side("kafka", {"PLAINTEXT": k.port, **k.secure_ports})


def start_pykbroker(material: Material):
    """pykbroker (in this process) with the same listeners and keys; (its Broker, its Side)."""
    import pykbroker
    from pykbroker.embedded import TEST_CONFIG
    cfg = {"listeners": "PLAINTEXT://127.0.0.1:0," + ",".join("%s://127.0.0.1:0" % n for n in SECURE_LISTENERS),
           "listener.security.protocol.map": PROTOCOL_MAP, "inter.broker.listener.name": "PLAINTEXT",
           **material.config(), **TEST_CONFIG}
    b = pykbroker.Broker(config=cfg).start()
    return b, Side("pykbroker", {li.name: li.port for li in b.broker.bound})


def add_scram_users(side: Side, timeout: float = 30.0) -> None:
    """USERS for SCRAM-SHA-256 and -512, through AlterUserScramCredentials on the PLAINTEXT
    listener (no authorizer: anyone may), then until DescribeUserScramCredentials shows them
    (Kafka applies them from its metadata log a moment after answering)."""
    from pykbroker.security.scram import salted_password
    with WireClient(side.plain, timeout=15) as c:
        # one request per mechanism: Kafka refuses a user named twice in one request
        # (DUPLICATE_RESOURCE), whatever the mechanisms
        for mech_id, mech in ((1, "SCRAM-SHA-256"), (2, "SCRAM-SHA-512")):
            ups = []
            for user, password in sorted(USERS.items()):
                salt = secrets.token_bytes(24)
                ups.append({"name": user, "mechanism": mech_id, "iterations": 8192, "salt": salt,
                            "salted_password": salted_password(mech, password, salt, 8192)})
            r = c.request(51, 0, {"deletions": [], "upsertions": ups})
            assert [x["error_code"] for x in r["results"]] == [0] * len(USERS), r
        deadline = time.monotonic() + timeout
        while True:
            d = c.request(50, 0, {"users": [{"name": u} for u in sorted(USERS)]})
            if all(x["error_code"] == 0 and len(x["credential_infos"]) == 2 for x in d["results"]):
                return
            assert time.monotonic() < deadline, d
            time.sleep(0.2)


def create_topic(side: Side, name: str, partitions: int = 3) -> None:
    with WireClient(side.plain, timeout=15) as c:
        wire.create_topic(c, name, partitions, exist_ok=True)


def stored(side: Side, topic: str, partitions: int = 3) -> dict:
    """What the broker stored: {partition: [(offset, key, value, headers, timestamp - the
    topic's newest timestamp), ...]} read with raw Fetches on the PLAINTEXT listener (the
    producers' clocks differ between the runs; the timestamps' pattern must not)."""
    from kafka.record.default_records import DefaultRecordBatch
    out = {}
    with WireClient(side.plain, timeout=15) as c:
        for p in range(partitions):
            part = wire.fetch_part(wire.fetch(c, topic, p, 0))
            assert part["error_code"] == 0, (side, topic, p, part)
            data, pos, recs = bytes(part["records"] or b""), 0, []
            while pos + 12 <= len(data):
                (length,) = struct.unpack_from(">i", data, pos + 8)
                for r in DefaultRecordBatch(data[pos:pos + 12 + length]):
                    recs.append([r.offset, r.key, r.value, [[k, v] for k, v in r.headers], r.timestamp])
                pos += 12 + length
            out[p] = recs
    newest = max((r[4] for rs in out.values() for r in rs), default=0)
    for rs in out.values():
        for r in rs:
            r[4] -= newest
    return out


def end_offsets(side: Side, topic: str, partitions: int = 3) -> list:
    """Each partition's log end offset, asked again (10 s at most) while a partition answers an
    error: a topic a client just made may not have its leaders ready yet (-1 with an error code,
    seen on Kafka in a loaded run)."""
    out = []
    with WireClient(side.plain, timeout=15) as c:
        for p in range(partitions):
            deadline = time.monotonic() + 10
            r = wire.list_offsets(c, topic, p, -1)
            while r["error_code"] != 0 and time.monotonic() < deadline:
                time.sleep(0.1)
                r = wire.list_offsets(c, topic, p, -1)
            out.append(r["offset"])
    return out
