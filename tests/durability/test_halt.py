"""Log dir failure that leaves the broker without storage: Apache Kafka halts the process
(``Exit.halt(1)``) when every log dir has failed ("Shutdown broker because all log dirs in ...
have failed", LogManager) and when the metadata log dir (by default the first log dir) has failed
("Shutdown broker because the metadata log dir ... has failed", ReplicaManager).  pykbroker does
the same: a critical line, exit status 1, no clean shutdown; the next start recovers every
acknowledged record.  Run as a real process with FaultFS and a fault hook (fault_child.py)."""
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol.wire import WireClient, create_topic, make_batch, produce, produce_part

from .test_broker_faults import consume_all

pytestmark = pytest.mark.timeout(120)

_READY = re.compile(r"ready, listening on PLAINTEXT://[^:,\s]+:(\d+)")


class FaultChild:
    def __init__(self, root, dirs, fail_dirs=()):
        self.root, self.dirs = root, dirs
        self.trigger = root + ".trigger"
        self.lines = []
        ready = threading.Event()
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.durability.fault_child", root, self.trigger, ",".join(dirs),
             *fail_dirs], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                m = _READY.search(line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(30):
            self.proc.kill()
            raise RuntimeError("fault child not ready:\n" + "".join(self.lines))

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def inject(self):
        open(self.trigger, "w").close()
        deadline = time.time() + 10
        while "injected EIO" not in self.text():
            assert time.time() < deadline, "fault hook did not fire"
            time.sleep(0.02)

    def text(self):
        return "".join(self.lines)


def _produce_acked(bootstrap, topic, n, partitions=(0,)):
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(n):
        for part in partitions:
            p.produce(topic, b"v-%d-%d" % (part, i), partition=part,
                      on_delivery=lambda err, m: err is None and acked.append((m.partition(), m.value())))
    assert p.flush(15) == 0
    return acked


def _poke_until_exit(child, topic, partition=0, timeout=20):
    """Produce until the broker process ends (the first failing append halts it)."""
    deadline = time.time() + timeout
    while child.proc.poll() is None and time.time() < deadline:
        try:
            with WireClient(child) as c:
                produce(c, topic, partition, make_batch([b"after-fault"]))
        except Exception:
            pass                       # the connection dies with the process
        time.sleep(0.1)
    return child.proc.wait(10)


def test_all_log_dirs_failed_halts_then_restart_recovers(tmp_path):
    root = str(tmp_path / "data")
    child = FaultChild(root, [root])
    try:
        create_topic(child, "h", 1)
        acked = _produce_acked(child.bootstrap, "h", 20)
        assert len(acked) == 20
        child.inject()
        rc = _poke_until_exit(child, "h")
    finally:
        if child.proc.poll() is None:
            child.proc.kill()
    out = child.text()
    assert rc == 1, out
    assert "CRITICAL pykbroker.log_manager: Shutdown broker because all log dirs in %s have failed" % root in out
    assert not re.search(r"pykbroker node \d+ stopped", out)     # no clean shutdown ran
    assert not os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))
    # the disk is fine again: a normal start recovers every acknowledged record
    with BrokerProcess(root) as b:
        got = consume_all(b.bootstrap, "h", [0])
        assert [v for (_, _), v in sorted(got.items())] == [v for _, v in acked]
        # and it serves: a new record goes in after them
        assert _produce_acked(b.bootstrap, "h", 1) == [(0, b"v-0-0")]


def test_metadata_log_dir_failure_halts(tmp_path):
    root = str(tmp_path / "data")
    dirs = [os.path.join(root, "d0"), os.path.join(root, "d1")]
    child = FaultChild(root, dirs, [dirs[0]])
    try:
        create_topic(child, "m", 4)
        acked = _produce_acked(child.bootstrap, "m", 5, partitions=range(4))
        in_d0 = [p for p in range(4) if os.path.isdir(os.path.join(dirs[0], "m-%d" % p))]
        assert in_d0
        child.inject()
        rc = _poke_until_exit(child, "m", in_d0[0])
    finally:
        if child.proc.poll() is None:
            child.proc.kill()
    out = child.text()
    assert rc == 1, out
    assert "Shutdown broker because the metadata log dir %s has failed" % dirs[0] in out
    with BrokerProcess(root, {"log.dirs": ",".join(dirs)}) as b:
        got = consume_all(b.bootstrap, "m", list(range(4)))
        assert sorted((p, v) for (p, _), v in got.items()) == sorted(acked)


def test_one_data_dir_of_two_failing_does_not_halt(tmp_path):
    """Kafka keeps running when a dir other than the metadata one fails (only its partitions
    go offline); the halt is only for the two cases above."""
    root = str(tmp_path / "data")
    dirs = [os.path.join(root, "d0"), os.path.join(root, "d1")]
    child = FaultChild(root, dirs, [dirs[1]])
    try:
        create_topic(child, "k", 4)
        _produce_acked(child.bootstrap, "k", 2, partitions=range(4))
        in_d1 = [p for p in range(4) if os.path.isdir(os.path.join(dirs[1], "k-%d" % p))]
        in_d0 = [p for p in range(4) if p not in in_d1]
        child.inject()
        with WireClient(child) as c:
            r = produce(c, "k", in_d1[0], make_batch([b"x"]))
            assert produce_part(r)["error_code"] == 56   # KAFKA_STORAGE_ERROR
            r = produce(c, "k", in_d0[0], make_batch([b"y"]))
            assert produce_part(r)["error_code"] == 0
        time.sleep(0.3)
        assert child.proc.poll() is None
        assert "Shutdown broker" not in child.text()
    finally:
        child.proc.terminate()
        child.proc.wait(20)
