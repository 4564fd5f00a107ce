"""Producing with a confluent-kafka ``Producer`` the tests have set up, keeping what its delivery
reports say: the errors the client was told, not what it retried away."""
from __future__ import annotations

from typing import Callable, Optional


def produce_each(producer, topic: str, values: list, partition: int, after: Optional[Callable] = None) -> list:
    """Produces ``values`` in order to ``partition`` of ``topic``, calling ``after()`` after each
    one (``lambda: producer.poll(0)`` to serve the callbacks as they go, ``lambda:
    producer.flush(15)`` to send them one request at a time).  Returns the list the delivery
    reports' errors are appended to: complete once the caller's ``producer.flush`` returns 0."""
    errors: list = []

    def report(err, msg) -> None:
        if err:
            errors.append(err)
    for v in values:
        producer.produce(topic, value=v, partition=partition, on_delivery=report)
        if after is not None:
            after()
    return errors
