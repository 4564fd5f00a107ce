"""Command line: ``pykbroker serve`` and ``pykbroker pipeline clickstream``.

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

from .config import BrokerConfig, ConfigError, parse_properties


def build_config(args) -> BrokerConfig:
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
        where = origin.get(e.name)
        raise ConfigError("%s (from %s)" % (e, where) if where else str(e), e.name) from None


async def _serve(config: BrokerConfig, control=None, as_kafka=None) -> None:
    import trio

    from .runner import BrokerRunner

    # the runner can crash and restart the broker (the control endpoint's /broker/*)
    runner = BrokerRunner(config, clock=trio.lowlevel.current_clock(), as_kafka=as_kafka)
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            await nursery.start(runner.run)
            if control is not None:
                from .server.control import serve_control

                port = await nursery.start(serve_control, runner, control[0], control[1])
                logging.getLogger("pykbroker").info("control endpoint on http://%s:%d", control[0], port)
            async for signum in signals:
                logging.getLogger("pykbroker").info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def _wants_pipeline(argv) -> bool:
    """Whether the command is ``pipeline`` (its first word that is not an option): only then
    are the clickstream arguments (and their module) needed."""
    return next((a for a in argv if not a.startswith("-")), None) == "pipeline"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pykbroker", description="A Kafka-compatible broker in Python.")
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
    pp = sub.add_parser("pipeline", help="data pipelines (PySpark; needs the 'pipeline' extra)")
    psub = pp.add_subparsers(dest="pipeline", required=True)
    cp = psub.add_parser("clickstream", help="page visits -> Spark Structured Streaming -> per-site window stats")
    hp = sub.add_parser("healthcheck", help="exit 0 if a broker answers ApiVersions (container HEALTHCHECK)")
    if "healthcheck" in (sys.argv[1:] if argv is None else argv):   # its module only when it runs
        from .healthcheck import add_arguments
        add_arguments(hp)
    if _wants_pipeline(sys.argv[1:] if argv is None else argv):
        from .pipeline import clickstream
        clickstream.add_arguments(cp)
    args = ap.parse_args(argv)
    if args.cmd == "pipeline":
        from .pipeline import clickstream
        return clickstream.run(args)
    if args.cmd == "healthcheck":
        from .healthcheck import run
        return run(args)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    if args.cmd == "serve":
        try:
            config = build_config(args)
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
        config.warn_unused()
        import trio

        from .clock import BrokerClock
        # the broker clock is the run's trio clock, so the control endpoint can move time
        trio.run(_serve, config, control, args.as_kafka, clock=BrokerClock())
    return 0


if __name__ == "__main__":
    sys.exit(main())
