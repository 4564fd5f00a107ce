"""The admin CLI as scripts see it: exit codes (0 ok, 1 Kafka/runtime error, 2 usage), one-line
errors without tracebacks, ``--help`` with examples, the message naming the ``tools`` extra when
confluent-kafka is missing, and ``import pykbroker.cli`` staying free of confluent_kafka."""
from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import TIMEOUT, cli


def _run(*args, input=None):
    return subprocess.run([sys.executable, "-m", "pykbroker", *args], input=input, capture_output=True,
                          timeout=TIMEOUT)


@pytest.mark.parametrize("args", [
    ["topics"],                                        # no action
    ["topics", "create"],                              # --topic missing
    ["groups", "reset-offsets", "--group", "g", "--all-topics"],   # no --to-*
    ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run", "--execute"],
    ["consume", "--topic", "t", "--from-beginning", "--offset", "3"],
    ["produce", "--topic", "t", "--acks", "2"],
    ["offsets", "--time", "yesterday"],
])
def test_usage_errors_exit_2(args):
    r = _run(*args)
    assert r.returncode == 2, r
    assert b"usage: pykbroker" in r.stderr and b"Traceback" not in r.stderr


def test_own_usage_checks_exit_2(pyk):
    r = cli(pyk, "topics", "alter-config", "--topic", "t", check=False)
    assert (r.returncode, r.stderr) == (2, b"pykbroker topics: nothing to change: give --add-config and/or "
                                           b"--delete-config\n")
    r = cli(pyk, "consume", "--topic", "t", "--offset", "soon", check=False)
    assert r.returncode == 2 and b"--offset expects earliest, latest or a number" in r.stderr
    r = cli(pyk, "topics", "list", "--command-property", "no.such.property=1", check=False)
    assert (r.returncode, r.stderr) == (2, b'pykbroker topics: cannot create the admin client: _INVALID_ARG: No such '
                                           b'configuration property: "no.such.property"\n')
    r = cli(pyk, "produce", "--topic", "t", "--command-property", "acks", check=False, input=b"x\n")
    assert (r.returncode, r.stderr) == (2, b"pykbroker produce: --command-property expects KEY=VALUE, got 'acks'\n")


def test_unreachable_broker_exits_1():
    r = _run("topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2")
    assert r.returncode == 1
    assert r.stderr == b"pykbroker topics: connection refused to 127.0.0.1:1 (is a broker running there?)\n"
    r = _run("produce", "--topic", "t", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2", input=b"x\n")
    assert (r.returncode, r.stderr.count(b"\n")) == (1, 1) and b"connection refused to 127.0.0.1:1" in r.stderr


def test_kafka_errors_exit_1(pyk):
    r = cli(pyk, "topics", "describe", "--topic", "no-such-topic", check=False)
    assert (r.returncode, r.stdout) == (1, b"") and b"does not exist" in r.stderr
    r = cli(pyk, "consume", "--topic", "no-such-topic", "--from-beginning", check=False)
    assert r.returncode == 1 and b"does not exist" in r.stderr
    r = cli(pyk, "groups", "delete", "--group", "no-such-group", check=False)
    assert r.returncode == 1 and b"GROUP_ID_NOT_FOUND" in r.stderr


@pytest.mark.parametrize("cmd", [["topics"], ["groups"], ["produce"], ["consume"], ["offsets"],
                                 ["cluster", "describe"]])
def test_help_has_examples_and_exit_codes(cmd):
    r = _run(*cmd, "--help")
    assert r.returncode == 0
    examples = r.stdout.split(b"examples:\n", 1)[1]
    assert b"pykbroker " + " ".join(cmd).encode() + b" " in examples
    assert b"exit status: 0 done, 1 Kafka or runtime error" in r.stdout


def test_top_level_help_lists_the_commands():
    r = _run("--help")
    for cmd in (b"topics", b"groups", b"produce", b"consume", b"offsets", b"cluster"):
        assert cmd in r.stdout


def test_missing_client_library_names_the_extra():
    code = ("import sys; sys.modules['confluent_kafka'] = None\n"   # what `import` sees when it is absent
            "from pykbroker.cli import main; sys.exit(main(['topics', 'list']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 1
    assert r.stderr == (b"pykbroker topics: this command needs the confluent-kafka client library: "
                        b"pip install confluent-kafka (or pip install '.[tools]' in a pykbroker checkout)\n")


def test_cli_import_does_not_load_the_client_library():
    code = ("import sys, pykbroker.cli; "
            "print(sorted(m for m in sys.modules if m.startswith(('confluent_kafka', 'pykbroker.admin_cli.'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.stdout == "[]\n", r.stderr


def test_bootstrap_server_before_or_after_the_action(pyk):
    before = _run("topics", "--bootstrap-server", pyk.bootstrap, "list", "--json")
    after = cli(pyk, "topics", "list", "--json")
    assert before.returncode == 0 and before.stdout == after.stdout
    assert _run("groups", "--bootstrap-server", pyk.bootstrap, "list").returncode == 0
