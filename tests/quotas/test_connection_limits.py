"""max.connections.per.ip (and its overrides) and max.connections, enforced at accept time as
Kafka's ConnectionQuotas: over the per-IP limit a new connection is closed at once; at the
broker-wide limit a new connection is not served until another one closes."""
import select
import socket
import time

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import WireClient, call

API_VERSIONS = {"client_software_name": "limits", "client_software_version": "1"}


def _answered(c: WireClient) -> bool:
    return c.request(18, 3, API_VERSIONS)["error_code"] == 0


def _settled(b, n: int) -> None:
    """Wait until the broker counts ``n`` open connections (a client's close reaches it a moment
    after the client returns)."""
    q = b.broker.connection_quotas
    deadline = time.monotonic() + 10
    while q.total != n:
        assert time.monotonic() < deadline, q.per_ip
        time.sleep(0.01)


def _closed_at_once(b) -> bool:
    c = WireClient(b, timeout=5)
    try:
        return c.closed_after(18, 3, API_VERSIONS)
    finally:
        c.close()


@pytest.fixture
def broker(tmp_path, request):
    b = pykbroker.Broker(log_dir=str(tmp_path), config={**TEST_CONFIG, **request.param}).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.mark.parametrize("broker", [{"max.connections.per.ip": "2"}], indirect=True)
def test_max_connections_per_ip_closes_the_extra_connection(broker):
    with WireClient(broker) as a, WireClient(broker) as b:
        assert _answered(a) and _answered(b)
        assert _closed_at_once(broker)          # the third from 127.0.0.1
        assert _answered(a) and _answered(b)    # the others are untouched
    # once they are closed, new ones are served again
    _settled(broker, 0)
    with WireClient(broker) as c:
        assert _answered(c)
    assert broker.broker.connection_quotas.rejected == 1
    # the override for this address (a dynamic broker config) lifts the limit to 3
    r = call(broker, 44, 1, {"validate_only": False, "resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": "max.connections.per.ip.overrides", "config_operation": 0, "value": "127.0.0.1:3"}]}]})
    assert [x["error_code"] for x in r["responses"]] == [0]
    _settled(broker, 0)
    with WireClient(broker) as a, WireClient(broker) as b, WireClient(broker) as c:
        assert _answered(a) and _answered(b) and _answered(c)
        assert _closed_at_once(broker)          # the fourth
    assert broker.broker.connection_quotas.rejected == 2


@pytest.mark.parametrize("broker", [{"max.connections": "2"}], indirect=True)
def test_max_connections_holds_the_extra_connection_until_one_closes(broker):
    a, b = WireClient(broker), WireClient(broker)
    try:
        assert _answered(a) and _answered(b)
        with WireClient(broker, timeout=0.5) as c:
            corr = c.send(18, 3, API_VERSIONS)
            with pytest.raises(socket.timeout):
                c.recv_frame()                  # not served while two are open
            a.close()
            c.settimeout(10)
            assert c.recv(18, 3, corr)["error_code"] == 0   # served once a slot frees
    finally:
        a.close()
        b.close()


def test_overrides_parse_as_kafka():
    from pykbroker.quota.connections import parse_overrides, validate_overrides
    assert parse_overrides("") == {}
    # addresses as they are, host names resolved (InetAddress.getByName); the last of a host wins
    assert parse_overrides("127.0.0.1:200, localhost:5,::1:7") == {"127.0.0.1": 5, "::1": 7}
    # a value Kafka's KafkaConfig refuses is refused whole, with its message
    for raw, why in (("127.0.0.1:3,nonsense", "Error parsing configuration property "
                      "'max.connections.per.ip.overrides': begin 0, end -1, length 8"),
                     ("127.0.0.1:3,10.0.0.1:x", 'For input string: "x"'),
                     ("10.0.0.1:", 'For input string: ""'),
                     ("a b:1,[::1]:2", "max.connections.per.ip.overrides contains invalid addresses : a b,[::1]")):
        with pytest.raises(ValueError) as e:
            validate_overrides(raw)
        assert str(e.value) == why


def test_malformed_overrides_refused_at_start_up(tmp_path):
    import subprocess
    import sys
    from pykbroker.config import ConfigError
    with pytest.raises(ConfigError, match='For input string: "many"'):
        pykbroker.Broker(log_dir=str(tmp_path), config={
            **TEST_CONFIG, "max.connections.per.ip.overrides": "127.0.0.1:many"}).start()
    # a host that does not resolve stops the start too (Kafka: UnknownHostException)
    with pytest.raises(ConfigError, match="unknown host"):
        pykbroker.Broker(log_dir=str(tmp_path), config={
            **TEST_CONFIG, "max.connections.per.ip.overrides": "no-such-host.invalid:3"}).start()
    # the command line refuses to start, with Kafka's message
    r = subprocess.run([sys.executable, "-m", "pykbroker", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(tmp_path / "cli"),
                        "--override", "max.connections.per.ip.overrides=127.0.0.1:2,oops"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "Error parsing configuration property 'max.connections.per.ip.overrides'" in r.stderr + r.stdout


@pytest.mark.parametrize("broker", [{"max.connections.per.ip": "2"}], indirect=True)
def test_malformed_overrides_refused_by_alter_configs(broker):
    """confluent-kafka's AdminClient: a malformed value is refused whole (INVALID_REQUEST with
    Kafka's message, as its broker's ConfigAdminManager answers), the current overrides stay."""
    ck = pytest.importorskip("confluent_kafka.admin")
    admin = ck.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = ck.ConfigResource(ck.ResourceType.BROKER, "1")

    def alter(value):
        res = ck.ConfigResource(ck.ResourceType.BROKER, "1", incremental_configs=[
            ck.ConfigEntry("max.connections.per.ip.overrides", value,
                           incremental_operation=ck.AlterConfigOpType.SET)])
        return admin.incremental_alter_configs([res])[res].result(10)

    alter("127.0.0.1:3")
    for bad in ("127.0.0.1:4,oops", "127.0.0.1:x"):
        with pytest.raises(Exception) as e:
            alter(bad)
        err = e.value.args[0]
        print("refused %r: %s %s" % (bad, err.name(), err.str()))
        assert err.name() == "INVALID_REQUEST"
    # Apache Kafka 4.4 answers the same per broker, but stores such a value as the cluster
    # default (its controller does not run KafkaConfig's checks); the broker then keeps what it had
    r = call(broker, 44, 1, {"validate_only": False, "resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": "max.connections.per.ip.overrides", "config_operation": 0, "value": "127.0.0.1:x"}]}]})
    assert r["responses"][0]["error_code"] == 0
    got = admin.describe_configs([res])[res].result(10)["max.connections.per.ip.overrides"].value
    assert got == "127.0.0.1:3"
    del admin
    import gc
    gc.collect()   # the AdminClient's connections close
    _settled(broker, 0)
    with WireClient(broker) as a, WireClient(broker) as b, WireClient(broker) as c:
        assert _answered(a) and _answered(b) and _answered(c)   # the override of 3 holds
        assert _closed_at_once(broker)


@pytest.mark.parametrize("broker", [{"connections.max.idle.ms": "400"}], indirect=True)
def test_idle_connection_closed_by_the_broker(broker):
    """connections.max.idle.ms=400: a raw socket that sends nothing is closed by the broker; one
    that keeps talking is not."""
    host, port = broker.bootstrap_servers.split(":")
    idle = socket.create_connection((host, int(port)))
    idle.settimeout(10)
    t0 = time.monotonic()
    closed_after = None
    with WireClient(broker) as busy:
        while time.monotonic() - t0 < 1.5:
            assert _answered(busy)          # active: kept
            if closed_after is None and _readable(idle, 0.1):
                assert idle.recv(1) == b""  # closed by the broker
                closed_after = time.monotonic() - t0
        assert _answered(busy)
    print("idle connection closed after %.2f s (connections.max.idle.ms=400)" % closed_after)
    assert closed_after is not None and closed_after >= 0.4
    assert broker.broker.connection_quotas.idle_closed >= 1
    idle.close()


def test_idle_time_per_listener(tmp_path):
    """listener.name.<l>.connections.max.idle.ms overrides the broker's value for one listener."""
    cfg = {**TEST_CONFIG, "listeners": "FAST://127.0.0.1:0,SLOW://127.0.0.1:0",
           "listener.security.protocol.map": "FAST:PLAINTEXT,SLOW:PLAINTEXT", "inter.broker.listener.name": "SLOW",
           "listener.name.fast.connections.max.idle.ms": "300"}
    with pykbroker.Broker(log_dir=str(tmp_path), config=cfg) as b:
        ports = {li.name: li.port for li in b.broker.bound}
        fast = socket.create_connection(("127.0.0.1", ports["FAST"]))
        slow = socket.create_connection(("127.0.0.1", ports["SLOW"]))
        fast.settimeout(10)
        slow.settimeout(1.5)
        assert fast.recv(1) == b""                  # FAST: closed after 300 ms
        with pytest.raises(socket.timeout):
            slow.recv(1)                            # SLOW: the default 10 minutes
        fast.close()
        slow.close()


def _set_broker_configs(b, **configs):
    r = call(b, 44, 1, {"validate_only": False, "resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in configs.items()]}]})
    return r["responses"][0]


def test_listener_max_connections(tmp_path):
    """listener.name.<l>.max.connections: the listener's extra connection waits for a slot, the
    other listener is not limited; set statically, then changed at run time."""
    cfg = {**TEST_CONFIG, "listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
           "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT", "inter.broker.listener.name": "B",
           "listener.name.a.max.connections": "1"}
    with pykbroker.Broker(log_dir=str(tmp_path), config=cfg) as b:
        ports = {li.name: li.port for li in b.broker.bound}
        a1 = WireClient(("127.0.0.1", ports["A"]))
        try:
            assert _answered(a1)
            with WireClient(("127.0.0.1", ports["A"]), timeout=0.5) as a2, \
                    WireClient(("127.0.0.1", ports["B"])) as b1, WireClient(("127.0.0.1", ports["B"])) as b2:
                corr = a2.send(18, 3, API_VERSIONS)
                with pytest.raises(socket.timeout):
                    a2.recv_frame()                 # A is at its limit of 1
                assert _answered(b1) and _answered(b2)
                # raised at run time for this broker: the waiting connection is served
                r = call(("127.0.0.1", ports["B"]), 44, 1, {"validate_only": False, "resources": [
                    {"resource_type": 4, "resource_name": "1", "configs": [
                        {"name": "listener.name.a.max.connections", "config_operation": 0, "value": "2"}]}]})
                assert r["responses"][0]["error_code"] == 0
                a2.settimeout(10)
                assert a2.recv(18, 3, corr)["error_code"] == 0
            # a bad value is refused
            r = call(("127.0.0.1", ports["B"]), 44, 1, {"validate_only": False, "resources": [
                {"resource_type": 4, "resource_name": "1", "configs": [
                    {"name": "listener.name.a.max.connections", "config_operation": 0, "value": "-1"}]}]})
            # Kafka's answer names the plain key (checked against Apache Kafka 4.4)
            assert (r["responses"][0]["error_code"], r["responses"][0]["error_message"]) == (
                42, "Invalid value -1 for configuration max.connections: Value must be at least 0")
        finally:
            a1.close()


@pytest.mark.parametrize("broker", [{"max.connection.creation.rate": "2", "quota.window.num": "2"}], indirect=True)
def test_broker_connection_creation_rate(broker):
    """max.connection.creation.rate=2 (windows of 1 s, 2 samples): connections beyond 2 a second
    are accepted late, not refused (Kafka's acceptor waits); measured, printed."""
    ck = pytest.importorskip("confluent_kafka.admin")
    q = broker.broker.connection_quotas
    t0 = time.monotonic()
    clients = []
    for _ in range(5):
        c = WireClient(broker, timeout=10)
        assert _answered(c)                 # every one is served
        clients.append(c)
    elapsed = time.monotonic() - t0
    for c in clients:
        c.close()
    # and a real client still connects and works under the limit
    md = ck.AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=15)
    print("5 connections at max.connection.creation.rate=2 took %.2f s; acceptor throttled %d times"
          % (elapsed, q.creation_throttled))
    assert q.creation_throttled >= 1 and elapsed >= 0.5
    assert md.brokers


def test_inter_broker_listener_makes_room_at_max_connections(tmp_path):
    """max.connections=2 with two listeners: a connection on the inter-broker listener is accepted
    over the limit and the least recently used connection of the other listener is closed."""
    cfg = {**TEST_CONFIG, "listeners": "CLIENT://127.0.0.1:0,REPL://127.0.0.1:0",
           "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPL:PLAINTEXT", "inter.broker.listener.name": "REPL",
           "max.connections": "2"}
    with pykbroker.Broker(log_dir=str(tmp_path), config=cfg) as b:
        ports = {li.name: li.port for li in b.broker.bound}
        old = WireClient(("127.0.0.1", ports["CLIENT"]), timeout=5)
        recent = WireClient(("127.0.0.1", ports["CLIENT"]), timeout=5)
        try:
            assert _answered(old)
            time.sleep(0.05)
            assert _answered(recent)         # `old` is now the least recently used
            with WireClient(("127.0.0.1", ports["REPL"]), timeout=5) as repl:
                assert _answered(repl)       # over the limit, on the inter-broker listener
                assert old.closed_after(18, 3, API_VERSIONS)   # closed to make room
                assert _answered(recent)
            assert b.broker.connection_quotas.lru_closed == 1
        finally:
            old.close()
            recent.close()


@pytest.mark.parametrize("broker", [{"quota.window.num": "2"}], indirect=True)
def test_connection_creation_rate_of_an_ip_entity(broker):
    """connection_creation_rate=2 on 127.0.0.1 (quota windows of 1 s, 2 samples): the connection
    that takes the address over 2 a second is closed, after the throttle time, unserved."""
    r = call(broker, 49, 1, {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}],
         "ops": [{"key": "connection_creation_rate", "value": 2.0, "remove": False}]}]})
    assert [e["error_code"] for e in r["entries"]] == [0]
    # (the AlterClientQuotas connection came before the quota: not counted)
    q = broker.broker.connection_quotas
    served, closed = [], []
    for _ in range(4):
        c = WireClient(broker, timeout=5)
        t0 = time.monotonic()
        try:
            if c.closed_after(18, 3, API_VERSIONS):
                closed.append(time.monotonic() - t0)
            else:
                served.append(c)
        except Exception:
            served.append(c)
    try:
        assert closed and q.throttled >= 1
        # Kafka's delayed close: at least the throttle time, at most one window (1 s)
        assert all(0.1 <= d for d in closed)
    finally:
        for c in served:
            c.close()
    time.sleep(2.1)   # this address stays over its rate until its samples expire (2 windows)
    r = call(broker, 49, 1, {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}],
         "ops": [{"key": "connection_creation_rate", "value": 0.0, "remove": True}]}]})
    assert [e["error_code"] for e in r["entries"]] == [0]
    assert q.ip_rates == {}


def _readable(sock, timeout: float) -> bool:
    """poll(), not select(): by this point of a whole-suite run the process may hold more than
    1,024 descriptors, which select() cannot watch."""
    import select as _select
    p = _select.poll()
    p.register(sock, _select.POLLIN | _select.POLLHUP | _select.POLLERR)
    return bool(p.poll(timeout * 1000))
