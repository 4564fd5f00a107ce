"""Each connection carries Kafka's principal (what authorization will check): ``User:ANONYMOUS``
on PLAINTEXT, ``User:<name>`` once SASL authentication succeeds.  Observed from inside a
handler, as an authorizer will see it."""
import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.wire import WireClient

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";'


class _Spy:
    """ApiVersions' handler, recording the principal of each connection that asks."""

    def __init__(self, inner, seen):
        self.inner, self.seen = inner, seen
        for k in ("API_KEY", "MIN_VERSION", "MAX_VERSION", "ADVERTISED_MIN_VERSION"):
            if hasattr(inner, k):
                setattr(self, k, getattr(inner, k))

    async def handle(self, ctx, request):
        self.seen.append((ctx.connection.listener_name, ctx.connection.principal))
        return await self.inner.handle(ctx, request)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_principals():
    cfg = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
           "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS, **TEST_CONFIG}
    seen = []
    with pykbroker.Broker(config=cfg) as b:
        handlers = b.broker.handlers
        handlers[18] = _Spy(handlers[18], seen)
        ports = {li.name: li.port for li in b.broker.bound}
        with WireClient(("127.0.0.1", ports["PLAINTEXT"])) as c:
            assert c.request(18, 0, {})["error_code"] == 0
        with WireClient(("127.0.0.1", ports["SASL_PLAINTEXT"])) as c:
            assert c.request(18, 0, {})["error_code"] == 0           # before authentication
            assert c.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            assert c.request(36, 2, {"auth_bytes": b"\x00alice\x00pw"})["error_code"] == 0
            assert c.request(18, 0, {})["error_code"] == 0           # after
    assert seen == [("PLAINTEXT", "User:ANONYMOUS"), ("SASL_PLAINTEXT", "User:ANONYMOUS"),
                    ("SASL_PLAINTEXT", "User:alice")]
