"""The data-directory lock (storage/dirlock.py, Kafka's ``.lock``): a second broker on a log dir
in use refuses to start, in every way a broker is started; without the lock two brokers on one
dir lose acknowledged records (reproduced here with the lock bypassed)."""
import os
import subprocess
import sys
import time

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.storage import dirlock
from pykbroker.storage.dirlock import LogDirInUseError, lock_log_dir
from tests.polling import poll_values


def _produce(bootstrap, topic, values):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    failed = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, msg: err and failed.append(err))
    assert p.flush(20) == 0
    assert failed == []   # every record acknowledged


def _consume_all(bootstrap, topic, expect, timeout=20.0):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lock-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        return poll_values(c, expect, timeout, settle=1.0)   # more records than expected would show
    finally:
        c.close()


def test_lock_file_refuses_second_holder_and_names_pid(tmp_path):
    lk = lock_log_dir(str(tmp_path))
    assert open(tmp_path / ".lock").read().strip() == str(os.getpid())
    with pytest.raises(LogDirInUseError) as e:
        lock_log_dir(str(tmp_path))
    assert e.value.holder_pid == os.getpid() and str(tmp_path) in str(e.value)
    lk.release()
    lock_log_dir(str(tmp_path)).release()   # free again once released


def test_lock_dirs_all_or_none(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    held = lock_log_dir(b)
    with pytest.raises(LogDirInUseError):
        dirlock.lock_log_dirs([a, b])
    lock_log_dir(a).release()   # the lock on a taken before b's refusal was given back
    held.release()


def test_second_serve_process_refuses_with_one_line(tmp_path):
    data = tmp_path / "data"
    with pykbroker.Broker(log_dir=data, config=TEST_CONFIG) as first:
        first.create_topic("locked")
        _produce(first.bootstrap_servers, "locked", [b"a", b"b"])
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pykbroker", "serve",
                               "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                               "--override", "log.dirs=%s" % data],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert lines == ["pykbroker: log dir %s is in use by another broker (pid %d): its .lock is "
                         "locked; one broker per data directory" % (data, os.getpid())], proc.stderr
        assert time.monotonic() - t0 < 30
        # the first broker's data is untouched and it keeps serving
        _produce(first.bootstrap_servers, "locked", [b"c"])
        assert [r.value for r in first.records("locked")] == [b"a", b"b", b"c"]


def test_second_embedded_and_subprocess_broker_refuse(tmp_path):
    data = tmp_path / "data"
    with pykbroker.Broker(log_dir=data, config=TEST_CONFIG):
        with pytest.raises(Exception) as e:
            pykbroker.Broker(log_dir=data, config=TEST_CONFIG).start(timeout=30)
        assert "is in use by another broker" in repr(e.value) or "is in use by another broker" in repr(
            e.value.__cause__)
        child = pykbroker.Broker.subprocess(log_dir=data, config=TEST_CONFIG, control_port=None)
        with pytest.raises(Exception) as e2:
            child.start(timeout=60)
        child.stop()
        assert "in use by another broker" in str(e2.value) and "exited with code 2" in str(e2.value)


def test_crash_and_restart_in_process_take_the_lock_again(tmp_path):
    data = tmp_path / "data"
    with pykbroker.Broker(log_dir=data, config=TEST_CONFIG) as b:
        b.create_topic("relock")
        _produce(b.bootstrap_servers, "relock", [b"1", b"2"])
        b.crash()
        b.restart()
        _produce(b.bootstrap_servers, "relock", [b"3"])
        assert _consume_all(b.bootstrap_servers, "relock", 3) == [b"1", b"2", b"3"]
        with pytest.raises(LogDirInUseError):   # held again by the new incarnation
            lock_log_dir(str(data))
        b.restart(clean=True)
        assert [r.value for r in b.records("relock")] == [b"1", b"2", b"3"]


def test_without_the_lock_two_brokers_lose_acknowledged_records(tmp_path, monkeypatch):
    """The bug the lock prevents: with it bypassed, a second broker on the same dir appends at
    offsets the first already acknowledged, and records acknowledged by the first are gone."""
    monkeypatch.setattr(dirlock, "lock_log_dirs", lambda dirs: [])
    data = tmp_path / "data"
    first = pykbroker.Broker(log_dir=data, config=TEST_CONFIG).start()
    try:
        first.create_topic("shared")
        _produce(first.bootstrap_servers, "shared", [b"first-%d" % i for i in range(100)])
        second = pykbroker.Broker(log_dir=data, config=TEST_CONFIG).start()
        try:
            _produce(first.bootstrap_servers, "shared", [b"first-%d" % i for i in range(100, 200)])
            _produce(second.bootstrap_servers, "shared", [b"second-%d" % i for i in range(100)])
        finally:
            second.stop()
    finally:
        first.stop()
    monkeypatch.undo()
    with pykbroker.Broker(log_dir=data, config=TEST_CONFIG) as after:
        got = _consume_all(after.bootstrap_servers, "shared", 300, timeout=10)
    acked_by_first = {b"first-%d" % i for i in range(200)}
    lost = acked_by_first - set(got)
    assert lost, "two brokers on one dir lost nothing: the reproduction no longer shows the bug"
