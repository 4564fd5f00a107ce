"""The Go and Node clients' ACL admin scenarios (tests/go/test_go_acls.py,
tests/node/test_node_acls.py: franz-go's kadm, sarama's ClusterAdmin, kafka-go's Client,
kafkajs's admin) on a 3-broker pykbroker cluster (ZooKeeper + 3 brokers) with the authorizer on
and ``super.users=User:ANONYMOUS``.

On a cluster the bindings live in ZooKeeper: the broker a client's CreateAcls or DeleteAcls
reaches writes them there, and every other broker learns the change from its change
notification, a moment later (Kafka's AclAuthorizer alike).  The clients' describes may reach
any broker, one that has not learned the change yet: after the create run and after the delete
run every broker is asked directly (a raw DescribeAcls each, until it shows the phase's bindings
or 15 s pass), each must hold exactly the five bindings, then none, and only then does the client
describe, in a run of its own (``describe`` phase), whose report stands for the phase's
describes; confluent-kafka's view must agree.  The reports are judged as on one broker
(tests/client_acls.check_acl_reports).

One cluster for the module (~10 s to start), one test per client, about 20 s in all.  A missing Go toolchain or Node package skips that client (a failure under CI=true for
Node); no ZooKeeper skips the module."""
from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from tests import needs
from tests.client_acls import (AUTH, GO_INVALID, broker_bindings, check_acl_reports, confluent_bindings,
                               expected_bindings)
from tests.client_brokers import CLUSTER_OVERRIDES
from tests.go import gobuild

needs.module("confluent_kafka.admin")
needs.module("kazoo.client")

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster
    with Cluster(3, str(tmp_path_factory.mktemp("acl-clients-cluster")), overrides={**CLUSTER_OVERRIDES, **AUTH},
                 zk_tick_time=500) as c:
        yield c


def _every_broker(cluster, prefix, want, timeout=15.0):
    """{broker id: its bindings of the run}, once each shows ``want`` or ``timeout`` passed."""
    deadline, seen = time.monotonic() + timeout, {}
    for i in (1, 2, 3):
        b = cluster.broker(i)
        while True:
            seen[i] = broker_bindings((b.host, b.port), prefix)
            if seen[i] == want or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    return seen


def _go_phase(gobin, client, prefix):
    return lambda bs, phase: gobuild.run(gobin / client, bs, "acls", wait=60, prefix=prefix, acl_phase=phase)


def _node_phase(prefix):
    from tests.node import noderun
    noderun.require()

    def run(bootstrap, phase):
        args = [noderun.node_binary(), "acls.js", "--brokers", bootstrap, "--prefix", prefix, "--phase", phase]
        r = subprocess.run(args, cwd=noderun.PACKAGE, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, "%s exited %d:\n%s" % (" ".join(args), r.returncode, r.stderr[-4000:])
        return json.loads(r.stdout)
    return run


def _scenario(cluster, run_phase, prefix, invalid):
    """The create and delete runs, each followed, once every broker shows what it left, by a
    describe run whose describes stand for the run's own (those may have reached a broker that
    had not learned the change yet)."""
    bs = cluster.bootstrap_servers
    every = sorted(expected_bindings(prefix).values())
    create = run_phase(bs, "create")
    brokers_between = _every_broker(cluster, prefix, every)
    create["described"] = run_phase(bs, "describe")["described"]
    between = confluent_bindings(bs, prefix)
    delete = run_phase(bs, "delete")
    brokers_after = _every_broker(cluster, prefix, [])
    delete["described"] = run_phase(bs, "describe")["described"]
    check_acl_reports(create, delete, prefix, between, confluent_bindings(bs, prefix), invalid)
    assert brokers_between == {1: every, 2: every, 3: every}, brokers_between
    assert brokers_after == {1: [], 2: [], 3: []}, brokers_after


@pytest.fixture(scope="module")
def gobin(tmp_path_factory):
    return gobuild.build_for_module(tmp_path_factory)


@pytest.mark.parametrize("client", ["franzgo", "sarama", "kafkago"])
def test_go_client_acls_on_the_cluster(cluster, gobin, client):
    prefix = "c%sacl%s" % (client[:2], uuid.uuid4().hex[:6])
    _scenario(cluster, _go_phase(gobin, client, prefix), prefix,
              [part.replace("%s", prefix) for part in GO_INVALID[client]])


def test_kafkajs_acls_on_the_cluster(cluster):
    prefix = "cjsacl%s" % uuid.uuid4().hex[:6]
    _scenario(cluster, _node_phase(prefix), prefix, ["KafkaJSProtocolError INVALID_REQUEST"])
