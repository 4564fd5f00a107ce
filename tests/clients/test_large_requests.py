"""Produce requests of several MB (batches of ~1 MB for three partitions in one request), which
the broker reads straight into one buffer per request and whose records it patches in place:
every value comes back byte for byte through confluent-kafka, under three codecs; and the
malloc settings applied at the first large request (pykbroker/server/malloc.py)."""
import hashlib
import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .util import ck_create_topic, unique_topic

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_multi_megabyte_produce_requests_read_back_exactly(broker, codec):
    topic = unique_topic("large-%s" % codec)
    ck_create_topic(broker.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.size": 1000000,
                  "compression.type": codec})
    rnd = __import__("random").Random(codec)
    sent = {}
    for i in range(3000):
        # random bytes (incompressible) and repetitive ones (compressible): both batch sizes
        v = rnd.randbytes(10240) if i % 3 else rnd.randbytes(100) * 100
        p.produce(topic, key=b"%d" % i, value=v, partition=i % 3)
        sent[b"%d" % i] = (i % 3, hashlib.sha256(v).digest())
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, i, 0) for i in range(3)])
        got, offsets = {}, {0: [], 1: [], 2: []}
        while len(got) < len(sent):
            for m in c.consume(500, 5):
                assert m.error() is None, m.error()
                got[m.key()] = (m.partition(), hashlib.sha256(m.value()).digest())
                offsets[m.partition()].append(m.offset())
    finally:
        c.close()
    assert got == sent
    for part, offs in offsets.items():   # offsets patched per batch: dense from 0
        assert offs == list(range(len(offs))), part


def _tune(env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    env.update(env_extra)
    code = ("from pykbroker.server import malloc; "
            "print(malloc.tune_for_large_requests(), malloc.tune_for_large_requests())")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60).stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_malloc_thresholds_set_once_unless_the_user_tunes_malloc():
    import ctypes
    if not hasattr(ctypes.CDLL(None), "mallopt"):
        pytest.skip("this C library has no mallopt")
    assert _tune({}) == ["True", "False"]                             # set once, then a no-op
    assert _tune({"MALLOC_ARENA_MAX": "2"}) == ["False", "False"]    # the user's settings win
