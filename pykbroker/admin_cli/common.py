"""What every admin command shares: the client library, errors and exit codes, output.

Exit codes (documented in ``pykbroker <command> --help`` and docs/admin-cli.md; scripts rely on them):

* 0: done;
* 1: a Kafka or runtime error (broker unreachable, an error code in a response, a record that
  could not be delivered, a missing client library);
* 2: a usage error (argparse's own code for bad arguments, kept for our own checks too).

confluent-kafka (librdkafka) is imported here only, when a command runs: ``pykbroker serve``
never pays for it, and a missing library is one line naming the extra that installs it.
"""
from __future__ import annotations

import json
import sys
import time
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable

from ..addresses import BOOTSTRAP_ENV, bootstrap_servers, split_address

if TYPE_CHECKING:
    import argparse
    import types

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

DEFAULT_BOOTSTRAP = "localhost:9092"   # Kafka's tools' default
# librdkafka's own default request timeout is 30 s; an admin call against an unreachable broker
# would otherwise wait forever (the future never resolves), so every call is bounded.
DEFAULT_TIMEOUT = 30.0


class ToolError(Exception):
    """A failure to report on one line (no traceback); ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def ck() -> types.ModuleType:
    """The confluent_kafka module, or a ToolError naming the extra that installs it."""
    try:
        import confluent_kafka
    except ImportError:
        raise ToolError("this command needs the confluent-kafka client library: "
                        "pip install confluent-kafka (or pip install '.[tools]' in a pykbroker checkout)") from None
    return confluent_kafka


def bootstrap(args: argparse.Namespace) -> str:
    """--bootstrap-server, else $PYKBROKER_BOOTSTRAP_SERVER, else Kafka's tools' default."""
    given = getattr(args, "bootstrap_server", None)
    if given:
        return given
    import os

    env = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if not env:
        return DEFAULT_BOOTSTRAP
    try:
        return bootstrap_servers(env)
    except Exception as e:
        raise ToolError("$%s: %s" % (BOOTSTRAP_ENV, e), EXIT_USAGE) from None


def command_config(path: str | None) -> dict:
    """The client properties of --command-config FILE (Java properties syntax, as Kafka's tools)."""
    if not path:
        return {}
    from ..config import parse_properties
    try:
        with open(path) as fh:
            return java_client_properties(parse_properties(fh.read()))
    except OSError as e:
        raise ToolError("--command-config: cannot read %s: %s" % (path, e.strerror or e), EXIT_USAGE) from None


def java_client_properties(props: dict) -> dict:
    """A Java client's security settings in librdkafka's words, so that the file written for
    Kafka's own tools (``sasl.jaas.config`` with username/password, a PEM truststore) works as
    is: librdkafka has no JAAS and names the CA file ``ssl.ca.location``.  librdkafka's own
    keys pass through untouched."""
    props = dict(props)
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        from ..security.jaas import JaasError, parse_jaas
        try:
            modules = parse_jaas(jaas)
        except JaasError as e:   # the message never carries the values (secrets)
            raise ToolError("--command-config: sasl.jaas.config: %s" % e, EXIT_USAGE) from None
        opts = modules[0][2]
        if "username" in opts:
            props.setdefault("sasl.username", opts["username"])
        if "password" in opts:
            props.setdefault("sasl.password", opts["password"])
    ttype = props.pop("ssl.truststore.type", None)
    if "ssl.truststore.location" in props:
        if (ttype or "PEM").upper() != "PEM":
            raise ToolError("--command-config: ssl.truststore.type=%s: only a PEM truststore "
                            "(ssl.truststore.type=PEM) or ssl.ca.location is understood" % ttype, EXIT_USAGE)
        props.setdefault("ssl.ca.location", props.pop("ssl.truststore.location"))
    return props


def client_config(args: argparse.Namespace, **extra: Any) -> dict:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap(args),
            # librdkafka logs every failed connection attempt (level 3, LOG_ERR) to stderr, many
            # a second; the command reports a failure itself, once, so only critical ones.
            "log_level": 2}
    conf.update(extra)
    # the user's properties last: they may override what the command chose (e.g. acks); the
    # file first, then each --command-property
    conf.update(command_config(getattr(args, "command_config", None)))
    conf.update(parse_kv(getattr(args, "command_property", None), "--command-property"))
    if not getattr(args, "_probed", False):
        args._probed = True
        probe(conf["bootstrap.servers"], min(wait_seconds(args), PROBE_SECONDS))
    return conf


# How long the first TCP connection to a bootstrap address may take before the command leaves
# the rest to the client library (which retries until --timeout).
PROBE_SECONDS = 5.0


def probe(servers: str, timeout: float) -> None:
    """Fail at once, in the user's words, when no bootstrap address can be reached: every one
    refuses the connection or has a name that does not resolve.  librdkafka would retry those
    until --timeout (30 s) and then say only "_TRANSPORT: Broker transport failure".  A slow or
    filtered address is left to the client (it may answer later)."""
    import socket

    problems = []
    for entry in servers.split(","):
        try:
            host, port = split_address(entry)
        except ValueError as e:
            raise ToolError("bootstrap servers: %s" % e, EXIT_USAGE) from None
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except socket.gaierror:
            problems.append("host name %r not resolved" % host)
        except ConnectionRefusedError:
            problems.append("connection refused to %s:%d (is a broker running there?)" % (host, port))
        except OSError:
            return   # a timeout, no route, ...: the client library tries until --timeout
    raise ToolError("; ".join(problems))


def admin(args: argparse.Namespace) -> Any:
    """One AdminClient per run, kept on ``args``: a client that is garbage collected while a
    future is pending fails it with _DESTROY."""
    if getattr(args, "_admin", None) is None:
        from confluent_kafka.admin import AdminClient
        conf = client_config(args)   # (its own errors say what they are)
        try:
            args._admin = AdminClient(conf)
        except Exception as e:   # a bad --command-property
            raise ToolError("cannot create the admin client: %s" % kafka_message(e), EXIT_USAGE) from None
    return args._admin


def wait_seconds(args: argparse.Namespace) -> float:
    return getattr(args, "timeout", None) or DEFAULT_TIMEOUT


# librdkafka's local errors (names starting with "_") in a user's words; a broker's error names
# (UNKNOWN_TOPIC_OR_PART, ...) are Kafka's own vocabulary and stay as they are.
_LOCAL_ERRORS = {
    "_TRANSPORT": "the connection to the broker failed",
    "_ALL_BROKERS_DOWN": "no broker could be reached",
    "_RESOLVE": "a broker's host name was not resolved",
    "_TIMED_OUT": "timed out",
    "_MSG_TIMED_OUT": "not delivered in time",
}


def kafka_message(exc: BaseException) -> str:
    """``NAME: text`` from a KafkaException (its first arg is a KafkaError) or any exception;
    the client library's local errors said in words."""
    err = exc.args[0] if getattr(exc, "args", None) else None
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        words = _LOCAL_ERRORS.get(err.name())
        if words:
            return "%s (%s)" % (words, err.str().replace("Local: ", ""))
        return "%s: %s" % (err.name(), err.str())
    return str(exc) or type(exc).__name__


def error_name(exc: BaseException) -> str | None:
    err = exc.args[0] if getattr(exc, "args", None) else None
    return err.name() if err is not None and hasattr(err, "name") else None


def result(future: Any, what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Wait for one admin future; a Kafka error becomes a ToolError saying what failed."""
    import concurrent.futures
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise ToolError("%s: no answer within %.0f s (is the broker at the bootstrap address up?)"
                        % (what, timeout)) from None
    except Exception as e:   # KafkaException and the ValueErrors confluent-kafka raises
        raise ToolError("%s: %s" % (what, kafka_message(e))) from None


# A group coordinator that is moving or still loading (and, on a fresh Apache Kafka, the
# __consumer_offsets topic being created by the first group request) answers with these; the
# client is expected to look the coordinator up again and retry.
RETRIABLE_GROUP_ERRORS = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS")


def retrying(args: argparse.Namespace, call: Callable[[], Any], what: str) -> Any:
    """``call()`` returns a future; its result, retried on a coordinator error until --timeout."""
    deadline = time.monotonic() + wait_seconds(args)
    delay = 0.1
    while True:
        try:
            return call().result(timeout=max(deadline - time.monotonic(), 0.1))
        except Exception as e:
            if error_name(e) in RETRIABLE_GROUP_ERRORS and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            import concurrent.futures
            if isinstance(e, concurrent.futures.TimeoutError):
                raise ToolError("%s: no answer within %.0f s" % (what, wait_seconds(args))) from None
            raise


def cluster_topics(args: argparse.Namespace) -> Any:
    """list_topics (Metadata for all topics) -> ClusterMetadata; a ToolError when unreachable."""
    a = admin(args)
    try:
        return a.list_topics(timeout=wait_seconds(args))
    except Exception as e:
        raise ToolError("cannot reach %s: %s" % (bootstrap(args), kafka_message(e))) from None


def print_json(obj: Any) -> None:
    print(json.dumps(obj, sort_keys=False))


def print_table(header: list[str], rows: list[list], out: IO[str] | None = None) -> None:
    """Columns left-aligned, two spaces apart (the layout of Kafka's kafka-consumer-groups.sh)."""
    out = out or sys.stdout
    cells = [[str(c) for c in header]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def parse_kv(items: Iterable[str] | None, what: str) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ToolError("%s expects KEY=VALUE, got %r" % (what, item), EXIT_USAGE)
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def decode(data: bytes | None) -> str | None:
    """Bytes for JSON output: text when valid UTF-8, else None (the caller adds base64)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class Progress:
    """``count records  rate/s`` redrawn on stderr at most twice a second, for long produce and
    consume runs.  On only when stderr is a terminal or ``--progress`` asks for it; a final
    line (with a newline) when done."""

    def __init__(self, enabled: bool, verb: str) -> None:
        self.enabled = enabled
        self.verb = verb
        self.count = 0
        self.t0 = time.monotonic()
        self.last = 0.0

    @classmethod
    def from_args(cls, args: argparse.Namespace, verb: str) -> "Progress":
        on = args.progress if args.progress is not None else sys.stderr.isatty()
        return cls(on, verb)

    def add(self, n: int = 1) -> None:
        self.count += n
        if self.enabled:
            now = time.monotonic()
            if now - self.last >= 0.5:
                self.last = now
                self._draw(now, "\r")

    def _draw(self, now: float, end: str) -> None:
        elapsed = max(now - self.t0, 1e-9)
        sys.stderr.write("%s%s %d records  %.0f records/s  %.1f s%s"
                         % ("\r", self.verb, self.count, self.count / elapsed, elapsed, end))
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            self._draw(time.monotonic(), "\n")
