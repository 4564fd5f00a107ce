"""The admin CLI as a new user meets it: a broker that is not there fails within seconds in the
user's words, a malformed --bootstrap-server or an unknown option is a usage error showing the
subcommand's usage, ``... | head`` ends quietly, ``--version``, topic ids as Kafka prints them,
and the conventions users bring from Kafka's tools, kcat and rpk (--command-config, a bootstrap
default from the environment, -b/-t)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient, NewTopic

import pykbroker

from .helpers import TIMEOUT, name


def _run(*args, input=None, env=None):
    e = dict(os.environ)
    e.pop("PYKBROKER_BOOTSTRAP_SERVER", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "pykbroker", *args], input=input, capture_output=True,
                          timeout=TIMEOUT, env=e)


def _refused_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # bound, never listened: connecting is refused
    return port


def test_refused_connection_fails_fast_in_words():
    port = _refused_port()
    for cmd in (["topics", "list"], ["groups", "list"], ["cluster", "describe"], ["offsets", "-t", "x"]):
        t = time.monotonic()
        r = _run(*cmd, "-b", "127.0.0.1:%d" % port)   # the default --timeout: 30 s
        took = time.monotonic() - t
        assert r.returncode == 1, r
        assert r.stderr == b"pykbroker %s: connection refused to 127.0.0.1:%d (is a broker running there?)\n" \
            % (cmd[0].encode(), port)
        assert took < 15, took   # was 30 s; a few seconds of interpreter start-up on a loaded machine
    r = _run("produce", "-t", "x", "-b", "127.0.0.1:%d" % port, input=b"v\n")
    assert (r.returncode, r.stderr) == (1, b"pykbroker produce: connection refused to 127.0.0.1:%d (is a broker "
                                           b"running there?)\n" % port)


def test_unresolvable_name_in_words():
    r = _run("topics", "list", "-b", "no-such-host.invalid:9092")
    assert (r.returncode, r.stderr) == (1, b"pykbroker topics: host name 'no-such-host.invalid' not resolved\n")


def test_malformed_bootstrap_is_a_usage_error():
    for bad in ("localhost", "localhost:port", "host:99999", ",", "a:1,b"):
        r = _run("topics", "list", "--bootstrap-server", bad)
        assert r.returncode == 2, (bad, r)
        assert r.stderr.startswith(b"usage: pykbroker topics list ") and b"Traceback" not in r.stderr
        assert b"argument -b/--bootstrap-server: expected HOST:PORT" in r.stderr
    r = _run("topics", "list", env={"PYKBROKER_BOOTSTRAP_SERVER": "localhost"})
    assert (r.returncode, r.stderr) == (2, b"pykbroker topics: $PYKBROKER_BOOTSTRAP_SERVER: expected HOST:PORT, "
                                           b"got 'localhost'\n")


def test_unknown_option_shows_the_subcommands_usage():
    r = _run("topics", "describe", "--bogus")
    assert r.returncode == 2
    assert r.stderr.startswith(b"usage: pykbroker topics describe ")
    assert r.stderr.endswith(b"pykbroker topics describe: error: unrecognized arguments: --bogus\n")
    r = _run("consume", "-t", "x", "--bogus")
    assert r.returncode == 2 and r.stderr.startswith(b"usage: pykbroker consume ")


def test_version():
    r = _run("--version")
    assert (r.returncode, r.stdout) == (0, b"pykbroker %s\n" % pykbroker.__version__.encode())


def test_pipe_to_head_ends_quietly(pyk):
    topic = name("head")
    r = _run("produce", "-b", pyk.bootstrap, "-t", topic, input=b"".join(b"%d\n" % i for i in range(50000)))
    assert r.returncode == 0, r
    p = subprocess.Popen([sys.executable, "-m", "pykbroker", "consume", "-b", pyk.bootstrap, "-t", topic,
                          "--from-beginning", "--exit-at-end"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"0\n"
    p.stdout.close()   # `| head -1`
    err = p.stderr.read()
    assert p.wait(TIMEOUT) == 0
    assert err == b""


def test_environment_bootstrap_and_short_options(pyk):
    topic = name("short")
    r = _run("topics", "create", "-t", topic, env={"PYKBROKER_BOOTSTRAP_SERVER": pyk.bootstrap})
    assert (r.returncode, r.stdout) == (0, b"Created topic %s.\n" % topic.encode())
    r = _run("produce", "-b", pyk.bootstrap, "-t", topic, input=b"hello\n")
    assert r.returncode == 0, r
    r = _run("consume", "-t", topic, "--from-beginning", "--max-messages", "1",
             env={"PYKBROKER_BOOTSTRAP_SERVER": pyk.bootstrap})
    assert (r.returncode, r.stdout) == (0, b"hello\n")
    # --bootstrap-server wins over the environment
    r = _run("topics", "list", "-b", pyk.bootstrap, env={"PYKBROKER_BOOTSTRAP_SERVER": "127.0.0.1:%d"
                                                         % _refused_port()})
    assert r.returncode == 0 and topic.encode() + b"\n" in r.stdout


def test_command_config_on_every_command(pyk, tmp_path):
    props = tmp_path / "client.properties"
    # a property librdkafka refuses proves the file reached the client of each command
    props.write_text("# client settings\nno.such.property=1\n")
    for cmd in (["topics", "list"], ["groups", "list"], ["cluster", "describe"], ["offsets", "-t", "x"],
                ["produce", "-t", "x"], ["consume", "-t", "x"],
                ["groups", "describe", "--group", "g"], ["topics", "describe"], ["users", "list"]):
        r = _run(*cmd, "-b", pyk.bootstrap, "--command-config", str(props), input=b"")
        assert r.returncode == 2, (cmd, r)
        assert b'No such configuration property: "no.such.property"' in r.stderr, (cmd, r)
    props.write_text("client.id=from-the-file\n")
    r = _run("topics", "list", "-b", pyk.bootstrap, "--command-config", str(props))
    assert r.returncode == 0, r
    r = _run("topics", "list", "-b", pyk.bootstrap, "--command-config", str(tmp_path / "missing"))
    assert r.returncode == 2 and b"--command-config: cannot read" in r.stderr


def test_topic_ids_as_kafka_prints_them(pyk):
    """The broker logs each new topic's id as Kafka's Uuid.toString does (URL-safe base64); the
    CLI prints the same text.  Topics are created until one id has a '-' or '_' (where the
    standard alphabet's '+' or '/' would differ): about one topic in two."""
    admin = AdminClient({"bootstrap.servers": pyk.bootstrap})
    logged = {}
    for _ in range(60):
        topic = name("tid")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        deadline = time.monotonic() + 30
        while topic not in logged:
            for line in pyk.proc.lines:
                m = re.search(r"created topic (\S+) \(id (\S+),", line)
                if m:
                    logged[m.group(1)] = m.group(2)
            assert time.monotonic() < deadline
        if re.search(r"[-_]", logged[topic]):
            break
    assert re.search(r"[-_]", logged[topic])
    r = _run("topics", "describe", "-b", pyk.bootstrap, "-t", topic)
    assert r.returncode == 0, r
    assert b"TopicId: %s\t" % logged[topic].encode() in r.stdout
