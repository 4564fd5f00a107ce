"""Build and run the Java kafka-clients scenarios in compat/java (real org.apache.kafka:kafka-clients).

``build(profile)`` compiles the Maven project for one client version (``kafka39`` = 3.9.x, what
Spark 4 bundles; ``kafka4`` = newest 4.x) unless the build output is newer than every source;
``run(...)`` starts one JVM for one scenario and parses its JSON-lines report into a ``Report``;
``run_batch(...)`` runs several scenarios in one JVM (concurrently unless told otherwise) and
splits its output back into one ``Report`` per scenario, as if each had had a JVM of its own.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "compat" / "java"
PROFILES = {"kafka39": "3.9.2", "kafka4": "4.4.0"}   # must match compat/java/pom.xml


class JavaToolsMissing(RuntimeError):
    pass


def _newest_source_mtime() -> float:
    newest = (PROJECT / "pom.xml").stat().st_mtime
    for p in (PROJECT / "src").rglob("*"):
        if p.is_file():
            newest = max(newest, p.stat().st_mtime)
    return newest


def classpath_file(profile: str) -> Path:
    return PROJECT / "target" / profile / "classpath.txt"


def build(profile: str) -> tuple[str, float]:
    """Compile one profile if needed; returns (java classpath, seconds spent building)."""
    missing = [t for t in ("java", "javac", "mvn") if shutil.which(t) is None]
    if missing:
        raise JavaToolsMissing(
            "the Java compatibility tests need %s on PATH (a JDK 17+ and Maven 3.8+; "
            "tools/test.sh installs the Debian packages default-jdk-headless and maven)" % " and ".join(missing))
    target = PROJECT / "target" / profile
    target.mkdir(parents=True, exist_ok=True)
    spent = 0.0
    # One build at a time per checkout (several test sessions may share it).
    with open(PROJECT / "target" / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cp = classpath_file(profile)
        classes = target / "classes" / "pykbroker" / "compat" / "Main.class"
        if not (cp.exists() and classes.exists() and cp.stat().st_mtime > _newest_source_mtime()):
            t0 = time.monotonic()
            base = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(PROJECT / "pom.xml"), "-P", profile, "compile"]
            # Offline first: dependencies are cached in ~/.m2 after the first build.
            for cmd in (base[:1] + ["-o"] + base[1:], base):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode == 0:
                    break
            else:
                raise RuntimeError("Maven build of compat/java (-P %s) failed:\n%s\n%s"
                                   % (profile, r.stdout[-5000:], r.stderr[-5000:]))
            os.utime(cp)   # the stamp: newer than every source once the build succeeded
            spent = time.monotonic() - t0
    classpath = str(target / "classes") + os.pathsep + cp.read_text().strip()
    return classpath, spent


class Report:
    """What one scenario JVM printed: JSON events, exit code, stderr (client logs)."""

    def __init__(self, cmd, rc, stdout, stderr, seconds):
        self.cmd, self.rc, self.stderr, self.seconds = cmd, rc, stderr, seconds
        self.events = []
        self.garbage = []
        for line in stdout.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.garbage.append(line)

    def all(self, event, **match):
        return [e for e in self.events if e.get("event") == event
                and all(e.get(k) == v for k, v in match.items())]

    def one(self, event, **match):
        found = self.all(event, **match)
        assert len(found) == 1, "expected one %s event matching %r, got %d\n%s" % (
            event, match, len(found), self.context())
        return found[0]

    def by_case(self, event):
        return {e["case"]: e for e in self.all(event)}

    def context(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-40:])
        errs = [e for e in self.events if e.get("event") in ("phase_error", "fatal", "member_error")]
        return "command: %s\nexit code: %s\nerrors: %s\nstderr tail:\n%s" % (
            " ".join(self.cmd[-6:]), self.rc, json.dumps(errs, indent=1), tail)

    def assert_phase(self, name):
        ok = self.all("phase_ok", phase=name)
        assert ok, "phase %r of the Java scenario failed\n%s" % (name, self.context())

    def assert_clean(self):
        assert self.all("done"), "the Java scenario did not finish\n" + self.context()
        assert self.rc == 0 and not self.all("phase_error"), self.context()


def run(classpath: str, scenario: str, bootstrap: str, timeout_s: int = 150, **args) -> Report:
    cmd = command(classpath, scenario, bootstrap, timeout_s, **args)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 30)
    return Report(cmd, r.returncode, r.stdout, r.stderr, time.monotonic() - t0)


def run_batch(classpath: str, bootstrap: str, runs: dict, timeout_s: int = 240,
              parallel: int | None = None) -> dict:
    """Run ``runs`` (run id -> (scenario, args)) in one JVM; returns run id -> ``Report``.

    A JVM start and the class loading of kafka-clients cost about a second of CPU each on the
    machines the tests run on; scenarios that mostly wait on the broker (rebalances,
    transactions) also overlap in one JVM.  The scenarios must use topics and groups of their own.
    Each Report holds the events tagged with its run id; its exit code is what that scenario's
    own JVM would have returned: 0 done, 1 done with a failed phase, 2 fatal or unfinished (the
    JVM's stderr, every run's client logs, is each Report's stderr)."""
    cmd = ["java", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
           "pykbroker.compat.Main", "batch", bootstrap, "timeout_s=%d" % timeout_s]
    if parallel is not None:
        cmd.append("parallel=%d" % parallel)
    lines = []
    for rid, (scenario, args) in runs.items():
        fields = [rid, scenario] + ["%s=%s" % kv for kv in args.items()]
        assert not any("\t" in f or "\n" in f for f in fields), fields
        lines.append("\t".join(fields))
    t0 = time.monotonic()
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=timeout_s + 30)
    seconds = time.monotonic() - t0
    out: dict = {}
    by_run: dict = {rid: [] for rid in runs}
    garbage = []
    for line in r.stdout.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            garbage.append(line)
            continue
        if isinstance(e, dict) and e.get("run") in by_run:
            by_run[e["run"]].append(line)
        else:
            garbage.append(line)
    for rid, (scenario, args) in runs.items():
        rep = Report(cmd + ["run=" + rid, scenario] + ["%s=%s" % kv for kv in args.items()], None,
                     "\n".join(by_run[rid]), r.stderr, seconds)
        rep.garbage.extend(garbage)
        done = rep.all("done")
        rep.rc = 2 if len(done) != 1 or rep.all("fatal") else (1 if done[0]["failed"] else 0)
        out[rid] = rep
    return out


def command(classpath: str, scenario: str, bootstrap: str, timeout_s: int = 150, **args) -> list:
    cmd = ["java", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
           "pykbroker.compat.Main", scenario, bootstrap, "timeout_s=%d" % timeout_s]
    return cmd + ["%s=%s" % kv for kv in args.items()]


def spawn(classpath: str, scenario: str, bootstrap: str, out_path: str, timeout_s: int = 300, **args):
    """Start a long-running scenario (``produce_load``, ``consume_group``) in the background, its
    JSON lines going to ``out_path`` (stderr to ``out_path + '.err'``); ``read(out_path)`` parses them."""
    cmd = command(classpath, scenario, bootstrap, timeout_s, **args)
    with open(out_path, "wb") as out, open(out_path + ".err", "wb") as err:
        return subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)


def read(out_path: str, rc=None) -> Report:
    """The events a spawned scenario has written so far (a partial last line is left out)."""
    with open(out_path, "r", errors="replace") as f:
        text = f.read()
    if not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    err = ""
    if os.path.exists(out_path + ".err"):
        with open(out_path + ".err", errors="replace") as f:
            err = f.read()
    return Report([out_path], rc, text, err, 0.0)
