"""Build the Go client scenarios of compat/go (a Go module: franz-go today) and run them.

``build(out_dir)`` runs ``go build -o out_dir/ ./...`` in compat/go (the module proxy supplies
the dependencies named in go.mod/go.sum on the first build; Go's caches make later builds quick)
and returns the directory of the binaries (once a session: later calls return the same directory).  ``go_binary()`` finds the toolchain: ``go`` on PATH,
else /usr/local/go/bin/go; None when there is none (the tests then skip, saying so).
``run(binary, bootstrap, scenario, **flags)`` runs one scenario and returns its JSON report;
``run_killing_a_leader(cluster, args, topic)`` (tests/client_brokers.py, shared with tests/node)
runs one that reports ``progress acked=N`` on stderr and kills partition 0's leader of ``topic``
-9 while it produces.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.client_brokers import run_killing_a_leader  # noqa: F401 (gobuild.run_killing_a_leader)

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "compat" / "go"


# a refused authentication's error: each Go client's own words, then the broker's message
# (Kafka's text) for each mechanism
GO_AUTH_ERROR = {"franzgo": "SASL_AUTHENTICATION_FAILED: SASL Authentication failed.",
                 "sarama": "kafka server: SASL Authentication failed",
                 "kafkago": "[58] SASL Authentication Failed"}
BROKER_AUTH_ERROR = {"PLAIN": "Authentication failed: Invalid username or password",
                     "SCRAM-SHA-256": "Authentication failed during authentication due to invalid credentials with "
                                      "SASL mechanism SCRAM-SHA-256",
                     "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials with "
                                      "SASL mechanism SCRAM-SHA-512",
                     # Kafka's unsecured validator: the RFC 7628 error status of an expired token
                     "OAUTHBEARER": '{"status":"invalid_token"}'}
# A refused client must give up at the broker's first refusal, not after retrying until its
# deadline (the secure scenario's produce waits up to 20 s): its whole run (the Go process's
# start, the TLS handshake and the exchange) under this.  Measured 0.01-2.2 s (franz-go the
# slowest).  With every SaslAuthenticate answered 12 s late, sarama still reports its
# authentication error, after 24-48 s (it tries again), and kafka-go (PLAIN) after 12 s: only
# this bound tells those apart.
REFUSED_WITHIN_S = 10.0


def broker_auth_error(client: str, mech: str) -> str:
    """The broker's message in ``client``'s refused authentication.  sarama (v1.61) acknowledges
    OAUTHBEARER's error challenge with the four characters ``\\x01`` (a Go raw string literal in
    its broker.go) instead of the byte 0x01: the broker takes them for a new, malformed client
    response and fails with its generic message rather than the challenge's JSON, Apache Kafka
    as pykbroker (tests/differential/test_secure_clients.py)."""
    if client == "sarama" and mech == "OAUTHBEARER":
        return "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
    return BROKER_AUTH_ERROR[mech]


def go_binary() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


# The directory of this session's build: tests/go and the modules of tests/differential and
# tests/security that run the Go clients use one build (each built ./... again before, linking
# three programs: 4 s with warm caches on a quiet 2-core machine, 7-9 s of setup under a load of 10-15).
_BUILT: list[Path] = []


def build(out_dir: Path) -> Path:
    """The built programs: ``out_dir`` on the session's first call, that directory afterwards."""
    if _BUILT:
        return _BUILT[0]
    go = go_binary()
    r = subprocess.run([go, "build", "-o", str(out_dir) + "/", "./..."], cwd=MODULE, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("go build in %s failed:\n%s%s" % (MODULE, r.stdout, r.stderr))
    _BUILT.append(out_dir)
    return out_dir


def require_toolchain(what: str) -> None:
    """At a test module's top: skip the module when there is no Go toolchain for ``what``."""
    if go_binary() is None:
        pytest.skip("no Go toolchain: %s needs one" % what, allow_module_level=True)


def build_or_fail(out_dir: Path) -> Path:
    """:func:`build` from a fixture: a failed build fails the tests using it (never a skip)."""
    try:
        return build(out_dir)
    except Exception as e:
        pytest.fail(str(e), pytrace=False)


def build_for_module(tmp_path_factory) -> Path:
    """A module-scoped ``gobin`` fixture's body outside tests/go: the built programs, or the
    module's tests skipped (tests.needs: a missing tool) when there is no Go toolchain."""
    if go_binary() is None:
        from tests import needs
        needs.skip_missing("a Go toolchain (go on PATH or /usr/local/go/bin/go) for the Go clients")
    return build_or_fail(tmp_path_factory.mktemp("gobin"))


def unsecured_jwt(sub: str, lifetime: int = 3600) -> str:
    """A JWT for Kafka's unsecured validator (``alg: none``, no signature), issued 10 s ago and
    good for ``lifetime`` seconds (negative: already expired)."""
    def enc(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return "%s.%s." % (enc({"alg": "none"}), enc({"sub": sub, "iat": now - 10, "exp": now + lifetime}))


def run(binary: Path, bootstrap: str, scenario: str, wait: float = 180.0, **flags) -> dict:
    """One scenario; its report (stdout JSON).  A client failure (exit 2) fails the test with
    the scenario's own message and the tail of franz-go's log."""
    args = [str(binary), "-brokers", bootstrap, "-scenario", scenario, "-v"]
    for k, v in flags.items():
        args += ["-%s=%s" % (k.replace("_", "-"), v)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=wait)
    if r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(args), r.returncode,
                                                   r.stderr[-4000:]))
    # the client's retries and errors of a run that succeeded, printed for pytest to show if the
    # test fails on the report (a record written twice by a retried request, say): otherwise
    # the log that explains it is gone with the process
    notable = [line for line in r.stderr.splitlines()
               if any(w in line.lower() for w in ("retry", "retrying", "error", "disconnect", "timeout"))]
    if notable:
        print("%s %s: %d client log line(s) on retries/errors, the last 40:\n%s"
              % (binary.name, scenario, len(notable), "\n".join(notable[-40:])))
    return json.loads(r.stdout)
