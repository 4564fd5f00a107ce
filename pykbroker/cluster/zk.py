"""ZooKeeper layout of a pykbroker cluster, and a small trio bridge over kazoo.

The layout is the one Apache Kafka used before KRaft (Kafka 2.8-3.x in ZooKeeper mode), so the
znodes read the same in ``zkCli.sh`` and tools that know Kafka's layout::

    /cluster/id                                  {"version":"1","id":"<cluster id>"}
    /controller                      ephemeral   {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                            "<n>" (bumped by every newly elected controller)
    /brokers/ids/<id>                ephemeral   {"version":5,"host":..,"port":..,"endpoints":[..],
                                                  "listener_security_protocol_map":{..},"rack":..,..}
    /brokers/topics/<t>                          {"version":3,"topic_id":"<22 chars>",
                                                  "partitions":{"0":[1,2,3],..},
                                                  "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<t>/partitions/<p>/state     {"version":1,"controller_epoch":1,"leader":1,
                                                  "leader_epoch":0,"isr":[1,2,3]}
    /config/topics/<t>                           {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id>, /config/brokers/<default>
                                                 {"version":1,"config":{"log.retention.ms":"1000"}}
                                                 (dynamic broker configs: one broker's, the cluster default)
    /config/changes/config_change_<seq>          {"version":2,"entity_path":"topics/<t>"} (or
                                                 "brokers/<id>", "brokers/<default>")
    /admin/delete_topics/<t>                     a pending deletion (the controller completes it)
    /admin/preferred_replica_election            {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /admin/reassign_partitions                   {"version":1,"partitions":[{"topic":..,"partition":..,
                                                  "replicas":[..] (null: cancel, pykbroker's addition)}]}
    /latest_producer_id_block                    {"version":1,"broker":1,"block_start":"0","block_end":"999"}

A partition's *partition epoch* is its state znode's version (``Stat.version``): every change is
a compare-and-set on it, so two writers (a leader shrinking its ISR, the controller electing a
new leader) can never both win.

Everything here but ``ZkSession`` is pure (bytes in, values out).  ``ZkSession`` runs kazoo's
blocking calls in worker threads and hands watch callbacks (kazoo's thread) to trio in order
through ``TrioToken.run_sync_soon``.
"""
from __future__ import annotations

import functools
import json
import logging
import time
from typing import Any, Awaitable, Callable, Iterable, Optional, Sequence

import trio

from .metadata import topic_id_from_str, topic_id_str
from .metadata_cache import BrokerRegistration, Endpoint, PartitionState

log = logging.getLogger("pykbroker.zk")

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
SEQID = "/brokers/seqid"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_GROUPS = "/config/groups"   # dynamic group configs, one znode per group (Kafka's config entity path)
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENTS = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = LOG_DIR_EVENTS + "/log_dir_event_"

# Persistent paths every cluster has (Kafka's ZkData.PersistentZkPaths).
PERSISTENT_PATHS = ("/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, CONFIG_TOPICS, "/config/clients",
                    "/config/users", CONFIG_BROKERS, "/config/ips", "/admin/delete_topics",
                    "/isr_change_notification", LOG_DIR_EVENTS, SEQID)


def broker_path(broker_id: int) -> str:
    return "%s/%d" % (BROKER_IDS, broker_id)


def topic_path(topic: str) -> str:
    return "%s/%s" % (TOPICS, topic)


def partitions_path(topic: str) -> str:
    return topic_path(topic) + "/partitions"


def partition_path(topic: str, partition: int) -> str:
    return "%s/%d" % (partitions_path(topic), partition)


def state_path(topic: str, partition: int) -> str:
    return partition_path(topic, partition) + "/state"


def config_path(topic: str) -> str:
    return "%s/%s" % (CONFIG_TOPICS, topic)


def broker_config_entity(entity: str) -> str:
    """Kafka's entity name of a dynamic broker config: the broker id, or ``<default>`` for the
    cluster-wide default (entity "" in the admin APIs)."""
    return entity or "<default>"


def broker_config_path(entity: str) -> str:
    return "%s/%s" % (CONFIG_BROKERS, broker_config_entity(entity))


def delete_marker_path(topic: str) -> str:
    return "%s/%s" % (DELETE_TOPICS, topic)


def _dumps(obj: Any) -> bytes:
    # Kafka writes compact JSON (Json.encodeAsBytes); so do we.
    return json.dumps(obj, separators=(",", ":")).encode()


def _now_ms_str() -> str:
    return str(int(time.time() * 1000))


# ---------------------------------------------------------------------- codecs
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


def encode_controller(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms_str()})


def decode_controller(data: Optional[bytes]) -> int:
    """The controller's broker id, or -1 (no znode, or not parseable)."""
    if not data:
        return -1
    try:
        obj = json.loads(data)
    except ValueError:
        return -1
    if isinstance(obj, int):   # Kafka 0.8 wrote a bare id
        return obj
    return int(obj.get("brokerid", -1))


def encode_broker(reg: BrokerRegistration, protocols: Optional[dict] = None) -> bytes:
    # Version 5 of Kafka's broker registration (ZkData BrokerIdZNode): every advertised endpoint
    # as a listener URI, each listener's security protocol (``protocols``: listener name ->
    # protocol, from listener.security.protocol.map; PLAINTEXT when not given), and at top
    # level the host/port of the first PLAINTEXT endpoint for old clients, or null/-1 when
    # there is none (Kafka: "older clients will not be able to connect").
    protocols = protocols or {}
    proto = {e.listener: protocols.get(e.listener, "PLAINTEXT") for e in reg.endpoints}
    eps = ["%s://%s:%d" % (e.listener, e.host, e.port) for e in reg.endpoints]
    plain = next((e for e in reg.endpoints if proto[e.listener] == "PLAINTEXT"), None)
    obj = {"version": 5, "host": plain.host if plain else None, "port": plain.port if plain else -1,
           "jmx_port": -1, "timestamp": _now_ms_str(), "endpoints": eps,
           "listener_security_protocol_map": proto, "features": {}}
    if reg.rack is not None:
        obj["rack"] = reg.rack
    return _dumps(obj)


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    obj = json.loads(data)
    endpoints = []
    for uri in obj.get("endpoints") or []:
        listener, _, rest = uri.partition("://")
        host, _, port = rest.rpartition(":")
        endpoints.append(Endpoint(listener, host.strip("[]"), int(port)))
    if not endpoints and obj.get("host"):
        endpoints.append(Endpoint("PLAINTEXT", obj["host"], int(obj["port"])))
    return BrokerRegistration(broker_id, tuple(endpoints), obj.get("rack"))


def encode_assignment(topic_id: bytes, assignment: dict[int, list[int]],
                      reassigning: Optional[dict[int, tuple[list[int], list[int]]]] = None) -> bytes:
    """``reassigning``: {partition: (adding, removing)} of the ongoing reassignments."""
    reassigning = reassigning or {}
    return _dumps({"version": 3, "topic_id": topic_id_str(topic_id),
                   "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
                   "adding_replicas": {str(p): list(a) for p, (a, _) in sorted(reassigning.items()) if a},
                   "removing_replicas": {str(p): list(r) for p, (_, r) in sorted(reassigning.items()) if r}})


def decode_reassignments(data: bytes) -> dict[int, tuple[list[int], list[int]]]:
    """{partition: (adding, removing)} of a topic znode (Kafka's version 2+ fields)."""
    obj = json.loads(data)
    adding = {int(p): [int(b) for b in r] for p, r in (obj.get("adding_replicas") or {}).items()}
    removing = {int(p): [int(b) for b in r] for p, r in (obj.get("removing_replicas") or {}).items()}
    return {p: (adding.get(p, []), removing.get(p, [])) for p in sorted(set(adding) | set(removing))}


def decode_assignment(data: bytes) -> tuple[Optional[bytes], dict[int, list[int]]]:
    obj = json.loads(data)
    tid = obj.get("topic_id")
    return (topic_id_from_str(tid) if tid else None,
            {int(p): [int(b) for b in r] for p, r in (obj.get("partitions") or {}).items()})


def encode_state(state: PartitionState, controller_epoch: int) -> bytes:
    # "replicas" is pykbroker's addition (Kafka's readers ignore unknown fields): the replica
    # set travels with the state it belongs to, so a broker applying one state-znode change
    # never pairs it with an older assignment during a reassignment.
    return _dumps({"version": 1, "controller_epoch": controller_epoch, "leader": state.leader,
                   "leader_epoch": state.leader_epoch, "isr": list(state.isr),
                   "replicas": list(state.replicas)})


def decode_state(data: bytes, zk_version: int, replicas: Sequence[int]) -> tuple[PartitionState, int]:
    """(state, controller_epoch) from a state znode's data and version (``replicas``: the
    assignment's, used when the znode has none, as Kafka's do not)."""
    obj = json.loads(data)
    if obj.get("replicas") is not None:
        replicas = [int(b) for b in obj["replicas"]]
    st = PartitionState(leader=int(obj["leader"]), leader_epoch=int(obj["leader_epoch"]),
                        partition_epoch=zk_version, replicas=tuple(replicas),
                        isr=tuple(int(b) for b in obj["isr"]))
    return st, int(obj.get("controller_epoch", 0))


def encode_topic_config(rendered: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(rendered.items()))})


def decode_topic_config(data: Optional[bytes]) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (json.loads(data).get("config") or {}).items()}


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: Optional[bytes]) -> Optional[tuple[int, int]]:
    if not data:
        return None
    obj = json.loads(data)
    return int(obj["block_start"]), int(obj["block_end"])


# Kafka's LogDirEventNotification event type for a failed log dir
LOG_DIR_FAILURE = 1


def encode_log_dir_event(broker_id: int, partitions: Iterable[tuple[str, int]]) -> bytes:
    # "partitions" is pykbroker's addition: Kafka's controller asked the broker which replicas
    # the failed dir held (LeaderAndIsr answers); here the broker says so in the notification
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE,
                   "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_log_dir_event(data: bytes) -> tuple[int, list[tuple[str, int]]]:
    obj = json.loads(data)
    return int(obj["broker"]), [(e["topic"], int(e["partition"])) for e in obj.get("partitions") or []]


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port[,host:port][/chroot]`` -> (hosts, chroot or '')."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""


# ---------------------------------------------------------------------- the kazoo bridge
class ZkSession:
    """One ZooKeeper session (kazoo) used from trio.

    - ``await call(method_name, *args)`` runs a kazoo method in a worker thread (kazoo's
      calls block); kazoo's own exceptions propagate (NodeExistsError, BadVersionError, ...);
      reads are retried across a lost connection (ConnectionLoss), writes are not.
    - watches: ``data_watch(path, fn)`` / ``children_watch(path, fn)`` run ``fn`` in trio (in
      the order ZooKeeper delivered them) with what kazoo's DataWatch/ChildrenWatch recipes
      report; ``fn`` returns nothing; ``stop_watch(handle)`` ends one.
    - ``on_state(fn)``: ``fn("CONNECTED"|"SUSPENDED"|"LOST")`` in trio on session changes.
      kazoo's SUSPENDED is a lost connection within a live session (a network blip, a server of
      the ensemble restarted): ephemeral znodes and the session survive it, kazoo's watch
      recipes re-read their znodes on the next CONNECTED, and calls made meanwhile wait for the
      reconnection (or fail with ConnectionLoss).  LOST is the session's expiry (its ephemeral
      znodes are gone); the next CONNECTED is a new session (``session_id`` changes).
    """

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        hosts, chroot = split_connect(connect)
        self.connect = connect
        self.chroot = chroot
        self.connection_timeout = connection_timeout_ms / 1000.0
        # Reconnect forever (a ZooKeeper outage must not end the broker); commands retried
        # briefly, callers handle what is left.
        self.client = KazooClient(hosts=hosts + chroot, timeout=session_timeout_ms / 1000.0,
                                  connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
                                  command_retry=KazooRetry(max_tries=3, max_delay=0.5))
        self._token: Optional[trio.lowlevel.TrioToken] = None
        self._state_fns: list[Callable[[str], Any]] = []
        self._stopped = False
        self._session_id: Optional[int] = None

    # -- life cycle
    async def start(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        if self.chroot:
            # the chroot itself must exist before a chrooted client can use it
            from kazoo.client import KazooClient
            hosts, _ = split_connect(self.connect)
            root = KazooClient(hosts=hosts)

            def ensure_root() -> None:
                root.start(timeout=self.connection_timeout)
                try:
                    root.ensure_path(self.chroot)
                finally:
                    root.stop()
                    root.close()
            await trio.to_thread.run_sync(ensure_root)
        try:
            await trio.to_thread.run_sync(functools.partial(self.client.start, timeout=self.connection_timeout))
        except Exception as e:
            raise RuntimeError("cannot connect to ZooKeeper at %s within %.0f s: %s"
                               % (self.connect, self.connection_timeout, e)) from None
        cid = self.client.client_id
        self._session_id = cid[0] if cid else None
        self.client.add_listener(self._kazoo_state)

    async def stop(self) -> None:
        self._stopped = True

        def close() -> None:
            try:
                self.client.stop()
                self.client.close()
            except Exception:
                pass
        await trio.to_thread.run_sync(close)

    # -- calls
    # Reads retried across a lost connection (Kafka's ZooKeeper client retries every request
    # until reconnected): a blip must not fail a broker's start or an event's handling.  Writes
    # are not: one may have been applied before the connection dropped, its callers tell (a
    # create of our own ephemeral znode, a compare-and-set re-read).
    _RETRIED_READS = frozenset(("get", "get_children", "exists", "ensure_path"))
    # a kazoo client with no connection queues calls until it reconnects: a retry waits there,
    # this pause only spaces the attempts of a connection that keeps dropping
    _RETRY_PAUSE_S = 0.1

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from kazoo.exceptions import ConnectionLoss
        fn = functools.partial(getattr(self.client, method), *args, **kwargs)
        while True:
            try:
                return await trio.to_thread.run_sync(fn)
            except ConnectionLoss:
                if method not in self._RETRIED_READS or self._stopped:
                    raise
            await trio.sleep(self._RETRY_PAUSE_S)

    async def run(self, fn: Callable, *args: Any) -> Any:
        """Any blocking function of the client (e.g. building and committing a transaction)."""
        return await trio.to_thread.run_sync(functools.partial(fn, *args))

    # How long a write is retried across lost connections: Kafka's ZooKeeper client retries a
    # request until reconnected; a bound keeps an outage from holding a client's request for
    # ever (the request then answers REQUEST_TIMED_OUT, which clients retry).
    WRITE_RETRY_S = 30.0

    async def until_connected(self, attempt: Callable[[], Awaitable[Any]], what: str,
                              timeout_s: Optional[float] = None) -> Any:
        """A write made again after each ConnectionLoss until it gets ZooKeeper's answer, as
        Kafka's ``retryRequestsUntilConnected`` does.  A lost connection leaves a write applied
        or not, unknown: ``attempt`` must build the request afresh each time (a kazoo
        transaction commits once) and its caller reads an "already there" answer with that in
        mind (a create finding its own znode, a compare-and-set finding the version moved)."""
        from kazoo.exceptions import ConnectionLoss
        deadline = trio.current_time() + (self.WRITE_RETRY_S if timeout_s is None else timeout_s)
        tries = 0
        while True:
            try:
                return await attempt()
            except ConnectionLoss:
                tries += 1
                if self._stopped:
                    raise
                if trio.current_time() >= deadline:
                    from ..protocol.errors import ErrorCode, KafkaError
                    raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                     "ZooKeeper unreachable while %s (%d attempts)" % (what, tries)) from None
                log.warning("ZooKeeper connection lost while %s; retrying once reconnected", what)
            await trio.sleep(self._RETRY_PAUSE_S)

    # -- into trio
    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in trio soon (from a kazoo thread: a raw watch's callback)."""
        self._post(fn, *args)

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._stopped or self._token is None:
            return
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            pass

    def _kazoo_state(self, state: str) -> None:
        # kazoo's KazooState is a str enum: "CONNECTED", "SUSPENDED", "LOST".  Called in kazoo's
        # connection thread before it sends anything on the new connection, so the session id
        # is current before any answer read on it reaches trio.
        if state == "CONNECTED":
            cid = self.client.client_id
            if cid:
                self._session_id = cid[0]
        elif state == "LOST":
            self._session_id = None
        for fn in self._state_fns:
            self._post(fn, str(state))

    def on_state(self, fn: Callable[[str], Any]) -> None:
        self._state_fns.append(fn)

    def data_watch(self, path: str, fn: Callable[[Optional[bytes], Any], Any]) -> list:
        handle = [True]

        # False ends kazoo's watch; falling through (None) keeps it
        def cb(data: Optional[bytes], stat: Any, event: Any = None) -> Optional[bool]:  # type: ignore[return]
            if not handle[0] or self._stopped:
                return False  # ends kazoo's DataWatch
            self._post(fn, data, stat)
        self.client.DataWatch(path, cb)
        return handle

    def children_watch(self, path: str, fn: Callable[[list], Any]) -> list:
        handle = [True]

        def cb(children: list[str]) -> Optional[bool]:  # type: ignore[return]  # None keeps the watch
            if not handle[0] or self._stopped:
                return False
            self._post(fn, list(children))
        self.client.ChildrenWatch(path, cb)
        return handle

    @staticmethod
    def stop_watch(handle: list) -> None:
        handle[0] = False

    # -- the session
    def session_id(self) -> Optional[int]:
        """The id of the current ZooKeeper session, kept while the connection is down (kazoo's
        ``client_id`` is None then); None before the first session and after an expiry until
        the next one.  It stays the same across reconnections within a session and changes
        after an expiry: what tells the two apart."""
        return self._session_id

    def owns(self, stat: Any) -> bool:
        """Whether an ephemeral znode (its ``Stat``) belongs to the current session."""
        sid = self.session_id()
        return stat is not None and sid is not None and stat.ephemeralOwner == sid
