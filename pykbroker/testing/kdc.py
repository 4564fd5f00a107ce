"""A throw-away MIT Kerberos KDC for tests of SASL/GSSAPI: a realm in a temporary directory, a
``krb5kdc`` on a free loopback port (UDP and TCP), principals with keytabs, and the
``krb5.conf`` clients and brokers point at (``KRB5_CONFIG`` for MIT's library, librdkafka and
kinit; ``-Djava.security.krb5.conf`` for the JVM).

Needs Debian's ``krb5-kdc`` and ``krb5-admin-server`` (``krb5kdc``, ``kdb5_util``,
``kadmin.local``) and ``krb5-user`` (``kinit``); ``tools/test.sh`` installs them when run as
root.  ``Kdc.missing()`` says what is absent.

    with Kdc() as kdc:
        keytab = kdc.add_principal("kafka/localhost")     # the broker's service key
        alice = kdc.add_principal("alice")
        env = kdc.env()                                   # KRB5_CONFIG=..., for child processes
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Optional

REALM = "PYKBROKER.TEST"
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def _which(tool: str) -> Optional[str]:
    return shutil.which(tool) or next((os.path.join(d, tool) for d in _SBIN
                                       if os.access(os.path.join(d, tool), os.X_OK)), None)


def _free_port() -> int:
    # a port free for TCP and UDP at once (the KDC serves both)
    for _ in range(50):
        t = socket.socket()
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            u.close()
            t.close()
        return port
    raise OSError("no free port for the KDC")


class Kdc:
    def __init__(self, realm: str = REALM, directory: Optional[str] = None) -> None:
        self.realm = realm
        self.dir = directory or tempfile.mkdtemp(prefix="pykbroker-kdc-")
        self._own_dir = directory is None
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.krb5_conf = os.path.join(self.dir, "krb5.conf")
        self.kdc_conf = os.path.join(self.dir, "kdc.conf")
        self.log_path = os.path.join(self.dir, "kdc.log")

    @staticmethod
    def missing() -> Optional[str]:
        absent = [t for t in TOOLS if _which(t) is None]
        if absent:
            return ("MIT Kerberos (%s missing: apt-get install krb5-kdc krb5-admin-server krb5-user, "
                    "as tools/test.sh does when run as root)" % ", ".join(absent))
        return None

    def env(self, **extra: str) -> dict:
        """The environment of a process that uses this realm (MIT's library reads these)."""
        return {**os.environ, "KRB5_CONFIG": self.krb5_conf, "KRB5_KDC_PROFILE": self.kdc_conf, **extra}

    def _run(self, *cmd: str, stdin: Optional[str] = None) -> str:
        r = subprocess.run([_which(cmd[0]) or cmd[0], *cmd[1:]], input=stdin, capture_output=True,
                           text=True, env=self.env(), timeout=60)
        if r.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (cmd[0], r.returncode, (r.stderr or r.stdout)[-2000:]))
        return r.stdout

    def start(self, timeout: float = 20.0) -> "Kdc":
        why = self.missing()
        if why:
            raise RuntimeError(why)
        self.port = _free_port()
        d = self.dir
        with open(self.krb5_conf, "w") as fh:
            fh.write("[libdefaults]\n default_realm = %(r)s\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
                     " rdns = false\n dns_canonicalize_hostname = false\n udp_preference_limit = 1\n"
                     " ticket_lifetime = 1h\n forwardable = true\n"
                     "[realms]\n %(r)s = {\n  kdc = 127.0.0.1:%(p)d\n }\n"
                     "[domain_realm]\n localhost = %(r)s\n .localhost = %(r)s\n" % {"r": self.realm, "p": self.port})
        with open(self.kdc_conf, "w") as fh:
            fh.write("[kdcdefaults]\n kdc_ports = %(p)d\n kdc_tcp_ports = %(p)d\n"
                     "[realms]\n %(r)s = {\n  database_name = %(d)s/principal\n  key_stash_file = %(d)s/stash\n"
                     "  acl_file = %(d)s/kadm5.acl\n  max_life = 1h\n  max_renewable_life = 1h\n"
                     "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n }\n"
                     "[logging]\n kdc = FILE:%(d)s/kdc.log\n" % {"r": self.realm, "p": self.port, "d": d})
        open(os.path.join(d, "kadm5.acl"), "w").close()
        # the database's master key: random, used once here and stashed in the directory
        self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", secrets.token_urlsafe(24))
        self.proc = subprocess.Popen([_which("krb5kdc") or "krb5kdc", "-n", "-r", self.realm],
                                     env=self.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while True:   # ready when it accepts TCP on its port
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError("krb5kdc exited (%s): %s" % (self.proc.returncode, err[-2000:]))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("krb5kdc did not listen on %d" % self.port)
                time.sleep(0.1)
        return self

    def principal(self, name: str) -> str:
        return name if "@" in name else "%s@%s" % (name, self.realm)

    def add_principal(self, name: str, keytab: Optional[str] = None) -> str:
        """A principal with a random key, exported to ``keytab`` (default ``<dir>/<name>.keytab``);
        returns the keytab's path."""
        keytab = keytab or os.path.join(self.dir, name.replace("/", "_") + ".keytab")
        self._run("kadmin.local", "-r", self.realm, "-q", "addprinc -randkey %s" % self.principal(name))
        self._run("kadmin.local", "-r", self.realm, "-q", "ktadd -k %s %s" % (keytab, self.principal(name)))
        return keytab

    def rekey(self, name: str, keytab: str) -> str:
        """A new random key for ``name`` written to another keytab: the old keytab is stale
        (what a client with an outdated keytab holds)."""
        self._run("kadmin.local", "-r", self.realm, "-q", "ktadd -k %s %s" % (keytab, self.principal(name)))
        return keytab

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Kdc":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
