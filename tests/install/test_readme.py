"""The README's first screen, as a new user reads and runs it: it says what pykbroker does not do
yet and how to install from this repository; its quick-start Python runs against a broker started
as it says (and explains the consumer's wait); its pytest example runs as written."""
import os
import re
import subprocess
import sys

from pykbroker.local.broker_process import BrokerProcess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as fh:
        return fh.read()


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(r"```%s\n(.*?)```" % lang, text, re.S)


def _section(title: str) -> str:
    text = _readme()
    start = text.index("\n## %s" % title)
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_first_screen_says_what_is_missing_and_how_to_install():
    first = "\n".join(_readme().splitlines()[:60])
    for words in ("TLS and SASL", "ACLs", "no quotas", "one CPU core", "pip install .", "pip install '.[tools]'",
                  "pykbroker serve", "## Use it in your tests"):
        assert words in first, words


def test_quick_start_python_runs_and_explains_its_wait(tmp_path):
    code = _blocks(_section("Install and start"), "python")[0]
    assert "group.initial.rebalance.delay.ms" in code   # the ~3 s wait of poll() is explained
    with BrokerProcess(str(tmp_path / "data")) as b:   # Kafka's defaults, as `pykbroker serve`
        r = subprocess.run([sys.executable, "-c", code.replace("localhost:9092", b.bootstrap)],
                           capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout) == (0, "b'hello'\n"), r.stderr


def test_pytest_example_runs_as_written(tmp_path):
    code = _blocks(_section("Use it in your tests"), "python")[0]
    (tmp_path / "test_example.py").write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tmp_path / "test_example.py")], capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
