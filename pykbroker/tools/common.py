"""What every admin command shares: the client library, errors and exit codes, output.

Exit codes (documented in ``pykbroker <command> --help`` and the README; scripts rely on them):

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

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEFAULT_BOOTSTRAP = "localhost:9092"   # Kafka's tools' default
# librdkafka's own default request timeout is 30 s; an admin call against an unreachable broker
# would otherwise wait forever (the future never resolves), so every call is bounded.
DEFAULT_TIMEOUT = 30.0


class ToolError(Exception):
    """A failure to report on one line (no traceback); ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


def ck():
    """The confluent_kafka module, or a ToolError naming the extra that installs it."""
    try:
        import confluent_kafka
    except ImportError:
        raise ToolError("this command needs the confluent-kafka client library: "
                        "pip install confluent-kafka (or pip install '.[tools]' in a pykbroker checkout)") from None
    return confluent_kafka


def bootstrap(args) -> str:
    return getattr(args, "bootstrap_server", None) or DEFAULT_BOOTSTRAP


def client_config(args, **extra) -> dict:
    conf = {"bootstrap.servers": bootstrap(args),
            # librdkafka logs every failed connection attempt (level 3, LOG_ERR) to stderr, many
            # a second; the command reports a failure itself, once, so only critical ones.
            "log_level": 2}
    conf.update(extra)
    # the user's properties last: they may override what the command chose (e.g. acks)
    conf.update(parse_kv(getattr(args, "command_property", None), "--command-property"))
    return conf


def admin(args):
    """One AdminClient per run, kept on ``args``: a client that is garbage collected while a
    future is pending fails it with _DESTROY."""
    if getattr(args, "_admin", None) is None:
        from confluent_kafka.admin import AdminClient
        try:
            args._admin = AdminClient(client_config(args))
        except Exception as e:   # a bad --command-property
            raise ToolError("cannot create the admin client: %s" % kafka_message(e), EXIT_USAGE) from None
    return args._admin


def wait_seconds(args) -> float:
    return getattr(args, "timeout", None) or DEFAULT_TIMEOUT


def kafka_message(exc) -> str:
    """``NAME: text`` from a KafkaException (its first arg is a KafkaError) or any exception."""
    err = exc.args[0] if getattr(exc, "args", None) else None
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        return "%s: %s" % (err.name(), err.str())
    return str(exc) or type(exc).__name__


def error_name(exc) -> str | None:
    err = exc.args[0] if getattr(exc, "args", None) else None
    return err.name() if err is not None and hasattr(err, "name") else None


def result(future, what: str, timeout: float = DEFAULT_TIMEOUT):
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


def retrying(args, call, what: str):
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


def cluster_topics(args):
    """list_topics (Metadata for all topics) -> ClusterMetadata; a ToolError when unreachable."""
    a = admin(args)
    try:
        return a.list_topics(timeout=wait_seconds(args))
    except Exception as e:
        raise ToolError("cannot reach %s: %s" % (bootstrap(args), kafka_message(e))) from None


def print_json(obj) -> None:
    print(json.dumps(obj, sort_keys=False))


def print_table(header: list[str], rows: list[list], out=None) -> None:
    """Columns left-aligned, two spaces apart (the layout of Kafka's kafka-consumer-groups.sh)."""
    out = out or sys.stdout
    cells = [[str(c) for c in header]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def parse_kv(items, what: str) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ToolError("%s expects KEY=VALUE, got %r" % (what, item), EXIT_USAGE)
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def decode(data: bytes | None):
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

    def __init__(self, enabled: bool, verb: str):
        self.enabled = enabled
        self.verb = verb
        self.count = 0
        self.t0 = time.monotonic()
        self.last = 0.0

    @classmethod
    def from_args(cls, args, verb: str) -> "Progress":
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
