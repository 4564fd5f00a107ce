"""``broker.faults`` and a subprocess broker's ``broker.clock``: the control requests of
run/control.py, made on the broker's loop by the in-process broker and over HTTP
(:func:`http_control`) by the subprocess broker, with the same answers."""
from __future__ import annotations

from typing import Any, Optional


def checked(status: int, answer: dict) -> dict:
    """A control answer, or the exception a Python caller expects for a refused one."""
    if status == 404:
        raise KeyError(answer.get("error"))
    if status >= 400:
        raise ValueError(answer.get("error"))
    return answer


class Faults:
    """``broker.faults``: rules the broker applies to the requests it decodes
    (``pykbroker/server/faults.py``), the same in-process and over a subprocess's HTTP control
    endpoint.  ``api`` is an API name ("Produce", "ListOffsets") or key; ``error`` an
    ``ErrorCode`` name ("NOT_LEADER_OR_FOLLOWER") or number; ``topic`` (and ``partition``)
    narrow a rule to those partitions of Produce / Fetch / ListOffsets / DeleteRecords /
    OffsetForLeaderEpoch requests, the other partitions of the same request being served
    normally; ``count`` is how many matching requests the rule touches (``None``: until
    :meth:`clear`).  Rules survive a crash and restart (they are the test's, not the broker's).
    Coordinator errors are rules on the group APIs, e.g. ``fail("JoinGroup",
    "COORDINATOR_LOAD_IN_PROGRESS")`` or ``fail("FindCoordinator", "COORDINATOR_NOT_AVAILABLE")``."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner   # has _control(method, path, req) -> answer

    def _add(self, req: dict) -> dict:
        return self._owner._control("POST", "/faults", req)

    def fail(self, api: str | int, error: str | int, topic: Optional[str] = None, partition: Optional[int] = None,
             count: Optional[int] = 1) -> None:
        """Answer the next ``count`` matching requests with ``error``."""
        self._add({"action": "fail", "api": api, "error": error, "topic": topic,
                   "partition": partition, "count": count})

    def delay(self, api: str | int, seconds: float, topic: Optional[str] = None,
              partition: Optional[int] = None, count: Optional[int] = None) -> None:
        """Wait ``seconds`` (real time) before serving each of the next ``count`` matching
        requests."""
        self._add({"action": "delay", "api": api, "seconds": seconds, "topic": topic,
                   "partition": partition, "count": count})

    def drop_connection(self, api: str | int, topic: Optional[str] = None, partition: Optional[int] = None,
                        count: Optional[int] = 1) -> None:
        """Close the connection, without answering, of the next ``count`` matching requests."""
        self._add({"action": "drop_connection", "api": api, "topic": topic,
                   "partition": partition, "count": count})

    def drop_response(self, api: str | int, topic: Optional[str] = None, partition: Optional[int] = None,
                      count: Optional[int] = 1) -> None:
        """Serve the next ``count`` matching requests, then close their connection without
        answering: the response is lost after the broker acted (a producer's retry then meets
        its own earlier append, which idempotence must not duplicate)."""
        self._add({"action": "drop_response", "api": api, "topic": topic,
                   "partition": partition, "count": count})

    def partition_offline(self, topic: str, partition: int = 0) -> None:
        """Take the partition offline, as when its only replica's log dir fails: Produce,
        Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch answer KAFKA_STORAGE_ERROR,
        Metadata shows no leader (LEADER_NOT_AVAILABLE, the node in ``offline_replicas``), until
        :meth:`partition_online`.  KeyError for an unknown partition."""
        self._owner._control("POST", "/partitions/offline", {"topic": topic, "partition": partition})

    def partition_online(self, topic: str, partition: int = 0) -> None:
        """Bring an offline partition back: its leader again, requests served."""
        self._owner._control("POST", "/partitions/online", {"topic": topic, "partition": partition})

    def clear(self) -> None:
        """Remove every rule and bring every offline partition back."""
        self._owner._control("DELETE", "/faults")

    @property
    def rules(self) -> list:
        """The active rules (JSON objects, as ``GET /faults`` shows them), for assertions."""
        return self._owner._control("GET", "/faults")["rules"]

    @property
    def offline(self) -> list:
        """The offline partitions, [(topic, partition), ...]."""
        return [tuple(tp) for tp in self._owner._control("GET", "/faults")["offline"]]


class RemoteClock:
    """``broker.clock`` of a subprocess broker: :class:`pykbroker.clock.BrokerClock`'s control
    methods over the HTTP control endpoint."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def advance(self, seconds: float) -> None:
        self._owner._control("POST", "/clock", {"advance_ms": float(seconds) * 1000.0})

    def freeze(self) -> None:
        self._owner._control("POST", "/clock", {"freeze": True})

    def unfreeze(self) -> None:
        self._owner._control("POST", "/clock", {"freeze": False})

    def state(self) -> dict:
        return self._owner._control("GET", "/clock")

    def time_ms(self) -> int:
        return self.state()["time_ms"]

    @property
    def frozen(self) -> bool:
        return self.state()["frozen"]


def http_control(url: str, method: str, path: str, req: Optional[dict] = None) -> tuple[int, dict]:
    """One request to a control endpoint (run/control.py): (status, JSON answer)."""
    import json
    import urllib.error
    import urllib.request

    data = None if req is None and method != "POST" else json.dumps(req or {}).encode()
    r = urllib.request.Request(url.rstrip("/") + path, method=method, data=data,
                               headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # loopback: no proxy
    try:
        with opener.open(r, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
