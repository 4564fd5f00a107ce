"""The secured broker the Node clients' TLS / SASL tests share (tests/node/conftest.py
``node_secure``) and the connection cases handed to the scenario programs' ``secure`` scenario
(compat/node/lib/scen.js ``securityCases``).

One in-process ``pykbroker.Broker(security="SASL_SSL", ...)`` (its throw-away CA, PLAIN and
SCRAM users, OAUTHBEARER with Kafka's unsecured validator) with three listeners: SASL_SSL
(every mechanism), SSL (server certificate only) and MTLS (SSL with
``ssl.client.auth=required``, trusting a second CA that issued the client's certificate).  A
topic, ``guarded``, exists for the refused cases to aim at; it must stay empty.
"""
from __future__ import annotations

import json
import os
import time

USERS = {"alice": "alice-Pa55word!", "bob": 'b"o\\b-secret'}   # a quote and a backslash: JAAS escaping
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
GUARDED = "node-secure-guarded"
# A refused case's client must give up at the broker's first refusal (its report's
# refused_after_ms: kafkajs, from the connect to the error; librdkafka, to its first
# authentication failure logged), not after retrying until a deadline: measured 130-330 ms.
REFUSED_WITHIN_MS = 10_000


def connection_case(name: str, brokers: str, ca: str, client_cert: tuple | None = None,
                    sasl: dict | None = None, expect: str = "ok", guarded: str = GUARDED) -> dict:
    """One case of the ``secure`` scenario's file (compat/node/lib/scen.js ``securityCases``):
    TLS trusting ``ca``, the client's (certificate, key) files when given, the SASL settings
    when given; a case expected to be refused aims at the ``guarded`` topic."""
    c = {"name": name, "brokers": brokers, "ssl": {"ca": ca}, "expect": expect}
    if client_cert:
        c["ssl"].update(cert=client_cert[0], key=client_cert[1])
    if sasl is not None:
        c["sasl"] = sasl
    if expect != "ok":
        c["topic"] = guarded
    return c


class SecureBroker:
    def __init__(self, directory: str):
        from pykbroker.security.certs import CertificateAuthority
        self.dir = directory
        clients_ca = CertificateAuthority("pykbroker node clients")
        self.clients_ca_file = os.path.join(directory, "clients-ca.pem")
        with open(self.clients_ca_file, "w") as fh:
            fh.write(clients_ca.cert_pem)
        self.cert, self.key = clients_ca.issue("node-client", server=False).write(directory, "client")
        self.config = {
            "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.truststore.type": "PEM",
            "listener.name.mtls.ssl.truststore.location": self.clients_ca_file,
        }

    def __enter__(self):
        import pykbroker
        from pykbroker.embedded import TEST_CONFIG
        self.broker = pykbroker.Broker(security="SASL_SSL", users=USERS, mechanisms=MECHANISMS,
                                       config={**self.config, **TEST_CONFIG}).start()
        try:
            self.ports = {li.name: li.port for li in self.broker.broker.bound}
            self.ca = self.broker.client_config("alice", "PLAIN")["ssl.ca.location"]
            self._create(GUARDED)
        except BaseException:
            self.broker.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.broker.stop()

    def address(self, listener: str) -> str:
        return "127.0.0.1:%d" % self.ports[listener]

    def _confluent(self, mechanism="PLAIN", user="alice"):
        return self.broker.client_config(user, mechanism)

    def _create(self, topic: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient(self._confluent())
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)

    def end_offsets(self, topic: str) -> tuple:
        """(low, high) of partition 0 of topic, through confluent-kafka as alice (PLAIN)."""
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({**self._confluent(), "group.id": "node-secure-check"})
        try:
            return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=15, cached=False)
        finally:
            c.close()

    # -- the connection cases ------------------------------------------------------------------
    def case(self, name: str, listener: str, sasl: dict | None = None, client_cert: bool = False,
             expect: str = "ok") -> dict:
        return connection_case(name, self.address(listener), self.ca,
                               (self.cert, self.key) if client_cert else None, sasl, expect)

    def password(self, name: str, mechanism: str, user: str = "alice", wrong: bool = False) -> dict:
        return self.case(name, "SASL_SSL", {"mechanism": mechanism, "username": user,
                                             "password": "not-" + USERS[user] if wrong else USERS[user]},
                         expect="auth-error" if wrong else "ok")

    def write_cases(self, name: str, cases: list) -> str:
        path = os.path.join(self.dir, "%s-%d.json" % (name, time.monotonic_ns()))
        with open(path, "w") as fh:
            json.dump({"cases": cases}, fh)
        return path
