"""Command line: ``pykbroker serve``, ``pykbroker cluster up`` and ``pykbroker pipeline clickstream``;
the admin commands (``topics``, ``groups``, ``produce``, ``consume``, ``offsets``, ``cluster
describe``) live in :mod:`pykbroker.admin_cli`.

Configuration uses Apache Kafka's names: ``--config server.properties`` is read first, then
``--listeners``/``--log-dirs`` and any number of ``--override key=value``.  SIGINT/SIGTERM stop
the broker cleanly (logs flushed, clean-shutdown marker written).

Start-up time matters (a test suite spawns brokers): the arguments are parsed and the
configuration validated before trio and the broker are imported, and the pipeline command's
module only when that command runs.  ``import pykbroker.cli`` imports neither trio nor the
protocol codecs nor any compression module (tests/configs/test_startup.py checks it).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any, cast

from . import admin_cli as tools
from .config import BrokerConfig, ConfigError, parse_properties

if TYPE_CHECKING:
    from .clock import BrokerClock
    from .local.cluster import Cluster
    from .local.secure_setup import SecureSetup


def build_config(args: argparse.Namespace) -> BrokerConfig:
    """server.properties, then --listeners/--log-dirs, then each --override (last wins), all
    parsed and validated by BrokerConfig.  A bad value raises ConfigError whose message says
    where the value came from."""
    values: dict[str, str] = {}
    origin: dict[str, str] = {}

    def put(key: str, value: str, where: str) -> None:
        values[key], origin[key] = value, where

    if args.config:
        with open(args.config) as fh:
            for k, v in parse_properties(fh.read()).items():
                put(k, v, args.config)
    if args.listeners:
        put("listeners", args.listeners, "--listeners")
    if args.log_dirs:
        put("log.dirs", args.log_dirs, "--log-dirs")
    for ov in args.override or []:
        if "=" not in ov:
            raise ConfigError("--override expects key=value, got %r" % ov)
        k, v = ov.split("=", 1)
        put(k.strip(), v.strip(), "--override")
    try:
        return BrokerConfig(values)
    except ConfigError as e:
        where = origin.get(e.name) if e.name is not None else None
        raise ConfigError("%s (from %s)" % (e, where) if where else str(e), e.name) from None


async def _serve(config: BrokerConfig, control: tuple[str, int] | None = None, as_kafka: str | None = None,
                 observe: dict[str, Any] | None = None, started: list[bool] | None = None) -> None:
    """``started``: a list that gets True once the broker and its endpoints listen."""
    import trio

    from .run.runner import BrokerRunner

    # --metrics / --trace / --log-format json: a request observer on every broker incarnation
    observer, metrics, prepare = None, None, None
    runner: BrokerRunner   # (read by the observer's lambda once the runner exists)
    if observe:
        from .observability.setup import build_observer
        observer, metrics = build_observer(observe, lambda: runner.broker)
        prepare = lambda b: setattr(b, "observer", observer)  # noqa: E731
    # the runner can crash and restart the broker (the control endpoint's /broker/*)
    # main() runs trio with a BrokerClock
    runner = BrokerRunner(config, clock=cast("BrokerClock", trio.lowlevel.current_clock()), as_kafka=as_kafka,
                          prepare=prepare)
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            await nursery.start(runner.run)
            if metrics is not None:
                from .observability.metrics import serve_metrics

                host, port = observe["metrics"]   # type: ignore[index]  # metrics exist only with observe
                port = await nursery.start(serve_metrics, metrics, host, port)
                logging.getLogger("pykbroker").info("metrics endpoint on http://%s:%d/metrics", host, port)
            if control is not None:
                from .run.control import serve_control

                port = await nursery.start(serve_control, runner, control[0], control[1])
                logging.getLogger("pykbroker").info("control endpoint on http://%s:%d", control[0], port)
            if started is not None:
                started.append(True)
            async for signum in signals:
                logging.getLogger("pykbroker").info("received %s, shutting down", signal.Signals(signum).name)
                if signum == signal.SIGTERM:
                    # a second signal stops at once
                    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as again:
                        async with trio.open_nursery() as inner:
                            async def _abort() -> None:
                                async for _ in again:
                                    inner.cancel_scope.cancel()
                                    break
                            inner.start_soon(_abort)
                            if runner.broker is not None:
                                await runner.broker.controlled_shutdown()
                            inner.cancel_scope.cancel()
                nursery.cancel_scope.cancel()
                break


def _cluster_up(args: argparse.Namespace) -> int:
    """``pykbroker cluster up``: :class:`pykbroker.local.cluster.Cluster` until a signal."""
    import json
    import threading

    from .local.zookeeper import ZooKeeperUnavailable
    from .local.cluster import Cluster

    overrides = {}
    for ov in args.override or []:
        if "=" not in ov:
            print("pykbroker: --override expects key=value, got %r" % ov, file=sys.stderr)
            return 2
        k, v = ov.split("=", 1)
        overrides[k.strip()] = v.strip()
    if args.brokers < 1:
        print("pykbroker: --brokers must be at least 1", file=sys.stderr)
        return 2
    # Kafka's default replication of __consumer_offsets is 3; fewer brokers could never create it
    overrides.setdefault("offsets.topic.replication.factor", str(min(3, args.brokers)))
    overrides.setdefault("transaction.state.log.replication.factor", str(min(3, args.brokers)))
    stop = threading.Event()
    received = []
    starting = [True]

    class Interrupted(BaseException):
        pass

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()
        if starting[0]:
            # During start-up, abort it: Cluster.start stops what it had started.  Only once,
            # so that a second signal does not interrupt that clean-up.
            starting[0] = False
            raise Interrupted()

    # Installed before anything starts.  The children get their own session (a terminal's
    # Ctrl-C reaches only this process), so the order of shutdown is ours: brokers first, then
    # ZooKeeper; and the kernel SIGTERMs them if this process dies (die_with_parent).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if args.metrics is not None:
        import importlib.util
        if importlib.util.find_spec("prometheus_client") is None:
            print("pykbroker: --metrics needs prometheus_client (pip install prometheus_client, or pip install '.[metrics]' in a pykbroker checkout)",
                  file=sys.stderr)
            return 2
    # --security: every broker's listener (also the inter-broker one) of that protocol, a
    # throw-away CA, the users (--user, default admin) and the brokers' own SCRAM user
    # (pykbroker/local/secure_setup.py)
    users = {}
    for u in args.user or []:
        if "=" not in u:
            print("pykbroker: --user expects NAME=PASSWORD, got %r" % u.split("=")[0], file=sys.stderr)
            return 2
        name, password = u.split("=", 1)
        users[name.strip()] = password
    mechanisms = [m.strip().upper() for m in args.mechanisms.split(",")] if args.mechanisms else None
    if (users or mechanisms) and not args.security:
        print("pykbroker: --user and --mechanisms need --security", file=sys.stderr)
        return 2
    try:
        cluster = Cluster(args.brokers, data_dir=args.dir, overrides=overrides, zookeeper=args.zookeeper,
                          log_level=args.log_level, die_with_parent=True, metrics_port=args.metrics,
                          security=args.security, users=users or None, mechanisms=mechanisms)
    except ValueError as e:
        print("pykbroker: %s" % e, file=sys.stderr)
        return 2
    try:
        try:
            cluster.start()
        except Interrupted:
            print("pykbroker: interrupted (%s) during start-up; stopped" % signal.Signals(received[0]).name,
                  file=sys.stderr)
            return 1
        except ZooKeeperUnavailable as e:
            print("pykbroker: %s" % e, file=sys.stderr)
            return 1
        except RuntimeError as e:
            print("pykbroker: cluster did not start: %s" % e, file=sys.stderr)
            return 1
        finally:
            starting[0] = False
        info = cluster.describe()
        if cluster.security is not None:
            info["security"] = _secure_cluster_info(cluster)
        if args.json:
            print(json.dumps(info), flush=True)
        else:
            _print_cluster(info, cluster_tmp=args.dir is None)
        while not stop.wait(0.5):
            for b in cluster.brokers:
                if b.proc is not None and b.proc.poll() is not None:
                    print("pykbroker: broker %d (pid %s) exited with status %s; see %s"
                          % (b.broker_id, b.pid, b.proc.returncode, b.log_path), file=sys.stderr, flush=True)
                    b.proc = None
            zk = cluster.zookeeper
            if zk is not None and zk.proc is not None and zk.proc.poll() is not None:
                print("pykbroker: ZooKeeper (pid %s) exited with status %s; see %s"
                      % (zk.pid, zk.proc.returncode, zk.log_path), file=sys.stderr, flush=True)
                zk.proc = None
        if not args.json:
            print("stopping (%s): brokers, then ZooKeeper" % signal.Signals(received[0]).name, flush=True)
    finally:
        cluster.close()
    return 0


def _secure_cluster_info(cluster: Cluster) -> dict:
    """What a client of a secured ``cluster up`` needs: the protocol, the CA, the users' names and
    a Java client properties file per user (``--command-config`` of Kafka's tools, or any JVM
    client; mode 0600, removed with the cluster's temporary security directory)."""
    import os
    sec: SecureSetup = cluster.security   # type: ignore[assignment]  # only called for a secured cluster
    files = {}
    for user in sorted(sec.users) or [None]:   # type: ignore[list-item]  # None: the one TLS-only client
        props = sec.java_properties(cluster.bootstrap_servers, user)
        path = os.path.join(sec.dir, "client-%s.properties" % (user or "ssl"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("".join("%s=%s\n" % kv for kv in props.items()))
        files[user or ""] = path
    return {"protocol": sec.protocol, "ca_file": sec.ca_file, "mechanisms": list(sec.mechanisms),
            "users": sorted(sec.users), "client_properties": files}


def _print_cluster(info: dict, cluster_tmp: bool) -> None:
    zk = info["zookeeper"]
    lines = ["bootstrap servers: %s" % info["bootstrap_servers"],
             "zookeeper.connect: %s%s" % (zk["connect"], "" if zk["managed"] else " (external)"), ""]
    rows = [("BROKER", "PORT", "PID", "DATA DIR")]
    rows += [(str(b["broker_id"]), str(b["port"]), str(b["pid"]), b["data_dir"]) for b in info["brokers"]]
    if zk["managed"]:
        rows.append(("zk", zk["connect"].rsplit(":", 1)[1], str(zk["pid"]), zk["data_dir"]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3])
    metrics = [(b["broker_id"], b.get("metrics")) for b in info["brokers"] if b.get("metrics")]
    if metrics:
        lines.append("")
        lines += ["metrics of broker %d: %s" % m for m in metrics]
    sec = info.get("security")
    if sec:
        lines.append("")
        lines.append("security: %s%s%s" % (sec["protocol"], ", SASL %s" % ",".join(sec["mechanisms"]) if sec["mechanisms"] else "",
                                           ", CA %s" % sec["ca_file"] if sec["ca_file"] else ""))
        lines += ["client properties of %s: %s" % (u or "TLS clients", p) for u, p in sec["client_properties"].items()]
    lines.append("")
    lines.append("data in %s%s; Ctrl-C stops the cluster"
                 % (info["data_dir"], " (temporary, removed on exit)" if cluster_tmp else ""))
    print("\n".join(lines), flush=True)


def _wants_pipeline(argv: list[str]) -> bool:
    """Whether the command is ``pipeline`` (its first word that is not an option): only then
    are the clickstream arguments (and their module) needed."""
    return next((a for a in argv if not a.startswith("-")), None) == "pipeline"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pykbroker", description="A Kafka-compatible broker in Python.")
    from . import __version__
    ap.add_argument("--version", action="version", version="pykbroker %s" % __version__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("serve", help="run a broker (default PLAINTEXT://127.0.0.1:9092, data in ./pykbroker-data)")
    sp.add_argument("--config", help="server.properties file (Kafka config names)")
    sp.add_argument("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092")
    sp.add_argument("--log-dirs", help="comma-separated data directories")
    sp.add_argument("--override", action="append", metavar="KEY=VALUE", help="any Kafka config, repeatable")
    sp.add_argument("--log-level", default="INFO")
    sp.add_argument("--control", metavar="HOST:PORT",
                    help="serve the HTTP control endpoint (faults, clock, crash/restart; no auth: "
                         "bind loopback), port 0: a free one")
    sp.add_argument("--as-kafka", metavar="VERSION",
                    help="speak only what that Apache Kafka release's broker offered: 2.8, 3.9, 4.0, 4.4 "
                         "(4.x: the newest); default: everything pykbroker builds")
    sp.add_argument("--metrics", metavar="HOST:PORT",
                    help="serve Prometheus metrics on http://HOST:PORT/metrics (port 0: a free one)")
    sp.add_argument("--log-format", choices=("text", "json"), default="text",
                    help="json: one JSON object per log line (with the request's connection, client id, "
                         "API and correlation id)")
    sp.add_argument("--trace", metavar="FILE", help="append every request and response, decoded, to FILE "
                                                     "(JSON lines; slow: for debugging)")
    # `pykbroker serve` needs no other command's parser: building them all (argparse looks up
    # translations and the terminal size for each) cost a few ms of every broker start-up
    if tools._command_word(sys.argv[1:] if argv is None else argv) != "serve":
        pp = sub.add_parser("pipeline", help="data pipelines (PySpark; needs the 'pipeline' extra)")
        psub = pp.add_subparsers(dest="pipeline", required=True)
        cp = psub.add_parser("clickstream", help="page visits -> Spark Structured Streaming -> per-site window stats")
        kp = sub.add_parser("cluster", help="a local multi-broker cluster on ZooKeeper (child processes)")
        ksub = kp.add_subparsers(dest="cluster", required=True)
        up = ksub.add_parser("up", help="start ZooKeeper and N brokers on loopback; Ctrl-C/SIGTERM stops them all")
        up.add_argument("--brokers", type=int, default=3, help="number of brokers, ids 1..N (default 3)")
        up.add_argument("--dir", help="data directory (default: a temporary one, removed on exit)")
        up.add_argument("--zookeeper", metavar="HOST:PORT", help="use this ZooKeeper instead of starting one")
        up.add_argument("--override", action="append", metavar="KEY=VALUE", help="a Kafka config for every broker, repeatable")
        up.add_argument("--log-level", default="INFO", help="the brokers' log level")
        up.add_argument("--json", action="store_true", help="print the cluster as one JSON document (for scripts)")
        up.add_argument("--security", choices=("SSL", "SASL_PLAINTEXT", "SASL_SSL"),
                        help="secure every listener (clients and inter-broker): a throw-away CA, the users, "
                             "SCRAM/PLAIN between brokers; client properties files are printed")
        up.add_argument("--user", action="append", metavar="NAME=PASSWORD",
                        help="a SASL user (PLAIN and SCRAM), repeatable (default: admin=admin-secret)")
        up.add_argument("--mechanisms", metavar="LIST",
                        help="SASL mechanisms, comma-separated (default PLAIN,SCRAM-SHA-256,SCRAM-SHA-512)")
        up.add_argument("--metrics", type=int, nargs="?", const=0, metavar="BASE_PORT",
                        help="serve each broker's Prometheus metrics on loopback: broker i on BASE_PORT+i-1, "
                             "or on free ports (printed) without a port")
        tp = sub.add_parser("trace", help="record (proxy) and compare (diff) protocol traces")
        if (sys.argv[1:] if argv is None else argv)[:1] == ["trace"]:   # its module only when it runs
            from .observability.cli import add_arguments as add_trace_arguments
            add_trace_arguments(tp)
        hp = sub.add_parser("healthcheck", help="exit 0 if a broker answers ApiVersions (container HEALTHCHECK)")
        if "healthcheck" in (sys.argv[1:] if argv is None else argv):   # its module only when it runs
            from .healthcheck import add_arguments
            add_arguments(hp)
        # the admin CLI (pykbroker/admin_cli): argparse only here, a command's module when it runs
        tools.add_parsers(sub, ksub, sys.argv[1:] if argv is None else argv)
        if _wants_pipeline(sys.argv[1:] if argv is None else argv):
            from .pipeline import clickstream
            clickstream.add_arguments(cp)
    args = tools.parse_args(ap, argv)
    if tools.handles(args):
        return tools.run(args)
    if args.cmd == "pipeline":
        from .pipeline import clickstream
        return clickstream.run(args)
    if args.cmd == "healthcheck":
        from .healthcheck import run
        return run(args)
    if args.cmd == "cluster":
        return _cluster_up(args)
    if args.cmd == "trace":
        from .observability.cli import run as run_trace
        return run_trace(args)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    if getattr(args, "log_format", "text") == "json":
        from .observability.logfmt import JsonFormatter
        for h in logging.getLogger().handlers:
            h.setFormatter(JsonFormatter())
    if args.cmd == "serve":
        try:
            config = build_config(args)
            # the secured listeners' keys, certificates and users, read now: a bad one is a
            # configuration error, not a crash at start-up
            from .security.setup import check_config
            check_config(config)
        except (ConfigError, OSError) as e:
            # A bad configuration is the user's to fix: one line, no traceback.
            print("pykbroker: configuration error: %s" % e, file=sys.stderr)
            return 2
        control = None
        if args.control:
            host, sep, port = args.control.rpartition(":")
            if not sep or not port.isdigit():
                print("pykbroker: --control expects HOST:PORT, got %r" % args.control, file=sys.stderr)
                return 2
            control = (host.strip("[]") or "127.0.0.1", int(port))
        if args.as_kafka:
            from .profiles import profile_name
            try:
                profile_name(args.as_kafka)
            except ValueError as e:
                print("pykbroker: %s" % e, file=sys.stderr)
                return 2
        observe: dict[str, Any] = {}
        if args.metrics:
            host, sep, port = args.metrics.rpartition(":")
            if not sep or not port.isdigit():
                print("pykbroker: --metrics expects HOST:PORT, got %r" % args.metrics, file=sys.stderr)
                return 2
            observe["metrics"] = (host.strip("[]") or "127.0.0.1", int(port))
            import importlib.util
            if importlib.util.find_spec("prometheus_client") is None:
                print("pykbroker: --metrics needs prometheus_client (pip install prometheus_client, or pip install '.[metrics]' in a pykbroker checkout)",
                      file=sys.stderr)
                return 2
        if args.trace:
            observe["trace"] = args.trace
        if args.log_format == "json":
            observe["log_context"] = True
        config.warn_unused()
        import trio

        from .clock import BrokerClock
        from .run.runner import error_line, startup_error
        started: list = []
        try:
            # the broker clock is the run's trio clock, so the control endpoint can move time
            trio.run(_serve, config, control, args.as_kafka, observe, started, clock=BrokerClock())
        except BaseException as e:
            # A start-up the user can fix (an address in use, a log dir that is a file, not
            # writable or held by another broker): one line naming it, exit 2, as a bad
            # configuration (the error arrives wrapped in the nurseries' exception groups).
            err = None if started else startup_error(e)
            if err is None:
                raise
            print("pykbroker: %s" % error_line(err), file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
