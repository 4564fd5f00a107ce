"""Helpers of the differential suite on top of the tests' wire client
(:mod:`pykbroker.protocol.wire`): every connection carries the suite's client id (group member
ids start with it), one-shot calls take a target (``conftest.Target``), and
:func:`differences` / :func:`explain` say where pykbroker's answer and Kafka's differ."""
from __future__ import annotations

import time

from pykbroker.protocol import wire
from pykbroker.protocol.wire import ZERO_UUID, WireClient, make_batch as batch, wait_for_topic  # noqa: F401
from tests.ports import free_port

CLIENT_ID = "differential"

# What the suite's retry loops absorbed: (side, what, error code) -> count.  Printed in the
# terminal summary (conftest.py), so a retry that hides a broker's misbehaviour shows.
ABSORBED: dict = {}


def absorbed(target, what: str, code: int) -> None:
    """Note one retried answer (``what``: the request) of ``target``."""
    key = (target.name, what, int(code))
    ABSORBED[key] = ABSORBED.get(key, 0) + 1


def connect(target, timeout: float = 20.0) -> WireClient:
    return WireClient(target, timeout=timeout, client_id=CLIENT_ID)


def call(target, api_key, version, body, **kw):
    with connect(target, **kw) as r:
        return r.request(api_key, version, body)


def produce(target, topic, partition, records, acks=-1, version=9, timeout_ms=10000, raw=None):
    """The one partition's answer (on ``raw`` if given, else on a new connection)."""
    if raw is not None:
        return wire.produce_part(wire.produce(raw, topic, partition, records, acks, version, timeout_ms))
    with connect(target) as r:
        return wire.produce_part(wire.produce(r, topic, partition, records, acks, version, timeout_ms))


def produce_accepted(c, topic, partition, records, acks=-1, deadline_s=30.0):
    """Produce ``records`` on the connection ``c`` until accepted (a new partition may not have
    its leader yet, Kafka's least of all); the last refusal fails the test after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while True:
        part = wire.produce_part(wire.produce(c, topic, partition, records, acks))
        if part["error_code"] == 0 or time.monotonic() > deadline:
            assert part["error_code"] == 0, part
            return
        time.sleep(0.1)


def settled(observe, done, timeout=30.0):
    """``observe()`` until ``done(result)``, or the deadline: then the last result, for the
    comparison to show.  Kafka answers an admin request once its controller committed the change;
    its broker's Metadata, DescribeConfigs and ListConfigResources read the broker's copy, which
    replays the metadata log a moment later, so a read right after a change can still show the old
    state on Kafka under load (pykbroker's own view is current when it answers)."""
    deadline = time.monotonic() + timeout
    while True:
        r = observe()
        if done(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def fetch(target, topic, partition, offset, version=12, max_wait_ms=0, max_bytes=1 << 20, isolation_level=0,
          current_leader_epoch=-1):
    with connect(target) as r:
        return wire.fetch(r, topic, partition, offset, version=version, max_wait_ms=max_wait_ms,
                          max_bytes=max_bytes, partition_max_bytes=max_bytes, isolation_level=isolation_level,
                          current_leader_epoch=current_leader_epoch)


def create_topic(target, name, partitions=1, configs=None, version=5):
    with connect(target) as r:
        return wire.create_topic(r, name, partitions, configs, version, exist_ok=True)


def init_producer_id(target, version=4):
    with connect(target) as r:
        return wire.init_producer_id(r, version)


def list_offsets(target, topic, partition, timestamp, version=7, isolation_level=0):
    with connect(target) as r:
        return wire.list_offsets(r, topic, partition, timestamp, version, isolation_level)


def differences(a, b, path="", out=None) -> list:
    """Every path where a (pykbroker) and b (Kafka) differ, as readable lines."""
    out = [] if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append("%s.%s: pykbroker=%r, kafka has no such key" % (path, k, a[k]))
            elif k not in a:
                out.append("%s.%s: kafka=%r, pykbroker has no such key" % (path, k, b[k]))
            else:
                differences(a[k], b[k], "%s.%s" % (path, k), out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, "%s[%d]" % (path, i), out)
    elif a != b:
        out.append("%s: pykbroker=%r kafka=%r" % (path or "<value>", a, b))
    return out


def explain(a, b) -> str:
    d = differences(a, b)
    return "pykbroker and Apache Kafka differ:\n  " + "\n  ".join(d[:40])


def sasl_sides(config: dict, pyk: str, kafka: str, both: str | None = None, authorizer: bool = False) -> list:
    """Module fixtures over ``config`` for a test module to bind at its top level: ``pyk``
    (pykbroker with a SASL listener), ``kafka`` (the oracle with one, started once per
    configuration for the directory; with ``authorizer``, the directory's shared authorizer
    Kafka, conftest.kafka_authorizer, whose settings ``config`` must be: no binding at a module's
    start nor left at its end) and, if named, ``both``
    (``run(fn)`` -> ``(fn(pykbroker side), fn(Kafka side))``)."""
    import pytest

    @pytest.fixture(scope="module", name=kafka)
    def kafka_side(request):
        if authorizer:
            k = request.getfixturevalue("kafka_authorizer")
            return {"plain": ("127.0.0.1", k.port), "sasl": ("127.0.0.1", k.sasl_port)}
        # the directory's Kafka with these settings (conftest.sasl_oracles), shared with every
        # module comparing with the same ones
        return request.getfixturevalue("sasl_oracles")(config)

    @pytest.fixture(scope="module", name=pyk)
    def pyk_side():
        yield from pykbroker_with_sasl_listener(config)

    fixtures = [kafka_side, pyk_side]
    if both is not None:
        @pytest.fixture(scope="module", name=both)
        def both_sides(request):
            p, k = request.getfixturevalue(pyk), request.getfixturevalue(kafka)
            return lambda fn: (fn(p), fn(k))
        fixtures.append(both_sides)
    return fixtures


def pykbroker_with_sasl_listener(config: dict):
    """pykbroker with a PLAINTEXT and a SASL_PLAINTEXT listener and ``config``, as the Kafka of
    conftest.sasl_oracles: ``{"plain": (host, port), "sasl": (host, port)}``."""
    import pykbroker
    from pykbroker.embedded import TEST_CONFIG

    cfg = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **config, **TEST_CONFIG}
    with pykbroker.Broker(config=cfg) as b:
        ports = {li.name: li.port for li in b.broker.bound}
        yield {"plain": ("127.0.0.1", ports["PLAINTEXT"]), "sasl": ("127.0.0.1", ports["SASL_PLAINTEXT"])}
