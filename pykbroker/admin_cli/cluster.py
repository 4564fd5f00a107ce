"""``pykbroker cluster describe``: cluster id, controller and brokers (DescribeCluster, Metadata).

Beside ``cluster up`` (which starts a local cluster): this one asks any running Kafka.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import add_common, parser
from .common import admin, ck, print_json, print_table, result, wait_seconds

if TYPE_CHECKING:
    import argparse

    from . import Subparsers

EXAMPLES = """  pykbroker cluster describe
  pykbroker cluster describe --bootstrap-server 127.0.0.1:9092 --json"""


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    p = parser(sub, name, help, "Describe a running cluster: its id, controller and brokers.", EXAMPLES)
    add_common(p)


def describe(args: argparse.Namespace) -> dict:
    ck()
    d = result(admin(args).describe_cluster(request_timeout=wait_seconds(args)), "describe cluster", wait_seconds(args))
    brokers = sorted(({"id": n.id, "host": n.host, "port": n.port, "rack": n.rack} for n in d.nodes),
                     key=lambda b: b["id"])
    controller = d.controller.id if d.controller is not None else None
    return {"cluster_id": d.cluster_id, "controller": controller, "brokers": brokers}


def run(args: argparse.Namespace) -> int:
    info = describe(args)
    if args.json:
        print_json(info)
        return 0
    print("cluster id: %s" % info["cluster_id"])
    print("controller: %s" % info["controller"])
    print()
    print_table(["BROKER", "HOST", "PORT", "RACK"],
                [[b["id"], b["host"], b["port"], b["rack"]] for b in info["brokers"]])
    return 0
