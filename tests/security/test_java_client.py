"""The Java client (kafka-clients 4.4 from the oracle's cached jars) over SASL_SSL: Admin
alterUserScramCredentials as a PLAIN user, then a SCRAM-SHA-512 producer and consumer with a
PEM truststore and hostname verification; a wrong password fails with Kafka's exception."""
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG

needs.module("cryptography")
LIBS = Path.home() / ".cache" / "pykbroker" / "kafka-4.4.0" / "libs"


@pytest.mark.skipif(shutil.which("java") is None or not (LIBS / "kafka-clients-4.4.0.jar").exists(),
                    reason="no JDK or Kafka jars not cached (python3 compat/kafka/oracle.py fetch)")
def test_java_admin_and_scram_clients_over_sasl_ssl(tmp_path):
    src = Path(__file__).parent / "java" / "Scram.java"
    with pykbroker.Broker(security="SASL_SSL", users={"admin": "admin-secret"}, config=TEST_CONFIG) as b:
        # the SCRAM user (created by the Java Admin below) and a wrong password, as properties files
        good = b.java_properties_file(str(tmp_path / "alice.properties"), "alice", "SCRAM-SHA-512", "alice-secret")
        bad = b.java_properties_file(str(tmp_path / "bad.properties"), "alice", "SCRAM-SHA-512", 'wr"o\\ng')
        r = subprocess.run(["java", "-cp", str(LIBS / "*"), str(src), b.bootstrap_servers, b._secure.ca_file,
                            good, bad], capture_output=True, text=True, timeout=240)
    out = r.stdout
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ScramCredentialInfo{mechanism=SCRAM_SHA_512, iterations=8192}" in out
    assert "sent java-scram-0@0" in out and "got java-value" in out
    assert "wrong password: " in out and "SaslAuthenticationException" in out, out
    assert "WRONG PASSWORD ACCEPTED" not in out
