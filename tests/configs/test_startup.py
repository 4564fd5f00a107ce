"""``pykbroker serve`` as users run it (a real subprocess): a bad config value is a one-line error
and exit status 2, never a traceback; an unknown key is a warning and the broker still starts;
server.properties and --override reach DescribeConfigs and topic defaults."""
import subprocess
import sys
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from pykbroker.local.broker_process import BrokerProcess

from tests.configs.helpers import TIMEOUT, describe, name

STATIC = ConfigSource.STATIC_BROKER_CONFIG.value  # 4


def _serve(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "pykbroker", "serve", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args,message", [
    (["--override", "log.segment.bytes=abc"],
     "Invalid value abc for configuration log.segment.bytes: Not a number of type INT (from --override)"),
    (["--override", "num.partitions=0"],
     "Invalid value 0 for configuration num.partitions: Value must be at least 1 (from --override)"),
    (["--listeners", "SSL://127.0.0.1:0"],
     "listener SSL: ssl.keystore.location: an SSL listener needs a key and certificate (ssl.keystore.location "
     "or ssl.keystore.certificate.chain + ssl.keystore.key)"),
    (["--listeners", "EXTERNAL://127.0.0.1:0"],
     "Invalid value EXTERNAL://127.0.0.1:0 for configuration listeners: No security protocol defined for listener "
     "EXTERNAL (from --listeners)"),
    (["--override", "log.retention.hours"], "--override expects key=value, got 'log.retention.hours'"),
])
def test_bad_value_exits_with_one_line(tmp_path, args, message):
    r = _serve("--log-dirs", str(tmp_path / "data"), *args)
    assert r.returncode == 2
    assert r.stderr == "pykbroker: configuration error: %s\n" % message
    assert not (tmp_path / "data").exists()   # refused before touching the data dir


def test_bad_value_in_properties_file_names_the_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.dirs=%s\nlog.cleanup.policy=shred\n" % (tmp_path / "data"))
    r = _serve("--config", str(props))
    assert r.returncode == 2
    assert r.stderr == ("pykbroker: configuration error: Invalid value shred for configuration log.cleanup.policy: "
                        "String must be one of: compact, delete (from %s)\n" % props)
    r = _serve("--config", str(tmp_path / "missing.properties"))
    assert r.returncode == 2 and "No such file" in r.stderr and "Traceback" not in r.stderr


def test_unknown_key_is_a_warning(tmp_path):
    with BrokerProcess(str(tmp_path / "data"), {"no.such.config": "secret-value", "num.partitions": "2"}) as b:
        text = b.log_text()
    assert "WARNING pykbroker.config: ignoring config 'no.such.config': not a broker config pykbroker knows " \
           "or uses" in text
    assert "secret-value" not in text   # values may be secrets: never logged


def _start_with_config_file(data_dir, *args):
    """``pykbroker serve --config FILE ...`` (BrokerProcess passes only flags and overrides): its
    output is read by BrokerProcess's own pump, so ``bootstrap`` and ``stop`` work as usual."""
    b = BrokerProcess(data_dir)
    b.proc = subprocess.Popen([sys.executable, "-m", "pykbroker", "serve", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1)
    threading.Thread(target=b._pump, args=(b.proc,), daemon=True).start()
    if not b._ready.wait(30):
        b.kill()
        raise RuntimeError("broker did not become ready:\n" + b.log_text())
    return b


def test_properties_and_overrides_reach_describe_configs_and_topics(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# Kafka-style file\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=%s\n"
                     "group.initial.rebalance.delay.ms=0\nnum.partitions=3\nlog.retention.ms=300000\n"
                     "message.max.bytes=2000000\n" % (tmp_path / "data"))
    b = _start_with_config_file(str(tmp_path / "data"), "--config", str(props), "--override", "num.partitions=4")
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        broker = admin.describe_configs([res])[res].result(TIMEOUT)
        assert (broker["num.partitions"].value, broker["num.partitions"].source) == ("4", STATIC)
        assert (broker["log.retention.ms"].value, broker["log.retention.ms"].source) == ("300000", STATIC)
        t = name("defaults")
        admin.create_topics([NewTopic(t, -1, 1)])[t].result(TIMEOUT)
        assert len(admin.list_topics(t, timeout=TIMEOUT).topics[t].partitions) == 4   # --override over the file
        topic = describe(admin, t)
        assert topic["retention.ms"] == ("300000", STATIC)
        assert topic["max.message.bytes"] == ("2000000", STATIC)
        # Topic-level overrides go through the same table: a bad one is INVALID_CONFIG.
        bad = name("bad")
        with pytest.raises(KafkaException) as e:
            admin.create_topics([NewTopic(bad, 1, 1, config={"max.message.bytes": "-1"})])[bad].result(TIMEOUT)
        err = e.value.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG
        assert err.str() == "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"
    finally:
        b.stop()
