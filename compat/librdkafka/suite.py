"""librdkafka's own test programs, run against pykbroker.

librdkafka's C/C++ test suite (``tests/`` of its source) is how its maintainers check a broker
release; its tests 0081 (the admin API, ACLs and SCRAM credentials included), 0097 (TLS
certificate verification, with the certificates ``ssl_environment()`` makes), 0109, 0115, 0119
(authorization: auto-creation, producer and consumer against denying ACLs, set with Kafka's
``kafka-acls.sh``), 0135 (SASL credentials changed at runtime) and 0142 (KIP-368
re-authentication under load) are what Security I and II must pass.

Where the sources come from: the Confluent Node client (compat/node, pinned by its lock file)
ships librdkafka's whole source tree, tests included, and ``npm ci`` builds the library there
(tools/test.sh).  This module compiles the test runner from that tree against that library: the
framework (``test.c`` and its helpers) and the selected test files, with every other test of
the runner's table linked as an empty stub (they are never selected, so never run).  About 40 s
on 2 cores, once per librdkafka version and selection (cached under
``~/.cache/pykbroker/librdkafka-tests``).

``kafka-acls.sh``: the tests call ``$KAFKA_PATH/bin/kafka-acls.sh``; ``kafka_path()`` makes such
a directory whose script runs Apache Kafka 4.4's own ``org.apache.kafka.tools.AclCommand``
(jars from Maven Central through compat/librdkafka/pom.xml).

    python compat/librdkafka/suite.py fetch-tools                 # the jars (tools/test.sh does)
    python compat/librdkafka/suite.py run --bootstrap 127.0.0.1:9092 --tests 0081 [--full]
        [--conf security.protocol=SASL_PLAINTEXT --conf sasl.mechanism=PLAIN ...]
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
NODE_LIBRDKAFKA = ROOT / "compat" / "node" / "node_modules" / "@confluentinc" / "kafka-javascript" / "deps" / "librdkafka"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pykbroker"
# The tests this project runs (the runner is built with these; others are stubs).
SELECTED = ("0081-admin.c", "0097-ssl_verify.cpp", "0109-auto_create_topics.cpp", "0115-producer_auth.cpp",
            "0119-consumer_auth.cpp", "0135-sasl_credentials.cpp", "0142-reauthentication.c")
# the framework's own objects, as librdkafka's tests/Makefile lists them
FRAMEWORK_C = ("test.c", "rusage.c", "sockem.c", "sockem_ctrl.c")
FRAMEWORK_SRC_C = ("tinycthread.c", "tinycthread_extra.c", "rdlist.c")
FRAMEWORK_CXX = ("testcpp.cpp",)
# what librdkafka was configured to link with (its Makefile.config: zstd, OpenSSL, zlib)
LIBS = ["-lrdkafka++", "-lrdkafka", "-lm", "-lzstd", "-lssl", "-lcrypto", "-lz", "-ldl", "-lpthread", "-lrt"]


# Flaws of librdkafka's test programs themselves, patched in the copy compiled here (each is
# upstream's text as of 2.15.1 and master; a tree without it is compiled unchanged).
# 0142 do_test_consumer: after its produce/poll loop it polls for the ``sent - received``
# messages still missing; when none is missing (the consumer kept up through the
# re-authentication) it asks for 0, which test_consumer_poll_timeout reads as "no limit" and
# polls until its 10 s timeout, then fails.  The patch skips that poll when nothing is missing;
# the test's assertion (as many received as sent) is unchanged.
PATCHES = {
    "0142-reauthentication.c": [(
        "        recv_cnt +=\n"
        "            test_consumer_poll_timeout(\"timeout\", c1, testid, -1, -1,\n"
        "                                       sent_cnt - recv_cnt, NULL, 10 * 1000);\n",
        "        if (sent_cnt > recv_cnt)   /* pykbroker's patch: see compat/librdkafka/suite.py */\n"
        "                recv_cnt += test_consumer_poll_timeout(\"timeout\", c1, testid, -1, -1,\n"
        "                                                       sent_cnt - recv_cnt, NULL, 10 * 1000);\n")],
}


def _source(src: Path, name: str, objs: Path) -> Path:
    """The test file to compile: librdkafka's own, or its patched copy (PATCHES)."""
    path = src / "tests" / name
    if name not in PATCHES:
        return path
    text = path.read_text()
    for old, new in PATCHES[name]:
        text = text.replace(old, new)
    out = objs / name
    out.write_text(text)
    return out


class Unavailable(RuntimeError):
    """The sources, a compiler, Java or Maven are missing."""


def source_dir() -> Path:
    """librdkafka's source tree with its library built (compat/node's npm ci)."""
    d = NODE_LIBRDKAFKA.resolve()
    missing = [p for p in ("tests/test.c", "src/rdkafka.h", "src/librdkafka.so", "src-cpp/librdkafka++.so")
               if not (d / p).exists()]
    if missing:
        raise Unavailable("librdkafka's built source tree from compat/node (npm ci, as tools/test.sh runs it): "
                          "%s missing under %s" % (", ".join(missing), d))
    for tool in ("gcc", "g++"):
        if shutil.which(tool) is None:
            raise Unavailable("%s (tools/test.sh installs g++)" % tool)
    return d


def version(src: Path) -> str:
    m = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", (src / "src" / "rdkafka.h").read_text())
    if not m:
        return "unknown"
    v = int(m.group(1), 16)
    return "%d.%d.%d" % (v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF)


def _stubs(src: Path, selected) -> str:
    """An empty ``main_<name>`` for every test of the runner's table not compiled in."""
    names = re.findall(r"^_TEST_DECL\((\w+)\);", (src / "tests" / "test.c").read_text(), re.M)
    have = set()
    for f in selected:
        have |= set(re.findall(r"int main_(\w+)\s*\(int", (src / "tests" / f).read_text()))
    return "".join("int main_%s(int argc, char **argv) { (void)argc; (void)argv; return 0; }\n" % n
                   for n in names if n not in have)


def build(selected=SELECTED) -> Path:
    """The test runner with ``selected`` compiled in; built once per librdkafka tree and selection."""
    src = source_dir()
    key = hashlib.sha256(("%s|%s|%r" % (src, ",".join(sorted(selected)), sorted(PATCHES.items()))).encode()).hexdigest()[:12]
    out = CACHE / "librdkafka-tests" / ("%s-%s" % (version(src), key))
    runner = out / "test-runner"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if runner.exists():
            return runner
        objs = out / "obj"
        shutil.rmtree(objs, ignore_errors=True)
        objs.mkdir()
        (objs / "stubs.c").write_text(_stubs(src, selected))
        flags = ["-g", "-O1", "-fPIC", "-I%s" % (src / "src"), "-I%s" % (src / "src-cpp"), "-I%s" % (src / "tests")]
        jobs = []
        for f in FRAMEWORK_C + tuple(x for x in selected if x.endswith(".c")):
            jobs.append(["gcc", *flags, "-c", str(_source(src, f, objs)), "-o", str(objs / (f + ".o"))])
        for f in FRAMEWORK_SRC_C:
            jobs.append(["gcc", *flags, "-c", str(src / "src" / f), "-o", str(objs / (f + ".o"))])
        jobs.append(["gcc", *flags, "-c", str(objs / "stubs.c"), "-o", str(objs / "stubs.c.o")])
        for f in FRAMEWORK_CXX + tuple(x for x in selected if x.endswith(".cpp")):
            jobs.append(["g++", *flags, "-c", str(src / "tests" / f), "-o", str(objs / (f + ".o"))])
        procs = []
        for cmd in jobs:   # two at a time: the machines this runs on have two cores
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            if len(procs) >= 2:
                _reap(procs.pop(0))
        for p in procs:
            _reap(p)
        tmp = out / "test-runner.tmp"
        _reap(subprocess.Popen(
            ["g++", "-rdynamic", "-o", str(tmp), *sorted(str(p) for p in objs.glob("*.o")),
             "-L%s" % (src / "src"), "-L%s" % (src / "src-cpp"),
             "-Wl,-rpath,%s" % (src / "src"), "-Wl,-rpath,%s" % (src / "src-cpp"), *LIBS],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        tmp.rename(runner)
    return runner


def _reap(p: subprocess.Popen) -> None:
    out, _ = p.communicate()
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(p.args[:4]), p.returncode, out[-4000:]))


# ----------------------------------------------------------------------------- kafka-acls.sh
def kafka_version() -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    assert m, POM
    return m.group(1).strip()


def fetch_tools(quiet: bool = True) -> Path:
    """Apache Kafka's tools jars in the cache (offline from ~/.m2 first, then Maven Central)."""
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        raise Unavailable("%s (tools/test.sh installs default-jdk-headless and maven)" % " and ".join(missing))
    root = CACHE / ("kafka-tools-%s" % kafka_version())
    libs, stamp = root / "libs", root / ".complete"
    pom_sum = hashlib.sha256(POM.read_bytes()).hexdigest()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text().strip() == pom_sum:
            return libs
        shutil.rmtree(libs, ignore_errors=True)
        base = ["mvn", "-B", "-Dstyle.color=never", "-f", str(POM), "dependency:copy-dependencies",
                "-DincludeScope=runtime", "-DoutputDirectory=%s" % libs]
        if quiet:
            base.insert(1, "-q")
        r = subprocess.run(base[:1] + ["-o"] + base[1:], capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(base, capture_output=True, text=True)
        if r.returncode != 0 or not (libs / ("kafka-tools-%s.jar" % kafka_version())).exists():
            raise Unavailable("Apache Kafka's tools %s from Maven Central:\n%s\n%s"
                              % (kafka_version(), r.stdout[-3000:], r.stderr[-3000:]))
        stamp.write_text(pom_sum + "\n")
    return libs


def kafka_path() -> Path:
    """A ``KAFKA_PATH`` whose ``bin/kafka-acls.sh`` is Kafka's AclCommand."""
    libs = fetch_tools()
    root = libs.parent / "kafka-path"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    script = root / "bin" / "kafka-acls.sh"
    text = ('#!/bin/sh\n# Apache Kafka %s\'s kafka-acls.sh (its AclCommand), for librdkafka\'s tests\n'
            'exec java -XX:TieredStopAtLevel=1 -Xshare:auto -cp "%s/*" org.apache.kafka.tools.AclCommand "$@"\n'
            % (kafka_version(), libs))
    if not script.exists() or script.read_text() != text:
        script.write_text(text)
        script.chmod(0o755)
    return root


# ----------------------------------------------------------------------------- 0097's certificates
@dataclasses.dataclass
class SslEnvironment:
    """What librdkafka's test harness (trivup's SslApp, used by its LibrdkafkaTestApp) hands a
    test run with ``--ssl``: test.conf entries, ``SSL_*`` environment variables naming the
    client's key, certificate and CAs in every encoding the tests load (0097 reads them all),
    and the broker's side: a server keystore signed by the same CA, that CA as truststore."""
    conf: dict           # test.conf: security.protocol and the client's ssl.* locations
    env: dict            # SSL_* variables, as LibrdkafkaTestApp sets them
    broker: dict         # the SSL listener's ssl.* settings (PEM files)


def ssl_environment(directory: str, client_auth: str = "required") -> SslEnvironment:
    """A fresh CA (and a second, unused one: the tests load a PEM holding several CAs), a client
    key and certificate in PEM, DER and PKCS#12, and a server certificate for 127.0.0.1 and
    localhost, all under ``directory``.  RSA keys, as trivup makes them (``openssl genpkey``)."""
    import datetime
    import ipaddress
    import secrets
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    # a per-run secret: it decrypts the PKCS#12 file and is handed to the tests as trivup does
    password = secrets.token_hex(12)
    now = datetime.datetime.now(datetime.timezone.utc)
    pem, der = serialization.Encoding.PEM, serialization.Encoding.DER

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "NN"),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "O"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(subject, key, issuer, issuer_key, ca=False, sans=()):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=30))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    def rsa_key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def write(fname, data: bytes) -> str:
        path = d / fname
        path.write_bytes(data)
        return str(path)

    cas = {}
    for which in ("unused_ca", "ca"):
        k = rsa_key()
        subj = name("SslApp" + ("_unused" if which == "unused_ca" else ""))
        cas[which] = (k, cert(subj, k, subj, k, ca=True))
    ca_key, ca_cert = cas["ca"]
    ca_pem = write("ca.pem", ca_cert.public_bytes(pem))
    files = {"SSL_ca_pem": ca_pem, "SSL_ca_der": write("ca.der", ca_cert.public_bytes(der)),
             "SSL_unused_ca_pem": write("unused_ca.pem", cas["unused_ca"][1].public_bytes(pem)),
             # the unused CA first, as trivup writes it
             "SSL_all_cas_pem": write("all_cas.pem", cas["unused_ca"][1].public_bytes(pem) + ca_cert.public_bytes(pem))}

    ck = rsa_key()
    cc = cert(name("librdkafka"), ck, ca_cert.subject, ca_key)
    files.update({
        "SSL_priv_pem": write("client-priv.pem", ck.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                                 serialization.NoEncryption())),
        "SSL_priv_der": write("client-priv.der", ck.private_bytes(der, serialization.PrivateFormat.TraditionalOpenSSL,
                                                                 serialization.NoEncryption())),
        # the certificate, then its chain (trivup appends the CA)
        "SSL_pub_pem": write("client-pub.pem", cc.public_bytes(pem) + ca_cert.public_bytes(pem)),
        "SSL_pub_der": write("client-pub.der", cc.public_bytes(der)),
        "SSL_pkcs": write("client.pfx", pkcs12.serialize_key_and_certificates(
            b"librdkafka", ck, cc, [ca_cert], serialization.BestAvailableEncryption(password.encode()))),
    })
    sk = rsa_key()
    sc = cert(name("localhost"), sk, ca_cert.subject, ca_key,
              sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    keystore = write("server.pem", sk.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
                     + sc.public_bytes(pem) + ca_cert.public_bytes(pem))
    for f in d.iterdir():
        f.chmod(0o600)
    conf = {"security.protocol": "SSL", "ssl.ca.location": ca_pem,
            "ssl.certificate.location": files["SSL_pub_pem"], "ssl.key.location": files["SSL_priv_pem"],
            "ssl.key.password": password}
    env = {**files, "SSL_password": password, "SSL_client_auth": client_auth}
    # TLS 1.2 only, as trivup configures Kafka (ssl.enabled.protocols=TLSv1.2,TLSv1.1,TLSv1): 0097
    # expects a refused client certificate to fail the handshake with the broker's alert
    # (bad_certificate); under TLS 1.3 the client has finished its handshake before the broker
    # judges its certificate, librdkafka reports the alert as a transport error and 0097 fails
    # against Apache Kafka 4.4 as well (measured)
    broker = {"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
              "ssl.truststore.type": "PEM", "ssl.truststore.location": ca_pem, "ssl.client.auth": client_auth,
              "ssl.enabled.protocols": "TLSv1.2"}
    return SslEnvironment(conf, env, broker)


# ----------------------------------------------------------------------------- running
@dataclasses.dataclass
class Report:
    returncode: int
    tests: dict          # test name -> "PASSED" | "FAILED" | "SKIPPED" | ... (the runner's summary table)
    subtests: dict       # "test: subtest" -> "PASS" | "SKIP" | "FAIL"
    log: str

    def failures(self) -> str:
        """Each failure with the lines the runner printed just before it (what the test was
        waiting for), the broker-independent progress lines left out."""
        lines = [ln for ln in self.log.splitlines() if "test(s) running" not in ln]
        out: list[str] = []
        for i, ln in enumerate(lines):
            if "### Test" in ln or "Test assertion failed" in ln:
                out.extend(lines[max(0, i - 12):i + 2])
        return "\n".join(out[-60:]) or self.log[-4000:]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROW = re.compile(r"^\|\s*(\w+)\s*\|\s*([A-Z]+)\s*\|")
_SUB = re.compile(r"^\[(\w+)\s*/\s*[\d.]+s\] \[ (.*?): (PASS|SKIP)\b")
_SUBFAIL = re.compile(r'^### Test "(\w+) \((.*?)\)" failed')


def run(runner: Path, tests, conf: dict, full: bool = False, parallel: int = 1,
        subtests: Optional[str] = None, env: Optional[dict] = None, timeout: float = 900.0,
        kafka_version_claim: str = "4.0.0") -> Report:
    """Run ``tests`` (numbers like "0081") with ``conf`` as test.conf; ``full``: also the
    subtests librdkafka marks as not quick (without ``-Q``)."""
    with tempfile.TemporaryDirectory(prefix="rdkafka-tests-") as d:
        Path(d, "test.conf").write_text("".join("%s=%s\n" % kv for kv in conf.items()))
        # tests that load librdkafka's own fixtures (0097's untrusted client certificates) open
        # them as ./fixtures/..., relative to the directory the runner starts in
        fixtures = NODE_LIBRDKAFKA.resolve() / "tests" / "fixtures"
        if fixtures.is_dir():
            Path(d, "fixtures").symlink_to(fixtures)
        args = [str(runner), "-E"] + ([] if full else ["-Q"]) + (["-p%d" % parallel] if parallel > 1 else [])
        e = {**os.environ, "TESTS": ",".join(tests),
             # the features the tests gate on: pykbroker serves what Kafka 4.0 does (and more)
             "TEST_KAFKA_VERSION": kafka_version_claim, **(env or {})}
        e.pop("CI", None)   # the runner's CI mode changes its timeouts and colours only
        if subtests:
            e["SUBTESTS"] = subtests
        try:
            p = subprocess.run(args, cwd=d, env=e, capture_output=True, text=True, timeout=timeout,
                               errors="replace")
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as t:
            rc = -1
            out = (t.stdout or b"").decode(errors="replace") + (t.stderr or b"").decode(errors="replace")
            out += "\n### runner timed out after %.0f s" % timeout
    text = _ANSI.sub("", out)
    tests_seen, subs = {}, {}
    for ln in text.splitlines():
        m = _ROW.match(ln)
        if m and m.group(1) != "MAIN":
            tests_seen[m.group(1)] = m.group(2)
        m = _SUB.match(ln)
        if m:
            subs["%s: %s" % (m.group(1), m.group(2))] = m.group(3)
        m = _SUBFAIL.match(ln)
        if m:
            subs["%s: %s" % (m.group(1), m.group(2))] = "FAIL"
    return Report(rc, tests_seen, subs, text)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch-tools")
    r = sub.add_parser("run")
    r.add_argument("--bootstrap", required=True)
    r.add_argument("--tests", required=True, help="e.g. 0081,0109")
    r.add_argument("--conf", action="append", default=[], help="test.conf key=value")
    r.add_argument("--full", action="store_true", help="also the non-quick subtests")
    r.add_argument("--subtests", default=None)
    a = ap.parse_args(argv)
    if a.cmd == "fetch-tools":
        print(fetch_tools())
        return 0
    conf = {"bootstrap.servers": a.bootstrap, **dict(kv.split("=", 1) for kv in a.conf)}
    rep = run(build(), a.tests.split(","), conf, full=a.full, subtests=a.subtests,
              env={"KAFKA_PATH": str(kafka_path())})
    for k, v in sorted(rep.subtests.items()):
        print("%-5s %s" % (v, k))
    for k, v in sorted(rep.tests.items()):
        print("%-8s %s" % (v, k))
    if rep.returncode != 0:
        print(rep.failures(), file=sys.stderr)
    return 0 if rep.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
