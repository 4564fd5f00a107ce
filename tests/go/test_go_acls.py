"""ACL admin calls of the Go clients against pykbroker with StandardAuthorizer on: franz-go's kadm
(CreateACLs / DescribeACLs / DeleteACLs with an ACLBuilder; compat/go/cmd/franzgo/acls.go) and
sarama's ClusterAdmin (CreateACLs, ListAcls, DeleteACL; compat/go/cmd/sarama/acls.go) and
kafka-go's Client (CreateACLs, DescribeACLs, DeleteACLs; compat/go/cmd/kafkago/acls.go).

Each scenario creates LITERAL and PREFIXED topic and group bindings, ALLOW and DENY, describes
them with three filters (exactly the created bindings must come back), then, in a second run,
deletes them with MATCH filters (the matching bindings must be reported deleted) and describes
again (empty).  A creation with a principal Kafka cannot parse must come back as the client's
error for INVALID_REQUEST and store nothing.  Between and after the runs confluent-kafka's AdminClient.describe_acls looks at
the bindings independently (tests/client_acls.py).  One authorizer broker for the module.
"""
from __future__ import annotations

import uuid

import pytest

from tests import needs
from tests.client_acls import GO_INVALID, authorizer_broker, check_acl_reports, confluent_bindings

from . import gobuild

gobuild.require_toolchain("the franz-go ACL scenario of compat/go")
needs.module("confluent_kafka.admin")


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory):
    with authorizer_broker(tmp_path_factory, "go-acls") as b:
        yield b


@pytest.mark.parametrize("client", ["franzgo", "sarama", "kafkago"])
def test_go_client_acls(gobin, auth_broker, client):
    p = "%sacl%s" % (client[:2], uuid.uuid4().hex[:6])
    bs = auth_broker.bootstrap_servers
    create = gobuild.run(gobin / client, bs, "acls", wait=60, prefix=p, acl_phase="create")
    between = confluent_bindings(bs, p)
    delete = gobuild.run(gobin / client, bs, "acls", wait=60, prefix=p, acl_phase="delete")
    invalid = [part.replace("%s", p) for part in GO_INVALID[client]]
    check_acl_reports(create, delete, p, between, confluent_bindings(bs, p), invalid)
