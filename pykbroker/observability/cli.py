"""``pykbroker trace proxy`` and ``pykbroker trace diff`` (arguments and entry point)."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def add_arguments(tp: argparse.ArgumentParser) -> None:
    sub = tp.add_subparsers(dest="trace_cmd", required=True)
    px = sub.add_parser("proxy", help="a recording TCP proxy in front of a Kafka broker or cluster (any Kafka)",
                        description="Relay a client's conversation with a broker or a cluster and append every "
                                    "request and response, decoded, to --out (JSON lines, as `serve --trace`).  One "
                                    "listener per upstream broker (the first on --listen's port, the others on the "
                                    "ports after it, or free ports with port 0); broker addresses in "
                                    "Metadata/FindCoordinator/DescribeCluster answers are rewritten to the matching "
                                    "listener, so the client keeps talking through the proxy.  ApiVersions answers "
                                    "are capped at the versions pykbroker's codecs decode.")
    px.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                    help="where clients connect (port 0: a free one, printed at start)")
    px.add_argument("--upstream", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                    help="the broker, or every broker of the cluster (comma-separated)")
    px.add_argument("--out", required=True, metavar="FILE", help="trace file (appended)")
    df = sub.add_parser("diff", help="compare two traces request by request, field by field",
                        description="Exit 0 when the two traces match after ignoring what legitimately differs "
                                    "between two brokers or runs (ids, timestamps, throttle, cluster id, hosts, ports, "
                                    "node ids); 1 with the differences printed; 2 on bad input.")
    df.add_argument("a")
    df.add_argument("b")
    df.add_argument("--ignore", action="append", default=[], metavar="FIELD",
                    help="one more field name to ignore (repeatable)")
    df.add_argument("--apis", metavar="NAMES", help="compare only these APIs (comma-separated, e.g. Produce,Fetch)")
    df.add_argument("--json", action="store_true", help="print the differences as one JSON document")


def run(args: argparse.Namespace) -> int:
    if args.trace_cmd == "proxy":
        from .proxy import main
        return main(args)
    from .diff import main
    return main(args)


