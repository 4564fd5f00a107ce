"""What the security tests ask of a real client, written once."""
import time
import uuid


def produce_one(cfg, topic_prefix: str, timeout: int = 20):
    """Deliver one record to a new topic ``<topic_prefix><random>`` with confluent-kafka:
    ``(delivery error or None, client errors seen on the way)``, each error ``(code, text)``;
    ("no answer", "") when nothing is reported within ``timeout`` s.  librdkafka retries a
    refused authentication on its own, so a record is delivered once the broker accepts."""
    from confluent_kafka import Producer
    errors, delivered = [], []
    p = Producer({**cfg, "error_cb": lambda e: errors.append((e.code(), e.str())),
                  "message.timeout.ms": timeout * 1000, "reconnect.backoff.max.ms": 500})
    p.produce(topic_prefix + uuid.uuid4().hex[:6], b"v",
              on_delivery=lambda err, msg: delivered.append(err and (err.code(), err.str())))
    deadline = time.monotonic() + timeout + 2
    while not delivered and time.monotonic() < deadline:
        p.poll(0.1)
    p.purge()
    p.flush(0)
    return (delivered[0] if delivered else ("no answer", "")), errors
