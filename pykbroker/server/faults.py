"""Fault injection: a sans-IO plan of rules the ``Dispatcher`` consults for each decoded request.

A rule matches an API (key or name), optionally narrowed to a topic and a partition, for its
next ``count`` matching requests (``None``: until cleared).  What it does to a matching request:

- ``error``: answer with that Kafka error code.  A rule without a topic answers the whole
  request through the handler's ``error_response`` (every partition / the top-level error, as
  Kafka's getErrorResponse).  A rule with a topic (and optionally a partition) on an API with a
  per-partition layout (the handler's ``RESPONSES``: Produce, Fetch, ListOffsets, DeleteRecords,
  OffsetForLeaderEpoch) errors only the matching partitions: the dispatcher hands the handler the
  request without them and puts their error entries back in request order (see
  ``Dispatcher._inject``), so the other partitions of the same request are served normally.
- ``delay``: wait that many seconds before serving the request (the connection's requests stay
  in order, so later requests on that connection wait too, as behind a slow Kafka request).
- ``drop``: close the connection without answering (and without serving the request).
- ``drop_response``: serve the request, then close the connection without answering: the
  response is lost, as when a connection breaks after the broker acted (what an idempotent
  producer's retry must not duplicate).

A partition taken offline (``set_offline``) is a set of such rules, one per per-partition API,
answering KAFKA_STORAGE_ERROR until ``set_online`` removes them: what Kafka's broker answers for
a partition whose log dir failed (its Metadata side, no leader, is the controller's:
``pykbroker/run/runner.py``).

A rule with a topic never matches an API without a per-partition layout.  The plan is mutated
and read on the broker's trio thread only (no locks).  With no rule the dispatcher's cost is one
truthiness check of ``rules``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from ..protocol.codec import APIS
from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ..handlers.support.common import PartitionResponses

# an API named by key or by name in any case ("Produce", "list_offsets"); an error by ErrorCode
# member name or number
Api = Union[int, str]
Error = Union[int, str]

ERROR, DELAY, DROP, DROP_RESPONSE = "error", "delay", "drop", "drop_response"

# The per-partition APIs a broker answers KAFKA_STORAGE_ERROR for an offline partition (Kafka's
# ReplicaManager.getPartitionOrException on an Offline partition): Produce, Fetch, ListOffsets,
# DeleteRecords, OffsetForLeaderEpoch.
OFFLINE_APIS = (0, 1, 2, 21, 23)


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_API_BY_NAME: dict[str, int] = {}   # built by the first api_key(name): reading every spec's name at import
#                           would parse every spec (they are parsed per API on first use)


def api_key(api: Api) -> int:
    """The API key of ``api``: an int, or a name in any case ("Produce", "list_offsets")."""
    if isinstance(api, int):
        if api not in APIS:
            raise ValueError("unknown API key %d" % api)
        return api
    if not _API_BY_NAME:
        _API_BY_NAME.update((_norm(spec.name), k) for k, spec in APIS.items())
    key = _API_BY_NAME.get(_norm(str(api)))
    if key is None:
        raise ValueError("unknown API %r" % (api,))
    return key


def error_code(error: Error) -> int:
    """An ``ErrorCode`` member name ("NOT_LEADER_OR_FOLLOWER") or number."""
    if isinstance(error, str):
        try:
            return int(ErrorCode[error.upper()])
        except KeyError:
            raise ValueError("unknown Kafka error %r" % error) from None
    return int(ErrorCode(int(error)))


class FaultRule:
    __slots__ = ("api_key", "topic", "partition", "action", "code", "seconds", "remaining", "tag")

    def __init__(self, api: Api, action: str, topic: Optional[str] = None, partition: Optional[int] = None,
                 code: int = 0, seconds: float = 0.0, count: Optional[int] = None,
                 tag: Optional[tuple[str, str, int]] = None) -> None:
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        if count is not None and count < 1:
            raise ValueError("count must be >= 1 (or None: until cleared)")
        self.api_key = api_key(api)
        self.topic = topic
        self.partition = partition
        self.action = action
        self.code = code
        self.seconds = float(seconds)
        self.remaining = count
        self.tag = tag   # ("offline", topic, partition) for the rules of set_offline

    def __repr__(self) -> str:
        return "FaultRule(%s %s topic=%r partition=%r code=%d seconds=%g remaining=%r)" % (
            APIS[self.api_key].name, self.action, self.topic, self.partition, self.code,
            self.seconds, self.remaining)

    def partitions(self, request: dict, layout: Optional[PartitionResponses]) -> list[tuple[str, int]]:
        """The (topic, partition) pairs of ``request`` this topic-scoped rule selects."""
        topic = self.topic
        if layout is None or topic is None:   # (no topic: no topic in a request matches None)
            return []
        out = []
        for t in request.get(layout.req_topics) or ():
            if t[layout.req_topic] != topic:
                continue
            for p in t[layout.req_parts]:
                idx = p[layout.req_index]
                if self.partition is None or idx == self.partition:
                    out.append((topic, idx))
        return out


class Decision:
    """What the plan decided for one request: ``drop``; ``delay`` seconds; ``error`` (a code for
    the whole request, or 0); ``partition_errors`` ({(topic, partition): code}, maybe empty);
    ``drop_response`` (serve, then close without answering)."""

    __slots__ = ("drop", "delay", "error", "partition_errors", "drop_response")

    def __init__(self) -> None:
        self.drop = False
        self.delay = 0.0
        self.error = 0
        self.partition_errors: dict[tuple[str, int], int] = {}
        self.drop_response = False

    def __bool__(self) -> bool:
        return (self.drop or self.delay > 0 or bool(self.error) or bool(self.partition_errors)
                or self.drop_response)


class FaultPlan:
    """The broker's fault rules, in the order they were added."""

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> FaultRule:
        self.rules.append(rule)
        return rule

    def fail(self, api: Api, error: Error, topic: Optional[str] = None, partition: Optional[int] = None,
             count: Optional[int] = 1) -> FaultRule:
        return self.add(FaultRule(api, ERROR, topic, partition, code=error_code(error), count=count))

    def delay(self, api: Api, seconds: float, topic: Optional[str] = None, partition: Optional[int] = None,
              count: Optional[int] = None) -> FaultRule:
        return self.add(FaultRule(api, DELAY, topic, partition, seconds=seconds, count=count))

    def drop_connection(self, api: Api, topic: Optional[str] = None, partition: Optional[int] = None,
                        count: Optional[int] = 1) -> FaultRule:
        return self.add(FaultRule(api, DROP, topic, partition, count=count))

    def drop_response(self, api: Api, topic: Optional[str] = None, partition: Optional[int] = None,
                      count: Optional[int] = 1) -> FaultRule:
        return self.add(FaultRule(api, DROP_RESPONSE, topic, partition, count=count))

    def clear(self) -> None:
        """Remove every rule (offline partitions come back online too)."""
        self.rules.clear()

    def set_offline(self, topic: str, partition: int) -> bool:
        """Answer KAFKA_STORAGE_ERROR for ``topic``-``partition`` in every per-partition API
        until :meth:`set_online`; False if it already was offline."""
        tag = ("offline", topic, int(partition))
        if any(r.tag == tag for r in self.rules):
            return False
        for key in OFFLINE_APIS:
            self.add(FaultRule(key, ERROR, topic, int(partition), code=int(ErrorCode.KAFKA_STORAGE_ERROR),
                               count=None, tag=tag))
        return True

    def set_online(self, topic: str, partition: int) -> bool:
        """Undo :meth:`set_offline`; False if it was not offline."""
        tag = ("offline", topic, int(partition))
        n = len(self.rules)
        self.rules = [r for r in self.rules if r.tag != tag]
        return len(self.rules) != n

    @property
    def offline(self) -> list:
        """The (topic, partition) pairs taken offline, sorted."""
        return sorted({r.tag[1:] for r in self.rules if r.tag and r.tag[0] == "offline"})

    def decide(self, key: int, request: dict, layout: Optional[PartitionResponses]) -> Decision:
        """Match ``request`` (API ``key``; ``layout`` its handler's ``PartitionResponses`` or
        None) against the rules; each matching rule spends one of its ``count``.  Drop wins over
        everything; delays add up; the first whole-request error wins over partition errors; for
        a partition, the first rule naming it wins."""
        d = Decision()
        spent = False
        for rule in self.rules:
            if rule.api_key != key:
                continue
            if rule.topic is not None:
                parts = rule.partitions(request, layout)
                if not parts:
                    continue
            if rule.action == DROP:
                d.drop = True
            elif rule.action == DELAY:
                d.delay += rule.seconds
            elif rule.action == DROP_RESPONSE:
                d.drop_response = True
            elif rule.topic is None:
                d.error = d.error or rule.code
            else:
                for tp in parts:
                    d.partition_errors.setdefault(tp, rule.code)
            if rule.remaining is not None:
                rule.remaining -= 1
                spent = spent or rule.remaining == 0
        if spent:
            self.rules = [r for r in self.rules if r.remaining != 0]
        if d.error:
            d.partition_errors = {}
        return d
