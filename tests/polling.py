"""Reading records back with a consumer the tests have set up (assigned or subscribed;
confluent-kafka's, or kafka-python's with ``kafka_python_values``): what arrived, not what a
client library made of its errors."""
from __future__ import annotations

import time


def poll_values(consumer, expect: int, timeout: float, settle: float = 0.0, poll: float = 0.5) -> list:
    """The values of the records ``consumer`` polls (error events skipped) until ``expect`` have
    arrived or ``timeout`` seconds have passed; then ``settle`` seconds more, so that records
    beyond those expected show too.  Closing the consumer stays the caller's."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        m = consumer.poll(poll)
        if m is not None and not m.error():
            got.append(m.value())
    end = time.monotonic() + settle
    while time.monotonic() < end:
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    return got


def kafka_python_values(consumer, expect: int, timeout: float, poll_ms: int = 200) -> list:
    """The values a kafka-python ``KafkaConsumer`` polls until ``expect`` have arrived or
    ``timeout`` seconds have passed.  Closing the consumer stays the caller's."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=poll_ms).values():
            got += [r.value for r in recs]
    return got
