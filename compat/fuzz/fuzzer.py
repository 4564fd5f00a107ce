"""Protocol fuzzer against a live broker: requests generated from ``protocol_specs/`` for every
API and version the broker advertises, and mutations of requests captured from real client
sessions (``compat/fuzz/corpus/``), sent over real sockets.  ``compat/fuzz/run.py`` is the
command; ``tests/protocol/test_fuzz_live.py`` runs it briefly.

What is checked, and counted:

- every request gets an answer with its correlation id, that decodes with the codec of its API
  and version (``answers``; ``error_answers``: those with a non-zero error code anywhere), or
  no answer where Kafka sends none (an acks=0 Produce: ``silent``, seen as the next request's
  answer arriving), or the connection is closed (``closes``).  A connection that neither
  answers nor closes within ``answer_timeout`` is waited for while the broker answers a fresh
  connection: an answer within ``held_timeout`` is ``slow``, none a ``held`` connection; a broker
  that does not answer a fresh connection is a ``hang``; a broker process that exits is a ``crash``.
  A wrong correlation id or an answer that does not decode is a ``bad_answer``.
- after each batch a real client (confluent-kafka) produces to a health topic and must be
  acknowledged in time (``health_failures`` otherwise); the broker's RSS and open fds are read
  from /proc after each batch (``rss_mb`` series, ``peak_rss_mb``, ``fds`` series).
- the broker's log is searched for tracebacks and ERROR lines (``internal_errors``: a handler
  that raised answers UNKNOWN_SERVER_ERROR, which is a bug even though the client is answered).
- records produced by a real client before the run, and a consumer group's committed offsets,
  are read back after it byte for byte (``data_intact``).

Generation draws names (topics, groups, transactional ids) mostly from small pools, so requests
meet existing state and the broker's state stays bounded (a leak is then growth, not new
topics), and clamps the fields that make a request wait (``max_wait_ms``, ``timeout_ms`` ...) to
under a second so a correct broker never holds an answer past ``answer_timeout``.  The topics the
real clients own are never named by the fuzzer.
"""
from __future__ import annotations

import os
import random
import re
import select
import socket
import struct
import time
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Callable

from hypothesis import HealthCheck, Phase, given, seed as hseed, settings
from hypothesis import strategies as st

from pykbroker.protocol import records as R
from pykbroker.protocol.codec import APIS
from pykbroker.protocol.primitives import ProtocolError
from pykbroker.protocol.wire import request_frame

API_VERSIONS = 18

# Names the fuzzer uses: a few topics (some created before the run, with data), groups and
# transactional ids.  The real clients' topics are named otherwise ("precious-", "health-").
# (Not the internal topics: deleting __consumer_offsets is an administrator's act, not bad input,
# and it would take the other clients' committed offsets with it.)
TOPIC_POOL = ["fz-0", "fz-1", "fz-2", "fz-new"]
GROUP_POOL = ["fzg-0", "fzg-1", "fzg-2"]
TXN_POOL = ["fzt-0", "fzt-1"]
_NAMEISH_TOPIC = {"name", "topic", "topic_name", "sink_topic"}
_NAMEISH_GROUP = {"group_id", "key"}
_NAMEISH_TXN = {"transactional_id", "v3_and_below_transactional_id", "transactional_id_pattern"}
# Fields that make a broker hold its answer (Fetch's max_wait_ms, a Produce's acks=-1 timeout, a
# JoinGroup's rebalance...): kept short so a held connection means a bug, not a long wait asked for.
_WAIT_FIELDS = {"max_wait_ms", "timeout_ms", "rebalance_timeout_ms"}
# A group session timeout must lie within group.min/max.session.timeout.ms (6 s - 30 min) for a
# JoinGroup to get anywhere; it does not make the broker hold the answer.
_SESSION_TIMEOUTS = [-1, 0, 300, 5999, 6000, 10000, 45000, 1800000, 1800001]
# Counts that size what the broker builds (partitions of a new topic, replicas): mostly small;
# the broker's own limits (MAX_PARTITIONS_PER_REQUEST) are still met by the boundary values.
_SIZE_FIELDS = {"num_partitions", "count", "replication_factor"}

_INT_RANGES = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
               "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def _int_strategy(t, name):
    lo, hi = _INT_RANGES[t]
    if name in _WAIT_FIELDS:
        return st.integers(-1, 300)
    if name == "session_timeout_ms":
        return st.sampled_from(_SESSION_TIMEOUTS)
    bounds = sorted(b for b in {lo, hi, 0, -1, 1, 2**15 - 1, 2**31 - 1, -(2**31)} if lo <= b <= hi)
    small = st.integers(max(lo, -2), min(hi, 5))
    if name in _SIZE_FIELDS:
        return st.one_of(small, small, small, st.sampled_from(bounds))
    return st.one_of(small, st.sampled_from(bounds), st.integers(lo, hi))


def _batches():
    """Record batches as producers write them (any codec, idempotent or not), and broken ones."""
    rec = st.tuples(st.none(), st.none(), st.one_of(st.none(), st.binary(max_size=12)),
                    st.one_of(st.none(), st.binary(max_size=40)),
                    st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))),
                             max_size=2))

    @st.composite
    def batch(draw):
        recs = draw(st.lists(rec, min_size=1, max_size=4))
        codec = draw(st.sampled_from([0, 0, 1, 2, 3, 4]))
        pid = draw(st.sampled_from([-1, -1, 0, 1000, 2**62]))
        b = R.encode_batch([R.Record(None, None, k, v, h) for _, _, k, v, h in recs], 0, codec,
                           producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=draw(st.sampled_from([0, 0, 5, -1])) if pid >= 0 else -1,
                           is_transactional=pid >= 0 and draw(st.booleans()))
        if draw(st.integers(0, 3)) == 0:   # one byte changed (after the CRC check, or not)
            b = bytearray(b)
            i = draw(st.integers(0, len(b) - 1))
            b[i] = draw(st.integers(0, 255))
            b = bytes(b)
        return b

    return st.one_of(batch(), st.none(), st.binary(max_size=80))


_STRATEGIES: dict = {}

# Values the broker handed out (member ids, generations and epochs, producer ids, topic ids, fetch
# sessions), learnt from its answers and drawn again by later requests, so sequences such as
# JoinGroup -> SyncGroup -> Heartbeat or InitProducerId -> Produce -> EndTxn reach the states past
# the first "unknown member/producer" check.  request field -> the answers' field it echoes.
_LEARNT_FIELDS = {
    "member_id": "member_id", "generation_id": "generation_id",
    "generation_id_or_member_epoch": "member_epoch", "member_epoch": "member_epoch",
    "producer_id": "producer_id", "v3_and_below_producer_id": "producer_id",
    "producer_epoch": "producer_epoch", "v3_and_below_producer_epoch": "producer_epoch",
    "topic_id": "topic_id", "session_id": "session_id",
}
_LEARNT_KEYS = set(_LEARNT_FIELDS.values())
LEARNT: dict = {k: [] for k in _LEARNT_KEYS}
_LEARNT_MAX = 64


def _learnt(key, fallback):
    """Draws one of the values learnt for ``key`` so far (read at draw time), else ``fallback``."""
    def pick(i):
        pool = LEARNT[key]
        return pool[i % len(pool)] if pool else fallback
    return st.integers(0, _LEARNT_MAX - 1).map(pick)


def learn(answer) -> None:
    """Keep the ids and epochs an answer carries (non-default ones) for later requests."""
    if isinstance(answer, list):
        for x in answer:
            if isinstance(x, (dict, list)):
                learn(x)
        return
    for k, v in answer.items():
        if isinstance(v, (dict, list)):
            learn(v)
        elif k == "topic_id" and _topic_name(answer) not in TOPIC_POOL:
            # only the pool's topics: the fuzzer must not name (and delete) the internal topics
            # or the topics of the broker's other clients by id either
            continue
        elif k in _LEARNT_KEYS and v not in (None, "", -1, bytes(16)):
            pool = LEARNT[k]
            if v not in pool:
                if len(pool) >= _LEARNT_MAX:
                    pool.pop(0)
                pool.append(bytes(v) if isinstance(v, memoryview) else v)


def _topic_name(entry: dict):
    for k in ("name", "topic", "topic_name"):
        if k in entry:
            return entry[k]
    return None


def _scalar(f, t, v, item=False):   # an array item draws as its array field (item unused)
    s = _scalar_fresh(f, t, v)
    key = _LEARNT_FIELDS.get(f["name"])
    if key is None:
        return s
    fallback = bytes(16) if t == "uuid" else ("" if t == "string" else 0)
    return st.one_of(s, _learnt(key, fallback))


def _scalar_fresh(f, t, v):
    name = f["name"]
    if t in _INT_RANGES:
        return _int_strategy(t, name)
    if t == "float64":
        return st.floats()
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.one_of(st.just(bytes(16)), st.binary(min_size=16, max_size=16))
    nullable = _in(f.get("nullable"), v)
    if t == "string":
        text = st.text(max_size=16)
        if name in _NAMEISH_TOPIC:
            s = st.one_of(st.sampled_from(TOPIC_POOL), st.sampled_from(TOPIC_POOL), text)
        elif name in _NAMEISH_GROUP:
            s = st.one_of(st.sampled_from(GROUP_POOL), st.sampled_from(GROUP_POOL), text)
        elif name in _NAMEISH_TXN:
            s = st.one_of(st.sampled_from(TXN_POOL), text)
        else:
            s = text
    elif t == "bytes":
        s = st.binary(max_size=48)
    elif t == "records":
        return _batches()
    else:
        raise AssertionError(t)
    return st.one_of(st.none(), s) if nullable else s


def message_strategy(fields, v, scalar, depth=0):
    """A hypothesis strategy for a message (a dict) of the spec's ``fields`` at version ``v``:
    structs and arrays nested as the spec says (arrays short, shorter below two levels), nullable
    ones sometimes None; ``scalar(f, t, v, item)`` draws a field (or an array item) of type ``t``."""
    parts = {}
    for f in fields:
        if not _in(f["versions"], v):
            continue
        t = f["type"]
        if t == "array":
            item = (message_strategy(f["fields"], v, scalar, depth + 1) if f["of"] == "struct"
                    else scalar(f, f["of"], v, True))
            s = st.lists(item, max_size=3 if depth < 2 else 1)
            if _in(f.get("nullable"), v):
                s = st.one_of(st.none(), s)
        elif t == "struct":
            s = message_strategy(f["fields"], v, scalar, depth + 1)
            if _in(f.get("nullable"), v):
                s = st.one_of(st.none(), s)
        else:
            s = scalar(f, t, v, False)
        parts[f["name"]] = s
    return st.fixed_dictionaries(parts)


def request_strategy(api_key: int, version: int):
    """A hypothesis strategy for the body (a dict) of one API's request at one version."""
    key = (api_key, version)
    s = _STRATEGIES.get(key)
    if s is None:
        s = _STRATEGIES[key] = message_strategy(APIS[api_key].request, version, _scalar)
    return s


def frame(api_key: int, version: int, corr: int, body: bytes, client_id: str | None = "fuzz",
          flexible: bool | None = None) -> bytes:
    """``wire.request_frame`` for any api key and version, known or not: the header is flexible
    as the API's highest version says when the version is past it (a fuzzed version)."""
    if flexible is None:
        api = APIS.get(api_key)
        flexible = api is not None and api.flexible(min(version, api.max_version)) and api_key != -1
    return request_frame(api_key, version, corr, body, client_id, flexible)


# ----------------------------------------------------------------------------- corpus + mutation
def load_corpus(path: str) -> list[bytes]:
    """Request payloads (size prefix removed) of every ``*.bin`` under ``path``: each file is the
    byte stream a client sent, i.e. Kafka frames one after another."""
    out = []
    if not path or not os.path.isdir(path):
        return out
    for name in sorted(os.listdir(path)):
        if not name.endswith(".bin"):
            continue
        with open(os.path.join(path, name), "rb") as fh:
            data = fh.read()
        pos = 0
        while pos + 4 <= len(data):
            (n,) = struct.unpack_from(">i", data, pos)
            if n < 8 or pos + 4 + n > len(data):
                break
            out.append(data[pos + 4:pos + 4 + n])
            pos += 4 + n
    return out


_INTERESTING = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000, 2**63 - 1]


def mutate(payload: bytes, rnd: random.Random, corpus: list[bytes]) -> tuple[bytes, bool]:
    """A mutated copy of one request payload (header + body), and whether its size prefix
    should lie (announce fewer bytes than sent: the rest reads as the start of another frame).
    The header's first 8 bytes are mutated less often than the body, so most mutants reach the
    body decoders and handlers of their API."""
    b = bytearray(payload)
    for _ in range(rnd.choice((1, 1, 1, 2, 3, 8))):
        op = rnd.randrange(11)
        lo = 8 if rnd.random() < 0.85 and len(b) > 9 else 0
        if not b:
            b += bytes(rnd.randrange(1, 16))
        i = rnd.randrange(lo, len(b)) if len(b) > lo else 0
        if op == 0:                      # flip a bit
            b[i] ^= 1 << rnd.randrange(8)
        elif op == 1:                    # an interesting byte
            b[i] = rnd.choice((0, 1, 0x7F, 0x80, 0xFE, 0xFF))
        elif op in (2, 3):               # an interesting int16/int32/int64 over what is there
            width = rnd.choice((2, 4, 8))
            fmt = {2: ">h", 4: ">i", 8: ">q"}[width]
            v = rnd.choice(_INTERESTING)
            lim = 1 << (8 * width - 1)
            v = max(-lim, min(lim - 1, v))
            b[i:i + width] = struct.pack(fmt, v)
        elif op == 4:                    # truncate
            del b[rnd.randrange(lo, len(b) + 1) if len(b) >= lo else 0:]
        elif op == 5:                    # append random bytes
            b += rnd.randbytes(rnd.randrange(1, 32))
        elif op == 6:                    # delete a range
            j = min(len(b), i + rnd.randrange(1, 16))
            del b[i:j]
        elif op == 7:                    # duplicate a range
            j = min(len(b), i + rnd.randrange(1, 32))
            b[i:i] = b[i:j]
        elif op == 8 and len(b) >= 4:    # another version of the same API
            struct.pack_into(">h", b, 2, rnd.choice((-1, 0, 1, 3, 7, 9, 12, 13, 17, 100, 0x7FFF)))
        elif op == 9 and len(b) >= 2:    # another API with this body
            struct.pack_into(">h", b, 0, rnd.choice(sorted(APIS) + [-1, 99, 1000, 0x7FFF]))
        elif op == 10 and corpus:        # splice with another captured request
            other = rnd.choice(corpus)
            j = rnd.randrange(0, len(other) + 1)
            b = b[:i] + bytearray(other[j:])
    lie = rnd.random() < 0.02 and len(b) > 12
    return bytes(b), lie


# ----------------------------------------------------------------------------- the broker's side
def proc_stats(pid: int) -> tuple[float, float, int]:
    """(RSS MB, peak RSS MB, open fds) of a process, from /proc."""
    rss = hwm = 0.0
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) / 1024
        fds = len(os.listdir("/proc/%d/fd" % pid))
    except (OSError, ValueError):
        return 0.0, 0.0, -1
    return rss, hwm, fds


def process_running(pid: int) -> bool:
    """The process exists and has not exited (a child killed but not yet reaped is a zombie,
    which ``kill(pid, 0)`` still finds)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _nonzero_error(x) -> bool:
    if isinstance(x, dict):
        for k, v in x.items():
            if k.endswith("error_code") and isinstance(v, int) and v != 0:
                return True
            if isinstance(v, (dict, list)) and _nonzero_error(v):
                return True
    elif isinstance(x, list):
        return any(_nonzero_error(v) for v in x)
    return False


@dataclass
class RunFigures:
    """What every fuzz run counts (this one and the SASL one, sasl.py), and the verdict they
    share: a crash, a hang, a held connection, a bad answer, a failed health check or an internal
    error logged by the broker fails the run."""
    requests: int = 0
    mutated: int = 0
    answers: int = 0
    closes: int = 0
    held: int = 0
    bad_answers: int = 0
    hangs: int = 0
    crashes: int = 0
    health_checks: int = 0
    health_failures: int = 0
    internal_errors: int = 0
    seconds: float = 0.0
    findings: list = field(default_factory=list)  # the first example of each kind of finding

    def ok(self) -> bool:
        return not (self.crashes or self.hangs or self.held or self.bad_answers or self.health_failures
                    or self.internal_errors)


@dataclass
class Figures(RunFigures):
    generated: int = 0
    error_answers: int = 0
    silent: int = 0
    slow: int = 0       # answered, but after more than twice answer_timeout
    held_expected: int = 0   # no answer where Kafka holds one too (_expected_hold says why)
    unprobed: int = 0   # no answer to a frame with a short size prefix (see LiveFuzzer.send)
    mutated_generated: int = 0   # mutations of requests generated earlier in the run (in mutated)
    generator_errors: int = 0
    connections: int = 0
    batches: int = 0
    rss_mb: list = field(default_factory=list)
    fds: list = field(default_factory=list)
    peak_rss_mb: float = 0.0
    data_intact: bool | None = None
    state_at_end: dict = field(default_factory=dict)   # topics, partitions, groups the run left
    apis: dict = field(default_factory=dict)      # "Name vN" -> requests sent
    slowest: dict = field(default_factory=dict)   # "Name vN" -> longest wait for its answer (s)
    finding_counts: dict = field(default_factory=dict)  # kind -> times seen
    finding_examples: dict = field(default_factory=dict)  # kind -> its first example
    learnt: dict = field(default_factory=dict)   # kind of id -> how many learnt (summed over connections)

    def ok(self) -> bool:
        return super().ok() and self.data_intact is not False

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["requests_per_second"] = round(self.requests / self.seconds, 1) if self.seconds else 0
        d["ok"] = self.ok()
        return d

    def table(self) -> str:
        d = self.as_dict()
        rows = [("requests tried", "%d (%d generated from the specs, %d mutated: %d of captures, "
                 "%d of generated requests)" % (self.requests, self.generated, self.mutated,
                                                self.mutated - self.mutated_generated, self.mutated_generated)),
                ("requests/s", d["requests_per_second"]),
                ("APIs x versions sent", len(self.apis)),
                ("answers", self.answers), ("  with an error code", self.error_answers),
                ("no answer (acks=0)", self.silent), ("closes", self.closes),
                ("slow answers (> %gs)" % (2 * _ANSWER_TIMEOUT), self.slow),
                ("connections opened", self.connections),
                ("bad answers", self.bad_answers), ("held connections", self.held),
                ("held as Kafka holds them", self.held_expected),
                ("no answer after a short size prefix", self.unprobed),
                ("hangs", self.hangs), ("crashes", self.crashes),
                ("internal errors logged", self.internal_errors),
                ("health checks (failed)", "%d (%d)" % (self.health_checks, self.health_failures)),
                # RSS before any fuzzed request, a tenth into the run (the pools' topics,
                # groups and internal topics exist by then), at the end, and the peak
                ("RSS MB first/10%/last/peak", "%.0f / %.0f / %.0f / %.0f" % (
                    self.rss_mb[0] if self.rss_mb else 0, self.rss_mb[len(self.rss_mb) // 10] if self.rss_mb else 0,
                    self.rss_mb[-1] if self.rss_mb else 0, self.peak_rss_mb)),
                ("open fds first/last/max", "%s / %s / %s" % (
                    self.fds[0] if self.fds else "-", self.fds[-1] if self.fds else "-",
                    max(self.fds) if self.fds else "-")),
                ("data of other clients intact", self.data_intact),
                ("ids learnt from answers", ", ".join("%s %d" % (k, v) for k, v in sorted(
                    (self.learnt or {k: len(v) for k, v in LEARNT.items()}).items()))),
                ("state left (topics/partitions/groups)", "%s / %s / %s" % (
                    self.state_at_end.get("topics", "-"), self.state_at_end.get("partitions", "-"),
                    self.state_at_end.get("groups", "-"))),
                ("seconds", "%.1f" % self.seconds)]
        w = max(len(r[0]) for r in rows)
        return "\n".join("%-*s  %s" % (w, k, v) for k, v in rows)


def sasl_plain_frames(sasl) -> list:
    """The requests that authenticate a connection with SASL/PLAIN as ``sasl`` = (user, password):
    SaslHandshake v1 and SaslAuthenticate v2, as (api key, version, body)."""
    user, password = sasl
    return [(17, 1, {"mechanism": "PLAIN"}),
            (36, 2, {"auth_bytes": b"\0" + user.encode() + b"\0" + password.encode()})]


class _Conn:
    def __init__(self, addr, timeout, sasl=None):
        """A connection; with ``sasl`` = (user, password) authenticated with SASL/PLAIN first (a
        refused or unanswered authentication raises OSError, as a refused connection does)."""
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        if sasl is not None:
            try:
                for i, (key, version, body) in enumerate(sasl_plain_frames(sasl)):
                    self.sock.sendall(frame(key, version, 0x7EAD0000 + i, APIS[key].encode_bytes("request", version, body)))
                    f = self.read_frame(timeout)
                    pos = 5 if APIS[key].flexible(version) else 4
                    if not f or APIS[key].decode("response", version, memoryview(f)[pos:])["error_code"] != 0:
                        raise OSError("SASL/PLAIN authentication %s" % ("refused" if f else "not answered"))
            except (OSError, ProtocolError) as e:
                self.close()
                raise OSError(str(e)) from None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def read_frame(self, timeout: float):
        """The next response frame (without size prefix); None on timeout; b"" on close."""
        try:
            return self.receive_frame(timeout)
        except ConnectionClosed:
            return b""

    def receive_frame(self, timeout: float):
        """The next frame without its size prefix (b"" is an empty frame); None on timeout;
        raises ConnectionClosed when the broker closed (or the socket failed)."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) >= 4 + n:
                    f = bytes(self.buf[4:4 + n])
                    del self.buf[:4 + n]
                    return f
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            # poll, not select: select() cannot take descriptors above 1023, which a long
            # test process (or a fuzz run beside many connections) reaches
            p = select.poll()
            p.register(self.sock, select.POLLIN)
            if not p.poll(left * 1000.0):
                return None
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                data = b""
            if not data:
                raise ConnectionClosed()
            self.buf += data


class ConnectionClosed(Exception):
    """The broker closed the connection (or the socket failed)."""


class FuzzTarget:
    """What a fuzzer knows of the broker it runs against: its address, its process (when known)
    and the log lines the process writes, read on from where the last look stopped."""

    def __init__(self, bootstrap: str, pid: int | None, log_lines: list | None):
        host, port = bootstrap.rsplit(":", 1)
        self.addr = (host, int(port))
        self.bootstrap = bootstrap
        self.pid = pid
        self.log_lines = log_lines
        self._log_seen = 0

    def new_log_lines(self) -> list:
        """The broker's log lines since the last call (none when its log is not followed)."""
        if self.log_lines is None:
            return []
        new = self.log_lines[self._log_seen:]
        self._log_seen += len(new)
        return new


# An answer is expected within this (the fuzzer's waits are kept under a second); later is
# "slow", and no answer within held_timeout while the broker serves others is "held".
_ANSWER_TIMEOUT = 3.0
_PROBE_CORR = 0x7EADBEEF
# bytes of a request shown in a finding (hex): enough for the mutated captures' requests whole
_FRAME_SHOWN = 2048
# generated requests kept as mutation seeds (a random one replaced once full)
_GENERATED_POOL = 2000
_PROBE = frame(18, 0, _PROBE_CORR, b"", flexible=False)


class LiveFuzzer(FuzzTarget):
    """Sends generated and mutated requests to one broker and keeps the figures."""

    def __init__(self, bootstrap: str, pid: int | None = None, log_lines: list | None = None, seed: int = 0,
                 corpus: list[bytes] | None = None, mutate_share: float = 0.5,
                 answer_timeout: float = None, held_timeout: float = 60.0, alive_timeout: float = 10.0,
                 versions: dict | None = None, progress=None, sasl=None):
        super().__init__(bootstrap, pid, log_lines)
        # (user, password): every connection authenticates with SASL/PLAIN before it is fuzzed
        # (a SASL_PLAINTEXT listener: the fuzzing happens after authentication)
        self.sasl = sasl
        self.seed = seed
        self.corpus = corpus or []
        self.mutate_share = mutate_share if self.corpus else 0.0
        self.answer_timeout = answer_timeout or _ANSWER_TIMEOUT
        self.held_timeout = held_timeout
        self.alive_timeout = alive_timeout   # a broker silent this long on a fresh connection hangs
        self.figures = Figures()
        self.conn: _Conn | None = None
        self.corr = 0
        self.progress = progress
        self.versions = versions or self.advertised()
        self.pairs = sorted((k, v) for k, (lo, hi) in self.versions.items() if k in APIS
                            for v in range(lo, hi + 1))
        self._health = None
        self.generated_pool: list[bytes] = []   # payloads generated so far: mutation seeds too
        self._stop = None

    # -- broker state ----------------------------------------------------------------------
    def advertised(self) -> dict:
        c = _Conn(self.addr, 10, self.sasl)
        try:
            body = APIS[18].encode_bytes("request", 3, {"client_software_name": "fuzz",
                                                        "client_software_version": "1"})
            c.sock.sendall(frame(18, 3, 1, body))
            f = c.read_frame(10)
            resp = APIS[18].decode("response", 3, f[4:])
            return {a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]}
        finally:
            c.close()

    def alive(self) -> bool:
        """The broker process runs and answers ApiVersions on a fresh connection."""
        if self.pid is not None and not process_running(self.pid):
            return False
        try:
            c = _Conn(self.addr, self.alive_timeout, self.sasl)
        except OSError:
            return False
        try:
            body = APIS[18].encode_bytes("request", 0, {})
            c.sock.sendall(frame(18, 0, 424242, body, flexible=False))
            f = c.read_frame(self.alive_timeout)
            return bool(f) and struct.unpack_from(">i", f)[0] == 424242
        except OSError:
            return False
        finally:
            c.close()

    # -- one request -------------------------------------------------------------------------
    def _connect(self):
        if self.conn is None:
            self.conn = _Conn(self.addr, 10, self.sasl)
            self.figures.connections += 1
        return self.conn

    def _drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _finding(self, text, kind_of=None):
        """Keep the first example of each kind of finding (its first and last lines, without
        times, ports and correlation ids) and count the rest, so one bug seen a thousand times
        does not hide another seen once."""
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        def kind(line):
            line = re.sub(r"\[[^]]*\]|\(client [^)]*\)|corr=\d+|frame=\w+|\d+\.\ds", "", line)
            return re.sub(r"\s+", " ", line).strip()
        if kind_of is not None:
            key = kind_of
        else:
            key = kind(lines[0]) if len(lines) == 1 else kind(lines[0]) + " | " + kind(lines[-1])
        counts = self.figures.finding_counts
        if key not in counts and len(counts) < 200:
            self.figures.findings.append(text)
            if isinstance(self.figures, Figures):
                self.figures.finding_examples[key] = text
        counts[key] = counts.get(key, 0) + 1

    def send(self, data: bytes, api_key: int, version: int, corr: int, label: str, reconnect_after=False,
             short_prefix=False) -> str:
        """Send one framed request and classify the outcome.  ``short_prefix``: the size prefix
        announces fewer bytes than sent, so the frame's last bytes start another frame whose rest
        the broker waits for (as Kafka does for an incomplete frame): nothing sent behind it on
        this connection can be answered, so no probe follows it and the connection is dropped."""
        fig = self.figures
        if self._stop:
            return "skip"   # the broker is down: the rest of the batch is drawn, not sent
        fig.requests += 1
        fig.apis[label] = fig.apis.get(label, 0) + 1
        try:
            c = self._connect()
        except OSError as e:
            self._after_failure("connect: %s" % e, label, data)
            return "hang"
        # A Produce may be acks=0 (Kafka answers nothing): an ApiVersions right behind it tells at
        # once whether an answer is coming (answers come in request order).
        probe = api_key == 0 and not short_prefix
        try:
            c.sock.sendall(data + (_PROBE if probe else b""))
        except OSError:
            # the broker closed this connection while we sent (an earlier frame's close)
            fig.closes += 1
            self._drop()
            return "close"
        t0 = time.monotonic()
        f = c.read_frame(self.answer_timeout)
        dt = time.monotonic() - t0
        slow = fig.slowest.get(label)
        if slow is None or dt > slow:
            fig.slowest[label] = dt
        if probe and f and len(f) >= 4 and struct.unpack_from(">i", f)[0] == _PROBE_CORR:
            fig.silent += 1
            outcome = "silent"
        elif short_prefix and f is None:
            outcome = self._unprobed(label, data)
        else:
            outcome = self._classify(f, api_key, version, corr, label, data)
            if probe and outcome == "answer" and c.read_frame(self.answer_timeout) is None:
                outcome = self._classify(None, 18, 0, _PROBE_CORR, "probe after " + label, data)
        if reconnect_after or outcome != "answer":
            self._drop()
        return outcome

    def _unprobed(self, label, data) -> str:
        """No answer to a frame sent with a short size prefix.  Its truncated body may be an
        acks=0 Produce (no answer) or a request the broker still works on; a probe on the same
        connection would only extend the incomplete next frame, so none is sent.  The broker
        must still answer a fresh connection (else a hang)."""
        self.figures.unprobed += 1
        if not self.alive():
            self._after_failure("no answer after a short size prefix and broker unresponsive", label, data)
            return "hang"
        return "unprobed"

    def _expected_hold(self, api_key, version, data) -> str | None:
        """Why Kafka too holds this request's answer, or None.  A JoinGroup is answered only when
        every known member of its group has rejoined or the group's rebalance timeout (the
        largest of its members'; v0: their session timeouts) has run out (Kafka 4.4 answers the
        second member's JoinGroup v0 of a group whose first member had a 30-min session after
        no less than the 40 s waited; one of 6 s after about 6 s: see docs/fuzzing.md): held
        while the group, described on another connection, is PreparingRebalance."""
        if api_key != 11:
            return None
        spec = APIS[11]
        try:
            from pykbroker.protocol.framing import parse_request_header
            payload = data[4:]
            hdr = parse_request_header(payload, spec.flexible(version) if spec.min_version <= version <= spec.max_version else False)
            msg = spec.decode("request", version, memoryview(payload)[hdr.body_offset:])
            group = msg["group_id"]
            from pykbroker.protocol.wire import WireClient
            with WireClient(self.bootstrap, timeout=self.alive_timeout, client_id="fuzz-describe") as c:
                for key, v, b in sasl_plain_frames(self.sasl) if self.sasl else []:
                    c.request(key, v, b)
                d = c.request(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
        except Exception:
            return None
        if d["error_code"] != 0 or d["group_state"] != "PreparingRebalance":
            return None
        timeout = msg.get("rebalance_timeout_ms", msg.get("session_timeout_ms"))
        return ("JoinGroup v%d of group %r (its rebalance timeout %s ms) waits while the group is "
                "PreparingRebalance with %d members: Kafka answers once they all rejoin or the "
                "group's rebalance timeout ends" % (version, group, timeout, len(d["members"])))

    def _classify(self, f, api_key, version, corr, label, data) -> str:
        fig = self.figures
        if f == b"":
            fig.closes += 1
            return "close"
        if f is None:
            # No answer yet: an acks=0 Produce (Kafka sends none), or a held request.  The next
            # request on the same connection tells them apart (answers come in order).
            probe_corr = _PROBE_CORR
            try:
                self.conn.sock.sendall(_PROBE)
            except OSError:
                fig.closes += 1
                return "close"
            g = self.conn.read_frame(self.answer_timeout)
            if g == b"":
                fig.closes += 1
                return "close"
            if g is not None and struct.unpack_from(">i", g)[0] == probe_corr:
                fig.silent += 1
                return "silent"
            if g is not None and len(g) >= 4 and struct.unpack_from(">i", g)[0] == corr:
                fig.answers += 1   # late but answered (the probe's answer still to come: reconnect)
                return "late"
            if self.alive():
                why = self._expected_hold(api_key, version, data)
                if why is not None:
                    fig.held_expected += 1
                    self._finding("held as Kafka holds it: %s: %s corr=%d frame=%s" % (
                        label, why, corr, data[:_FRAME_SHOWN].hex()),
                        kind_of="held as Kafka holds it: %s (group PreparingRebalance)" % label)
                    return "held_expected"
                # The broker serves others: a slow request (creating hundreds of partitions on a
                # loaded machine takes seconds) or one it holds for good.  Give it held_timeout.
                t0 = time.monotonic()
                while g is None or (len(g) >= 4 and struct.unpack_from(">i", g)[0] not in (corr, probe_corr)):
                    if time.monotonic() - t0 > self.held_timeout:
                        fig.held += 1
                        self._finding("held: %s corr=%d frame=%s" % (label, corr, data[:_FRAME_SHOWN].hex()))
                        return "held"
                    g = self.conn.read_frame(1.0)
                    if g == b"":
                        fig.closes += 1
                        return "close"
                if struct.unpack_from(">i", g)[0] == probe_corr:
                    fig.silent += 1
                    return "silent"
                fig.answers += 1
                fig.slow += 1
                self._finding("slow: %s answered after %.1fs corr=%d frame=%s" % (
                    label, 2 * self.answer_timeout + time.monotonic() - t0, corr, data[:_FRAME_SHOWN].hex()))
                return "late"
            self._after_failure("no answer and broker unresponsive", label, data)
            return "hang"
        if len(f) < 4:
            fig.bad_answers += 1
            self._finding("short answer to %s: %r" % (label, f))
            return "bad"
        (got,) = struct.unpack_from(">i", f)
        if got != corr:
            fig.bad_answers += 1
            self._finding("correlation id %d for %d: %s frame=%s" % (got, corr, label, data[:_FRAME_SHOWN].hex()))
            return "bad"
        spec = APIS.get(api_key)
        if spec is None:
            fig.bad_answers += 1
            self._finding("answer to unknown API %s" % label)
            return "bad"
        if api_key == API_VERSIONS:
            v = version if spec.min_version <= version <= spec.max_version else 0
            pos = 4
        else:
            v = version
            pos = 5 if spec.flexible(version) else 4
        try:
            body = spec.decode("response", v, memoryview(f)[pos:])
        except ProtocolError as e:
            # a frame our own codec cannot decode (unsupported version answered?)
            fig.bad_answers += 1
            self._finding("undecodable answer to %s: %s" % (label, e))
            return "bad"
        fig.answers += 1
        if _nonzero_error(body):
            fig.error_answers += 1
        learn(body)
        return "answer"

    def _after_failure(self, what, label, data=b""):
        fig = self.figures
        if self.pid is not None:
            if not process_running(self.pid):
                fig.crashes += 1
                self._finding("crash after %s: %s frame=%s" % (label, what, data[:_FRAME_SHOWN].hex()))
                raise BrokerDown("broker process exited after %s" % label)
        if not self.alive():
            fig.hangs += 1
            self._finding("hang after %s: %s frame=%s" % (label, what, data[:_FRAME_SHOWN].hex()))
            raise BrokerDown("broker stopped answering after %s" % label)

    # -- batches ---------------------------------------------------------------------------
    def _one_mutated(self, rnd: random.Random):
        """One mutated request: of a captured client request, or (half of the time once there
        are some) of a request generated earlier in the run, so mutations reach every API and
        version, not only those the captured clients used.  Drawn with ``rnd`` (plain
        ``random``, not hypothesis: a mutation costs microseconds, a hypothesis example
        milliseconds, which bounded the rate)."""
        fig = self.figures
        self.corr = (self.corr + 1) & 0x3FFFFFFF
        corr = self.corr
        of_generated = bool(self.generated_pool) and rnd.random() < 0.5
        base = rnd.choice(self.generated_pool if of_generated else self.corpus)
        payload, lie = mutate(base, rnd, self.corpus)
        if len(payload) >= 8:
            payload = payload[:4] + struct.pack(">i", corr) + payload[8:]
        api_key, version = struct.unpack_from(">hh", payload) if len(payload) >= 4 else (-1, -1)
        size = len(payload) - (rnd.randrange(1, 8) if lie else 0)
        data = struct.pack(">i", size) + payload
        name = APIS[api_key].name if api_key in APIS else "api%d" % api_key
        fig.mutated += not self._stop
        fig.mutated_generated += of_generated and not self._stop
        return self.send(data, api_key, version, corr, "%s v%d (mutated)" % (name, version),
                         reconnect_after=lie, short_prefix=lie)

    def _one_generated(self, draw):
        """One request generated from the specs by hypothesis (any advertised API and version)."""
        fig = self.figures
        self.corr = (self.corr + 1) & 0x3FFFFFFF
        corr = self.corr
        api_key, version = draw(st.sampled_from(self.pairs))
        spec = APIS[api_key]
        cid = draw(st.sampled_from(["fuzz", "rdkafka", None, "", "x" * 300]))
        if not spec.min_version <= version <= spec.max_version:
            # advertised but never served (Produce v0-2, refused by closing as Kafka 4 does): any body
            fig.generated += not self._stop
            return self.send(frame(api_key, version, corr, draw(st.binary(max_size=64)), cid),
                             api_key, version, corr, "%s v%d" % (spec.name, version))
        msg = draw(request_strategy(api_key, version))
        try:
            body = APIS[api_key].encode_bytes("request", version, msg)
        except Exception as e:   # a value the strategy should not have made
            fig.generator_errors += 1
            self._finding("encode %s v%d: %r" % (APIS[api_key].name, version, e))
            return "skip"
        data = frame(api_key, version, corr, body, cid)
        if self.corpus:   # a seed for later mutations (the generator's costly work used twice)
            if len(self.generated_pool) >= _GENERATED_POOL:
                self.generated_pool[draw(st.integers(0, _GENERATED_POOL - 1))] = data[4:]
            else:
                self.generated_pool.append(data[4:])
        # counted after the last draw: a draw past hypothesis' buffer ends the example unsent
        fig.generated += not self._stop
        return self.send(data, api_key, version, corr, "%s v%d" % (APIS[api_key].name, version))

    def batch(self, n: int, batch_no: int) -> None:
        """``n`` requests, a ``mutate_share`` of them mutated, in an order drawn from the batch's
        seed.  The generated ones are drawn by hypothesis (one example each), the mutated ones
        by a ``random.Random`` of the same seed between them, so a batch is reproducible."""
        bseed = self.seed * 100003 + batch_no
        rnd = random.Random(bseed)
        plan = [bool(self.corpus) and rnd.random() < self.mutate_share for _ in range(n)]
        self._stop = None

        def mutated_until_generated():
            while plan and plan[0] and not self._stop:
                plan.pop(0)
                try:
                    self._one_mutated(rnd)
                except BrokerDown as e:
                    self._stop = str(e)

        @settings(max_examples=max(1, plan.count(False)), database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @hseed(bseed)
        @given(st.data())
        def run(data):
            # Every example draws the same way whatever happened to the broker: hypothesis
            # rejects a test whose draws depend on outside state (once the broker is down,
            # ``send`` sends nothing).
            mutated_until_generated()
            if plan:
                plan.pop(0)
            try:
                self._one_generated(data.draw)
            except BrokerDown as e:
                self._stop = str(e)

        if False in plan:
            run()
        while plan and not self._stop:   # what hypothesis left (it ran fewer examples): mutated only
            mutated_until_generated()
            if plan:
                plan.pop(0)
        self._drop()
        if self._stop:
            raise BrokerDown(self._stop)

    def check_health(self) -> None:
        """A real client produces one record and must be acknowledged in 15 s; RSS/fds read."""
        from confluent_kafka import Producer

        fig = self.figures
        fig.health_checks += 1
        if self._health is None:
            self._health = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                     "enable.idempotence": True, "message.timeout.ms": 15000,
                                     **client_conf(self.sasl)})
        res = []
        self._health.produce("health-fuzz", value=b"ping-%d" % fig.health_checks,
                             on_delivery=lambda err, msg: res.append(err))
        self._health.flush(20)
        if not res or res[0] is not None:
            fig.health_failures += 1
            self._finding("health check %d: %s" % (fig.health_checks, res[0] if res else "no delivery"))
        if self.pid is not None:
            rss, hwm, fds = proc_stats(self.pid)
            fig.rss_mb.append(round(rss, 1))
            fig.fds.append(fds)
            fig.peak_rss_mb = max(fig.peak_rss_mb, hwm)
        new = self.new_log_lines()
        for i, line in enumerate(new):
            if " ERROR " in line or " CRITICAL " in line:
                fig.internal_errors += 1
                j = i + 1   # the traceback: up to the next log line
                while j < len(new) and j < i + 60 and not new[j].startswith("["):
                    j += 1
                self._finding("log: " + "".join(new[i:j])[:4000])

    def close(self):
        self._drop()
        if self._health is not None:
            self._health.flush(5)
            self._health = None

    def run(self, requests: int | None = None, seconds: float | None = None, batch: int = 300,
            stop=None, after_batch: Callable[[float], None] | None = None) -> Figures:
        """Batches of ``batch`` requests until ``requests`` were sent, ``seconds`` have passed,
        ``stop`` (an event the connections of a run share) is set, or the broker is down (which
        sets ``stop``, so the other connections end too).  After each batch ``after_batch(t0)``,
        ``t0`` the run's start on time.monotonic(): by default a health check and the progress
        line, as a one-connection run does."""
        fig = self.figures
        after_batch = after_batch or self._after_batch
        t0 = time.monotonic()
        n = 0
        try:
            while stop is None or not stop.is_set():
                if requests is not None and fig.requests >= requests:
                    break
                if seconds is not None and time.monotonic() - t0 >= seconds:
                    break
                size = batch if requests is None else max(1, min(batch, requests - fig.requests))
                self.batch(size, n)
                n += 1
                fig.batches = n
                after_batch(t0)
        except BrokerDown:
            if stop is not None:
                stop.set()
        fig.seconds = time.monotonic() - t0
        return fig

    def _after_batch(self, t0: float) -> None:
        self.check_health()
        if self.progress:
            self.progress(self.figures, time.monotonic() - t0)


class BrokerDown(Exception):
    pass


# ----------------------------------------------------------------------------- other clients' data
class Precious:
    """Records a real client produced before the run (and a group's committed offsets), to be
    read back byte for byte afterwards."""

    def __init__(self, bootstrap: str, records: int = 300, sasl=None):
        self.bootstrap = bootstrap
        self.conf = client_conf(sasl)
        self.topic = "precious-%s" % _uuid.uuid4().hex[:8]
        self.group = "precious-group-%s" % _uuid.uuid4().hex[:8]
        self.n = records
        self.sent: dict = {}        # (partition, offset) -> (key, value, headers)
        self.committed: dict = {}

    def produce(self) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self.conf})
        for f in admin.create_topics([NewTopic(self.topic, 3, 1)]).values():
            f.result(30)
        rnd = random.Random(7)
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                          "compression.type": codec, "linger.ms": 5, **self.conf})
            acks = []
            for i in range(self.n // 5):
                key = rnd.randbytes(rnd.randrange(0, 20)) or None
                value = rnd.randbytes(rnd.randrange(0, 300))
                headers = [("h%d" % j, rnd.randbytes(rnd.randrange(0, 8))) for j in range(rnd.randrange(0, 3))]
                p.produce(self.topic, value=value, key=key, headers=headers or None, partition=i % 3,
                          on_delivery=lambda err, msg, k=key, v=value, h=headers:
                          acks.append((err, msg.partition(), msg.offset(), k, v, h)))
            p.flush(30)
            for err, part, off, k, v, h in acks:
                assert err is None, err
                self.sent[(part, off)] = (k, v, h)
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                      **self.conf})
        self.committed = {TopicPartition(self.topic, p).partition: 10 + p for p in range(3)}
        c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in self.committed.items()], asynchronous=False)
        c.close()

    def check(self) -> tuple[bool, str]:
        from confluent_kafka import Consumer, TopicPartition

        got = {}
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "precious-reader-%s" % _uuid.uuid4().hex[:6],
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", **self.conf})
        try:
            c.assign([TopicPartition(self.topic, p, 0) for p in range(3)])
            deadline = time.monotonic() + 60
            while len(got) < len(self.sent) and time.monotonic() < deadline:
                m = c.poll(1.0)
                if m is None or m.error():
                    continue
                got[(m.partition(), m.offset())] = (m.key(), m.value(), [(k, v) for k, v in (m.headers() or [])])
        finally:
            c.close()
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                      **self.conf})
        try:
            committed = {tp.partition: tp.offset for tp in c.committed(
                [TopicPartition(self.topic, p) for p in range(3)], timeout=15)}
        finally:
            c.close()
        want = {k: (v[0], v[1], [(a, b) for a, b in v[2]]) for k, v in self.sent.items()}
        if got != want:
            missing = len(set(want) - set(got))
            changed = sum(1 for k in want if k in got and got[k] != want[k])
            return False, "records: %d missing, %d changed, %d extra" % (
                missing, changed, len(set(got) - set(want)))
        if committed != self.committed:
            return False, "committed offsets %s, expected %s" % (committed, self.committed)
        return True, "%d records and %d committed offsets read back unchanged" % (len(got), len(committed))


def client_conf(sasl) -> dict:
    """What a confluent-kafka client adds to its configuration to authenticate as ``sasl``
    (user, password) with SASL/PLAIN; nothing without."""
    if sasl is None:
        return {}
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": sasl[0], "sasl.password": sasl[1]}


def prepare_pool(bootstrap: str, sasl=None) -> None:
    """The pool's first topics exist, with a few records, so fuzzed requests reach real state."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **client_conf(sasl)})
    fs = admin.create_topics([NewTopic(t, 2, 1) for t in TOPIC_POOL[:3]])
    for f in fs.values():
        try:
            f.result(30)
        except Exception:
            pass   # exists already
    p = Producer({"bootstrap.servers": bootstrap, **client_conf(sasl)})
    for t in TOPIC_POOL[:3]:
        for i in range(20):
            p.produce(t, value=b"pool-%d" % i, key=b"k%d" % (i % 4), partition=i % 2)
    p.flush(30)


_ERRORISH = re.compile(r" ERROR |^Traceback")


def run_against_new_broker(data_dir: str, requests: int | None = None, seconds: float | None = None,
                           seed: int = 0, corpus_dir: str | None = None, batch: int = 300,
                           mutate_share: float = 0.5, progress=None, overrides: dict | None = None,
                           log_path: str | None = None, connections: int = 1, sasl: bool = False) -> Figures:
    """Start a broker (a child process, as users run it), fuzz it, check the other clients' data,
    stop it.  The figures say what happened.  ``connections`` > 1: that many fuzzing connections
    at once (run_connections).  ``sasl``: the broker's listener is SASL_PLAINTEXT (every mechanism,
    compat/fuzz/sasl.py) and every connection, the fuzzer's and the real clients', authenticates
    with SASL/PLAIN first: the whole request surface fuzzed after authentication."""
    from pykbroker.local.broker_process import BrokerProcess

    conf = {"group.initial.rebalance.delay.ms": "0"}
    creds = None
    if sasl:
        from compat.fuzz.sasl import PASSWORD, USER, broker_overrides
        conf.update(broker_overrides())
        creds = (USER, PASSWORD)
    conf.update(overrides or {})
    with BrokerProcess(data_dir, conf, log_level="INFO") as b:
        prepare_pool(b.bootstrap, creds)
        precious = Precious(b.bootstrap, sasl=creds)
        precious.produce()
        fz = LiveFuzzer(b.bootstrap, pid=b.proc.pid, log_lines=b.lines, seed=seed,
                        corpus=load_corpus(corpus_dir) if corpus_dir else [], mutate_share=mutate_share,
                        progress=progress, sasl=creds)
        fz.check_health()   # the first RSS/fd reading: before any fuzzed request
        if connections > 1:
            fig = run_connections(fz, connections, corpus_dir, requests, seconds, batch)
        else:
            fig = fz.run(requests=requests, seconds=seconds, batch=batch)
        fz.close()
        if fig.crashes == 0 and fig.hangs == 0:
            try:
                ok, why = precious.check()
            except Exception as e:   # the real client could not read back at all
                ok, why = False, "reading back failed: %r" % e
            fig.data_intact = ok
            if not ok:
                fig.findings.append("data: " + why)
                fig.finding_counts["data: " + why] = 1
                fig.finding_examples["data: " + why] = "data: " + why
            rss, hwm, fds = proc_stats(b.proc.pid)
            fig.peak_rss_mb = max(fig.peak_rss_mb, hwm)
            fig.state_at_end = broker_state(b.bootstrap, creds)
        if log_path:
            with open(log_path, "w") as fh:
                fh.write(b.log_text())
    return fig


# ----------------------------------------------------------------------------- several connections
def stream_seed(seed: int, i: int) -> int:
    """The generator seed of fuzzing connection ``i`` of a run seeded ``seed``: connection 0 draws
    exactly what a one-connection run draws; the others draw streams of their own, so a run with
    N connections is reproducible connection by connection (the interleaving is the scheduler's)."""
    return seed if i == 0 else seed * 1_000_003 + 7919 * i


def _merge(total: Figures, part: dict) -> None:
    """Adds one connection's figures (as_dict of its worker) to the run's."""
    for k, v in part.items():
        if k in ("findings", "rss_mb", "fds", "peak_rss_mb", "data_intact", "state_at_end",
                 "requests_per_second", "ok", "seconds"):
            continue
        if k == "finding_examples":
            for kk, text in v.items():
                total.finding_examples.setdefault(kk, text)
            continue
        if k in ("apis", "finding_counts", "learnt"):
            d = getattr(total, k)
            for kk, n in v.items():
                d[kk] = d.get(kk, 0) + n
        elif k == "slowest":
            for kk, t in v.items():
                total.slowest[kk] = max(total.slowest.get(kk, 0.0), t)
        elif isinstance(v, int) and not isinstance(v, bool):
            setattr(total, k, getattr(total, k) + v)
    for f in part.get("findings", []):
        if f not in total.findings and len(total.findings) < 200:
            total.findings.append(f)


def _worker(i: int, bootstrap: str, pid: int, seed: int, corpus_dir: str | None, mutate_share: float,
            versions: dict, requests: int | None, seconds: float | None, batch: int, out, stop,
            sasl=None) -> None:
    """One fuzzing connection, in a process of its own (the generator, pure Python, is what
    bounds one connection's rate): batches of ``batch`` requests until its share of the requests
    or the time is used or the run is stopped; after each batch its figures so far go to ``out``.
    Its hangs and held connections are found by its own LiveFuzzer.send, as in a one-connection
    run; health checks, RSS/fds and the broker's log are the parent's."""
    fig = None
    try:
        fz = LiveFuzzer(bootstrap, pid=pid, seed=stream_seed(seed, i),
                        corpus=load_corpus(corpus_dir) if corpus_dir else [], mutate_share=mutate_share,
                        versions=versions, sasl=sasl)
        fig = fz.figures

        def report(t0: float) -> None:
            fig.seconds = time.monotonic() - t0
            fig.learnt = {k: len(v) for k, v in LEARNT.items()}
            out.put((i, False, fig.as_dict()))

        fz.run(requests, seconds, batch, stop=stop, after_batch=report)
        fz.close()
        out.put((i, True, fig.as_dict()))
    except Exception as e:   # the worker itself broke: counted, never silently lost
        f = fig or Figures()
        f.generator_errors += 1
        f.findings.append("worker %d: %r" % (i, e))
        out.put((i, True, f.as_dict()))


def run_connections(fz: LiveFuzzer, connections: int, corpus_dir: str | None, requests: int | None,
                    seconds: float | None, batch: int, health_every: int | None = None) -> Figures:
    """``connections`` fuzzing connections at once, each in a worker process with its own
    generator stream (stream_seed); ``fz`` (the parent's LiveFuzzer, which sends nothing) runs a
    health check, reads RSS/fds and scans the broker's log every ``health_every`` (default
    ``batch``) requests of the whole run, as a one-connection run does after each of its batches.  A crash or hang seen by any
    connection stops them all.  The figures are the sum of the connections' (plus the parent's
    health checks and log findings)."""
    import multiprocessing as mp
    import queue as _queue

    ctx = mp.get_context("spawn")   # no fork of a process holding librdkafka and log threads
    out, stop = ctx.Queue(), ctx.Event()
    share = [None] * connections
    if requests is not None:
        share = [requests // connections + (1 if i < requests % connections else 0) for i in range(connections)]
    procs = [ctx.Process(target=_worker, daemon=True,
                         args=(i, fz.bootstrap, fz.pid, fz.seed, corpus_dir, fz.mutate_share, fz.versions,
                               share[i], seconds, batch, out, stop, fz.sasl)) for i in range(connections)]
    for p in procs:
        p.start()
    latest: dict = {}
    done: set = set()
    fig = fz.figures
    t0 = time.monotonic()
    health_every = health_every or batch
    next_check = health_every

    def total() -> Figures:
        t = Figures()
        for part in latest.values():
            _merge(t, part)
        return t

    try:
        while len(done) < connections:
            try:
                i, last, part = out.get(timeout=1.0)
                latest[i] = part
                if last:
                    done.add(i)
            except _queue.Empty:
                for j, p in enumerate(procs):
                    if j not in done and not p.is_alive():
                        done.add(j)   # died without its last figures: counted as a finding below
                        fz._finding("worker %d exited with status %s" % (j, p.exitcode))
                        fig.generator_errors += 1
            t = total()
            if t.requests >= next_check or len(done) == connections:
                next_check = t.requests + health_every
                if t.crashes or t.hangs:
                    stop.set()   # a connection saw the broker down: no health check of a dead broker
                elif fz.pid is not None and not process_running(fz.pid):
                    fig.crashes += 1
                    fz._finding("crash: the broker process exited (seen before a health check)")
                    stop.set()
                else:
                    fz.check_health()
                if fz.progress:
                    shown = total()
                    shown.rss_mb, shown.fds = fig.rss_mb, fig.fds
                    fz.progress(shown, time.monotonic() - t0)
    finally:
        stop.set()
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.terminate()
    t = total()
    for k in ("crashes", "hangs", "health_checks", "health_failures", "internal_errors", "generator_errors"):
        setattr(t, k, getattr(t, k) + getattr(fig, k))
    t.findings = fig.findings + [f for f in t.findings if f not in fig.findings]
    for k, n in fig.finding_counts.items():
        t.finding_counts[k] = t.finding_counts.get(k, 0) + n
    for k, text in fig.finding_examples.items():
        t.finding_examples.setdefault(k, text)
    t.rss_mb, t.fds, t.peak_rss_mb = fig.rss_mb, fig.fds, fig.peak_rss_mb
    t.seconds = time.monotonic() - t0
    fz.figures = t
    return t


def broker_state(bootstrap: str, sasl=None) -> dict:
    """How many topics, partitions and groups the broker holds: what the run created (memory
    that grows with state is not a leak; memory that grows without it is)."""
    from pykbroker.protocol.wire import WireClient

    with WireClient(bootstrap) as c:
        for key, v, b in sasl_plain_frames(sasl) if sasl else []:
            c.request(key, v, b)
        md = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        groups = c.request(16, 5, {"states_filter": [], "types_filter": []})
    return {"topics": len(md["topics"]), "partitions": sum(len(t["partitions"]) for t in md["topics"]),
            "groups": len(groups["groups"])}
