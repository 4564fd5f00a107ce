"""ACL admin calls of the Node clients against pykbroker with StandardAuthorizer on: kafkajs's
admin.createAcls / describeAcls / deleteAcls (compat/node/acls.js).

The scenario creates LITERAL and PREFIXED topic and group bindings, ALLOW and DENY, describes
them with three filters (exactly the created bindings must come back), then, in a second run,
deletes them with MATCH filters (the matching bindings must be reported deleted) and describes
again (empty).  A creation with a principal Kafka cannot parse must come back as kafkajs's
error for INVALID_REQUEST and store nothing.  Between and after the runs confluent-kafka's AdminClient.describe_acls looks at
the bindings independently (tests/client_acls.py).  One authorizer broker for the module.
"""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests import needs
from tests.client_acls import authorizer_broker, check_acl_reports, confluent_bindings

from . import noderun

noderun.skip_module_unless_usable()
needs.module("confluent_kafka.admin")


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory):
    noderun.require()
    with authorizer_broker(tmp_path_factory, "node-acls") as b:
        yield b


def _run(bootstrap, prefix, phase):
    args = [noderun.node_binary(), "acls.js", "--brokers", bootstrap, "--prefix", prefix, "--phase", phase]
    r = subprocess.run(args, cwd=noderun.PACKAGE, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "%s exited %d:\n%s" % (" ".join(args), r.returncode, r.stderr[-4000:])
    return json.loads(r.stdout)


def test_kafkajs_admin_acls(auth_broker):
    p = "jsacl%s" % uuid.uuid4().hex[:6]
    bs = auth_broker.bootstrap_servers
    create = _run(bs, p, "create")
    between = confluent_bindings(bs, p)
    delete = _run(bs, p, "delete")
    # kafkajs throws the refused creation's error code (KafkaJSProtocolError, type INVALID_REQUEST)
    check_acl_reports(create, delete, p, between, confluent_bindings(bs, p), ["KafkaJSProtocolError INVALID_REQUEST"])
