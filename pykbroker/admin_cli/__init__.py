"""The admin CLI: ``pykbroker topics|groups|produce|consume|offsets|users|acls`` and ``cluster describe``.

Everything goes through the Kafka protocol (confluent-kafka, i.e. librdkafka, as the client), so
the commands work against pykbroker and Apache Kafka alike; options follow Kafka's own tools
(``--bootstrap-server``, ``--topic``, ``--group``, ``--from-beginning``, ``--dry-run``/``--execute``).
One module per command group (``topics.py``, ``groups.py``, ...), each with ``add_arguments`` and
``run``; this package's ``__init__`` is standard library only and imports a command's module only
when that command runs (``pykbroker serve`` start-up time matters).

Exit codes: 0 done, 1 Kafka or runtime error, 2 usage error (see ``common.py``).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Sequence

from ..addresses import BOOTSTRAP_ENV, bootstrap_servers

if TYPE_CHECKING:
    import types

    # what ``ArgumentParser.add_subparsers()`` returns: commands and actions are added to it
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

# command -> one-line help; the command is run by the module of its name (admin_cli/topics.py ...)
COMMANDS = {
    "topics": "list, describe, create, delete topics; alter their configs; add partitions",
    "groups": "list, describe (lag, members), reset offsets of, delete consumer groups",
    "produce": "write records read line by line from stdin or a file",
    "consume": "read records and print them (values or JSON lines)",
    "offsets": "earliest and latest offset of each partition (or at a timestamp)",
    "users": "add, delete, list SCRAM users (AlterUserScramCredentials)",
    "acls": "add, list, remove ACL bindings (kafka-acls.sh's options; Create/Describe/DeleteAcls)",
}
CLUSTER_DESCRIBE_HELP = "cluster id, controller and brokers of a running cluster (any Kafka)"

EXIT_CODES = """exit status: 0 done, 1 Kafka or runtime error (broker unreachable, an error in a
response, an undelivered record), 2 usage error, 130 interrupted (consume: Ctrl-C is a normal end, 0)."""


def _command_word(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: a command with actions (topics, groups) takes it before or after the action
    # without the action's parser resetting it to the default (common.bootstrap gives that)
    p.add_argument("-b", "--bootstrap-server", default=argparse.SUPPRESS, metavar="HOST:PORT[,...]",
                   type=bootstrap_servers,
                   help="broker(s) to connect to (default: $%s, else localhost:9092)" % BOOTSTRAP_ENV)


def add_common(p: argparse.ArgumentParser, json_output: bool = True) -> None:
    add_bootstrap(p)
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties file (key=value lines, as Kafka's tools take), e.g. "
                        "client.id or security settings; --command-property wins over it")
    p.add_argument("--command-property", action="append", metavar="KEY=VALUE",
                   help="a librdkafka client property, repeatable (e.g. client.id=ops)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="give up waiting for the cluster after this long (default 30)")
    if json_output:
        p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def parser(sub: Subparsers, name: str, help: str, description: str, examples: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description,
                          epilog="examples:\n" + examples + "\n\n" + EXIT_CODES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def action_parsers(sub: Subparsers, name: str, help: str, description: str, examples: str) -> Subparsers:
    """A command whose first word is an action (topics, groups, users, acls): its parser, taking
    -b before or after the action; -> the subparsers its actions are added to (action_parser)."""
    p = parser(sub, name, help, description, examples)
    add_bootstrap(p)
    return p.add_subparsers(dest="action", required=True, metavar="ACTION")


def action_parser(sub: Subparsers, name: str, help: str, examples: str) -> argparse.ArgumentParser:
    """An action of topics/groups, whose --help shows the command's examples of that action; it
    takes the common options (add_common)."""
    mine = "\n".join(line for line in examples.splitlines() if (" %s " % name) in line + " ")
    p = sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".",
                       epilog=("examples:\n" + mine + "\n\n" if mine else "") + EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    return p


def add_parsers(sub: Subparsers, cluster_sub: Subparsers, argv: Sequence[str] | None = None) -> None:
    """Add the commands to ``pykbroker``'s subparsers; their arguments (and modules) only for the
    command being run, a one-line entry for the others (top-level ``--help``)."""
    argv = sys.argv[1:] if argv is None else argv
    word = _command_word(argv)
    for name, help in COMMANDS.items():
        if word == name:
            _module(name).add_arguments(sub, name, help)
        else:
            sub.add_parser(name, help=help)
    if word == "cluster":
        _module("cluster").add_arguments(cluster_sub, "describe", CLUSTER_DESCRIBE_HELP)
    else:
        cluster_sub.add_parser("describe", help=CLUSTER_DESCRIBE_HELP)


def handles(args: argparse.Namespace) -> bool:
    return args.cmd in COMMANDS or (args.cmd == "cluster" and getattr(args, "cluster", None) == "describe")


def _module(name: str) -> types.ModuleType:
    import importlib
    return importlib.import_module("%s.%s" % (__name__, name))


def run(args: argparse.Namespace) -> int:
    from .common import ToolError
    try:
        return _module(args.cmd).run(args) or 0
    except BrokenPipeError:
        # `pykbroker consume ... | head`: the reader left; not an error of ours.  stdout now
        # points at /dev/null so that the interpreter's last flush does not fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except ToolError as e:
        print("pykbroker %s: %s" % (args.cmd, e), file=sys.stderr)
        return e.code
    except Exception as e:
        # an error of the client library that no command turned into a ToolError: still one
        # line and exit 1 (anything else is a bug of ours: its traceback helps)
        if type(e).__module__.split(".")[0] not in ("cimpl", "confluent_kafka"):
            raise
        from .common import kafka_message
        print("pykbroker %s: %s" % (args.cmd, kafka_message(e)), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pykbroker %s: interrupted" % args.cmd, file=sys.stderr)
        return 130


def parse_args(ap: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``ap.parse_args(argv)``, but an unknown option is reported with the usage of the
    (sub)command it was given to, not the top level's (argparse's subparsers leave unknown
    options to the top-level parser)."""
    args, extras = ap.parse_known_args(argv)
    if extras:
        p = ap
        while True:
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs or getattr(args, subs[0].dest, None) not in subs[0].choices:
                break
            p = subs[0].choices[getattr(args, subs[0].dest)]
        p.error("unrecognized arguments: %s" % " ".join(extras))
    return args
