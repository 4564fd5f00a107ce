"""Start-up failures a person can act on, as users meet them: ``pykbroker serve`` (a real
subprocess) with a listener address in use or a log dir that is a file ends with one line naming
the address or path and exit status 2, not a traceback; the embedded ``Broker`` raises the
OSError / ConfigError itself; ``Broker.subprocess`` stops waiting when its child exits; an unknown
config key is a warning naming it, with the known key a misspelling was meant to be."""
import logging
import os
import socket
import subprocess
import sys
import time

import pytest
import trio

import pykbroker
from pykbroker.config import ConfigError


def _serve(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "pykbroker", "serve", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_serve_port_in_use_is_one_line(tmp_path, busy_port):
    r = _serve("--listeners", "PLAINTEXT://127.0.0.1:%d" % busy_port, "--log-dirs", str(tmp_path / "d"),
               "--log-level", "WARNING")
    assert r.returncode == 2
    assert r.stderr == ("pykbroker: cannot listen on 127.0.0.1:%d (listener PLAINTEXT): Address already in use\n"
                        % busy_port)
    # with the default (INFO) logging too: the log lines, then the error, no traceback
    r = _serve("--listeners", "PLAINTEXT://127.0.0.1:%d" % busy_port, "--log-dirs", str(tmp_path / "d"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1].startswith("pykbroker: cannot listen on 127.0.0.1:%d" % busy_port)


def test_serve_control_port_in_use_is_one_line(tmp_path, busy_port):
    r = _serve("--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(tmp_path / "d"), "--log-level", "WARNING",
               "--control", "127.0.0.1:%d" % busy_port)
    assert r.returncode == 2
    assert r.stderr == ("pykbroker: cannot listen on 127.0.0.1:%d (control endpoint): Address already in use\n"
                        % busy_port)


def test_serve_log_dir_that_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("")
    r = _serve("--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(f), "--log-level", "WARNING")
    assert (r.returncode, r.stderr) == (2, "pykbroker: log dir %s is not a directory\n" % f)
    r = _serve("--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(f / "sub"), "--log-level", "WARNING")
    assert (r.returncode, r.stderr) == (2, "pykbroker: cannot create log dir %s: Not a directory\n" % (f / "sub"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to any directory")
def test_serve_log_dir_not_writable(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        r = _serve("--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(d), "--log-level", "WARNING")
    finally:
        d.chmod(0o700)
    assert (r.returncode, r.stderr) == (2, "pykbroker: log dir %s is not writable\n" % d)


def test_serve_misspelt_override_suggests_the_key(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "pykbroker", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
                          "--log-dirs", str(tmp_path / "d"), "--override", "log.retention.hour=1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "ready, listening" in line:
                break
        text = "".join(lines)
    finally:
        p.terminate()
        p.wait(30)
    assert ("ignoring config 'log.retention.hour': not a broker config pykbroker knows or uses; "
            "did you mean 'log.retention.hours'?") in text


def test_embedded_port_in_use_raises_the_oserror(busy_port):
    with pytest.raises(OSError) as e:
        pykbroker.Broker(port=busy_port).start()
    assert str(e.value) == ("[Errno 98] cannot listen on 127.0.0.1:%d (listener PLAINTEXT): Address already in use"
                            % busy_port)

    async def main():
        async with pykbroker.Broker(port=busy_port):
            pass
    with pytest.raises(OSError, match="cannot listen on 127.0.0.1:%d" % busy_port):
        trio.run(main)


def test_embedded_log_dir_that_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("")
    with pytest.raises(NotADirectoryError, match="log dir %s is not a directory" % f):
        pykbroker.Broker(log_dir=str(f)).start()


def test_embedded_bad_value_raises_config_error():
    with pytest.raises(ConfigError, match="num.partitions: Value must be at least 1"):
        pykbroker.Broker(config={"num.partitions": 0}).start()


def test_embedded_unknown_key_warns_naming_it(caplog):
    with caplog.at_level(logging.WARNING, logger="pykbroker.config"):
        with pykbroker.Broker(config={"log.retention.hour": "1", "no.such.config": "x"}):
            pass
    warned = [r.getMessage() for r in caplog.records if r.name == "pykbroker.config"]
    assert warned == ["ignoring config 'log.retention.hour': not a broker config pykbroker knows or uses; "
                      "did you mean 'log.retention.hours'?",
                      "ignoring config 'no.such.config': not a broker config pykbroker knows or uses"]


def test_subprocess_broker_stops_waiting_when_its_child_exits(busy_port):
    t = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        pykbroker.Broker.subprocess(port=busy_port).start(timeout=60)
    # the child fails in well under a second; 20 s leaves room for a loaded machine and is
    # still far from the 60 s timeout it waited for before
    assert time.monotonic() - t < 20
    assert str(e.value) == ("broker exited with code 2: cannot listen on 127.0.0.1:%d (listener PLAINTEXT): "
                            "Address already in use" % busy_port)
