"""The Go and Node clients' ACL admin scenarios (tests/go/test_go_acls.py,
tests/node/test_node_acls.py) against Apache Kafka 4.4 and pykbroker, both with StandardAuthorizer
on and ``super.users=User:ANONYMOUS`` (the clients come in on PLAINTEXT): franz-go's kadm, sarama's
ClusterAdmin, kafka-go's Client (compat/go/cmd/*/acls.go) and kafkajs's admin (compat/node/acls.js)
create LITERAL and PREFIXED topic and group bindings, ALLOW and DENY, and one Kafka refuses (a
principal without its type), describe them with four filters, then, in a second run, delete them
with MATCH filters and describe again; confluent-kafka's describe_acls looks at the bindings
between and after the runs.

Observations compared, the same run prefix on both brokers: every binding the client reports
created, described and deleted, every error it reports (the refused creation's, in the client's
words with Kafka's message where the client keeps it), and confluent-kafka's two views.  They must
be equal and also right (tests/client_acls.check_acl_reports), so an answer wrong alike on both
sides still fails.

Kafka's broker applies ACL changes from its metadata log a moment after the controller answered:
each scenario describes only once the run's bindings are what its phase left, looking every 50 ms
for at most 15 s (scen.ACLSettle in compat/go, the same loop in acls.js), the same steps against
either broker; pykbroker's first look settles.

One pykbroker for the module, the authorizer Kafka shared with test_acls.py; each client's two sides run side by side.  About
12 s, the Kafka start included.  A missing oracle fails; a missing Go toolchain or Node package
skips that client's test (a failure under CI=true for Node)."""
from __future__ import annotations

import json
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import needs
from tests.client_acls import GO_INVALID, authorizer_broker, check_acl_reports, confluent_bindings
from tests.go import gobuild

from .helpers import explain

needs.module("confluent_kafka.admin")


@pytest.fixture(scope="module")
def sides(tmp_path_factory, kafka_authorizer):
    """{"pykbroker": bootstrap, "kafka": bootstrap}, both with the authorizer on (the Kafka shared
    with test_acls.py, conftest.py: no binding on it)."""
    with authorizer_broker(tmp_path_factory, "pyk-client-acls") as b:
        yield {"pykbroker": b.bootstrap_servers, "kafka": kafka_authorizer.bootstrap}


@pytest.fixture(scope="module")
def gobin(tmp_path_factory):
    return gobuild.build_for_module(tmp_path_factory)


def _both(sides, run_phase, prefix):
    """Both brokers at once: {"create", "between", "delete", "after"} of each."""
    def observe(bootstrap):
        create = run_phase(bootstrap, "create")
        between = confluent_bindings(bootstrap, prefix)
        delete = run_phase(bootstrap, "delete")
        return {"create": create, "between": between, "delete": delete, "after": confluent_bindings(bootstrap, prefix)}

    with ThreadPoolExecutor(2) as pool:
        p, k = pool.map(observe, (sides["pykbroker"], sides["kafka"]))
    return p, k


def _judge(p, k, prefix, invalid):
    assert p == k, explain(p, k)
    check_acl_reports(p["create"], p["delete"], prefix, p["between"], p["after"], invalid)


@pytest.mark.parametrize("client", ["franzgo", "sarama", "kafkago"])
def test_go_client_acls_same_observations(sides, gobin, client):
    prefix = "d%sacl%s" % (client[:2], uuid.uuid4().hex[:6])
    p, k = _both(sides, lambda bs, phase: gobuild.run(gobin / client, bs, "acls", wait=60, prefix=prefix,
                                                      acl_phase=phase), prefix)
    _judge(p, k, prefix, [part.replace("%s", prefix) for part in GO_INVALID[client]])


def test_kafkajs_acls_same_observations(sides):
    from tests.node import noderun
    noderun.require()
    prefix = "djsacl%s" % uuid.uuid4().hex[:6]

    def run_phase(bootstrap, phase):
        args = [noderun.node_binary(), "acls.js", "--brokers", bootstrap, "--prefix", prefix, "--phase", phase]
        r = subprocess.run(args, cwd=noderun.PACKAGE, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, "%s exited %d:\n%s" % (" ".join(args), r.returncode, r.stderr[-4000:])
        return json.loads(r.stdout)

    p, k = _both(sides, run_phase, prefix)
    _judge(p, k, prefix, ["KafkaJSProtocolError INVALID_REQUEST"])
