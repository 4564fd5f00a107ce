"""Broker addresses as Kafka's clients take them in ``bootstrap.servers`` (``HOST:PORT[,...]``):
the admin commands' ``--bootstrap-server`` and its default, ``$PYKBROKER_BOOTSTRAP_SERVER``.

Standard library only: ``pykbroker.cli`` imports it to build its parser, before any command's
module (and its client library) is loaded.
"""
from __future__ import annotations

import argparse
import re

# The environment variable that gives --bootstrap-server's default (scripts, shells, containers).
BOOTSTRAP_ENV = "PYKBROKER_BOOTSTRAP_SERVER"

# HOST:PORT, HOST a name, an IPv4 address or a bracketed IPv6 one, an optional listener prefix
# (PLAINTEXT://): what Kafka's clients accept in bootstrap.servers.
_ADDRESS = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*://)?(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\],]+):(\d{1,5})$")


def split_address(entry: str) -> tuple[str, int]:
    """("host", port) of one bootstrap address; ValueError naming it when malformed (Kafka's
    clients refuse such a bootstrap.servers at once, "Invalid url in bootstrap.servers")."""
    m = _ADDRESS.match(entry.strip())
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise ValueError("expected HOST:PORT, got %r" % entry.strip())
    return m.group(1).strip("[]"), int(m.group(2))


def bootstrap_servers(value: str) -> str:
    """argparse type of --bootstrap-server: a malformed list is a usage error (exit 2)."""
    entries = [e for e in value.split(",") if e.strip()]
    if not entries:
        raise argparse.ArgumentTypeError("expected HOST:PORT[,HOST:PORT...], got %r" % value)
    for e in entries:
        try:
            split_address(e)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return ",".join(e.strip() for e in entries)
