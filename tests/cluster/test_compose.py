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


def configs(svc) -> dict:
    """The broker configs the image's entrypoint makes of the service's KAFKA_* variables."""
    from pykbroker.container import env_config
    return env_config({k: str(v) for k, v in svc["environment"].items()})


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
        conf = configs(svc)
        assert conf["broker.id"] == str(n) and conf["zookeeper.connect"] == "zookeeper:2181"
        assert "command" not in svc
        # INTERNAL (the service name) between brokers and for containers; EXTERNAL published on
        # the host under its own port and advertised as localhost there
        # (tests/containers checks each listener's addresses)
        assert conf["inter.broker.listener.name"] == "INTERNAL"
        external = dict(item.split("://") for item in conf["advertised.listeners"].split(","))["EXTERNAL"]
        port = external.rsplit(":", 1)[1]
        assert external == "localhost:%s" % port
        assert svc["ports"] == ["%s:%s" % (port, port)]
        seen_ports.add(port)
        assert svc["healthcheck"]["test"][1:] == ["pykbroker", "healthcheck"]
        vol, mount = svc["volumes"][0].split(":")
        assert mount == "/var/lib/pykbroker" and vol in compose["volumes"]
    assert len(seen_ports) == 3
    assert len({s["volumes"][0] for s in brokers.values()}) == 3    # a volume each
    for v in zk["volumes"]:
        assert v.split(":")[0] in compose["volumes"]
