"""ZooKeeperServer: a real ZooKeeper 3.8 JVM, checked with kazoo (an independent client)."""
import os
import signal
import socket

import pytest

from pykbroker.local.zookeeper import ZooKeeperServer, ZooKeeperUnavailable, find_classpath, four_letter

from .helpers import pid_alive, port_open, proc_state, requires_zookeeper, wait_for

pytestmark = requires_zookeeper


def kazoo_client(zk):
    from kazoo.client import KazooClient

    c = KazooClient(hosts=zk.connect_string, timeout=10.0)
    c.start(timeout=15)
    return c


def test_start_write_restart_read_back(tmp_path):
    with ZooKeeperServer(str(tmp_path / "zk")) as zk:
        port, pid = zk.port, zk.pid
        assert port > 0 and pid_alive(pid)
        assert four_letter("127.0.0.1", port, "ruok") == b"imok"
        c = kazoo_client(zk)
        try:
            c.ensure_path("/pykbroker/test")
            c.create("/pykbroker/test/node", b"written before the restart")
        finally:
            c.stop()
            c.close()

        zk.restart(down_seconds=1.0)          # SIGKILL: only what reached the txn log survives
        assert not pid_alive(pid)
        assert zk.port == port and zk.pid != pid
        c = kazoo_client(zk)
        try:
            data, stat = c.get("/pykbroker/test/node")
        finally:
            c.stop()
            c.close()
        assert data == b"written before the restart"
        assert stat.version == 0
        # the config it runs with: loopback only, no admin server
        cfg = open(zk.config_path).read()
        assert "clientPortAddress=127.0.0.1" in cfg and "admin.enableServer=false" in cfg
        new_pid = zk.pid
    assert not pid_alive(new_pid)
    assert not port_open(port)
    assert os.path.exists(tmp_path / "zk" / "data" / "version-2")   # a given dir is kept


def test_stop_is_sigterm_and_port_closes(tmp_path):
    zk = ZooKeeperServer(str(tmp_path / "zk")).start()
    port, pid = zk.port, zk.pid
    rc = zk.stop()
    assert rc in (143, -signal.SIGTERM)      # JVM exit status on SIGTERM
    assert not pid_alive(pid) and not port_open(port)
    assert zk.stop() is None                 # stopping twice is harmless
    zk.start()                               # and it comes back on the same port
    try:
        assert zk.port == port and port_open(port)
    finally:
        zk.close()


def test_pause_resume(tmp_path):
    with ZooKeeperServer(str(tmp_path / "zk")) as zk:
        zk.pause()
        assert proc_state(zk.pid) == "T"
        # the kernel still accepts the connection, but nobody answers
        with pytest.raises(socket.timeout):
            four_letter("127.0.0.1", zk.port, "ruok", timeout=1.0)
        zk.resume()
        wait_for(lambda: four_letter("127.0.0.1", zk.port, "ruok") == b"imok", what="ruok after SIGCONT")


def test_temporary_data_dir_removed(tmp_path):
    zk = ZooKeeperServer()
    zk.start()
    d = zk.data_dir
    assert os.path.isdir(d)
    zk.close()
    assert not os.path.exists(d)


def test_missing_jars_error_names_the_package(monkeypatch):
    monkeypatch.delenv("ZOOKEEPER_CLASSPATH", raising=False)
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setattr("pykbroker.local.zookeeper.DEBIAN_JAR", "/nonexistent/zookeeper.jar")
    with pytest.raises(ZooKeeperUnavailable, match="apt-get install zookeeper"):
        find_classpath()


def test_failed_start_shows_this_runs_log(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOOKEEPER_CLASSPATH", str(tmp_path / "no-such.jar"))
    zk = ZooKeeperServer(str(tmp_path / "zk"))
    with pytest.raises(RuntimeError) as e:
        zk.start(timeout=60)
    assert "ZooKeeper exited with status 1" in str(e.value)
    assert "ZooKeeperServerMain" in str(e.value)      # java's "could not find or load main class"
    assert zk.proc is None


def test_port_taken_meanwhile_moves_on_given_port_fails(tmp_path, monkeypatch):
    import pykbroker.local.zookeeper as mod

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    try:
        picks = [busy]
        real = mod.free_port
        monkeypatch.setattr(mod, "free_port", lambda host="127.0.0.1": picks.pop() if picks else real(host))
        with ZooKeeperServer(str(tmp_path / "a")) as zk:     # a picked port: it moves on
            assert zk.port != busy
            assert "Address already in use" in open(zk.log_path).read()
        with pytest.raises(RuntimeError, match="did not start on 127.0.0.1:%d" % busy):
            ZooKeeperServer(str(tmp_path / "b"), port=busy).start()   # a given port: an error
    finally:
        taken.close()
