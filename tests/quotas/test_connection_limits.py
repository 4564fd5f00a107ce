"""max.connections.per.ip (and its overrides) and max.connections, enforced at accept time as
Kafka's ConnectionQuotas: over the per-IP limit a new connection is closed at once; at the
broker-wide limit a new connection is not served until another one closes."""
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
    from pykbroker.quota.connections import parse_overrides
    assert parse_overrides("") == {}
    # addresses as they are, host names resolved (InetAddress.getByName), bad entries ignored
    assert parse_overrides("127.0.0.1:200, localhost:5,[::1]:7,nonsense,10.0.0.1:x") == {
        "127.0.0.1": 5, "::1": 7}


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
