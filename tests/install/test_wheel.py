"""pykbroker installed as users install it, away from the source checkout: the wheel carries the
protocol specs as package data, a ``pip install --target`` of it starts a broker that real
clients use, and the same package imported from a zip archive (a zipapp) reads its specs.

The wheel is built from a copy of the checkout (so parallel runs never share a build/ dir)
without build isolation: no package index is needed.
"""
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile

import pytest

from tests import needs
from tests.polling import poll_values
from confluent_kafka import Consumer, Producer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPECS = os.path.join(ROOT, "protocol_specs")
READY = re.compile(r"ready, listening on PLAINTEXT://127\.0\.0\.1:(\d+)")

needs.module("wheel", "the 'wheel' package (the test extra): building a wheel without isolation needs it")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    os.makedirs(src)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if os.path.exists(os.path.join(ROOT, name)):
            shutil.copy(os.path.join(ROOT, name), src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(os.path.join(ROOT, "pykbroker"), src / "pykbroker", symlinks=True, ignore=ignore)
    shutil.copytree(SPECS, src / "protocol_specs", ignore=ignore)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (wheel,) = list((tmp / "dist").glob("pykbroker-*.whl"))
    target = tmp / "target"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return wheel, target


def test_wheel_carries_the_specs_of_protocol_specs(installed):
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as z:
        shipped = {n.rsplit("/", 1)[1]: z.read(n) for n in z.namelist()
                   if n.startswith("pykbroker/protocol/specs/")}
        # no data files outside the package (they land under the interpreter's prefix, which a
        # --target or --user install does not search)
        assert not [n for n in z.namelist() if ".data/data/" in n]
    sources = sorted(n for n in os.listdir(SPECS) if n.endswith(".json"))
    assert sorted(shipped) == sources
    for n in sources:   # byte for byte the top-level protocol_specs/, the copy that is edited
        with open(os.path.join(SPECS, n), "rb") as fh:
            assert shipped[n] == fh.read(), n


def _env(path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(path)
    return env


def test_target_install_serves_clients(installed, tmp_path):
    _, target = installed
    # started outside the checkout, with only the --target directory on the path
    proc = subprocess.Popen([sys.executable, "-m", "pykbroker", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
                             "--log-dirs", str(tmp_path / "data"), "--override",
                             "group.initial.rebalance.delay.ms=0"],
                            cwd=str(tmp_path), env=_env(target), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, port = [], []
    ready = threading.Event()

    def pump():
        for line in proc.stdout:
            lines.append(line)
            m = READY.search(line)
            if m:
                port.append(int(m.group(1)))
                ready.set()
    threading.Thread(target=pump, daemon=True).start()
    try:
        assert ready.wait(60), "".join(lines)
        bootstrap = "127.0.0.1:%d" % port[0]
        p = Producer({"bootstrap.servers": bootstrap})
        p.produce("installed", b"from a --target install")
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe(["installed"])
        try:
            assert poll_values(c, 1, 60, poll=1) == [b"from a --target install"]
        finally:
            c.close()
    finally:
        proc.terminate()
        proc.wait(30)
    r = subprocess.run([sys.executable, "-c", "import pykbroker; print(pykbroker.__file__)"],
                       cwd=str(tmp_path), env=_env(target), capture_output=True, text=True)
    assert r.stdout.startswith(str(target)), r.stdout + r.stderr


def test_zipped_package_reads_its_specs(installed, tmp_path):
    _, target = installed
    app = tmp_path / "app.zip"
    with zipfile.ZipFile(app, "w") as z:
        for dirpath, _, files in os.walk(target / "pykbroker"):
            for f in files:
                if not f.endswith(".pyc"):
                    full = os.path.join(dirpath, f)
                    z.write(full, os.path.relpath(full, target))
    code = ("import pykbroker; from pykbroker.protocol.codec import APIS, BY_NAME; "
            "print(pykbroker.__file__); print(len(APIS), BY_NAME['produce'].request[0]['name'])")
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=_env(app),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    where, apis = r.stdout.splitlines()
    assert where.startswith(str(app))
    count = len([n for n in os.listdir(SPECS) if n.endswith(".json") and n[:2].isdigit()])
    assert apis == "%d transactional_id" % count
