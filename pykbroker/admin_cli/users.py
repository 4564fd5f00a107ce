"""``pykbroker users add|delete|list``: SCRAM users, what Kafka's ``kafka-configs.sh --entity-type
users --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=...]'`` (and
``--delete-config``, ``--describe``) do.

Requests: AlterUserScramCredentials (51) for add and delete, DescribeUserScramCredentials (50) for
list (and for ``delete`` without ``--mechanism``: every mechanism the user has).  The broker salts
and stores the password; it is sent once, in the request, and never printed or logged here.  The
password comes from ``--password`` (visible to other local users in the process list, as Kafka's
tool's is), else a prompt without echo when stdin is a terminal, else stdin's first line (for
scripts: ``printf '%s\\n' "$PW" | pykbroker users add alice``).

To manage users of a secured broker, ``--command-config FILE`` takes the client properties (SASL
and SSL settings), as Kafka's tools do.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Sequence

from . import action_parser, action_parsers
from .common import EXIT_USAGE, ToolError, ck, client_config, error_name, kafka_message, print_json, wait_seconds

if TYPE_CHECKING:
    import argparse

    from . import Subparsers

EXAMPLES = """  pykbroker users add alice --mechanism SCRAM-SHA-512 --iterations 8192 --command-config admin.properties
  pykbroker users list
  pykbroker users list alice bob --json
  pykbroker users delete alice --mechanism SCRAM-SHA-256"""

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's ScramMechanism: 4096 is both the minimum the broker accepts and kafka-configs.sh's
# default when a config gives no iterations.
DEFAULT_ITERATIONS = 4096


def _mechanism(text: str) -> str:
    m = text.strip().upper()
    if m not in MECHANISMS:
        import argparse
        raise argparse.ArgumentTypeError("unknown SCRAM mechanism %r (one of %s)" % (text, ", ".join(MECHANISMS)))
    return m


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    usub = action_parsers(sub, name, help, "Manage SCRAM users (kafka-configs.sh --entity-type users).", EXAMPLES)
    ap = action_parser(usub, "add", "add a user or change its password (one mechanism)", EXAMPLES)
    ap.add_argument("user")
    ap.add_argument("--mechanism", type=_mechanism, default="SCRAM-SHA-512", help="default SCRAM-SHA-512")
    ap.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                    help="PBKDF2 iterations (default %d; the broker accepts 4096 to 16384)" % DEFAULT_ITERATIONS)
    ap.add_argument("--password", help="the password (else prompted without echo, or stdin's first line)")
    dp = action_parser(usub, "delete", "delete a user's credential (every mechanism unless --mechanism)", EXAMPLES)
    dp.add_argument("user")
    dp.add_argument("--mechanism", type=_mechanism, help="only this mechanism's credential")
    lp = action_parser(usub, "list", "users with their mechanisms and iterations", EXAMPLES)
    lp.add_argument("users", nargs="*", metavar="USER", help="only these users (default: all)")


def _read_password(args: argparse.Namespace) -> bytes:
    if args.password is not None:
        pw = args.password
    elif sys.stdin.isatty():
        import getpass
        pw = getpass.getpass("password for %s: " % args.user)
        if getpass.getpass("again: ") != pw:
            raise ToolError("the two passwords differ", EXIT_USAGE)
    else:
        pw = sys.stdin.readline().rstrip("\r\n")
    if not pw:
        # Kafka refuses an empty password too (ScramFormatter would hash it, but the tool
        # rejects it); saying so here beats a user who cannot log in.
        raise ToolError("empty password", EXIT_USAGE)
    return pw.encode()


def _enum(mechanism: str) -> Any:
    from confluent_kafka.admin import ScramMechanism
    return ScramMechanism.SCRAM_SHA_256 if mechanism == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def _name(enum: Any) -> str:
    return {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(int(enum.value), str(enum))


def _admin(args: argparse.Namespace) -> Any:
    """The admin client, with an error callback: a refused login (wrong --command-config
    credentials) is reported by librdkafka there at once, while the request's future would only
    time out after --timeout."""
    if getattr(args, "_admin", None) is None:
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import AdminClient
        args._auth_errors = []

        def on_error(err: Any) -> None:
            if err.code() == KafkaError._AUTHENTICATION:
                args._auth_errors.append(err.str())
        conf = client_config(args, error_cb=on_error)
        try:
            args._admin = AdminClient(conf)
        except Exception as e:   # a bad --command-property
            raise ToolError("cannot create the admin client: %s" % kafka_message(e), EXIT_USAGE) from None
    return args._admin


def _wait(args: argparse.Namespace, future: Any, what: str) -> Any:
    import concurrent.futures
    import time
    deadline = time.monotonic() + wait_seconds(args)
    try:
        while True:
            try:
                return future.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                args._admin.poll(0)   # serves error_cb
                if args._auth_errors:
                    raise ToolError("%s: authentication to the broker failed (check --command-config): %s"
                                    % (what, args._auth_errors[0])) from None
                if time.monotonic() > deadline:
                    raise ToolError("%s: no answer within %.0f s" % (what, wait_seconds(args))) from None
    except ToolError:
        raise
    except Exception as e:
        name = error_name(e)
        # RESOURCE_NOT_FOUND: describe of an unknown user, or delete of a credential it does not have
        words = {"RESOURCE_NOT_FOUND": "no such user" if what.startswith("describe") else "no such credential",
                 "UNSUPPORTED_SASL_MECHANISM": "mechanism not enabled on the broker",
                 "UNACCEPTABLE_CREDENTIAL": "credential refused by the broker",
                 "CLUSTER_AUTHORIZATION_FAILED": "not allowed (needs ALTER/DESCRIBE on the cluster)",
                 "SASL_AUTHENTICATION_FAILED": "authentication to the broker failed (check --command-config)",
                 "_AUTHENTICATION": "authentication to the broker failed (check --command-config)"}.get(name or "")
        raise ToolError("%s: %s%s" % (what, words + ": " if words else "", kafka_message(e))) from None


def describe(args: argparse.Namespace, users: Sequence[str]) -> dict:
    """{user: [(mechanism, iterations), ...]} of the given users (all when empty)."""
    a = _admin(args)
    if users:
        futs = a.describe_user_scram_credentials(list(dict.fromkeys(users)), request_timeout=wait_seconds(args))
        descs = {u: _wait(args, f, "describe user %s" % u) for u, f in futs.items()}
    else:
        descs = _wait(args, a.describe_user_scram_credentials(request_timeout=wait_seconds(args)), "describe users")
    return {u: sorted((_name(i.mechanism), i.iterations) for i in d.scram_credential_infos)
            for u, d in sorted(descs.items())}


def _alter(args: argparse.Namespace, alterations: list[Any], what: str) -> None:
    futs = _admin(args).alter_user_scram_credentials(alterations, request_timeout=wait_seconds(args))
    for f in futs.values():
        _wait(args, f, what)


def run(args: argparse.Namespace) -> int:
    ck()
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion
    if args.action == "add":
        if not args.user:
            raise ToolError("empty user name", EXIT_USAGE)
        pw = _read_password(args)
        _alter(args, [UserScramCredentialUpsertion(args.user, ScramCredentialInfo(_enum(args.mechanism), args.iterations), pw)],
               "add user %s" % args.user)
        out = {"user": args.user, "mechanism": args.mechanism, "iterations": args.iterations, "result": "added"}
        if getattr(args, "json", False):
            print_json(out)
        else:
            print("Completed updating config for user %s." % args.user)   # kafka-configs.sh's words
        return 0
    if args.action == "delete":
        mechs = [args.mechanism] if args.mechanism else [m for m, _ in describe(args, [args.user]).get(args.user, [])]
        if not mechs:
            raise ToolError("delete user %s: no such user" % args.user)
        # one request per mechanism: a broker takes one change per user and request (Kafka 4.4's
        # ScramControlManager; DUPLICATE_RESOURCE otherwise)
        for m in mechs:
            _alter(args, [UserScramCredentialDeletion(args.user, _enum(m))], "delete user %s" % args.user)
        if getattr(args, "json", False):
            print_json({"user": args.user, "deleted": mechs})
        else:
            print("Deleted %s of user %s." % (", ".join(mechs), args.user))
        return 0
    users = describe(args, args.users)
    if args.json:
        print_json([{"user": u, "credentials": [{"mechanism": m, "iterations": i} for m, i in creds]}
                    for u, creds in users.items()])
        return 0
    # kafka-configs.sh --describe --entity-type users prints one line per user:
    #   SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192
    for u, creds in users.items():
        print("SCRAM credential configs for user-principal '%s' are %s"
              % (u, ", ".join("%s=iterations=%d" % c for c in creds)))
    return 0

