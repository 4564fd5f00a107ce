"""The README's first screen, as a new user reads and runs it: it says what pykbroker does not do
yet and how to install from this repository; its quick-start Python runs against a broker started
as it says (and explains the consumer's wait); its pytest example runs as written.  The README
stays short (the rest lives in docs/), and no link of the README, CONTRIBUTING.md,
ARCHITECTURE.md or docs/*.md leads nowhere."""
import glob
import os
import re
import subprocess
import sys

import pytest

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
    for words in ("TLS and SASL", "ACLs", "client quotas", "client quotas live in ZooKeeper", "one CPU core", "pip install .", "pip install '.[tools]'",
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


# -- length and links ----------------------------------------------------------------------
README_MAX_LINES = 300   # what a user reads first; the rest goes to docs/ (each page linked from it)


def test_readme_is_short():
    n = len(_readme().splitlines())
    assert n <= README_MAX_LINES, "README.md has %d lines; move sections to docs/" % n


def _markdown_files() -> list[str]:
    return (["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"]
            + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))))


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are code, not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _links(text: str) -> list[str]:
    prose = _prose(text)
    inline = re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)
    reference = re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", prose, re.M)
    return inline + reference


def _anchors(path: str) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    with open(path) as fh:
        heads = re.findall(r"^#+\s+(.*?)\s*#*$", _prose(fh.read()), re.M)
    out = set()
    for h in heads:
        slug = re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _broken_links(path: str) -> list[str]:
    """The relative links of a markdown file whose file, or whose heading, does not exist."""
    with open(path) as fh:
        links = _links(fh.read())
    bad = []
    for target in links:
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue   # http(s) and mailto are not checked here, nor anchors within the file
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if not os.path.exists(dest):
            bad.append(target)
        elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
            bad.append(target + " (no such heading)")
    return bad


@pytest.mark.parametrize("name", _markdown_files())
def test_relative_links_point_at_existing_files(name):
    path = os.path.join(ROOT, name)
    if not os.path.exists(path):
        pytest.skip("%s is not in this checkout" % name)
    bad = _broken_links(path)
    assert not bad, "%s links to what does not exist: %s" % (name, bad)


def test_link_check_finds_a_broken_link(tmp_path):
    """The checker itself: a link to a missing file and one to a missing heading are found,
    links inside code are not links, web links are left alone."""
    (tmp_path / "a.md").write_text("# Title\n\n## Real part\n")
    text = ("[ok](a.md) [ok2](a.md#real-part) [gone](b.md) [bad anchor](a.md#nowhere) "
            "`[code](x.md)`\n```\n[block](y.md)\n```\n[web](https://example.org)\n")
    (tmp_path / "doc.md").write_text(text)
    assert _links(text) == ["a.md", "a.md#real-part", "b.md", "a.md#nowhere", "https://example.org"]
    assert _anchors(str(tmp_path / "a.md")) == {"title", "real-part"}
    assert _broken_links(str(tmp_path / "doc.md")) == ["b.md", "a.md#nowhere (no such heading)"]
