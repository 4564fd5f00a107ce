"""Authorization: Kafka's ACL model (``bindings``), StandardAuthorizer's decision rule over an
index of the bindings (``authorizer``), and the one check every handler calls (``check``)."""
