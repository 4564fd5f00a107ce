# pykbroker as a container: one broker, PLAINTEXT on 9092, data in a volume.
#
#   docker build -t pykbroker .
#   docker run --rm -p 9092:9092 pykbroker                 # clients on this host: localhost:9092
#
# advertised.listeners is the address clients are told to connect to (Metadata answers), so it
# must be reachable from where the clients run, not from inside the container.  The default,
# PLAINTEXT://localhost:9092, suits clients on the Docker host with -p 9092:9092.  Elsewhere:
#   docker run -p 29092:9092 -e PYKBROKER_ADVERTISED_LISTENERS=PLAINTEXT://myhost:29092 pykbroker
# or as arguments (appended to `pykbroker serve`; a later --override wins):
#   docker run -p 29092:9092 pykbroker --override advertised.listeners=PLAINTEXT://myhost:29092
# Any other Kafka config the same way: --override num.partitions=3 (or --config FILE).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what the package needs to build (see .dockerignore); the source is removed after install.
WORKDIR /tmp/pykbroker-src
COPY pyproject.toml README.md ./
COPY protocol_specs ./protocol_specs
COPY pykbroker ./pykbroker
# the admin CLI's client library too (pykbroker topics|groups|produce|consume ... inside the container)
RUN pip install --no-cache-dir ".[tools]" \
    && cd / && rm -rf /tmp/pykbroker-src \
    && useradd --system --uid 10001 --no-create-home --home-dir /var/lib/pykbroker --shell /usr/sbin/nologin pykbroker \
    && mkdir -p /var/lib/pykbroker \
    && chown pykbroker:pykbroker /var/lib/pykbroker

WORKDIR /var/lib/pykbroker
USER pykbroker
VOLUME /var/lib/pykbroker
EXPOSE 9092

# Read by the entrypoint (pykbroker/container.py).  Any broker config can also be given as the
# apache/kafka image takes it: KAFKA_<KEY> (. as _, _ as __, - as ___), e.g.
#   -e KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://myhost:29092 -e KAFKA_NUM_PARTITIONS=3
# KAFKA_LISTENERS / KAFKA_ADVERTISED_LISTENERS / KAFKA_LOG_DIRS win over these defaults.  Change
# the listening port through an environment variable rather than --listeners: the healthcheck
# reads it too, to find the broker.
ENV PYKBROKER_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    PYKBROKER_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    PYKBROKER_LOG_DIRS=/var/lib/pykbroker

# A real ApiVersions round trip, not a port check (pykbroker/healthcheck.py).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["pykbroker", "healthcheck"]

# The broker runs in the entrypoint's own process (PID 1), so `docker stop`'s SIGTERM reaches it
# (clean shutdown).  Arguments of `docker run IMAGE ...` are appended to `pykbroker serve`'s.
ENTRYPOINT ["python", "-m", "pykbroker.container"]
CMD []
