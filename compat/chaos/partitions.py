"""Network-partition runs (Jepsen style) against a 3-broker cluster in network namespaces, with
every client operation recorded and checked by :mod:`compat.chaos.checker`.

One run = a cluster from :func:`compat.chaos.netns.cluster` (ZooKeeper and 3 brokers, each in
its own namespace), a topic (RF 3, ``min.insync.replicas=2``, unclean election off), a workload,
and a *nemesis* that cuts links between namespaces for ``fault_s`` seconds, heals, waits
``quiet_s`` and strikes again until the run's time is up.  The test process (the clients) is
never cut: like Jepsen's control node it reaches every broker, so an isolated leader still
gets produce requests, which is where a replicated log loses data.

Workload (``WORKLOADS``; ``txn`` and ``group``: :class:`TxnWorkload`, :class:`GroupWorkload`):
``idempotent``: ``producers`` idempotent ``acks=all`` confluent-kafka
producers (``acks1``: plain ``acks=1`` ones instead, whose losses are expected), each writing values
``p<n>-<seq>`` round-robin over the partitions, every send recorded with its outcome; one
consumer reading every partition from offset 0 all along (every poll recorded); after the last
heal the producers drain, and a final reader reads every partition to its end, again and again
until everything acknowledged is read or ``bound`` seconds have passed since the heal.

Nemeses (``NEMESES``; "the leader" is partition 0's leader when the fault starts):

- ``isolate-leader``: the leader cut from every other node (ZooKeeper and both followers);
- ``leader-zk``: the leader cut from ZooKeeper only (its followers still fetch from it);
- ``leader-followers``: the leader cut from its followers only (it keeps its ZooKeeper session);
- ``majority-minority``: one broker against the two others, ZooKeeper on a random side;
- ``bridge``: Jepsen's bridge: the leader and ZooKeeper+the other follower on two sides, one
  follower in both (it reaches everyone, the two sides do not reach each other);
- ``zk-blip``: the controller cut from ZooKeeper for half the session timeout (its session
  survives: kazoo reports SUSPENDED, then CONNECTED), healed; 3 s later the leader (another
  broker than the controller) is isolated from all, which needs an election;
- ``flapping``: all through the fault window, one of the shapes above (on a random broker) for
  1-3 s, healed for 1-3 s, again;
- ``slow-leader``: the leader's links to ZooKeeper and the brokers delayed 100-500 ms each way
  (compat/chaos/relay.py); ``lossy-leader``: 5-20 % of their packets dropped (iptables);
- ``clock-jump`` (pykbroker only: its control endpoint moves its clock): the leader's clock,
  then random brokers', jumps 5-60 s forward every 2-5 s of the fault window;
- combined with process faults (``COMBINED``; undone at the heal: a killed broker restarted on
  its data, a stopped process continued): ``isolate-kill-new-leader`` (the leader isolated, the
  broker elected in its place killed -9), ``isolate-pause-zk`` (the leader isolated, ZooKeeper
  SIGSTOPped beyond the session timeout, continued while the cut lasts),
  ``followers-cut-sigstop-leader`` (the leader cut from its followers, SIGSTOPped until its
  session expires, continued still cut: a zombie leader), ``split-sigstop-controller`` (one
  broker alone, the controller on the majority side SIGSTOPped beyond the session timeout,
  continued while the split lasts), ``flapping-zk-restart`` (``flapping``, and ZooKeeper killed
  -9 once in the window and started again on its data 2-4 s later), ``followers-cut-kill-leader``
  (the leader cut from its followers only; once it has shrunk the ISR to itself it is killed -9,
  and started again at the heal: the partition offline meanwhile, unclean election being off).

``run(nemesis, seconds)`` returns a :class:`RunReport` (the checker's :class:`Result` and the
figures of the table).  The command:

    python compat/chaos/partitions.py                              # every nemesis, 120 s each
    python compat/chaos/partitions.py leader-zk bridge --seconds 60
    python compat/chaos/partitions.py --out compat/chaos/results   # results.md + run-<nemesis>.json

Needs root, iproute2 and iptables (tools/test.sh installs them).  Exit status 0 when no run
found an anomaly, 1 otherwise, 2 when namespaces cannot be made here.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from typing import Callable, Iterable, Optional

if __name__ == "__main__":   # run as a script: this checkout (pykbroker and compat/) first on the path
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from pykbroker.protocol import wire  # noqa: E402

from compat.chaos import netns  # noqa: E402
from compat.chaos.common import pace, start_threads  # noqa: E402
from compat.chaos.checker import (READ_COMMITTED, READ_UNCOMMITTED, Assign, Commit, History, Poll,  # noqa: E402
                                  Result, Send, Txn, check)

TOPIC = "jepsen"
WORKLOADS = ("idempotent", "acks1", "txn", "group")


# ---------------------------------------------------------------------------- cluster views
def leader_of(cluster, partition: int = 0, topic: str = TOPIC) -> Optional[int]:
    """Partition's leader as the brokers say, the answer with the highest leader epoch winning
    (an isolated broker may still believe in an older one)."""
    best = (-1, None)
    for b in cluster.brokers:
        if not b.running():
            continue
        try:
            with wire.WireClient((b.host, b.port), timeout=2.0) as c:
                m = c.request(3, 12, {"topics": [{"name": topic, "topic_id": b"\0" * 16}],
                                      "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})
        except (OSError, ValueError):
            continue
        for t in m["topics"]:
            for p in t["partitions"]:
                if p["partition_index"] == partition and p["leader_id"] >= 0 and p["leader_epoch"] > best[0]:
                    best = (p["leader_epoch"], p["leader_id"])
    return best[1]


def controller_of(cluster, ask: Optional[Iterable[int]] = None) -> Optional[int]:
    """The controller id most brokers name (an isolated one may name a stale one); ``ask``: only
    those brokers' answers."""
    votes: dict = {}
    for b in cluster.brokers:
        if not b.running() or (ask is not None and b.broker_id not in ask):
            continue
        try:
            with wire.WireClient((b.host, b.port), timeout=2.0) as c:
                m = c.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})
        except (OSError, ValueError):
            continue
        if m["controller_id"] >= 0:
            votes[m["controller_id"]] = votes.get(m["controller_id"], 0) + 1
    return max(votes, key=votes.get) if votes else None


# ---------------------------------------------------------------------------- Apache Kafka
# The oracle for a ZooKeeper-mode cluster is the last Kafka line with ZooKeeper mode (3.9); its
# jars are fetched from Maven Central by ``python compat/kafka/oracle.py fetch --version 3.9.1``
# into the same cache compat/kafka/oracle.py uses.
KAFKA_ZK_VERSION = "3.9.1"


def kafka_libs(version: str = KAFKA_ZK_VERSION) -> Optional[str]:
    root = os.environ.get("PYKBROKER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pykbroker")
    libs = os.path.join(root, "kafka-%s" % version, "libs")
    return libs if os.path.exists(os.path.join(libs, "kafka_2.13-%s.jar" % version)) else None


def _kafka_node_class():
    from pykbroker.local.cluster import BrokerNode

    class KafkaZkNode(BrokerNode):
        """An Apache Kafka broker in ZooKeeper mode in place of a ``pykbroker serve`` child: same
        directory layout (``broker.log``, ``kafka-logs/``), same host/launcher/port handling."""
        libs = ""

        def command(self) -> list:
            props = {"broker.id": str(self.broker_id), "zookeeper.connect": self.zookeeper_connect,
                     "listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
                     "advertised.listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
                     "log.dirs": self.log_dir, **self.overrides}
            cfg = os.path.join(self.data_dir, "server.properties")
            with open(cfg, "w") as fh:
                fh.write("".join("%s=%s\n" % kv for kv in props.items()))
            # small heaps and C1 only: three brokers and ZooKeeper share a 2-core machine
            return [*self.launcher, "java", "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                    "-Dkafka.logs.dir=%s" % self.data_dir, "-cp", os.path.join(self.libs, "*"),
                    "kafka.Kafka", cfg]
    return KafkaZkNode


# The oracle in KRaft mode: Apache Kafka 4.4, each broker also a controller (``process.roles``
# broker,controller; all three voters of the quorum), in the same namespaces; ZooKeeper still runs
# in its namespace but nothing uses it, so a cut from "zk" is no cut for this cluster and a
# paused ZooKeeper no fault.  Its jars: ``python compat/kafka/oracle.py fetch`` (4.4 is its default).
KAFKA_KRAFT_VERSION = "4.4.0"
KRAFT_CONTROLLER_PORT = 9093


def _kafka_kraft_node_class():
    import base64
    import subprocess
    import uuid
    from pykbroker.local.cluster import BrokerNode

    class KafkaKraftNode(BrokerNode):
        """An Apache Kafka 4.4 combined broker+controller in place of a ``pykbroker serve``
        child; ``voters`` and ``cluster_id`` are the cluster's (set before the first spawn).  Its
        log dir is formatted at the first spawn only (a restart after kill -9 keeps its data)."""
        libs = ""
        voters = ""
        cluster_id = ""

        def _config(self) -> str:
            props = {"process.roles": "broker,controller", "node.id": str(self.broker_id),
                     "controller.quorum.voters": self.voters,
                     "listeners": "PLAINTEXT://%s:%d,CONTROLLER://%s:%d" % (
                         self.host, self.port, self.host, KRAFT_CONTROLLER_PORT),
                     "advertised.listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
                     "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                     "log.dirs": self.log_dir, "transaction.state.log.replication.factor": "3",
                     "transaction.state.log.min.isr": "2",
                     "share.coordinator.state.topic.replication.factor": "3",
                     **{k: v for k, v in self.overrides.items() if not k.startswith("zookeeper.")}}
            cfg = os.path.join(self.data_dir, "server.properties")
            with open(cfg, "w") as fh:
                fh.write("".join("%s=%s\n" % kv for kv in props.items()))
            return cfg

        def _java(self) -> list:
            # small heaps and C1 only: three JVMs share a 2-core machine
            return ["java", "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                    "-Dkafka.logs.dir=%s" % self.data_dir, "-cp", os.path.join(self.libs, "*")]

        def spawn(self) -> None:
            if not self.running() and not os.path.exists(os.path.join(self.log_dir, "meta.properties")):
                os.makedirs(self.log_dir, exist_ok=True)
                r = subprocess.run(self._java() + ["kafka.tools.StorageTool", "format",
                                                   "--cluster-id=" + self.cluster_id, "-c", self._config()],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("kafka-storage format failed: %s %s" % (r.stdout, r.stderr[-2000:]))
            super().spawn()

        def command(self) -> list:
            return [*self.launcher, *self._java(), "kafka.Kafka", self._config()]

    KafkaKraftNode.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return KafkaKraftNode


# ---------------------------------------------------------------------------- nemeses
def _node(broker_id: int) -> str:
    return "b%d" % broker_id


@dataclasses.dataclass
class NemesisContext:
    """What a nemesis may need beyond the net: the cluster, the fault window's end (for the
    nemeses that act all through it) and ``undo``, run at the heal after ``net.heal()``."""
    cluster: object
    session_timeout_s: float
    until: float = 0.0
    undo: list = dataclasses.field(default_factory=list)
    ports: dict = dataclasses.field(default_factory=dict)
    events: list = dataclasses.field(default_factory=list)   # what a lasting nemesis did, for the log
    fault_s: float = 0.0   # the fault window's length (ctx.until - fault_s: when it began)
    figures: dict = dataclasses.field(default_factory=dict)  # the nemesis's own, added to the report's

    def heal(self, net) -> None:
        net.heal()
        undo, self.undo = self.undo, []
        for f in reversed(undo):
            f()


def _isolate_leader(net, leader, others, rnd, ctx=None):
    net.isolate(_node(leader))
    return "b%d isolated from all" % leader


def _leader_zk(net, leader, others, rnd, ctx=None):
    net.cut(_node(leader), "zk")
    return "b%d cut from zk" % leader


def _leader_followers(net, leader, others, rnd, ctx=None):
    for o in others:
        net.cut(_node(leader), _node(o))
    return "b%d cut from b%s" % (leader, ",b".join(map(str, others)))


def _majority_minority(net, leader, others, rnd, ctx=None):
    brokers = [leader] + list(others)
    rnd.shuffle(brokers)
    minority, majority = [_node(brokers[0])], [_node(b) for b in brokers[1:]]
    (minority if rnd.random() < 0.5 else majority).append("zk")
    net.partition([minority, majority])
    return "%s | %s" % (",".join(minority), ",".join(majority))


def _bridge(net, leader, others, rnd, ctx=None):
    bridge, other = rnd.sample(list(others), 2)
    net.partition([[_node(leader)], ["zk", _node(other)]])
    return "b%d | b%d (bridge) | zk,b%d" % (leader, bridge, other)


def _zk_blip(net, leader, others, rnd, ctx):
    cluster, session_timeout_s = ctx.cluster, ctx.session_timeout_s
    controller = controller_of(cluster)
    if controller is None:
        return _isolate_leader(net, leader, others, rnd)
    # shorter than the session timeout: the controller's session survives, kazoo reports it
    # SUSPENDED then CONNECTED again
    net.cut(_node(controller), "zk")
    time.sleep(session_timeout_s / 2)
    net.heal()
    time.sleep(3.0)
    # now an election is needed: is there still a controller to hold it?
    victim = leader if leader != controller else others[0]
    net.isolate(_node(victim))
    return "controller b%d cut from zk for %.0f s, healed; then b%d isolated from all" % (
        controller, session_timeout_s / 2, victim)


# flapping: partitions cut and healed every FLAP_S seconds (each drawn in the range) all through
# the fault window, each a new draw of one of these shapes
FLAP_S = (1.0, 3.0)
FLAP_SHAPES = (_isolate_leader, _leader_zk, _leader_followers, _majority_minority, _bridge)


def _flapping(net, leader, others, rnd, ctx):
    cuts = 0
    while True:
        shape = rnd.choice(FLAP_SHAPES)
        # a random broker, not always partition 0's leader: every partition's leader gets hit
        victim = rnd.choice([leader] + list(others))
        rest = [b for b in [leader] + list(others) if b != victim]
        ctx.events.append(shape(net, victim, rest, rnd))
        cuts += 1
        if not _sleep_until(min(ctx.until, time.monotonic() + rnd.uniform(*FLAP_S)), ctx.until):
            break
        net.heal()
        if not _sleep_until(min(ctx.until, time.monotonic() + rnd.uniform(*FLAP_S)), ctx.until):
            break
    return "flapping: %d cut(s) of %.0f-%.0f s, healed as long between (%s, ...)" % (
        cuts, FLAP_S[0], FLAP_S[1], "; ".join(ctx.events[:3]))


def _sleep_until(t: float, until: float) -> bool:
    """Sleep to ``t``; False when that reaches the window's end ``until``."""
    time.sleep(max(0.0, t - time.monotonic()))
    return time.monotonic() < until - 0.05


# slow links: 100-500 ms each way (a delay drawn per chunk, in order) on every link of the leader
# to the other brokers and ZooKeeper, through compat/chaos/relay.py
SLOW_DELAY_S = (0.1, 0.5)
# lossy links: a share of the packets drawn in this range, dropped by the kernel each way
LOSS = (0.05, 0.20)


def _slow_leader(net, leader, others, rnd, ctx):
    from compat.chaos.relay import slow_links
    links = slow_links(net, _node(leader), ctx.ports, delay=SLOW_DELAY_S, seed=rnd.randrange(1 << 30))

    def undo():
        # what went through the relays: the proof that the links really took them
        ctx.figures["relayed bytes"] = ctx.figures.get("relayed bytes", 0) + links.carried
        links.close()
    ctx.undo.append(undo)
    return "b%d's links to zk and the brokers delayed %.0f-%.0f ms each way" % (
        leader, 1000 * SLOW_DELAY_S[0], 1000 * SLOW_DELAY_S[1])


def _lossy_leader(net, leader, others, rnd, ctx):
    loss = rnd.uniform(*LOSS)
    for o in ["zk"] + [_node(b) for b in others]:
        net.lossy(_node(leader), o, loss)
    return "b%d's links to zk and the brokers lose %.0f %% of their packets" % (leader, 100 * loss)


# clock jumps: the broker's clock (pykbroker/clock.py, moved through its control endpoint) jumps
# forward by CLOCK_JUMP_S (drawn) every CLOCK_EVERY_S through the fault window, on the leader
# first, then on random brokers.  Forward only: the broker clock never goes back.  Every timer
# of the broker's loop sees the jump (replica lag, group sessions, transaction timeouts);
# ZooKeeper's session (kazoo, real time) does not.
CLOCK_JUMP_S = (5.0, 60.0)
CLOCK_EVERY_S = (2.0, 5.0)


def clock_jump(broker, seconds: float) -> dict:
    import urllib.request
    url = getattr(broker, "control_url", None)
    if not url:
        raise RuntimeError("broker %d has no control endpoint: clock jumps need pykbroker's" % broker.broker_id)
    req = urllib.request.Request(url + "/clock", data=json.dumps({"advance_ms": int(seconds * 1000)}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _clock_jumps(net, leader, others, rnd, ctx):
    victim = leader
    jumps = []
    while True:
        s = rnd.uniform(*CLOCK_JUMP_S)
        try:
            st = clock_jump(ctx.cluster.broker(victim), s)
            jumps.append("b%d +%.0fs (offset now %.0f s)" % (victim, s, st["offset_ms"] / 1000.0))
        except OSError as e:
            jumps.append("b%d jump failed (%s)" % (victim, e))
        if not _sleep_until(time.monotonic() + rnd.uniform(*CLOCK_EVERY_S), ctx.until):
            break
        victim = rnd.choice([leader] + list(others))
    return "clock jumps: %s" % ", ".join(jumps)


# ---------------------------------------------------------------------------- combined with process faults
# A partition and a process fault in the same window, as real outages come: a network cut that
# forces an election, then the process that won it crashes; ZooKeeper stalled while a partition
# needs it; a leader frozen long enough to lose its session and then thawed behind a cut (a
# "zombie" that still believes it leads).  Every process fault is undone at the heal (after the
# net is healed): a killed broker is started again on its data, a paused process continued.

def _wait_new_leader(cluster, old: int, until: float, partition: int = 0) -> Optional[int]:
    """The partition's leader once it is another broker than ``old`` (None by ``until``)."""
    while time.monotonic() < until:
        now = leader_of(cluster, partition)
        if now is not None and now != old:
            return now
        time.sleep(0.2)
    return None


def _restart_later(ctx, broker_id: int) -> None:
    """At the heal, start the killed broker again on its data.  A broker killed less than a
    ZooKeeper session ago may find its old registration still there: Apache Kafka in ZooKeeper
    mode then exits at start-up (NodeExists from registerBroker), so it is started once more
    after the session timeout, as a service manager restarting it would (said in the event)."""
    def undo():
        t = time.monotonic()
        try:
            try:
                ctx.cluster.start(broker_id)
                again = ""
            except Exception as first:
                time.sleep(ctx.session_timeout_s + 1.0)
                ctx.cluster.start(broker_id)
                again = " (started again after the session timeout: %s)" % str(first).splitlines()[0][:120]
            ctx.events.append("b%d restarted in %.1f s%s" % (broker_id, time.monotonic() - t, again))
        except Exception as e:   # the run goes on with two brokers; the report says so
            ctx.events.append("b%d failed to restart: %s" % (broker_id, e))
        ctx.figures["restarts"] = ctx.figures.get("restarts", 0) + 1
    ctx.undo.append(undo)


def _isolate_kill_new_leader(net, leader, others, rnd, ctx):
    """The leader isolated from all; once another broker leads, that one is killed -9 (only the
    third broker is left in touch with ZooKeeper: the partition has one live in-sync replica,
    below ``min.insync.replicas``).  At the heal the killed broker starts again on its data."""
    net.isolate(_node(leader))
    new = _wait_new_leader(ctx.cluster, leader, ctx.until - 2.0)
    if new is None:
        return "b%d isolated from all; no new leader within the window, nothing killed" % leader
    t = time.monotonic()
    ctx.cluster.kill(new)
    _restart_later(ctx, new)
    ctx.figures["kill -9"] = ctx.figures.get("kill -9", 0) + 1
    return "b%d isolated from all; new leader b%d killed -9 %.1f s into the fault" % (
        leader, new, t - (ctx.until - ctx.fault_s))


def _isolate_pause_zk(net, leader, others, rnd, ctx):
    """The leader isolated from all; 2 s later ZooKeeper itself is stopped (SIGSTOP) for longer
    than the session timeout, then continued while the leader stays cut: the election the cut
    asks for has to wait for ZooKeeper, and every session's clock runs out while it is frozen."""
    zk = ctx.cluster.zookeeper
    net.isolate(_node(leader))
    time.sleep(2.0)
    pause_s = min(ctx.session_timeout_s + 2.0, max(1.0, ctx.until - time.monotonic() - 3.0))
    zk.pause()
    ctx.undo.append(zk.resume)   # in case the window ends first
    time.sleep(pause_s)
    zk.resume()
    ctx.figures["zk paused s"] = round(ctx.figures.get("zk paused s", 0) + pause_s, 1)
    return "b%d isolated from all; ZooKeeper SIGSTOPped %.1f s (2 s in), continued, b%d still cut" % (
        leader, pause_s, leader)


def _followers_cut_sigstop_leader(net, leader, others, rnd, ctx):
    """The leader cut from its followers (it keeps ZooKeeper), then frozen (SIGSTOP) for longer
    than the session timeout: ZooKeeper expires it, the controller elects a follower.  It is
    continued while still cut from the followers: a zombie that believed it led, acknowledging
    acks=1 writes alone until it learns otherwise (acks=all ones need ``min.insync.replicas``).
    A :class:`ZombieProbe` measures that on a topic of its own (see there)."""
    probe = ZombieProbe.start(ctx.cluster, leader, others, len(ctx.figures.get("zombie probes", [])))
    for o in others:
        net.cut(_node(leader), _node(o))
    time.sleep(1.0)
    t_stop = time.monotonic()
    pause_s = min(ctx.session_timeout_s + 3.0, max(1.0, ctx.until - time.monotonic() - 3.0))
    ctx.cluster.pause(leader)
    ctx.undo.append(lambda: ctx.cluster.resume(leader))
    if probe is not None:
        probe.while_frozen(ctx.cluster, t_stop + pause_s - 0.5)
    time.sleep(max(0.0, t_stop + pause_s - time.monotonic()))
    ctx.cluster.resume(leader)
    ctx.figures["SIGSTOP s"] = round(ctx.figures.get("SIGSTOP s", 0) + pause_s, 1)
    desc = "b%d cut from b%s, SIGSTOPped %.1f s (1 s in), continued still cut" % (
        leader, ",b".join(map(str, others)), pause_s)
    if probe is not None:
        found = probe.after_wake(ctx.until - 0.5)
        ctx.figures.setdefault("zombie probes", []).append(found)
        desc += "; probe: " + found["says"]
    return desc


def _isr_views(cluster, partition: int = 0, topic: str = TOPIC) -> list:
    """Partition's ISR as each running broker's metadata says (a cut broker's view may be old)."""
    views = []
    for b in cluster.brokers:
        if not b.running():
            continue
        try:
            m = wire.metadata((b.host, b.port), [topic])
        except (OSError, ValueError):
            continue
        for p in m["topics"][0]["partitions"]:
            if p["partition_index"] == partition:
                views.append(sorted(p["isr_nodes"]))
    return views


def _followers_cut_kill_leader(net, leader, others, rnd, ctx):
    """The leader cut from its followers only (it keeps ZooKeeper, so no election): once it has
    shrunk the ISR to itself (``replica.lag.time.max.ms``), it is killed -9.  Its partition has no
    other in-sync replica and unclean election is off: offline until the heal starts it again on
    its data, where whatever it acknowledged alone (acks=1) must still be, and the followers
    truncate to it, not it to them.  Killed anyway 4 s before the window's end if the ISR never
    shrank (then a follower in the ISR may be elected)."""
    for o in others:
        net.cut(_node(leader), _node(o))
    t0 = time.monotonic()
    shrunk = False
    while time.monotonic() < ctx.until - 4.0:
        if [leader] in _isr_views(ctx.cluster):
            shrunk = True
            break
        time.sleep(0.3)
    t = time.monotonic()
    ctx.cluster.kill(leader)
    _restart_later(ctx, leader)
    ctx.figures["kill -9"] = ctx.figures.get("kill -9", 0) + 1
    return "b%d cut from b%s; %s; b%d killed -9 %.1f s into the fault" % (
        leader, ",b".join(map(str, others)),
        "ISR shrank to it alone after %.1f s" % (t - t0) if shrunk else "ISR never shrank to it alone",
        leader, t - (ctx.until - ctx.fault_s))


def _split_sigstop_controller(net, leader, others, rnd, ctx):
    """A majority/minority split (one broker alone, the two others with ZooKeeper), then the
    controller, on the majority side, frozen (SIGSTOP) for longer than the session timeout and
    continued before the heal.  The lone broker is partition 0's leader unless that one is the
    controller (then another broker): its session expires while the only controller that could
    move its partitions is frozen, so the elections wait for ZooKeeper to expire the controller
    too and the third broker to take over; the woken controller finds itself replaced."""
    brokers = [leader] + list(others)
    controller = controller_of(ctx.cluster)
    if controller is None:
        controller = rnd.choice(list(others))
    lone = leader if leader != controller else rnd.choice([b for b in brokers if b != controller])
    net.partition([[_node(lone)], ["zk"] + [_node(b) for b in brokers if b != lone]])
    time.sleep(1.0)
    pause_s = min(ctx.session_timeout_s + 3.0, max(1.0, ctx.until - time.monotonic() - 3.0))
    ctx.cluster.pause(controller)
    ctx.undo.append(lambda: ctx.cluster.resume(controller))   # in case the window ends first
    time.sleep(pause_s)
    ctx.cluster.resume(controller)
    ctx.figures["SIGSTOP s"] = round(ctx.figures.get("SIGSTOP s", 0) + pause_s, 1)
    time.sleep(min(2.0, max(0.0, ctx.until - time.monotonic() - 0.5)))
    # as the third broker sees it (the lone one's view is stale by construction, and the woken
    # controller's may be for a moment): the one whose word a client on the majority side gets
    third = [b for b in brokers if b not in (lone, controller)]
    now = controller_of(ctx.cluster, ask=third)
    woken = controller_of(ctx.cluster, ask=[controller])

    def name(c):
        return "b%d" % c if c is not None else "unknown"
    return ("b%d | zk,b%s; controller b%d SIGSTOPped %.1f s (1 s in), continued, split kept; "
            "2 s later the woken b%d names %s; controller now %s") % (
        lone, ",b".join(str(b) for b in brokers if b != lone), controller, pause_s, controller,
        name(woken), name(now))


# ZooKeeper killed -9 this far into a flapping window (a share of it), down this long, then
# started again on its data: shorter than the session timeout, so the brokers' sessions
# survive it (ZooKeeper keeps sessions in its log) if they reconnect in time, while the cuts go on
ZK_RESTART_AT = (0.25, 0.5)
ZK_DOWN_S = (2.0, 4.0)


def _flapping_zk_restart(net, leader, others, rnd, ctx):
    """:func:`_flapping` all through the window, and ZooKeeper killed -9 once in it and started
    again on its data 2-4 s later (from a thread of its own, so the flapping goes on through it)."""
    zk = ctx.cluster.zookeeper
    at = time.monotonic() + rnd.uniform(*ZK_RESTART_AT) * max(0.0, ctx.until - time.monotonic())
    down_s = rnd.uniform(*ZK_DOWN_S)
    done: list = []

    def restart():
        time.sleep(max(0.0, at - time.monotonic()))
        t = time.monotonic()
        try:
            zk.restart(down_seconds=down_s)
            done.append("ZooKeeper killed -9 at +%.1f s, back after %.1f s" % (
                t - (ctx.until - ctx.fault_s), time.monotonic() - t))
        except Exception as e:   # the heal starts it again; the report says so
            done.append("ZooKeeper restart failed: %s" % e)
    th = threading.Thread(target=restart, name="zk-restart", daemon=True)
    th.start()

    def undo():
        th.join(60.0)
        if not zk.running():
            zk.start()
    ctx.undo.append(undo)
    desc = _flapping(net, leader, others, rnd, ctx)
    th.join(max(0.0, at - time.monotonic()) + down_s + 40.0)
    ctx.figures["zk restarts"] = ctx.figures.get("zk restarts", 0) + 1
    ctx.figures["zk down s"] = round(ctx.figures.get("zk down s", 0) + down_s, 1)
    return desc + "; " + ("; ".join(done) or "ZooKeeper restart still under way at the window's end")


class ZombieProbe:
    """What a frozen leader does with acks=1 writes when it wakes, measured on a probe topic of
    one partition led by the victim (replicas victim-first, created before the cut, never read by
    the checker), over raw connections opened before the freeze:

    - while it is frozen, once another broker leads the probe partition, one acks=1 Produce is
      sent to it on such a connection: the kernel buffers it, as it buffers the requests of a
      producer whose metadata still names the frozen leader (librdkafka keeps sending to it until
      a metadata answer drops that broker);
    - when it is continued: whether that buffered write is acknowledged (an acknowledged write the
      new leader never had: lost), and how long the zombie goes on acknowledging fresh acks=1
      writes (one every 100 ms) before it answers an error (it learned it no longer leads), up to
      the window's end.

    Apache Kafka in ZooKeeper mode learns it through the controller's LeaderAndIsr, which the cut
    holds back; pykbroker from ZooKeeper, which it still reaches: the figure compares the two."""

    PRODUCE_V = 9

    def __init__(self, topic: str, leader: int, conns: list):
        self.topic = topic
        self.leader = leader
        self.conns = conns
        self.buffered: Optional[int] = None   # correlation id of the write sent while frozen
        self.new_leader: Optional[int] = None
        self.note = ""

    @classmethod
    def start(cls, cluster, leader: int, others: list, n: int) -> Optional["ZombieProbe"]:
        topic = "zombie-probe-%d" % n
        try:
            first = cluster.broker(controller_of(cluster) or others[0])
            with wire.WireClient((first.host, first.port)) as c:
                r = c.request(19, 5, {"topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                                                  "assignments": [{"partition_index": 0,
                                                                   "broker_ids": [leader] + list(others)}],
                                                  "configs": []}],
                                      "timeout_ms": 30000, "validate_only": False})
                if r["topics"][0]["error_code"]:
                    return None
            t_end = time.monotonic() + 10.0
            while leader_of(cluster, 0, topic) != leader:
                if time.monotonic() > t_end:
                    return None
                time.sleep(0.2)
            b = cluster.broker(leader)
            return cls(topic, leader, [wire.WireClient((b.host, b.port), timeout=30.0) for _ in range(2)])
        except (OSError, ValueError, KeyError):
            return None

    def _produce(self, conn, value: str) -> int:
        return conn.send(0, self.PRODUCE_V, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                             "topic_data": [{"name": self.topic, "partition_data": [
                                                 {"index": 0, "records": wire.make_batch([value.encode()])}]}]})

    def _answer(self, conn, corr: int) -> tuple:
        part = wire.produce_part(conn.recv(0, self.PRODUCE_V, corr))
        return part["error_code"], part["base_offset"]

    def while_frozen(self, cluster, until: float) -> None:
        """Once another broker leads the probe partition, one write to the frozen one."""
        while time.monotonic() < until:
            now = leader_of(cluster, 0, self.topic)
            if now is not None and now != self.leader:
                self.new_leader = now
                self.buffered = self._produce(self.conns[0], "sent-while-frozen")
                return
            time.sleep(0.2)

    def after_wake(self, until: float) -> dict:
        """The figures: ``buffered_acked`` (None: nothing was buffered), ``acked_after_wake``,
        ``refused_after_s`` (None: none refused by ``until``), ``error``, and ``says`` (all of
        it in words)."""
        t0 = time.monotonic()
        out = []
        found: dict = {"buffered_acked": None, "acked_after_wake": 0, "refused_after_s": None, "error": None}
        try:
            if self.buffered is None:
                out.append("no other leader before the wake, nothing buffered")
            else:
                err, off = self._answer(self.conns[0], self.buffered)
                found["buffered_acked"] = err == 0
                out.append("the write buffered while frozen (b%d led by then) %s" % (
                    self.new_leader, "acknowledged at %d" % off if err == 0 else "refused (error %d)" % err))
            acked = 0
            conn = self.conns[1]
            while time.monotonic() < until:
                err, off = self._answer(conn, self._produce(conn, "after-wake-%d" % acked))
                if err:
                    found["refused_after_s"] = round(time.monotonic() - t0, 2)
                    found["error"] = err
                    out.append("after the wake %d acks=1 write(s) acknowledged, the first refused "
                               "(error %d) %.2f s after it" % (acked, err, time.monotonic() - t0))
                    break
                acked += 1
                found["acked_after_wake"] = acked
                time.sleep(0.1)
            else:
                out.append("after the wake %d acks=1 write(s) acknowledged in %.1f s, none refused "
                           "until the window's end" % (acked, time.monotonic() - t0))
        except (OSError, ValueError) as e:
            out.append("probe failed: %s" % e)
        finally:
            for c in self.conns:
                c.close()
        found["says"] = "; ".join(out)
        return found


NEMESES: dict[str, Callable] = {
    "isolate-leader": _isolate_leader,
    "leader-zk": _leader_zk,
    "leader-followers": _leader_followers,
    "majority-minority": _majority_minority,
    "bridge": _bridge,
    "zk-blip": _zk_blip,
    "flapping": _flapping,
    "slow-leader": _slow_leader,
    "lossy-leader": _lossy_leader,
    "clock-jump": _clock_jumps,
    "isolate-kill-new-leader": _isolate_kill_new_leader,
    "isolate-pause-zk": _isolate_pause_zk,
    "followers-cut-sigstop-leader": _followers_cut_sigstop_leader,
    "split-sigstop-controller": _split_sigstop_controller,
    "followers-cut-kill-leader": _followers_cut_kill_leader,
    "flapping-zk-restart": _flapping_zk_restart,
}
# partitions combined with process faults (kill -9, SIGSTOP of a broker or of ZooKeeper)
COMBINED = ("isolate-kill-new-leader", "isolate-pause-zk", "followers-cut-sigstop-leader",
            "split-sigstop-controller", "flapping-zk-restart", "followers-cut-kill-leader")
# nemeses that act all through the fault window themselves (they return at its end)
LASTING = {"flapping", "clock-jump", "flapping-zk-restart"}
# nemeses only pykbroker can be given (its control endpoint moves its clock)
PYKBROKER_ONLY = {"clock-jump"}


# ---------------------------------------------------------------------------- workload
def rdkafka_debug() -> dict:
    """librdkafka's own debug log for the producers (to the run's stderr), when
    ``PYKBROKER_CHAOS_RDKAFKA_DEBUG`` names its contexts (e.g. ``metadata,topic,broker,msg``):
    which broker each metadata request went to and when a partition's leader changed, to trace
    where a producer's writes went during a fault."""
    contexts = os.environ.get("PYKBROKER_CHAOS_RDKAFKA_DEBUG")
    return {"debug": contexts, "log_level": 7} if contexts else {}


class Workload:
    """Producers and a live consumer recording into one :class:`History`."""

    isolation = READ_UNCOMMITTED   # the live consumer's
    live_consumer = True

    def __init__(self, bootstrap: str, history: History, producers: int = 2, rate: int = 200,
                 partitions: int = 3, message_timeout_ms: int = 60000, workload: str = "idempotent"):
        self.bootstrap = bootstrap
        self.workload = workload
        self.h = history
        self.n = producers
        self.rate = rate
        self.partitions = partitions
        self.message_timeout_ms = message_timeout_ms
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []
        self._consumer: Optional[threading.Thread] = None
        self.errors: list[str] = []

    def _produce(self, n: int) -> None:
        from confluent_kafka import Producer
        proc = "p%d" % n
        # WORKLOADS: idempotent acks=all (Kafka's promise: nothing acknowledged is lost), or
        # plain acks=1 (the leader alone acknowledges: a leader cut off and replaced loses what
        # it acknowledged alone, in Kafka too; counted, expected)
        # every workload but acks1 writes its raw values idempotent acks=all (txn and group check
        # the transactions and commits over them, not acks=1 losses)
        safe = self.workload != "acks1"
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": safe, "acks": "all" if safe else "1",
                      "linger.ms": 5, "message.timeout.ms": self.message_timeout_ms,
                      "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                      "client.id": "jepsen-" + proc, "log_level": 2, **rdkafka_debug()})

        def done(err, msg, send):
            send.ack_time = time.monotonic()
            if err is not None:
                send.error = str(err.name())
            else:
                send.offset = msg.offset()

        seq = 0
        interval = 1.0 / max(1, self.rate)
        next_t = time.monotonic()
        while not self._stop_producing.is_set():
            part = seq % self.partitions
            send = Send(proc, "%s-%d" % (proc, seq), part, time.monotonic())
            try:
                p.produce(TOPIC, send.value.encode(), partition=part,
                          on_delivery=lambda err, msg, s=send: done(err, msg, s))
            except BufferError:
                p.poll(0.1)
                continue
            self.h.add(send)
            seq += 1
            p.poll(0)
            next_t = pace(next_t, interval)
        left = p.flush(self.message_timeout_ms / 1000.0 + 10)
        if left:
            self.errors.append("%s: %d send(s) without an outcome after the flush" % (proc, left))

    def _consume(self) -> None:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "jepsen-live",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": self.isolation,
                      "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
        try:
            self.h.add(Assign("live", time.monotonic()))
            c.assign([TopicPartition(TOPIC, p, 0) for p in range(self.partitions)])
            while not self._stop_consuming.is_set():
                msgs = c.consume(500, 0.5)
                now = time.monotonic()
                recs: dict = {}
                for m in msgs:
                    if m.error():
                        continue
                    recs.setdefault(m.partition(), []).append((m.offset(), m.value().decode()))
                if recs:
                    self.h.add(Poll("live", now, recs, self.isolation))
        finally:
            c.close()

    def start(self) -> None:
        self._threads += start_threads(self._produce, self.n)
        if self.live_consumer:
            self._consumer = threading.Thread(target=self._consume, daemon=True)
            self._consumer.start()

    def _stop_producers(self) -> None:
        """The producers stop and have ended (their last flush done)."""
        self._stop_producing.set()
        for t in self._threads:
            t.join()

    def stop(self) -> None:
        self._stop_producers()
        self._stop_consuming.set()
        if self._consumer is not None:
            self._consumer.join()


class TxnWorkload(Workload):
    """Transactional consume-transform-produce over the topic itself, as Jepsen's Kafka workload
    makes transactions both read and write: the idempotent producers write raw values; two
    applications (one consumer group, read_committed, transactional ids ``ctp-0``/``ctp-1``)
    turn each raw value ``v`` read from partition ``p`` into ``T<txn>:v`` written to partition
    ``p+1`` and commit the input offsets in the same transaction.  Outputs are read again by the
    applications (and skipped), so transactions read what others wrote: the write-read edges of
    G1c.  Every transaction is recorded (:class:`Txn`: committed, aborted, or unknown when its
    commit's outcome is not known), every output a :class:`Send` with its transaction and source,
    every application poll a read_committed :class:`Poll` inside its transaction.  The live
    consumer reads read_committed.  Checked: aborted reads, G0/G1c, each acknowledged raw value
    transformed exactly once (``transform-lost``/``-duplicate``), and the usual ones."""

    isolation = READ_COMMITTED
    APPS = 2
    BATCH = 100
    GROUP = "jepsen-ctp"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._stop_apps = threading.Event()
        self._apps: list[threading.Thread] = []
        self.last_input = time.monotonic()   # when an application last transformed a raw value
        # every session that ended other than by the stop (application, monotonic time, why):
        # an application stalled by a call that keeps failing (init_transactions refused, a
        # fatal error after each commit) shows here, not as a silent lack of polls
        self.session_ends: list[tuple[str, float, str]] = []
        self._txn_seq = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        super().start()
        self._apps += start_threads(self._app, self.APPS)

    def stop(self) -> None:
        self._stop_producers()
        # the applications finish transforming what was written: until every acknowledged raw
        # value has an output in a committed transaction (or 120 s: the check then reports
        # what was left)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.untransformed():
            time.sleep(1.0)
        self._stop_apps.set()
        for t in self._apps:
            t.join(120)
            if t.is_alive():
                self.errors.append("a transforming application did not stop")
        self._stop_consuming.set()
        if self._consumer is not None:
            self._consumer.join()

    def _ended(self, name: str, why: str) -> None:
        with self._lock:
            self.session_ends.append((name, time.monotonic(), why))

    def figures(self, t0: float) -> dict:
        """The session ends for the report: how many, and the last few with their time in the run."""
        with self._lock:
            ends = list(self.session_ends)
        if not ends:
            return {}
        return {"ctp sessions ended": len(ends),
                "ctp last session ends": ["%s +%.1f s: %s" % (n, t - t0, why[:160]) for n, t, why in ends[-4:]]}

    def untransformed(self) -> int:
        with self.h._lock:
            sends = list(self.h.sends)
            committed = {t.id for t in self.h.txns.values() if t.status == "committed"}
        done = {s.source for s in sends if s.source is not None and s.txn in committed}
        return sum(1 for s in sends if s.source is None and s.acked and s.value not in done)

    def _next_txn(self, name: str) -> str:
        with self._lock:
            self._txn_seq += 1
            return "%s.%d" % (name, self._txn_seq)

    def _app(self, i: int) -> None:
        from compat.chaos.chaos_eos import _bounded, _ClientHang
        name = "ctp-%d" % i
        while not self._stop_apps.is_set():
            try:
                self._session(name, _bounded, _ClientHang)
            except Exception as e:   # a session failing outright: a new one, counted
                self.errors.append("%s session: %r" % (name, e))
            if not self._stop_apps.is_set():
                time.sleep(0.5)

    def _session(self, name, _bounded, _ClientHang) -> None:
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
        h = self.h

        def assigned(consumer, parts):
            h.add(Assign(name, time.monotonic(), sorted(p.partition for p in parts)))

        # max.poll.interval.ms is also the member's rebalance timeout: a member that keeps its
        # session but does not rejoin (a librdkafka consumer stuck between revoke and rejoin,
        # seen on pykbroker and on Kafka 3.9.1 alike, results/nemeses.md) holds a rebalance up
        # for that long, then the coordinator drops it; 30 s instead of the default 5 minutes,
        # so the run measures the brokers rather than that wait
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.GROUP, "isolation.level": READ_COMMITTED,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 10000,
                      "max.poll.interval.ms": 30000,
                      "topic.metadata.refresh.interval.ms": 1000, "log_level": 2, **rdkafka_debug()})
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": name, "transaction.timeout.ms": 20000,
                      "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})

        def rewind() -> bool:
            try:
                committed = c.committed(c.assignment(), 20)
                for tp in committed:
                    c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
                h.add(Assign(name, time.monotonic(), sorted(tp.partition for tp in committed)))
            except KafkaException:
                return False
            return True

        try:
            p.init_transactions(30)
            c.subscribe([TOPIC], on_assign=assigned)
            while not self._stop_apps.is_set():
                msgs = [m for m in c.consume(self.BATCH, 0.5) if not m.error()]
                if not msgs:
                    continue
                tid = self._next_txn(name)
                now = time.monotonic()
                recs: dict = {}
                for m in msgs:
                    recs.setdefault(m.partition(), []).append((m.offset(), m.value().decode()))
                h.add(Poll(name, now, recs, READ_COMMITTED, txn=tid))
                txn = h.add(Txn(tid, "unknown", name))
                p.begin_transaction()
                try:
                    raw = 0
                    for m in msgs:
                        v = m.value().decode()
                        if v.startswith("T"):
                            continue   # an output: transformed already
                        raw += 1
                        part = (m.partition() + 1) % self.partitions
                        send = h.add(Send(name, "T%s:%s" % (tid, v), part, time.monotonic(), txn=tid, source=v))

                        def done(err, msg, send=send):
                            send.ack_time = time.monotonic()
                            if err is not None:
                                send.error = str(err.name())
                            else:
                                send.offset = msg.offset()
                        p.produce(TOPIC, send.value.encode(), partition=part, on_delivery=done)
                    nxt: dict = {}
                    for m in msgs:
                        nxt[m.partition()] = max(nxt.get(m.partition(), 0), m.offset() + 1)
                    offsets = [TopicPartition(TOPIC, part, off) for part, off in nxt.items()]
                    meta = c.consumer_group_metadata()
                    _bounded(lambda: p.send_offsets_to_transaction(offsets, meta, 30), 45)
                    _bounded(lambda: p.commit_transaction(30), 45)
                    txn.status = "committed"
                    p.poll(0)
                    if raw:
                        self.last_input = time.monotonic()
                except _ClientHang:
                    self.errors.append("%s: a transaction call blocked past its timeout (new producer)" % name)
                    self._ended(name, "a transaction call blocked past its timeout")
                    return   # txn stays unknown; the next session's InitProducerId fences this one
                except KafkaException as e:
                    err = e.args[0]
                    if err.txn_requires_abort() or err.retriable():
                        try:
                            p.abort_transaction(30)
                            txn.status = "aborted"
                        except KafkaException as e2:
                            self._ended(name, "abort_transaction: %s" % e2.args[0])
                            return   # unknown; a new session
                        if not rewind():
                            self._ended(name, "committed offsets not read after an abort")
                            return
                        continue
                    self._ended(name, "in a transaction: %s" % err)
                    return   # fatal (fenced, ...): unknown; a new session
        except KafkaException as e:
            self._ended(name, "outside a transaction: %s" % e.args[0])
            return   # outside a transaction (init, begin, consume): a new session
        finally:
            try:
                p.flush(5)
                c.close()
            except Exception:
                pass


class GroupWorkload(Workload):
    """Consumer groups with commits: the idempotent producers, and ``MEMBERS`` confluent-kafka
    consumers of one group that commit (synchronously) the offsets after what each poll
    returned; one member leaves and rejoins every ``CHURN_S`` seconds so that partitions move;
    an observer reads the group's committed offsets every 0.5 s (OffsetFetch from a consumer that
    does not join).  Every assignment, poll, commit (acknowledged or failed) and observation is
    recorded.  Checked: commit-backward, commit-skip (see checker.py), and the usual ones."""

    live_consumer = False
    MEMBERS = 3
    CHURN_S = 8.0
    GROUP = "jepsen-group"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._members: list[threading.Thread] = []
        self._generation = 0

    def start(self) -> None:
        super().start()
        self._members += start_threads(self._member, self.MEMBERS)
        self._observer = threading.Thread(target=self._observe, daemon=True)
        self._observer.start()

    def stop(self) -> None:
        self._stop_producers()
        # the members read what the producers' last flush wrote and an observer reads the group's
        # offsets once after that; at most 5 s (a value the log lost is never read: the check
        # reports it)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and (self.unread() or self._commit_pending()):
            time.sleep(0.1)
        read_at = time.monotonic()
        while time.monotonic() < deadline and not self._observed_since(read_at):
            time.sleep(0.1)
        self._stop_consuming.set()
        for t in self._members + [self._observer]:
            t.join(120)

    def unread(self) -> int:
        """Acknowledged values no group member has polled yet."""
        with self.h._lock:
            sends = list(self.h.sends)
            polls = [p for p in self.h.polls if p.consumer.startswith("m")]
        seen = {v for p in polls for recs in p.records.values() for _o, v in recs}
        return sum(1 for s in sends if s.acked and s.value not in seen)

    def _commit_pending(self) -> bool:
        with self.h._lock:
            return any(c.ack_time is None for c in self.h.commits if not c.observed)

    def _observed_since(self, t: float) -> bool:
        with self.h._lock:
            return any(c.observed and c.time >= t for c in reversed(self.h.commits))

    def _member(self, i: int) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        h = self.h
        incarnation = 0
        while not self._stop_consuming.is_set():
            incarnation += 1
            name = "m%d.%d" % (i, incarnation)

            def assigned(consumer, parts, name=name):
                h.add(Assign(name, time.monotonic(), sorted(p.partition for p in parts), group=self.GROUP))

            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.GROUP, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                          "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
            # member 0 leaves and rejoins every CHURN_S: reassignments all along
            leave_at = time.monotonic() + self.CHURN_S if i == 0 else float("inf")
            try:
                c.subscribe([TOPIC], on_assign=assigned)
                while not self._stop_consuming.is_set() and time.monotonic() < leave_at:
                    msgs = [m for m in c.consume(200, 0.5) if not m.error()]
                    if not msgs:
                        continue
                    recs: dict = {}
                    for m in msgs:
                        recs.setdefault(m.partition(), []).append((m.offset(), m.value().decode()))
                    h.add(Poll(name, time.monotonic(), recs))
                    offsets = {part: rs[-1][0] + 1 for part, rs in recs.items()}
                    com = h.add(Commit(name, time.monotonic(), offsets, self.GROUP))
                    try:
                        c.commit(offsets=[TopicPartition(TOPIC, part, off) for part, off in offsets.items()],
                                 asynchronous=False)
                        com.ack_time = time.monotonic()
                    except KafkaException as e:
                        com.ack_time = time.monotonic()
                        com.error = e.args[0].name()
            except KafkaException as e:
                self.errors.append("%s: %s" % (name, e.args[0]))
            finally:
                try:
                    c.close()
                except Exception:
                    pass

    def _observe(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.GROUP, "enable.auto.commit": False,
                      "log_level": 2})
        tps = [TopicPartition(TOPIC, p) for p in range(self.partitions)]
        try:
            while not self._stop_consuming.wait(0.5):
                t = time.monotonic()
                try:
                    got = c.committed(tps, timeout=5)
                except KafkaException:
                    continue
                offsets = {tp.partition: tp.offset for tp in got if tp.offset >= 0 and not tp.error}
                if offsets:
                    self.h.add(Commit("observer", t, offsets, self.GROUP, ack_time=time.monotonic(), observed=True))
        finally:
            c.close()


def final_read(bootstrap: str, h: History, partitions: int, until: float, log=print,
               isolation: str = READ_UNCOMMITTED) -> int:
    """Read every partition from 0 to its end, recorded as polls of reader ``final-<k>``; again
    (a new reader) until every acknowledged value has been read since the heal or ``until``
    (monotonic) passes.  Returns the number of passes."""
    from confluent_kafka import Consumer, TopicPartition
    passes = 0
    while True:
        passes += 1
        name = "final-%d" % passes
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-" + name, "enable.auto.commit": False,
                      "enable.partition.eof": True, "auto.offset.reset": "earliest", "isolation.level": isolation,
                      "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
        try:
            ends = {}
            for p in range(partitions):
                while p not in ends and time.monotonic() < until:
                    try:
                        ends[p] = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
                    except Exception:
                        time.sleep(0.5)
            h.add(Assign(name, time.monotonic()))
            c.assign([TopicPartition(TOPIC, p, 0) for p in ends])
            done = {p for p, e in ends.items() if e == 0}
            while len(done) < len(ends) and time.monotonic() < until:
                msgs = c.consume(1000, 1.0)
                now = time.monotonic()
                recs: dict = {}
                for m in msgs:
                    if m.error():
                        if m.error().code() == -191 and m.offset() >= ends[m.partition()]:   # _PARTITION_EOF
                            done.add(m.partition())
                        continue
                    recs.setdefault(m.partition(), []).append((m.offset(), m.value().decode()))
                    if m.offset() + 1 >= ends[m.partition()]:
                        done.add(m.partition())
                if recs:
                    h.add(Poll(name, now, recs, isolation))
        finally:
            c.close()
        seen = set()
        for p in h.polls:
            if p.time >= (h.heal or 0):
                for recs in p.records.values():
                    seen.update(v for _o, v in recs)
        # acknowledged and visible: outside transactions, or in committed ones
        missing = [s.value for s in h.sends if s.acked and s.value not in seen
                   and (s.txn is None or (s.txn in h.txns and h.txns[s.txn].status == "committed"))]
        if not missing or time.monotonic() >= until:
            return passes
        log("final read %d: %d acknowledged value(s) not read yet (e.g. %s); again" % (passes, len(missing), missing[:3]))
        time.sleep(2.0)


def duplicated_positions(h: History) -> list[tuple[int, int]]:
    """The (partition, offset) positions of every value read at more than one position."""
    where: dict[str, set] = {}
    for p in h.polls:
        for part, recs in p.records.items():
            for off, value in recs:
                where.setdefault(value, set()).add((part, off))
    return sorted(pos for ps in where.values() if len(ps) > 1 for pos in ps)


def lookup_batches(bootstrap: str, h: History, topic: str = TOPIC, log=print) -> None:
    """``h.batches`` for the positions of duplicated values: the producer id, epoch and sequence
    of the record at each, from the batch headers a raw Fetch of the partition's leader returns
    there (the same request for either broker).  What cannot be read stays unknown (the
    duplicate then counts as one)."""
    from pykbroker.protocol import records as R
    from pykbroker.protocol import wire
    wanted = duplicated_positions(h)
    if not wanted:
        return
    seeds = [(hp.rsplit(":", 1)[0], int(hp.rsplit(":", 1)[1])) for hp in bootstrap.split(",")]
    leaders: dict[int, tuple[str, int]] = {}
    for seed in seeds:
        try:
            md = wire.metadata(seed, [topic])
        except OSError:
            continue
        nodes = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
        for part in md["topics"][0]["partitions"]:
            if part["leader_id"] in nodes:
                leaders[part["partition_index"]] = nodes[part["leader_id"]]
        break
    for part, off in wanted:
        leader = leaders.get(part)
        if leader is None:
            continue
        try:
            resp = wire.fetch(leader, topic, part, off, partition_max_bytes=256 << 10)
        except OSError as e:
            log("batch headers of %d@%d not read: %s" % (part, off, e))
            continue
        buf = wire.fetch_part(resp).get("records") or b""
        pos = 0
        while pos + R.HEADER_SIZE <= len(buf):
            hdr = R.parse_header(buf, pos)
            if hdr.base_offset <= off <= hdr.last_offset:
                seq = R.increment_sequence(hdr.base_sequence, off - hdr.base_offset)
                h.batches[(part, off)] = (hdr.producer_id, hdr.producer_epoch, seq)
                break
            pos += hdr.size
    log("batch headers of %d duplicated position(s): %s" % (len(wanted), {k: h.batches.get(k) for k in wanted}))


def workload_figures(h: History) -> dict:
    """Transactions by outcome, commits acknowledged / failed, observers' reads."""
    out: dict = {}
    if h.txns:
        for st in ("committed", "aborted", "unknown"):
            out["txn " + st] = sum(1 for t in h.txns.values() if t.status == st)
    commits = [c for c in h.commits if not c.observed]
    if commits:
        out["commits ok"] = sum(1 for c in commits if c.ok)
        out["commits failed"] = sum(1 for c in commits if c.error is not None)
        out["reassignments"] = sum(1 for a in h.assigns if a.group)
        out["observer reads"] = sum(1 for c in h.commits if c.observed)
    return out


# ---------------------------------------------------------------------------- a run
@dataclasses.dataclass
class RunReport:
    nemesis: str
    workload: str
    broker: str
    seconds: float
    faults: list
    result: Result
    final_passes: int = 0
    data_dir: Optional[str] = None
    errors: list = dataclasses.field(default_factory=list)

    figures: dict = dataclasses.field(default_factory=dict)   # the workload's own (transactions, commits)

    HEADER = ("| nemesis | workload | broker | s | faults | sent | acked | failed | lost | dup | anomalies | longest unavail s "
              "| produce p99 ms | workload figures |")
    RULE = "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

    def row(self) -> str:
        r = self.result
        anomalies = ", ".join("%s %d" % kv for kv in sorted(r.counts.items()) if kv[0] not in ("lost", "duplicate")) or "none"
        if r.client_duplicates:   # in the dup column too; named so the row says whose they are
            anomalies += "; client re-sends after an epoch bump %d" % r.client_duplicates
        lost = str(r.lost)
        if r.lost_spans:   # which partitions, sent when (s from the first send): see Result.lost_spans
            lost += " (%s)" % ", ".join("p%d %.1f-%.1f s" % tuple(sp[:3]) for sp in r.lost_spans)
        return "| %s | %s | %s | %.0f | %d | %d | %d | %d | %s | %d | %s | %.1f | %.0f | %s |" % (
            self.nemesis, self.workload, self.broker, self.seconds, len(self.faults), r.sent, r.acked, r.failed, lost, r.duplicated,
            anomalies, r.longest_unavailable, 1000 * r.p99,
            ", ".join("%s %s" % kv for kv in self.figures.items() if not isinstance(kv[1], list)) or "")


def run(nemesis: str, seconds: float = 60.0, fault_s: float = 20.0, quiet_s: float = 10.0,
        partitions: int = 3, producers: int = 2, rate: int = 200, bound: float = 60.0,
        session_timeout_ms: int = 6000, seed: int = 1, data_dir: Optional[str] = None,
        history_path: Optional[str] = None, log: Callable[[str], None] = print,
        workload: str = "idempotent", broker: str = "pykbroker",
        after: Optional[Callable[[object], dict]] = None) -> RunReport:
    """One run; ``broker="kafka"``: Apache Kafka 3.9 brokers in ZooKeeper mode in the same
    namespaces (same ZooKeeper, same settings), the oracle for every figure.  ``after(cluster)``,
    when given, is called once everything is read back, before the cluster stops; the figures it
    returns join the report's."""
    after_figures: dict = {}
    strike = NEMESES[nemesis]
    rnd = random.Random(seed)
    keep = data_dir is not None
    if keep and os.path.isdir(data_dir) and os.listdir(data_dir):
        # ZooKeeper's data would carry the last run's topic and broker state into this one
        raise ValueError("%s is not empty: a run needs a fresh directory" % data_dir)
    data_dir = data_dir or tempfile.mkdtemp(prefix="pykbroker-partitions-")
    overrides = {"zookeeper.session.timeout.ms": str(session_timeout_ms), "default.replication.factor": "3",
                 "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
                 "replica.lag.time.max.ms": "10000", "group.initial.rebalance.delay.ms": "0",
                 "unclean.leader.election.enable": "false"}
    if broker != "pykbroker" and nemesis in PYKBROKER_ONLY:
        raise ValueError("%s needs pykbroker's control endpoint (Apache Kafka's clock cannot be moved here)" % nemesis)
    h = History()
    faults: list = []
    # die_with_parent: a run killed outright leaves no broker or ZooKeeper running
    cluster = netns.cluster(3, data_dir, overrides=overrides, die_with_parent=True)
    net = cluster.net
    if nemesis in PYKBROKER_ONLY:
        for b in cluster.brokers:
            b.control_port = 0   # serve --control on the broker's namespace address
    ctx = NemesisContext(cluster, session_timeout_ms / 1000.0,
                         ports={"zk": netns.ZK_PORT, **{_node(b.broker_id): b.port for b in cluster.brokers}})
    if broker in ("kafka", "kafka4"):
        version = KAFKA_ZK_VERSION if broker == "kafka" else KAFKA_KRAFT_VERSION
        libs = kafka_libs(version)
        if libs is None:
            cluster.close()
            raise RuntimeError("Apache Kafka %s jars not found: python compat/kafka/oracle.py fetch --version %s"
                               % (version, version))
        node_cls = _kafka_node_class() if broker == "kafka" else _kafka_kraft_node_class()
        if broker == "kafka4":
            node_cls.voters = ",".join("%d@%s:%d" % (b.broker_id, b.host, KRAFT_CONTROLLER_PORT)
                                       for b in cluster.brokers)
            # KRaft's broker session (heartbeats to the controller quorum) stands for the
            # ZooKeeper session of the other two: the same length
            overrides["broker.session.timeout.ms"] = str(session_timeout_ms)
            overrides["broker.heartbeat.interval.ms"] = str(min(2000, session_timeout_ms // 3))
        kafka_nodes = []
        for b in cluster.brokers:
            k = node_cls(b.broker_id, b.data_dir, None, dict(b.overrides, **overrides))
            k.host, k.launcher, k.port, k.libs = b.host, b.launcher, b.port, libs
            k.die_with_parent = True
            kafka_nodes.append(k)
        cluster.brokers = kafka_nodes
    try:
        cluster.start()
        if broker != "kafka4":   # KRaft brokers register with their controllers, not in ZooKeeper
            cluster.wait_registered()
        # Kafka's ZooKeeper-mode brokers take CreateTopics only on the controller
        first = cluster.broker(controller_of(cluster) or 1)
        with wire.WireClient((first.host, first.port)) as c:
            r = c.request(19, 5, {"topics": [{"name": TOPIC, "num_partitions": partitions, "replication_factor": 3,
                                              "assignments": [], "configs": []}],
                                  "timeout_ms": 30000, "validate_only": False})
            assert r["topics"][0]["error_code"] == 0, r
            wire.wait_for_topic(c, TOPIC, partitions, timeout=30)
        log("cluster up in namespaces (%s); ZooKeeper %s" % (cluster.bootstrap_servers, cluster.zookeeper_connect))
        cls = {"txn": TxnWorkload, "group": GroupWorkload}.get(workload, Workload)
        load = cls(cluster.bootstrap_servers, h, producers, rate, partitions, workload=workload)
        load.start()
        t0 = time.monotonic()
        t_end = t0 + seconds
        time.sleep(min(5.0, seconds / 4))
        try:
            while time.monotonic() + 1.0 < t_end:
                leader = leader_of(cluster, 0)
                if leader is None:
                    time.sleep(1.0)
                    continue
                others = [b.broker_id for b in cluster.brokers if b.broker_id != leader]
                t_fault = time.monotonic()
                ctx.until = min(t_fault + fault_s, t_end)
                ctx.events = []
                ctx.fault_s = ctx.until - t_fault
                desc = strike(net, leader, others, rnd, ctx)
                log("t=%.1f fault: %s" % (t_fault - t0, desc))
                time.sleep(max(0.0, ctx.until - time.monotonic()))
                ctx.heal(net)
                if ctx.events and nemesis not in LASTING:   # what the heal did (a restart)
                    desc += "; heal: " + "; ".join(ctx.events)
                faults.append((round(t_fault - t0, 1), round(time.monotonic() - t0, 1), desc))
                log("t=%.1f healed" % (time.monotonic() - t0))
                time.sleep(max(0.0, min(quiet_s, t_end - time.monotonic())))
        finally:
            ctx.heal(net)
            h.heal = time.monotonic()
        load.stop()
        log("workload stopped (%.1f s after the heal); final read" % (time.monotonic() - h.heal))
        passes = final_read(cluster.bootstrap_servers, h, partitions, h.heal + bound + 30, log=log,
                            isolation=READ_COMMITTED if workload == "txn" else READ_UNCOMMITTED)
        lookup_batches(cluster.bootstrap_servers, h, log=log)
        if after is not None:   # the caller's look at the healed cluster, before it stops
            after_figures = after(cluster)
    finally:
        cluster.stop_all()
        net.close()
    result = check(h, bound=bound)
    if history_path:
        os.makedirs(os.path.dirname(os.path.abspath(history_path)), exist_ok=True)
        with open(history_path, "w") as fh:
            json.dump(h.to_dict(), fh)
    report = RunReport(nemesis, workload, broker, seconds, faults, result, passes, data_dir if keep or not result.ok else None,
                       load.errors, workload_figures(h))
    if result.acked_without_offset:
        report.figures["acked without offset"] = result.acked_without_offset
    report.figures.update(ctx.figures)
    report.figures.update(after_figures)
    if isinstance(load, TxnWorkload):
        report.figures.update(load.figures(t0))
    if result.ok and not keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return report


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Network partitions (namespaces + iptables) against a 3-broker "
                                             "pykbroker cluster, histories checked (compat/chaos/checker.py).")
    ap.add_argument("nemeses", nargs="*", default=list(NEMESES), help="of: %s" % ", ".join(NEMESES))
    ap.add_argument("--seconds", type=float, default=120.0, help="length of each run (default 120)")
    ap.add_argument("--fault", type=float, default=20.0, help="seconds each fault lasts (default 20)")
    ap.add_argument("--quiet", type=float, default=10.0, help="seconds between faults (default 10)")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--broker", default="pykbroker", choices=["pykbroker", "kafka", "kafka4", "both", "all"],
                    help="kafka: Apache Kafka %s in ZooKeeper mode in the same namespaces (the oracle); "
                         "kafka4: Apache Kafka %s in KRaft mode (each broker also a controller); "
                         "both: each run on pykbroker, then on Kafka %s; all: on the three"
                         % (KAFKA_ZK_VERSION, KAFKA_KRAFT_VERSION, KAFKA_ZK_VERSION))
    ap.add_argument("--workload", action="append", choices=WORKLOADS,
                    help="idempotent (acks=all, idempotent producers; the default), acks1 (acks=1: "
                         "losses expected, as with Kafka), txn (transactional consume-transform-produce, "
                         "read_committed), group (a consumer group committing); repeat for several")
    ap.add_argument("--rate", type=int, default=200, help="records/s per producer (default 200)")
    ap.add_argument("--bound", type=float, default=60.0,
                    help="seconds after the heal by which everything acknowledged must be readable")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None, help="directory for the table (results.md) and per-run JSON")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="keep every run's cluster (ZooKeeper and broker logs, data) under DIR/<nemesis>; "
                         "without it a run's directory is kept only when it found an anomaly")
    ap.add_argument("--histories", default=None, help="directory for each run's whole history (JSON, large)")
    args = ap.parse_args(argv)
    why = netns.unavailable()
    if why:
        print("cannot run: %s" % why)
        return 2
    import signal

    def stop(signum, frame):
        # unwind through run()'s clean-up: servers stopped, namespaces and bridge removed
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    reports = []
    brokers = {"both": ["pykbroker", "kafka"], "all": ["pykbroker", "kafka", "kafka4"]}.get(args.broker, [args.broker])
    for n, w, br in [(n, w, br) for n in args.nemeses for w in (args.workload or ["idempotent"]) for br in brokers]:
        if br != "pykbroker" and n in PYKBROKER_ONLY:
            print("[%s-%s-kafka] skipped: Apache Kafka's clock cannot be moved here (no control endpoint)" % (n, w))
            continue
        tag = "%s-%s-%s" % (n, w, br)
        hist = os.path.join(args.histories, "history-%s.json" % tag) if args.histories else None
        rep = run(n, args.seconds, args.fault, args.quiet, producers=args.producers, rate=args.rate,
                  bound=args.bound, seed=args.seed, history_path=hist,
                  data_dir=os.path.join(args.keep, tag) if args.keep else None, workload=w, broker=br,
                  log=lambda m, tag=tag: print("[%s] %s" % (tag, m), flush=True))
        reports.append(rep)
        print(RunReport.HEADER)
        print(rep.row(), flush=True)
        for kind, ex in list(rep.result.anomalies.items()) + list(rep.result.client_anomalies.items()):
            for e in ex[:5]:
                print("    %s: %s" % (kind, e))
        for e in rep.errors[:10]:
            print("    workload: %s" % e)
        for e in rep.figures.get("ctp last session ends", []):
            print("    session ended: %s" % e)
        if rep.data_dir:
            print("    logs kept in %s" % rep.data_dir)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "run-%s.json" % tag), "w") as fh:
                json.dump({"nemesis": n, "workload": w, "broker": br, "seconds": rep.seconds, "faults": rep.faults,
                           "figures": rep.figures,
                           "result": dataclasses.asdict(rep.result), "final_passes": rep.final_passes,
                           "errors": rep.errors}, fh, indent=1)
    print()
    print(RunReport.HEADER)
    print(RunReport.RULE)
    for rep in reports:
        print(rep.row())
    if args.out:
        with open(os.path.join(args.out, "results.md"), "w") as fh:
            fh.write("%s\n%s\n" % (RunReport.HEADER, RunReport.RULE))
            for rep in reports:
                fh.write(rep.row() + "\n")
    # acks=1 loses what an isolated leader acknowledged alone (Kafka too): counted, not failed
    return 0 if all(r.result.ok for r in reports if r.workload == "idempotent" and r.broker == "pykbroker") else 1


if __name__ == "__main__":
    sys.exit(main())
