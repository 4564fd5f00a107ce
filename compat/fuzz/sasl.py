"""The SASL state machine fuzzed against a live SASL listener: sessions of SaslHandshake (v0/v1)
and SaslAuthenticate (v0-2) or raw v0 token frames, with PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER tokens that are right, wrong or mutated (fuzzer.mutate's bit flips, interesting
values, truncations and splices), requests of other APIs before, during and after the exchange,
and whole frames mutated, each session on a fresh connection.  ``compat/fuzz/run.py --sasl``
runs it (``--requests`` then counts sessions); ``tests/security/test_sasl_fuzz.py`` runs it briefly.

What is checked (``SaslFigures``): every Kafka request gets an answer with its correlation id
that decodes with its API's codec, or the connection closes (a raw v0 token gets a raw frame or
a close); a connection that does neither within ``answer_timeout`` while the broker still
answers a fresh one is a ``held`` finding, a broker that no longer answers is a ``hang``, a
process that exits a ``crash``.  A valid exchange must authenticate (``authenticated`` counts
them; a valid exchange refused is a finding).  After each batch of sessions a real client
(confluent-kafka, SCRAM) must authenticate and produce; the broker's log must hold no ERROR line
or traceback.  Frame sizes always tell the truth here (a lying size only makes the broker wait for
bytes, which the protocol fuzzer already covers).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import random
import socket
import struct
import time
from dataclasses import dataclass
from typing import Optional

from pykbroker.protocol.codec import APIS
from pykbroker.protocol.primitives import ProtocolError

from .fuzzer import ConnectionClosed, FuzzTarget, RunFigures, _Conn, frame, mutate, process_running

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS, METADATA = 17, 36, 18, 3
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
USER, PASSWORD = "alice", "fuzz-Secret-1"
_HASH = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


@dataclass
class SaslFigures(RunFigures):
    sessions: int = 0
    raw_answers: int = 0
    authenticated: int = 0

    def ok(self) -> bool:
        return super().ok() and not self.findings


_METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


class Closed(Exception):
    pass


def _unsecured_jwt(sub="alice", exp_delta=600):
    def b64(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return "%s.%s." % (b64({"alg": "none"}), b64({"sub": sub, "iat": now, "exp": now + exp_delta}))


_TOKEN_BYTES = (b"\x00", b"\x01", b"\xff", b"\x80", b",", b"=", b"n,,", b"r=", b"p=", b"\xc3\x28",
                b"=2C", b"=3D", b"a=", b"auth=", b"Bearer ", b"%")


def _mutate_token(token: bytes, rnd: random.Random) -> bytes:
    """Token-level mutations: bit flips, separators and invalid UTF-8 put in or swapped,
    truncation, repetition, a huge or an empty token."""
    b = bytearray(token)
    for _ in range(rnd.choice((1, 1, 2, 4))):
        op = rnd.randrange(7)
        i = rnd.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] ^= 1 << rnd.randrange(8)
        elif op == 1:
            b[i:i] = rnd.choice(_TOKEN_BYTES)
        elif op == 2 and b:
            j = min(len(b) - 1, i)
            b[j:j + 1] = rnd.choice(_TOKEN_BYTES)
        elif op == 3:
            del b[i:]
        elif op == 4:
            b += bytes(b[i:]) * rnd.randrange(1, 4)
        elif op == 5:
            b = bytearray(rnd.choice((b"", b"\x00" * rnd.randrange(1, 9), bytes(rnd.randrange(256) for _ in range(40)))))
        else:
            del b[i:i + rnd.randrange(1, 8)]
    return bytes(b)


class _Session:
    """One connection's SASL exchange, driven by ``rnd``."""

    def __init__(self, fz: "SaslFuzzer", rnd: random.Random):
        self.fz, self.rnd = fz, rnd
        self.conn = _Conn(fz.addr, 5.0)
        self.corr = 0

    # -- sending -------------------------------------------------------------------------
    def _maybe_mutate(self, payload: bytes, share: float) -> tuple[bytes, bool]:
        if self.rnd.random() < share:
            self.fz.figures.mutated += 1
            out, _lie = mutate(payload, self.rnd, self.fz.corpus)   # the size below tells the truth
            return out, True
        return payload, False

    def request(self, api_key: int, version: int, body: dict | bytes, mutate_share: float = 0.0):
        """Send one Kafka request; its decoded answer, or raise Closed."""
        fig = self.fz.figures
        self.corr += 1
        corr = self.corr
        raw = body if isinstance(body, bytes) else APIS[api_key].encode_bytes("request", version, body)
        payload = frame(api_key, version, corr, raw, client_id=self.rnd.choice(["fuzz", None, ""]))[4:]
        payload, mutated = self._maybe_mutate(payload, mutate_share)
        fz = self.fz
        if mutated:
            fz.corpus.append(payload[:4096])   # keep splicing material fresh
            if len(fz.corpus) > 400:
                del fz.corpus[:100]
        fig.requests += 1
        got = self._send(struct.pack(">i", len(payload)) + payload, "%s v%d" % (APIS[api_key].name, version))
        if mutated:
            if len(payload) >= 8:
                api_key, version, corr = struct.unpack_from(">hhi", payload)
            if api_key not in APIS:
                fig.bad_answers += 1   # Kafka closes on an unknown API key
                fz.finding("an answer to unknown API key %d" % api_key, payload)
                raise Closed()
        if len(got) < 4 or struct.unpack_from(">i", got)[0] != corr:
            fig.bad_answers += 1
            fz.finding("answer with a wrong correlation id to %s v%d" % (api_key, version), payload)
            raise Closed()
        spec = APIS[api_key]
        flexible = api_key != API_VERSIONS and spec.flexible(min(version, spec.max_version))
        body_at = 4 + (1 if flexible else 0)
        try:
            # an ApiVersions of a version not served is answered with a v0 body (KIP-511)
            v = version if spec.min_version <= version <= spec.max_version else 0
            answer = spec.decode("response", v, memoryview(got)[body_at:], exact=False)
        except ProtocolError as e:
            fig.bad_answers += 1
            fz.finding("undecodable %s v%d answer: %s" % (spec.name, version, e), payload)
            raise Closed()
        fig.answers += 1
        return answer

    def raw_token(self, token: bytes, mutate_share: float = 0.0) -> bytes:
        """A v0 (raw) token frame; the raw answer token, or raise Closed."""
        token, _ = self._maybe_mutate(token, mutate_share)
        self.fz.figures.requests += 1
        got = self._send(struct.pack(">i", len(token)) + token, "raw SASL token")
        self.fz.figures.raw_answers += 1
        return got   # the raw answer token (read_frame took its size prefix off)

    def _read(self, timeout: float):
        """The next frame without its size prefix (b"" is an empty frame: a raw v0 token answer
        may be one); None on timeout; raises Closed when the broker closed."""
        try:
            return self.conn.receive_frame(timeout)
        except ConnectionClosed:
            self.fz.figures.closes += 1
            raise Closed() from None

    def _send(self, data: bytes, label: str) -> bytes:
        fz, fig = self.fz, self.fz.figures
        try:
            self.conn.sock.sendall(data)
        except OSError:
            fig.closes += 1
            raise Closed() from None
        got = self._read(fz.answer_timeout)
        if got is None:
            fz.after_silence(label, data)
            raise Closed()
        return got

    # -- the exchange --------------------------------------------------------------------
    def run(self) -> None:
        rnd = self.rnd
        # a valid session: no mutation, right credentials, nothing out of order; it must get in
        valid = rnd.random() < 0.35
        share = 0.0 if valid else self.fz.mutate_share
        mech = rnd.choice(MECHANISMS)
        if not valid and rnd.random() < 0.15:
            mech = rnd.choice(["GSSAPI", "plain", "", "SCRAM-SHA-1", "x" * 300])
        hv = rnd.choice((0, 1, 1, 1))
        authenticated = False
        try:
            if rnd.random() < 0.3:
                self.request(API_VERSIONS, rnd.randrange(0, 4),
                             {"client_software_name": "fuzz", "client_software_version": "1"}, share / 2)
            if not valid and rnd.random() < 0.05:
                self.request(METADATA, 12, _METADATA)   # before authentication: a close
            r = self.request(SASL_HANDSHAKE, hv, {"mechanism": mech}, share / 3)
            if r.get("error_code"):
                return
            raw = hv == 0
            av = rnd.randrange(0, 3)

            def step(token):
                if share and rnd.random() < share:
                    # the token itself mutated inside a well-formed frame: what reaches the
                    # mechanism's parser (a mutated frame mostly stops at the codec)
                    token = _mutate_token(token, rnd)
                    self.fz.figures.mutated += 1
                if raw:
                    return self.raw_token(token, share)
                ans = self.request(SASL_AUTHENTICATE, av, {"auth_bytes": token}, share)
                if ans.get("error_code"):
                    raise Closed()
                return bytes(ans.get("auth_bytes") or b"")

            if not valid and not raw and rnd.random() < 0.1:
                # another API in the middle of the exchange: its error answer, then a close
                self.request(METADATA, 12, _METADATA)
            password = PASSWORD if valid or rnd.random() < 0.5 else "wrong"
            if mech == "PLAIN":
                step(b"\0%s\0%s" % (USER.encode(), password.encode()))
            elif mech in _HASH:
                self._scram(step, mech, password, tamper=not valid and rnd.random() < 0.1)
            elif mech == "OAUTHBEARER":
                jwt = _unsecured_jwt(exp_delta=600 if valid or rnd.random() < 0.5 else -600)
                out = step(("n,,\x01auth=Bearer %s\x01\x01" % jwt).encode())
                if out:
                    step(b"\x01")
            else:
                step(os.urandom(rnd.randrange(0, 64)))
            authenticated = True
            if valid:
                self.fz.figures.authenticated += 1
            # authenticated (or so it seems): a request is served, a second handshake refused
            self.request(METADATA, 12, _METADATA, share / 4)
            if rnd.random() < 0.2:
                self.request(SASL_HANDSHAKE, 1, {"mechanism": mech}, share / 4)
        except Closed:
            if valid and not authenticated:
                self.fz.finding("a valid %s exchange (handshake v%d) was refused" % (mech, hv), b"")
        finally:
            self.conn.close()

    def _scram(self, step, mech, password, tamper=False):
        h = _HASH[mech]
        nonce = base64.b64encode(os.urandom(18)).decode()
        bare = "n=%s,r=%s" % (USER, nonce)
        server_first = step(("n,," + bare).encode()).decode("utf-8", "replace")
        try:
            attrs = dict(kv.split("=", 1) for kv in server_first.split(",") if "=" in kv)
            salt, iterations, rnonce = base64.b64decode(attrs["s"]), int(attrs["i"]), attrs["r"]
        except (KeyError, ValueError):
            # an answer to a mutated client-first that is no server-first: go on with garbage
            step(os.urandom(self.rnd.randrange(1, 64)))
            return
        if tamper:
            rnonce = nonce + "x"   # a nonce that does not extend the client's
        salted = hashlib.pbkdf2_hmac(h().name, password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", h)
        stored = h(client_key).digest()
        without_proof = "c=biws,r=%s" % rnonce
        auth_msg = ",".join((bare, server_first, without_proof)).encode()
        sig = hmac.digest(stored, auth_msg, h)
        proof = bytes(a ^ b for a, b in zip(client_key, sig))
        step(("%s,p=%s" % (without_proof, base64.b64encode(proof).decode())).encode())


class SaslFuzzer(FuzzTarget):
    """Sessions against one SASL_PLAINTEXT listener (``addr``) of the broker process ``pid``."""

    def __init__(self, bootstrap: str, pid: int | None = None, log_lines: list | None = None, seed: int = 0,
                 mutate_share: float = 0.5, answer_timeout: float = 3.0):
        super().__init__(bootstrap, pid, log_lines)
        self.rnd = random.Random(seed)
        self.mutate_share = mutate_share
        self.answer_timeout = answer_timeout
        self.figures = SaslFigures()
        self.corpus: list[bytes] = []
        self._stop = None

    def finding(self, text: str, data: bytes) -> None:
        if len(self.figures.findings) < 50:
            self.figures.findings.append("%s frame=%s" % (text, data[:120].hex()))

    def alive(self) -> bool:
        try:
            c = _Conn(self.addr, 5.0)
        except OSError:
            return False
        try:
            c.sock.sendall(frame(API_VERSIONS, 0, 7, b"", flexible=False))
            got = c.read_frame(10.0)
            return bool(got)
        finally:
            c.close()

    def after_silence(self, label: str, data: bytes) -> None:
        """No answer and no close within answer_timeout."""
        fig = self.figures
        if self.pid is not None and not process_running(self.pid):
            fig.crashes += 1
            self.finding("crash after %s" % label, data)
            self._stop = "crash"
        elif not self.alive():
            fig.hangs += 1
            self.finding("hang after %s" % label, data)
            self._stop = "hang"
        else:
            fig.held += 1
            self.finding("held connection after %s" % label, data)

    def check_health(self) -> None:
        """A real client (a new confluent-kafka producer: a fresh SCRAM authentication) must
        deliver a record; the broker's log since the last check must hold no ERROR line."""
        from confluent_kafka import Producer
        fig = self.figures
        fig.health_checks += 1
        res = []
        producer = Producer({**client_config(self.bootstrap), "message.timeout.ms": 15000})
        producer.produce("health-sasl-fuzz", value=b"ping", on_delivery=lambda err, msg: res.append(err))
        producer.flush(20)
        del producer
        if not res or res[0] is not None:
            fig.health_failures += 1
            self.finding("health check %d: %s" % (fig.health_checks, res[0] if res else "no delivery"), b"")
        new = list(self.new_log_lines())
        for i, line in enumerate(new):
            if " ERROR " in line or " CRITICAL " in line:
                fig.internal_errors += 1
                self.finding("log: " + line.strip()[:500], b"")
            elif line.startswith("Traceback"):
                # the whole traceback (to its exception line): what a fix needs
                tb = [line.rstrip()]
                for nxt in new[i + 1:i + 60]:
                    tb.append(nxt.rstrip())
                    if nxt and not nxt[0].isspace():
                        break
                self.finding("log: " + "\n".join(tb)[-4000:], b"")

    def run(self, sessions: int, batch: int = 100, seconds: Optional[float] = None) -> SaslFigures:
        """``sessions`` sessions, or fewer when ``seconds`` have passed first (checked per batch)."""
        t0 = time.monotonic()
        done = 0
        while done < sessions and not self._stop and (seconds is None or time.monotonic() - t0 < seconds):
            for _ in range(min(batch, sessions - done)):
                self.figures.sessions += 1
                rnd = random.Random(self.rnd.getrandbits(64))
                try:
                    _Session(self, rnd).run()
                except (OSError, socket.timeout) as e:
                    if not (self.pid is None or process_running(self.pid)):
                        self.figures.crashes += 1
                        self._stop = "crash"
                        self.finding("crash: %r" % e, b"")
                        break
                    self.finding("connection failed while the broker runs: %r" % e, b"")
                done += 1
                if self._stop:
                    break
            if not self._stop:
                self.check_health()
        self.figures.seconds = time.monotonic() - t0
        return self.figures


def broker_overrides() -> dict:
    """A SASL_PLAINTEXT listener with every mechanism pykbroker serves."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";'
            % (USER, PASSWORD))
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            "offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}


def client_config(bootstrap: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD}


def run_against_new_broker(data_dir: str, sessions: int = 1000, seed: int = 0, batch: int = 100,
                           mutate_share: float = 0.5, seconds: Optional[float] = None) -> SaslFigures:
    """A broker process with a SASL listener (PLAIN from JAAS, SCRAM users created through the
    admin API, OAUTHBEARER unsecured), fuzzed, stopped."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from pykbroker.local.broker_process import BrokerProcess

    with BrokerProcess(data_dir, broker_overrides(), log_level="INFO") as b:
        admin = AdminClient(client_config(b.bootstrap, "PLAIN"))
        ups = [UserScramCredentialUpsertion(USER, ScramCredentialInfo(m, 4096), PASSWORD.encode())
               for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
        # one request per mechanism: Kafka 4.4 refuses two changes of one user in a request
        # (DUPLICATE_RESOURCE), and so does pykbroker
        for up in ups:
            for f in admin.alter_user_scram_credentials([up]).values():
                f.result(15)
        fz = SaslFuzzer(b.bootstrap, pid=b.proc.pid, log_lines=b.lines, seed=seed, mutate_share=mutate_share)
        fz.check_health()
        fig = fz.run(sessions, batch, seconds)
    return fig
