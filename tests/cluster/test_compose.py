"""docker-compose.yml's `cluster` profile, read statically (the suite assumes no Docker engine):
ZooKeeper 3.8 + 3 brokers built from ./Dockerfile, wired together the way `cluster up` does."""
import os

import pytest

from tests import needs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def compose():
    yaml = needs.module("yaml", "PyYAML (the test extra): docker-compose.yml not parsed")
    with open(os.path.join(ROOT, "docker-compose.yml")) as fh:
        return yaml.safe_load(fh)


def overrides(svc) -> dict:
    cmd = svc["command"]
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--override")


def test_cluster_profile(compose):
    services = compose["services"]
    assert "profiles" not in services["pykbroker"]          # `docker compose up` unchanged
    zk = services["zookeeper"]
    assert zk["profiles"] == ["cluster"] and zk["image"] == "zookeeper:3.8"
    assert "srvr" in zk["environment"]["ZOO_4LW_COMMANDS_WHITELIST"]   # its healthcheck's command
    assert zk["healthcheck"]["test"][1:] == ["zkServer.sh", "status"]
    brokers = {n: s for n, s in services.items() if n.startswith("broker-")}
    assert sorted(brokers) == ["broker-1", "broker-2", "broker-3"]
    seen_ports = set()
    for name, svc in brokers.items():
        n = int(name.split("-")[1])
        assert svc["profiles"] == ["cluster"]
        assert os.path.samefile(os.path.join(ROOT, svc["build"]["context"], svc["build"]["dockerfile"]),
                                os.path.join(ROOT, "Dockerfile"))
        assert svc["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        ov = overrides(svc)
        assert ov == {"broker.id": str(n), "zookeeper.connect": "zookeeper:2181"}
        env = svc["environment"]
        port = env["PYKBROKER_LISTENERS"].rsplit(":", 1)[1]
        # one listener for clients and brokers alike: the service name, the published port
        assert env["PYKBROKER_ADVERTISED_LISTENERS"] == "PLAINTEXT://%s:%s" % (name, port)
        assert svc["ports"] == ["%s:%s" % (port, port)]
        seen_ports.add(port)
        assert svc["healthcheck"]["test"][1:] == ["pykbroker", "healthcheck"]
        vol, mount = svc["volumes"][0].split(":")
        assert mount == "/var/lib/pykbroker" and vol in compose["volumes"]
    assert len(seen_ports) == 3
    assert len({s["volumes"][0] for s in brokers.values()}) == 3    # a volume each
    for v in zk["volumes"]:
        assert v.split(":")[0] in compose["volumes"]
