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


def produce_until_answer(cfg, topic: str, value: bytes = b"v", timeout: float = 10):
    """One record to ``topic`` with confluent-kafka, waiting at most ``timeout`` s for its
    delivery report or the first client error (a refused login or handshake is reported by
    error_cb at once; the record would wait message.timeout.ms): ``(delivery reports, client
    errors)``, the KafkaError objects as reported."""
    from confluent_kafka import Producer
    errors, delivered = [], []
    p = Producer({**cfg, "message.timeout.ms": 8000, "error_cb": errors.append})
    p.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + timeout
    while not delivered and not errors and time.monotonic() < deadline:
        p.poll(0.1)
    p.purge()
    p.flush(0)
    return delivered, errors


def set_broker_configs(admin, broker_id: str, entries: dict):
    """IncrementalAlterConfigs SET of ``entries`` on broker ``broker_id`` through a confluent-kafka
    ``AdminClient``: None when accepted, else the client's KafkaError (code and message)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    res = ConfigResource(ResourceType.BROKER, broker_id, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()])
    try:
        for f in admin.incremental_alter_configs([res]).values():
            f.result(15)
    except KafkaException as e:
        return e.args[0]
    return None
