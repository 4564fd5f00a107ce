"""SASL/GSSAPI (Kerberos) against a real MIT KDC (pykbroker/testing/kdc.py): the broker's service
key from a keytab named in its Krb5LoginModule JAAS entry, clients logging in from their own
keytabs.  kcat (Debian's librdkafka, cyrus-sasl's GSSAPI plugin), the Java client (the JDK's
Krb5LoginModule) and kafka-python (python-gssapi, a ticket cache) produce and read back byte-exact; the principal is ``User:<primary>`` by
``sasl.kerberos.principal.to.local.rules=DEFAULT`` (an authorizer with ``super.users=User:alice``
lets alice in and refuses bob); a client whose keytab holds a stale key cannot log in; the
server's steps (RFC 4752's security-layer negotiation) refuse what Kafka's refuses.

confluent-kafka's wheels are built without cyrus-sasl: they refuse ``sasl.mechanism=GSSAPI``
("No provider for SASL mechanism GSSAPI"), so they are not among the clients here.
"""
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import needs
from tests.ports import free_port

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.testing.kdc import Kdc

LIBS = Path.home() / ".cache" / "pykbroker" / "kafka-4.4.0" / "libs"
TOPIC = "kerberized"


@pytest.fixture(scope="module")
def kdc():
    needs.require_kerberos()
    with Kdc() as k:
        k.keytabs = {"kafka": k.add_principal("kafka/localhost")}
        for user in ("alice", "bob"):
            k.keytabs[user] = k.add_principal(user)
        # carol's first keytab, then a new key for carol: the first keytab is stale
        k.keytabs["carol-stale"] = k.add_principal("carol")
        k.rekey("carol", os.path.join(k.dir, "carol-new.keytab"))
        yield k


@pytest.fixture(scope="module")
def broker(kdc):
    mp = pytest.MonkeyPatch()
    mp.setenv("KRB5_CONFIG", kdc.krb5_conf)   # MIT's library in this process reads the test realm
    port = free_port()
    # clients name the service kafka/<the host they connect to>: the broker is advertised as
    # localhost, the host of its service principal
    cfg = {**TEST_CONFIG, "listeners": "SASL_PLAINTEXT://127.0.0.1:%d" % port,
           "advertised.listeners": "SASL_PLAINTEXT://localhost:%d" % port,
           "sasl.enabled.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka",
           "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
               'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
               'keyTab="%s" principal="kafka/localhost@%s";' % (kdc.keytabs["kafka"], kdc.realm),
           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:alice", "allow.everyone.if.no.acl.found": "false"}
    try:
        with pykbroker.Broker(config=cfg) as b:
            yield b, "localhost:%d" % port
    finally:
        mp.undo()


def _kcat(kdc, bootstrap, user, keytab, args, stdin=None, cache=None):
    if shutil.which("kcat") is None:
        needs.skip_missing("kcat (apt-get install kcat)")
    env = kdc.env(KRB5CCNAME="FILE:%s/kcat-%s.cc" % (kdc.dir, cache or user))
    cmd = ["kcat", "-b", bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
           "-X", "sasl.kerberos.service.name=kafka", "-X", "sasl.kerberos.keytab=" + keytab,
           "-X", "sasl.kerberos.principal=" + user, *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=60)


def test_kcat_produces_and_reads_back_as_user_alice(kdc, broker, caplog):
    b, bootstrap = broker
    caplog.set_level(logging.DEBUG, logger="pykbroker.security")
    lines = ["kerberos-%d %s" % (i, "é✓" * i) for i in range(10)]
    r = _kcat(kdc, bootstrap, "alice", kdc.keytabs["alice"], ["-P", "-t", TOPIC, "-p", "0"], "\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _kcat(kdc, bootstrap, "alice", kdc.keytabs["alice"], ["-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[:len(lines)] == lines
    # the authenticated principal is alice@PYKBROKER.TEST's primary (DEFAULT rule)
    assert any("authenticated as User:alice with GSSAPI" in rec.getMessage() for rec in caplog.records)


def test_the_principal_decides_what_is_allowed(kdc, broker):
    """bob authenticates (a valid ticket) as User:bob, whom no ACL allows anything."""
    b, bootstrap = broker
    r = _kcat(kdc, bootstrap, "bob", kdc.keytabs["bob"],
              ["-P", "-t", TOPIC, "-p", "0", "-X", "message.timeout.ms=8000"], "from bob\n")
    assert "authorization failed" in (r.stdout + r.stderr).lower(), r.stderr[-2000:]


def test_a_stale_keytab_cannot_log_in(kdc, broker):
    b, bootstrap = broker
    r = _kcat(kdc, bootstrap, "carol", kdc.keytabs["carol-stale"],
              ["-L", "-X", "metadata.request.timeout.ms=5000", "-m", "8"])
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "kinit" in out, out[-2000:]
    assert "Broker 1" not in r.stdout and "brokers:" not in r.stdout.lower()


@pytest.mark.skipif(shutil.which("java") is None or not (LIBS / "kafka-clients-4.4.0.jar").exists(),
                    reason="no JDK or Kafka jars not cached (python3 compat/kafka/oracle.py fetch)")
def test_java_client_with_a_keytab(kdc, broker):
    b, bootstrap = broker
    src = Path(__file__).parent / "java" / "Gssapi.java"
    r = subprocess.run(["java", "-Djava.security.krb5.conf=%s" % kdc.krb5_conf, "-cp", str(LIBS / "*"), str(src),
                        bootstrap, "java-kerberized", "alice@" + kdc.realm, kdc.keytabs["alice"],
                        "carol@" + kdc.realm, kdc.keytabs["carol-stale"]],
                       capture_output=True, text=True, timeout=240)
    out = r.stdout
    assert r.returncode == 0, r.stderr[-3000:]
    sent = [ln.split()[1] for ln in out.splitlines() if ln.startswith("sent ")]
    got = [ln.split()[1] for ln in out.splitlines() if ln.startswith("got ")]
    assert len(sent) == 5 and got == sent, out
    assert "committed as group java-gssapi" in out
    assert "STALE KEYTAB ACCEPTED" not in out
    # the KDC refuses the login (the client cannot answer its pre-authentication with the old key)
    assert "stale keytab:" in out and "LoginException" in out, out


def _initiator(kdc, user):
    """A GSS-API initiator for ``user`` (a ticket from the KDC) towards kafka/localhost."""
    import gssapi
    cache = "FILE:%s/py-%s.cc" % (kdc.dir, user)
    subprocess.run(["kinit", "-kt", kdc.keytabs[user], user], env=kdc.env(KRB5CCNAME=cache), check=True)
    creds = gssapi.Credentials(usage="initiate", store={"ccache": cache})
    return gssapi.SecurityContext(name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service),
                                  creds=creds, usage="initiate", mech=gssapi.MechType.kerberos,
                                  flags=gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity)


def _server(broker):
    """The GSSAPI server of the broker's listener, with its service key and rules."""
    from pykbroker.security.kerberos import GssapiServer
    b, _ = broker
    sec = b.broker.listener_security["SASL_PLAINTEXT"]
    return GssapiServer(sec.gssapi_credentials, sec.kerberos_namer)


@pytest.mark.parametrize("case", ["ok", "authzid-ignored", "layer", "token-at-final-step", "garbage"])
def test_the_server_exchange_sans_io(kdc, broker, case):
    from pykbroker.security.errors import AuthenticationFailed
    srv, ctx = _server(broker), _initiator(kdc, "alice")
    if case == "garbage":
        with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism GSSAPI"):
            srv.evaluate(b"\x60\x03not a ticket")
        return
    ap_rep = srv.evaluate(ctx.step())
    assert ap_rep and not srv.complete
    assert ctx.step(ap_rep) is None and ctx.complete
    if case == "token-at-final-step":
        with pytest.raises(AuthenticationFailed):
            srv.evaluate(b"\x00")
        return
    offer = ctx.unwrap(srv.evaluate(b"")).message
    assert offer == b"\x01\x01\x00\x00"   # no security layer only; 65536 bytes
    layer = b"\x04" if case == "layer" else b"\x01"
    authzid = b"mallory" if case == "authzid-ignored" else b""
    answer = ctx.wrap(layer + b"\x00\x00\x00" + authzid, False).message
    if case == "layer":
        with pytest.raises(AuthenticationFailed):
            srv.evaluate(answer)
        return
    assert srv.evaluate(answer) == b"" and srv.complete
    assert srv.authorization_id == "alice"   # the Kerberos name decides, never the authzid


@pytest.mark.parametrize("rules,name,short", [
    (["DEFAULT"], "alice@PYKBROKER.TEST", "alice"),
    (["DEFAULT"], "kafka/localhost@PYKBROKER.TEST", "kafka"),
    (["DEFAULT"], "alice@OTHER.REALM", None),
    (["RULE:[1:$1@$0](.*@OTHER\\.REALM)s/@.*//L", "DEFAULT"], "Alice@OTHER.REALM", "alice"),
    (["RULE:[2:$1_$2@$0](kafka_.*@PYKBROKER\\.TEST)s/@.*//", "DEFAULT"], "kafka/localhost@PYKBROKER.TEST",
     "kafka_localhost"),
    (["RULE:[1:$1@$0](.*)"], "alice@PYKBROKER.TEST", None),   # a non-simple result is refused
])
def test_principal_to_local_rules(rules, name, short):
    from pykbroker.security.kerberos import KerberosShortNamer, NoMatchingRule
    namer = KerberosShortNamer("PYKBROKER.TEST", rules)
    if short is None:
        with pytest.raises(NoMatchingRule):
            namer.short_name(name)
    else:
        assert namer.short_name(name) == short


@pytest.mark.parametrize("case", ["no-package", "no-jaas", "no-service-name", "no-keytab-option"])
def test_bad_gssapi_settings_stop_the_start(tmp_path, monkeypatch, case):
    from pykbroker.broker import BrokerServer
    from pykbroker.config import BrokerConfig, ConfigError
    from pykbroker.security import kerberos
    jaas = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/nonexistent.keytab" '
            'principal="kafka/localhost@PYKBROKER.TEST";')
    cfg = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
           "sasl.enabled.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka",
           "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas}
    if case == "no-package":
        monkeypatch.setattr(kerberos, "gssapi_module", lambda: None)
        message = "needs the gssapi package"
    elif kerberos.gssapi_module() is None:
        needs.skip_missing("the gssapi package (pip install 'pykbroker[kerberos]')")
    if case == "no-jaas":
        del cfg["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"]
        message = "Could not find a 'KafkaServer'"
    elif case == "no-service-name":
        del cfg["sasl.kerberos.service.name"]
        message = "No serviceName defined"
    elif case == "no-keytab-option":
        cfg["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"] = jaas.replace("useKeyTab=true ", "")
        message = "needs useKeyTab=true"
    with pytest.raises(ConfigError, match=message):
        BrokerServer(BrokerConfig(cfg))


def test_kafka_python_with_a_ticket_cache(kdc, broker, monkeypatch):
    """kafka-python's GSSAPI (python-gssapi, the ticket cache kinit filled) as a third client."""
    kafka = needs.module("kafka")
    b, bootstrap = broker
    cache = "FILE:%s/kafka-python.cc" % kdc.dir
    subprocess.run(["kinit", "-kt", kdc.keytabs["alice"], "alice"], env=kdc.env(KRB5CCNAME=cache), check=True)
    monkeypatch.setenv("KRB5CCNAME", cache)
    cfg = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
           "sasl_kerberos_service_name": "kafka"}
    values = [bytes(range(i, i + 40)) for i in range(5)]
    p = kafka.KafkaProducer(acks="all", **cfg)
    for v in values:
        p.send("kafka-python-kerberized", v, partition=0)
    p.flush(30)
    p.close()
    c = kafka.KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=15000, **cfg)
    c.assign([kafka.TopicPartition("kafka-python-kerberized", 0)])
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == len(values):
            break
    c.close()
    assert got == values
