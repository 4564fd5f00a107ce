"""A history checker for Kafka-protocol logs: Jepsen's queue and Kafka workloads, in Python.

Pure: it takes a :class:`History` (what clients did and saw, with times) and returns a
:class:`Result`; no sockets, no files, no clocks.  The fault runs (``partitions.py``) record
histories; the tests feed it synthetic ones.

A history holds

- **sends** (:class:`Send`): a producer ``process`` sent ``value`` to ``partition`` at ``time``;
  it was acknowledged at ``ack_time`` with ``offset``, or failed with ``error`` (or neither: the
  outcome is unknown).  ``txn`` names the transaction it belonged to, if any.
- **polls** (:class:`Poll`): a ``consumer`` got ``records`` (``{partition: [(offset, value)]}``)
  at ``time``, under ``isolation`` (read_uncommitted / read_committed), inside ``txn`` if any.
- **assigns** (:class:`Assign`): a consumer (re)started reading a set of partitions (a rebalance,
  a seek, a restart): its poll order starts afresh there.
- **transactions** (:class:`Txn`): their outcome, ``committed``, ``aborted`` or ``unknown``.
- **commits** (:class:`Commit`): a consumer of a ``group`` committed ``offsets``
  (``{partition: next offset to read}``), acknowledged at ``ack_time`` or failed with ``error``;
  or (``observed``) an observer read the group's committed offsets (OffsetFetch) between ``time``
  and ``ack_time``.  An :class:`Assign` with a ``group`` is a group member's (re)assignment.
- ``heal``: when the last fault ended (None: no fault, the whole history counts as healed).

Values are unique across the history (e.g. ``"<producer>-<seq>"``): a value names one send.

Anomalies (``Result.anomalies``, kind -> examples), Jepsen's names:

- ``lost``: an acknowledged write (outside a transaction, or of a committed one) that no poll
  after the heal returned.  The final read after the heal reads every partition to its end.
- ``unseen-within-bound``: acknowledged, read after the heal, but only more than ``bound`` seconds
  after it (the cluster took too long to make it readable again).
- ``duplicate``: one value read at two or more positions (partition, offset).  Not counted when
  the log's batch headers (``History.batches``) show every copy written by one producer id under
  a different producer epoch each: the client re-sent the value as a new write after an epoch
  bump, which no broker can detect; those are ``Result.client_anomalies``
  (``duplicate-after-epoch-bump``) and ``client_duplicates``.
- ``inconsistent-offsets``: two different values at one (partition, offset), from acknowledgements
  and polls together; or a value acknowledged at one offset and read only at others.
- ``nonmonotonic-send``: one producer's acknowledged writes to a partition whose offsets are not
  in the order it sent them (from acknowledgements and from the log as read).
- ``nonmonotonic-poll``: a consumer read offset ``j`` after offset ``i >= j`` of one partition
  with no (re)assignment between.
- ``poll-skip``: a consumer went from offset ``i`` to ``j > i + 1`` while the log holds a record
  it should have read in between (a committed one under read_committed).  Gaps without any known
  record (transaction markers, compaction) are not skips.
- ``aborted-read``: a read_committed poll returned a write of an aborted transaction (G1a).
- ``G0``: a cycle of write-write dependencies between committed transactions (Adya's G0 as Elle
  infers it on a log: T1 -ww-> T2 when T2's write is the next write after T1's in a partition).
- ``G1c``: a cycle of write-write and write-read dependencies (T1 -wr-> T2 when T2 polled a value
  T1 wrote) with at least one write-read edge: circular information flow.
- ``transform-lost`` / ``transform-duplicate`` (consume-transform-produce: sends whose ``source``
  names the input value they were made from): an acknowledged input none of whose outputs was
  read after the heal; an input two of whose outputs were read (exactly once broken).
- ``commit-backward``: a group's committed offset for a partition went down: a successful commit
  lower than one acknowledged before it, or an observer reading a committed offset lower than one
  acknowledged before its read started.
- ``commit-skip``: a group committed offset ``c`` for a partition while a record below ``c`` had
  been read by none of its members (it will never be processed), or a member (re)assigned a
  partition started reading beyond the committed offset while records lay between (the
  committed offset being the last acknowledged one, or that of a commit issued before the
  member's first read whose outcome was unknown then: failed, or not answered yet, as a failed
  OffsetCommit may still have been applied).

Figures beside them: ``acked``, ``lost``, ``duplicated``, ``longest_unavailable`` (the longest
time between two acknowledgements while sending), ``p50``/``p99`` produce latency.
"""
from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from collections import defaultdict
from typing import Optional

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

# examples kept per anomaly kind: enough to find the records in the logs, short enough to print
MAX_EXAMPLES = 20


@dataclasses.dataclass
class Send:
    process: str
    value: str
    partition: int
    time: float
    offset: Optional[int] = None     # set when acknowledged
    error: Optional[str] = None      # set when it definitely failed
    ack_time: Optional[float] = None
    txn: Optional[str] = None
    source: Optional[str] = None     # consume-transform-produce: the input value this was made from

    @property
    def acked(self) -> bool:
        return self.offset is not None and self.error is None


@dataclasses.dataclass
class Poll:
    consumer: str
    time: float
    records: dict                    # {partition: [(offset, value), ...]} in the order received
    isolation: str = READ_UNCOMMITTED
    txn: Optional[str] = None


@dataclasses.dataclass
class Assign:
    consumer: str
    time: float
    partitions: Optional[list] = None   # None: all of them
    group: Optional[str] = None          # a consumer group member's assignment (commits checked)


@dataclasses.dataclass
class Commit:
    consumer: str
    time: float
    offsets: dict                    # {partition: committed offset (the next one to read)}
    group: str = ""
    ack_time: Optional[float] = None
    error: Optional[str] = None
    observed: bool = False           # an observer's read of the committed offsets, not a commit

    @property
    def ok(self) -> bool:
        return self.ack_time is not None and self.error is None


@dataclasses.dataclass
class Txn:
    id: str
    status: str                      # committed / aborted / unknown
    process: Optional[str] = None


class History:
    """Collects events from any number of client threads (``add`` takes a lock; the checker
    itself is single-threaded)."""

    def __init__(self):
        self.sends: list[Send] = []
        self.polls: list[Poll] = []
        self.assigns: list[Assign] = []
        self.txns: dict[str, Txn] = {}
        self.commits: list[Commit] = []
        self.heal: Optional[float] = None
        # (partition, offset) -> (producer id, producer epoch, sequence) of the record there, read
        # from the log's batch headers after the run for the positions of duplicated values
        # (see the duplicates check); empty when none was looked up
        self.batches: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._lock = threading.Lock()

    def add(self, event) -> object:
        with self._lock:
            if isinstance(event, Send):
                self.sends.append(event)
            elif isinstance(event, Poll):
                self.polls.append(event)
            elif isinstance(event, Assign):
                self.assigns.append(event)
            elif isinstance(event, Txn):
                self.txns[event.id] = event
            elif isinstance(event, Commit):
                self.commits.append(event)
            else:
                raise TypeError("not a history event: %r" % (event,))
        return event

    # -- serialised form (results/*.json keep histories for re-checking) -------------------
    def to_dict(self) -> dict:
        return {"sends": [dataclasses.astuple(s) for s in self.sends],
                "polls": [[p.consumer, p.time, {str(k): v for k, v in p.records.items()}, p.isolation, p.txn]
                          for p in self.polls],
                "assigns": [dataclasses.astuple(a) for a in self.assigns],
                "txns": [dataclasses.astuple(t) for t in self.txns.values()],
                "commits": [[c.consumer, c.time, {str(k): v for k, v in c.offsets.items()}, c.group, c.ack_time,
                             c.error, c.observed] for c in self.commits],
                # wall clock minus the monotonic one the events' times are on: lines a history up
                # with the brokers' logs (ignored when read back)
                "batches": [[part, off, *b] for (part, off), b in sorted(self.batches.items())],
                "heal": self.heal, "wall_offset": time.time() - time.monotonic()}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        h = cls()
        h.sends = [Send(*s) for s in d["sends"]]
        h.polls = [Poll(c, t, {int(k): [tuple(r) for r in v] for k, v in recs.items()}, iso, txn)
                   for c, t, recs, iso, txn in d["polls"]]
        h.assigns = [Assign(*a) for a in d["assigns"]]
        h.txns = {t[0]: Txn(*t) for t in d["txns"]}
        h.commits = [Commit(c[0], c[1], {int(k): v for k, v in c[2].items()}, *c[3:]) for c in d.get("commits", [])]
        h.batches = {(b[0], b[1]): (b[2], b[3], b[4]) for b in d.get("batches", [])}
        h.heal = d.get("heal")
        return h


@dataclasses.dataclass
class Result:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    read: int = 0                    # distinct values read
    acked_without_offset: int = 0    # successes whose acknowledgement carried no offset
    lost: int = 0
    duplicated: int = 0
    longest_unavailable: float = 0.0
    p50: float = 0.0
    p99: float = 0.0
    anomalies: dict = dataclasses.field(default_factory=dict)   # kind -> [example, ...]
    counts: dict = dataclasses.field(default_factory=dict)      # kind -> number found
    # duplicates the log's batch headers show a client made (duplicate-after-epoch-bump): counted
    # in ``duplicated`` and reported, not counted against the broker in ``ok``
    client_duplicates: int = 0
    client_anomalies: dict = dataclasses.field(default_factory=dict)
    # where the lost writes were sent: [partition, first send s, last send s, how many] per run of
    # losses (a gap of LOST_SPAN_GAP_S or more starts a new one), times from the history's first
    # send.  A count alone compares badly between runs and brokers: an acks=1 loss is the rate
    # times how long a cut-off leader kept acknowledging, summed over the partitions it led, and
    # which partitions the isolated broker leads differs from run to run
    lost_spans: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.counts

    def _add(self, kind: str, example) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        ex = self.anomalies.setdefault(kind, [])
        if len(ex) < MAX_EXAMPLES:
            ex.append(example)


LOST_SPAN_GAP_S = 2.0


def _spans(lost: list, t0: float) -> list:
    """``Result.lost_spans`` of ``lost`` (sends), per partition, in send order."""
    out: list = []
    for part in sorted({s.partition for s in lost}):
        span: Optional[list] = None
        for s in sorted((s for s in lost if s.partition == part), key=lambda s: s.time):
            t = round(s.time - t0, 1)
            if span is not None and s.time - t0 - span[2] < LOST_SPAN_GAP_S:
                span[2] = t
                span[3] += 1
            else:
                span = [part, t, t, 1]
                out.append(span)
    return out


def check(history: History, bound: Optional[float] = None) -> Result:
    """Every check on ``history``; ``bound`` (seconds) enables ``unseen-within-bound``."""
    r = Result()
    sends = sorted(history.sends, key=lambda s: s.time)
    by_value = {s.value: s for s in sends}
    txns = history.txns

    # a transaction whose outcome its client never learnt (a commit that timed out, a client
    # fenced by its successor) committed if a read_committed poll read one of its writes
    seen_committed = {v for p in history.polls if p.isolation == READ_COMMITTED
                      for recs in p.records.values() for _o, v in recs}
    inferred = {s.txn for s in sends if s.txn is not None and s.value in seen_committed
                and (txns.get(s.txn) is None or txns[s.txn].status == "unknown")}

    def status(s: Send) -> str:
        if s.txn is None:
            return "committed"
        if s.txn in inferred:
            return "committed"
        t = txns.get(s.txn)
        return t.status if t is not None else "unknown"

    aborted_values = {s.value for s in sends if s.txn is not None and status(s) == "aborted"}

    # -- the log as observed: (partition, offset) -> values; value -> positions read ----------
    at: dict[tuple, set] = defaultdict(set)
    read_at: dict[str, set] = defaultdict(set)
    first_read: dict[str, float] = {}
    first_read_after_heal: dict[str, float] = {}
    heal = history.heal
    for p in sorted(history.polls, key=lambda p: p.time):
        for part, recs in p.records.items():
            for off, value in recs:
                at[(part, off)].add(value)
                read_at[value].add((part, off))
                first_read.setdefault(value, p.time)
                if heal is None or p.time >= heal:
                    first_read_after_heal.setdefault(value, p.time)
    for s in sends:
        if s.acked:
            at[(s.partition, s.offset)].add(s.value)

    # -- counts and figures --------------------------------------------------------------
    r.sent = len(sends)
    acked = [s for s in sends if s.acked]
    r.acked = len(acked)
    r.failed = sum(1 for s in sends if s.error is not None)
    r.read = len(read_at)
    lat = sorted(s.ack_time - s.time for s in acked if s.ack_time is not None)
    if lat:
        r.p50 = lat[len(lat) // 2]
        r.p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    # per partition (one partition without a leader is unavailability even while the others
    # acknowledge): the longest time between two acknowledgements, or from the first send to
    # the first acknowledgement, or from the last acknowledgement to the last send (a partition
    # that never recovered)
    for part in sorted({s.partition for s in sends}):
        ps = [s for s in sends if s.partition == part]
        ack_times = sorted(s.ack_time for s in ps if s.acked and s.ack_time is not None)
        if ack_times:
            gaps = [b - a for a, b in zip(ack_times, ack_times[1:])]
            gaps.append(max(0.0, ps[-1].time - ack_times[-1]))
            gaps.append(max(0.0, ack_times[0] - ps[0].time))
        else:
            gaps = [ps[-1].time - ps[0].time]
        r.longest_unavailable = max(r.longest_unavailable, max(gaps))

    # -- lost / unseen-within-bound ---------------------------------------------------------
    # a success without an offset (librdkafka's answer when an idempotent retry of a batch that
    # was possibly persisted comes back as a duplicate) is an acknowledgement too: it must be read
    no_offset = [s for s in sends if s.offset is None and s.error is None and s.ack_time is not None]
    r.acked_without_offset = len(no_offset)
    lost_sends: list[Send] = []
    for s in acked + no_offset:
        if status(s) != "committed":
            continue
        where = "%d@%s" % (s.partition, s.offset if s.offset is not None else "?")
        if s.value not in first_read_after_heal:
            r.lost += 1
            lost_sends.append(s)
            was = " (read before the heal at %s, not after)" % sorted(read_at[s.value]) if s.value in read_at else ""
            r._add("lost", "%s acknowledged at %s (t=%.3f)%s" % (s.value, where, s.ack_time or s.time, was))
        elif bound is not None and heal is not None and first_read_after_heal[s.value] - heal > bound:
            r._add("unseen-within-bound", "%s acknowledged at %s, first read %.1f s after the heal"
                   % (s.value, where, first_read_after_heal[s.value] - heal))

    r.lost_spans = _spans(lost_sends, sends[0].time if sends else 0.0)

    # -- duplicates --------------------------------------------------------------------------
    for value, where in read_at.items():
        if len(where) > 1:
            r.duplicated += len(where) - 1
            ids = [history.batches.get(w) for w in sorted(where)]
            if all(ids) and len({i[0] for i in ids if i}) == 1 and ids[0] and ids[0][0] >= 0 \
                    and len({i[1] for i in ids if i}) == len(ids):
                # every copy written by one idempotent producer id, each under another producer
                # epoch: the client sent the value again as a new write after bumping its epoch
                # (KIP-360), which no broker can tell from new data (sequences restart at 0 in
                # the new epoch); librdkafka 2.16.0 does this after an OUT_OF_ORDER_SEQUENCE_NUMBER
                # behind a refused batch (its issue #4953), whichever broker answers.  A broker
                # that let one (producer id, epoch, sequence) in twice shows one epoch twice.
                r.client_duplicates += 1
                ex = r.client_anomalies.setdefault("duplicate-after-epoch-bump", [])
                if len(ex) < MAX_EXAMPLES:
                    ex.append("%s read at %s, written as (producer id, epoch, sequence) %s"
                              % (value, sorted(where), [tuple(i) for i in ids if i]))
                continue
            r._add("duplicate", "%s read at %s" % (value, sorted(where)))

    # -- inconsistent offsets ----------------------------------------------------------------
    for (part, off), values in sorted(at.items()):
        if len(values) > 1:
            r._add("inconsistent-offsets", "%d@%d holds %s" % (part, off, sorted(values)))
    for s in acked:
        where = read_at.get(s.value)
        if where and (s.partition, s.offset) not in where:
            r._add("inconsistent-offsets", "%s acknowledged at %d@%d, read at %s" % (s.value, s.partition, s.offset, sorted(where)))

    # -- a producer's order --------------------------------------------------------------------
    issue: dict[str, int] = {}
    per_process: dict[tuple, list] = defaultdict(list)
    for i, s in enumerate(sends):
        issue[s.value] = i
        if s.acked:
            per_process[(s.process, s.partition)].append(s)
    for (proc, part), ss in per_process.items():
        for a, b in zip(ss, ss[1:]):
            if b.offset <= a.offset:
                r._add("nonmonotonic-send", "%s sent %s then %s to partition %d: acknowledged at offsets %d then %d"
                       % (proc, a.value, b.value, part, a.offset, b.offset))
    # the log as read, offset order: each producer's acknowledged values must come in send order
    # (a value at several offsets counts at its first: the copies are duplicates, not disorder)
    log: dict[int, list] = defaultdict(list)
    for (part, off), values in at.items():
        for v in values:
            log[part].append((off, v))
    for part, entries in log.items():
        entries.sort()
        last: dict[str, tuple] = {}
        seen: set = set()
        for off, v in entries:
            s = by_value.get(v)
            if s is None or not s.acked or v in seen:
                continue
            seen.add(v)
            prev = last.get(s.process)
            if prev is not None and issue[v] < issue[prev[1]]:
                r._add("nonmonotonic-send", "partition %d holds %s's %s at %d after its later %s at %d"
                       % (part, s.process, v, off, prev[1], prev[0]))
            if prev is None or issue[v] > issue[prev[1]]:
                last[s.process] = (off, v)

    # -- consumers: skips and going back ------------------------------------------------------
    # offsets holding a readable record, per isolation level, sorted for range look-ups
    readable = {READ_UNCOMMITTED: defaultdict(list), READ_COMMITTED: defaultdict(list)}
    # under read_committed only the writes known committed must be read (an unknown outcome may
    # be an abort)
    not_committed = {s.value for s in sends if status(s) != "committed"}
    for (part, off), values in at.items():
        readable[READ_UNCOMMITTED][part].append(off)
        if any(v not in not_committed for v in values):
            readable[READ_COMMITTED][part].append(off)
    for lvl in readable.values():
        for offs in lvl.values():
            offs.sort()
    events = sorted([(p.time, 1, p) for p in history.polls] + [(a.time, 0, a) for a in history.assigns],
                    key=lambda e: (e[0], e[1]))
    position: dict[tuple, int] = {}   # (consumer, partition) -> last offset read
    for _t, kind, e in events:
        if kind == 0:
            for key in [k for k in position if k[0] == e.consumer and (e.partitions is None or k[1] in e.partitions)]:
                del position[key]
            continue
        offs_of = readable[READ_COMMITTED if e.isolation == READ_COMMITTED else READ_UNCOMMITTED]
        for part, recs in e.records.items():
            for off, value in recs:
                key = (e.consumer, part)
                prev = position.get(key)
                if prev is not None:
                    if off <= prev:
                        r._add("nonmonotonic-poll", "%s read %d@%d (%s) after %d@%d" % (e.consumer, part, off, value, part, prev))
                    elif off > prev + 1:
                        offs = offs_of[part]
                        i = bisect.bisect_right(offs, prev)
                        if i < len(offs) and offs[i] < off:
                            missed = offs[i:bisect.bisect_left(offs, off)]
                            r._add("poll-skip", "%s went from %d@%d to %d@%d, skipping %d record(s) from offset %d"
                                   % (e.consumer, part, prev, part, off, len(missed), missed[0]))
                position[key] = off if prev is None else max(prev, off)
                if e.isolation == READ_COMMITTED and value in aborted_values:
                    r._add("aborted-read", "%s read %s at %d@%d (read_committed), written by aborted %s"
                           % (e.consumer, value, part, off, by_value[value].txn))

    _check_transforms(history, r, sends, txns)
    _check_commits(history, r, at, aborted_values)

    # -- transactions: G0 and G1c -----------------------------------------------------------------
    committed = {t.id for t in txns.values() if t.status == "committed"} | inferred
    if committed:
        writer = {s.value: s.txn for s in sends if s.txn in committed}
        ww: dict[str, set] = defaultdict(set)
        wr: dict[str, set] = defaultdict(set)
        for part, entries in log.items():
            prev_txn = None
            for off, v in entries:   # sorted above
                if len(at[(part, off)]) > 1:
                    continue   # an inconsistent offset has no single version order
                t = writer.get(v)
                if t is None:
                    continue
                if prev_txn is not None and prev_txn != t:
                    ww[prev_txn].add(t)
                prev_txn = t
        for p in history.polls:
            if p.txn not in committed:
                continue
            for recs in p.records.values():
                for _off, v in recs:
                    t = writer.get(v)
                    if t is not None and t != p.txn:
                        wr[t].add(p.txn)
        for comp in strongly_connected(committed, ww):
            r._add("G0", "ww cycle: %s" % " ".join(_cycle(comp, ww, {})))
        both = {t: ww.get(t, set()) | wr.get(t, set()) for t in committed}
        for comp in strongly_connected(committed, both):
            cset = set(comp)
            if any(b in cset for a in comp for b in wr.get(a, ())):
                r._add("G1c", "ww/wr cycle: %s" % " ".join(_cycle(comp, ww, wr)))
    return r


def _check_transforms(history: History, r: Result, sends: list, txns: dict) -> None:
    """Consume-transform-produce: each acknowledged input read, after the heal, through exactly
    one of its outputs (the outputs of aborted transactions are invisible to read_committed
    readers; an output of a transaction whose outcome is unknown counts if it was read)."""
    outputs: dict[str, list] = defaultdict(list)   # input value -> its outputs' values
    for s in sends:
        if s.source is not None:
            outputs[s.source].append(s.value)
    if not outputs:
        return
    heal = history.heal
    read_committed_after: set = set()
    for p in history.polls:
        if p.isolation == READ_COMMITTED and (heal is None or p.time >= heal):
            for recs in p.records.values():
                read_committed_after.update(v for _o, v in recs)
    for s in sends:
        if s.source is not None or not s.acked or s.txn is not None:
            continue   # inputs: plain acknowledged writes
        seen = sorted(o for o in outputs.get(s.value, ()) if o in read_committed_after)
        if not seen:
            r._add("transform-lost", "input %s (%d@%d) has no output read after the heal (%d output(s) sent)"
                   % (s.value, s.partition, s.offset, len(outputs.get(s.value, ()))))
        elif len(seen) > 1:
            r._add("transform-duplicate", "input %s read through %d outputs: %s" % (s.value, len(seen), seen))


def _check_commits(history: History, r: Result, at: dict, aborted_values: set) -> None:
    """Consumer groups: committed offsets never go down; nothing committed over unread."""
    if not history.commits:
        return
    member_of: dict[str, str] = {a.consumer: a.group for a in history.assigns if a.group}
    # (group, partition) -> offset -> first time a member read it
    first_read: dict[tuple, dict] = defaultdict(dict)
    for p in sorted(history.polls, key=lambda p: p.time):
        g = member_of.get(p.consumer)
        if g is None:
            continue
        for part, recs in p.records.items():
            fr = first_read[(g, part)]
            for off, _v in recs:
                fr.setdefault(off, p.time)
    readable: dict[int, list] = defaultdict(list)
    for (part, off), values in at.items():
        if any(v not in aborted_values for v in values):
            readable[part].append(off)
    for offs in readable.values():
        offs.sort()

    done = sorted((c for c in history.commits if c.ok and not c.observed), key=lambda c: c.ack_time)
    high: dict[tuple, tuple] = {}       # (group, partition) -> (offset, consumer, ack_time): highest so far
    checked: dict[tuple, int] = {}      # (group, partition) -> offsets below this were checked read
    acked_commits: dict[tuple, list] = defaultdict(list)   # for the observers: [(ack_time, offset)]
    for c in done:
        for part, off in sorted(c.offsets.items()):
            key = (c.group, part)
            acked_commits[key].append((c.ack_time, off))
            h = high.get(key)
            if h is not None and off < h[0]:
                r._add("commit-backward", "%s committed %d for partition %d of group %s at t=%.3f, after %s's %d (t=%.3f)"
                       % (c.consumer, off, part, c.group, c.ack_time, h[1], h[0], h[2]))
            if h is None or off > h[0]:
                high[key] = (off, c.consumer, c.ack_time)
            lo = checked.get(key, 0)
            if off > lo:
                offs = readable[part]
                fr = first_read[key]
                for x in offs[bisect.bisect_left(offs, lo):bisect.bisect_left(offs, off)]:
                    t = fr.get(x)
                    if t is None or t > c.ack_time:
                        r._add("commit-skip", "%s committed %d for partition %d of group %s (t=%.3f) but no member had read offset %d"
                               % (c.consumer, off, part, c.group, c.ack_time, x))
                        break   # one example per commit
                checked[key] = off
    # observers: an OffsetFetch started after a commit's acknowledgement reads at least it
    for key, lst in acked_commits.items():
        lst.sort()
    for o in sorted((c for c in history.commits if c.observed and c.ack_time is not None), key=lambda c: c.time):
        for part, off in sorted(o.offsets.items()):
            lst = acked_commits.get((o.group, part), [])
            i = bisect.bisect_left(lst, (o.time, -1))
            before = max((x[1] for x in lst[:i]), default=None)
            if before is not None and off < before:
                r._add("commit-backward", "an observer read %d as partition %d's committed offset of group %s at t=%.3f, "
                       "after %d was acknowledged" % (off, part, o.group, o.time, before))
    # a (re)assigned member starts where the group committed, not beyond.  What it may find
    # committed: the last commit acknowledged before its first read, or any commit issued before
    # that read whose outcome was not known then: one that failed (the client's last error does
    # not say whether an earlier attempt was appended: librdkafka retries an OffsetCommit after
    # NOT_COORDINATOR or a timeout, and a coordinator that loses its leadership fails a pending
    # write that its successor, loading the log to its end, applies; Kafka's coordinators do the
    # same) or one still awaiting its answer.  The start is checked against the highest of those
    # not above it.
    commits_by_key: dict[tuple, list] = defaultdict(list)
    for c in done:
        for part, off in c.offsets.items():
            commits_by_key[(c.group, part)].append((c.ack_time, off))
    for lst in commits_by_key.values():
        lst.sort()
    unknown_by_key: dict[tuple, list] = defaultdict(list)   # (issued, answered or None, offset)
    for c in history.commits:
        if c.observed:
            continue
        for part, off in c.offsets.items():
            unknown_by_key[(c.group, part)].append((c.time, c.ack_time if c.ok else None, off))
    polls = sorted(history.polls, key=lambda p: p.time)
    for a in history.assigns:
        if not a.group or not a.partitions:
            continue
        for part in a.partitions:
            # the member's first read of the partition after this assignment (before its next one)
            nxt = min((b.time for b in history.assigns if b.consumer == a.consumer and b.time > a.time), default=None)
            first = None
            for p in polls:
                if p.consumer != a.consumer or p.time < a.time or (nxt is not None and p.time >= nxt):
                    continue
                recs = p.records.get(part)
                if recs:
                    first = (p.time, recs[0][0])
                    break
            if first is None:
                continue
            lst = commits_by_key.get((a.group, part), [])
            i = bisect.bisect_left(lst, (first[0], -1))
            committed = max((x[1] for x in lst[:i]), default=0)
            if first[1] <= committed:
                continue
            # commits whose outcome the group did not know at the first read, below the start
            maybe = [off for issued, ok_at, off in unknown_by_key.get((a.group, part), ())
                     if issued < first[0] and (ok_at is None or ok_at >= first[0]) and committed < off <= first[1]]
            base = max(maybe, default=committed)
            offs = readable[part]
            j = bisect.bisect_left(offs, base)
            if first[1] > base and j < len(offs) and offs[j] < first[1]:
                r._add("commit-skip", "%s, assigned partition %d of group %s at t=%.3f, started at offset %d; the group "
                       "had committed %d%s and offset %d holds a record" % (
                           a.consumer, part, a.group, a.time, first[1], committed,
                           " (%d by a commit of unknown outcome)" % base if base != committed else "", offs[j]))


def strongly_connected(nodes, edges) -> list:
    """Strongly connected components with more than one node (Tarjan's, iterative), each sorted,
    among ``nodes`` (``edges``: node -> its successors; others are passed over).  The
    transaction cycles here and the import-cycle test (tests/install/test_layering.py) use it."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    out = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in nodes:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _cycle(comp: list, ww: dict, wr: dict) -> list:
    """One cycle inside a component, edges labelled: ``T1 -ww-> T2 -wr-> T1``.  Starts on a
    write-read edge when there is one (the edge that makes it G1c rather than G0)."""
    cset = set(comp)
    start = None
    for a in comp:
        for b in sorted(wr.get(a, ())):
            if b in cset:
                start = (a, b, "wr")
                break
        if start:
            break
    if start is None:
        a = comp[0]
        b = next(x for x in sorted(ww.get(a, ())) if x in cset)
        start = (a, b, "ww")
    a, b, lbl = start
    # breadth-first from b back to a inside the component
    prev = {b: None}
    queue = [b]
    while queue and a not in prev:
        nxt = []
        for v in queue:
            for lab, edges in (("ww", ww), ("wr", wr)):
                for w in sorted(edges.get(v, ())):
                    if w in cset and w not in prev:
                        prev[w] = (v, lab)
                        nxt.append(w)
        queue = nxt
    path = []
    v = a
    while prev.get(v) is not None:
        u, lab = prev[v]
        path.append((u, lab, v))
        v = u
    path.reverse()
    parts = [a, "-%s->" % lbl, b]
    for _u, lab, v in path:
        parts += ["-%s->" % lab, v]
    return parts
