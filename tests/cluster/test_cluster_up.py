"""``pykbroker cluster up`` as users run it: a real child process, parsed output, real probes."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys

from tests import needs

from .helpers import assert_answers, cmdline, pid_alive, port_open, requires_zookeeper, wait_for

pytestmark = requires_zookeeper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextlib.contextmanager
def launched(*args, stop=signal.SIGKILL):
    """``pykbroker cluster up *args`` running; sent ``stop`` on exit if the test left it running."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-m", "pykbroker", "cluster", "up", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(stop)
            proc.wait(60)


def read_until(proc, pred, limit=200):
    """stdout lines up to and including the first for which pred is true."""
    lines = []
    for _ in range(limit):
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("cluster up ended early (status %s):\n%s\nstderr:\n%s"
                                 % (proc.wait(), "".join(lines), proc.stderr.read()))
        lines.append(line)
        if pred(line):
            return lines
    raise AssertionError("no expected line in:\n" + "".join(lines))


def test_cluster_up_json_three_brokers_then_sigterm():
    with launched("--brokers", "3", "--json", "--override", "num.partitions=2") as proc:
        info = json.loads(read_until(proc, lambda l: l.startswith("{"))[-1])
        brokers = info["brokers"]
        assert [b["broker_id"] for b in brokers] == [1, 2, 3]
        assert info["bootstrap_servers"] == ",".join("127.0.0.1:%d" % b["port"] for b in brokers)
        assert len({b["port"] for b in brokers}) == 3
        zk_port = int(info["zookeeper"]["connect"].rsplit(":", 1)[1])
        assert port_open(zk_port)
        for b, addr in zip(brokers, info["bootstrap_servers"].split(",")):
            assert_answers(addr)
            argv = cmdline(b["pid"])
            assert argv[argv.index("--override", argv.index("serve")) + 1:].count("broker.id=%d" % b["broker_id"]) == 1
            assert "zookeeper.connect=%s" % info["zookeeper"]["connect"] in argv
            assert "num.partitions=2" in argv
            assert os.path.isdir(os.path.join(b["data_dir"], "kafka-logs"))
        pids = [b["pid"] for b in brokers] + [info["zookeeper"]["pid"]]
        assert all(pid_alive(p) for p in pids)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        for p in pids:
            assert not pid_alive(p), "pid %d survived cluster up's SIGTERM" % p
        assert not port_open(zk_port)
        for b in brokers:
            assert not port_open(b["port"])
        assert not os.path.exists(info["data_dir"])     # temporary: removed on exit


def test_cluster_up_table_with_dir_kept(tmp_path):
    d = tmp_path / "cluster"
    with launched("--brokers", "2", "--dir", str(d)) as proc:
        lines = read_until(proc, lambda l: "Ctrl-C" in l)
        text = "".join(lines)
        bootstrap = re.search(r"^bootstrap servers: (\S+)$", text, re.M).group(1)
        rows = {m.group(1): (int(m.group(2)), int(m.group(3)), m.group(4))
                for m in re.finditer(r"^(\d+|zk)\s+(\d+)\s+(\d+)\s+(\S+)\s*$", text, re.M)}
        assert set(rows) == {"1", "2", "zk"}, text
        assert bootstrap == "127.0.0.1:%d,127.0.0.1:%d" % (rows["1"][0], rows["2"][0])
        assert rows["1"][2] == str(d / "broker-1") and rows["zk"][2] == str(d / "zookeeper")
        for addr in bootstrap.split(","):
            assert_answers(addr)
        pids = [r[1] for r in rows.values()]

        proc.send_signal(signal.SIGINT)               # what Ctrl-C sends to the launcher
        assert proc.wait(60) == 0
        assert all(not pid_alive(p) for p in pids)
        assert not port_open(rows["zk"][0])
        # --dir is kept: the brokers' logs say they ran and shut down cleanly
        log = (d / "broker-1" / "broker.log").read_text()
        assert "ready, listening on PLAINTEXT://127.0.0.1:%d" % rows["1"][0] in log
        assert "received SIGTERM" in log
        assert (d / "zookeeper" / "data" / "version-2").is_dir()


def test_cluster_up_bad_override():
    with launched("--brokers", "1", "--override", "no-equals-sign") as proc:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "key=value" in err


def processes_under(d):
    """pids whose working directory is inside d (the launcher starts each child in its own dir)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cwd = os.readlink("/proc/%s/cwd" % name)
            except OSError:
                continue
            if cwd == str(d) or cwd.startswith(str(d) + os.sep):
                if pid_alive(int(name)):
                    out.append(int(name))
    return out


def test_sigterm_during_start_up_leaves_nothing(tmp_path):
    d = tmp_path / "cluster"
    with launched("--brokers", "3", "--dir", str(d)) as proc:
        # as soon as the brokers are spawned (probably before they answer)
        wait_for(lambda: (d / "broker-3" / "broker.log").exists(), timeout=60, what="brokers spawned")
        assert processes_under(d)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        assert processes_under(d) == []


def test_launcher_killed_children_follow(tmp_path):
    """SIGKILL of the launcher cannot run its clean-up: the kernel's parent-death signal does."""
    d = tmp_path / "cluster"
    with launched("--brokers", "1", "--dir", str(d)) as proc:
        read_until(proc, lambda l: "Ctrl-C" in l)
        children = processes_under(d)
        assert len(children) == 2                       # ZooKeeper and the broker
        proc.kill()
        proc.wait()
        wait_for(lambda: processes_under(d) == [], timeout=30, what="children gone after the launcher's death")


def test_no_java_is_one_clear_line(tmp_path):
    env = dict(os.environ, JAVA=str(tmp_path / "no-such-java"),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, "-m", "pykbroker", "cluster", "up", "--brokers", "1",
                        "--dir", str(tmp_path / "c")], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["pykbroker: JAVA=%s is not an executable java" % (tmp_path / "no-such-java")]
    assert "Traceback" not in r.stderr


def test_cluster_up_metrics_per_broker():
    """``--metrics``: every broker serves Prometheus metrics on its own port, printed by
    ``cluster up``; records produced to a replicated topic show up in the leader's
    MessagesIn counter and in the followers' replication counters."""
    import urllib.request
    import uuid

    needs.module("prometheus_client")
    ck = needs.module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    # SIGTERM at the end: the launcher removes its temporary directory
    with launched("--brokers", "2", "--json", "--metrics", stop=signal.SIGTERM) as proc:
        info = json.loads(read_until(proc, lambda l: l.startswith("{"))[-1])
        urls = [b["metrics"] for b in info["brokers"]]
        assert all(u and u.startswith("http://127.0.0.1:") for u in urls) and len(set(urls)) == 2, urls
        for b in info["brokers"]:
            argv = cmdline(b["pid"])
            assert argv[argv.index("--metrics") + 1] == b["metrics"][len("http://"):-len("/metrics")]
        topic = "m-" + uuid.uuid4().hex[:6]
        admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"]})
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(60)
        p = ck.Producer({"bootstrap.servers": info["bootstrap_servers"], "acks": "all"})
        for i in range(25):
            p.produce(topic, b"v%d" % i)
        assert p.flush(60) == 0

        def counter(url, name):
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            m = re.search(r'^%s\{[^}]*topic="%s"[^}]*\} ([0-9.e+]+)$' % (name, topic), text, re.M)
            return float(m.group(1)) if m else 0.0
        wait_for(lambda: sum(counter(u, "kafka_server_brokertopicmetrics_messagesin_total") for u in urls) == 25,
                 timeout=30)
        wait_for(lambda: sum(counter(u, "kafka_server_brokertopicmetrics_replicationbytesout_total")
                             for u in urls) > 0, timeout=30)
