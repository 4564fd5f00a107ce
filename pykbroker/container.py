"""The container image's entrypoint: ``python -m pykbroker.container [pykbroker serve options]``.

Broker settings come from the environment in the apache/kafka image's convention, so a compose
file written for that image configures pykbroker unchanged: every ``KAFKA_<KEY>`` variable is the
broker config ``key``, spelt as that image spells it (``.`` as ``_``, ``_`` as ``__``, ``-`` as
``___``; upper case): ``KAFKA_ADVERTISED_LISTENERS`` is ``advertised.listeners``,
``KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR`` is ``offsets.topic.replication.factor``.
``CLUSTER_ID`` is ``cluster.id``, as there.  Named listeners therefore work as with that image:
``KAFKA_LISTENERS=EXTERNAL://0.0.0.0:9092,INTERNAL://0.0.0.0:29092`` with
``KAFKA_ADVERTISED_LISTENERS``, ``KAFKA_LISTENER_SECURITY_PROTOCOL_MAP`` and
``KAFKA_INTER_BROKER_LISTENER_NAME`` (docker-compose.yml; each client is told the addresses of the
listener it connected through).  The variables that image reads for its JVM and log4j
(``KAFKA_HEAP_OPTS``, ``KAFKA_OPTS``, ``KAFKA_LOG4J_*``, ...) are not broker configs and are left
alone.

The image's own variables still work and are the defaults: ``PYKBROKER_LISTENERS``,
``PYKBROKER_ADVERTISED_LISTENERS``, ``PYKBROKER_LOG_DIRS`` (the Dockerfile sets them);
``KAFKA_LISTENERS``, ``KAFKA_ADVERTISED_LISTENERS`` and ``KAFKA_LOG_DIRS`` win over them, and the
container's arguments (``docker run IMAGE --override key=value``) over both.  An unknown key is
the warning ``pykbroker serve`` gives for any unknown config (naming it, never its value).

The broker runs in this process (no shell in between), so ``docker stop``'s SIGTERM reaches it.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# The apache/kafka image's variables that configure its JVM, log4j or scripts, not the broker.
NOT_BROKER_CONFIGS = frozenset((
    "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME", "KAFKA_LOG4J_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_DEBUG", "KAFKA_HOME", "KAFKA_VERSION",
))


def config_key(variable: str) -> str:
    """``KAFKA_ABC_DEF`` -> ``abc.def``, ``KAFKA_ABC__DEF`` -> ``abc_def``, ``KAFKA_ABC___DEF`` ->
    ``abc-def`` (the apache/kafka image's spelling, read back)."""
    name = variable[len("KAFKA_"):].lower()
    return name.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


def env_config(environ: Mapping[str, str]) -> dict[str, str]:
    """The broker configs the environment gives, in the apache/kafka image's convention."""
    out = {}
    for var, value in sorted(environ.items()):
        if var.startswith("KAFKA_") and len(var) > len("KAFKA_") and var not in NOT_BROKER_CONFIGS:
            out[config_key(var)] = value
    if environ.get("CLUSTER_ID"):
        out.setdefault("cluster.id", environ["CLUSTER_ID"])
    return out


def serve_args(environ: Mapping[str, str], argv: Sequence[str]) -> list[str]:
    """``pykbroker serve`` arguments: the image's defaults, the KAFKA_* settings, then ``argv``."""
    configs = env_config(environ)
    listeners = configs.pop("listeners", None) or environ.get("PYKBROKER_LISTENERS") or "PLAINTEXT://0.0.0.0:9092"
    log_dirs = configs.pop("log.dirs", None) or environ.get("PYKBROKER_LOG_DIRS") or "/var/lib/pykbroker"
    advertised = configs.pop("advertised.listeners", None) or environ.get("PYKBROKER_ADVERTISED_LISTENERS")
    args = ["serve", "--listeners", listeners, "--log-dirs", log_dirs]
    if advertised:
        args += ["--override", "advertised.listeners=" + advertised]
    for key, value in configs.items():
        args += ["--override", "%s=%s" % (key, value)]
    return args + list(argv)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    from .cli import main as cli_main
    return cli_main(serve_args(os.environ if environ is None else environ, sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
