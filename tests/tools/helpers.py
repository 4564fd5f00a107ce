"""Run ``pykbroker <command>`` as users do (a subprocess) and normalise what legitimately
differs between two clusters before comparing outputs."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

TIMEOUT = 120   # a generous bound for one command on a loaded machine (never a timing assertion)


def cli(target, *args, input=None, check=True, bootstrap=True):
    """``pykbroker ARGS --bootstrap-server <target>``; ``check``: the exit status must be 0."""
    cmd = [sys.executable, "-m", "pykbroker", *args]
    if bootstrap:
        cmd += ["--bootstrap-server", target.bootstrap]
    r = subprocess.run(cmd, input=input, capture_output=True, timeout=TIMEOUT)
    if check and r.returncode != 0:
        raise AssertionError("%s exited %d:\nstdout: %s\nstderr: %s"
                             % (" ".join(args), r.returncode, r.stdout.decode(errors="replace"),
                                r.stderr.decode(errors="replace")))
    return r


def cli_json(target, *args, input=None):
    return json.loads(cli(target, *args, "--json", input=input).stdout)


def name(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def wait_topic(target, topic, partitions=None, timeout=60.0):
    """Until the target's metadata lists the topic (with that many partitions): Kafka answers
    CreateTopics/CreatePartitions before every broker's metadata has it."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and (partitions is None or len(t.partitions) == partitions) \
                and all(p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError("topic %s not in %s's metadata" % (topic, target.name))
        time.sleep(0.2)


def wait_gone(target, topic, timeout=60.0):
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    deadline = time.monotonic() + timeout
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise AssertionError("topic %s still in %s's metadata" % (topic, target.name))
        time.sleep(0.2)


def scrub(obj, keys=("topic_id", "cluster_id", "timestamp", "member_id", "host", "port")):
    """A copy without the values that differ between two clusters by nature."""
    if isinstance(obj, dict):
        return {k: ("<%s>" % k if k in keys else scrub(v, keys)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v, keys) for v in obj]
    return obj


class _KafkaNotRun:
    """The Kafka half of ``both`` under PYKBROKER_QUICK=1 (no JVM started).  Equal to nothing
    and not subscriptable, so a comparison left outside :func:`same_as_kafka` fails instead of
    comparing pykbroker's answer with itself."""

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        return True

    __hash__ = None

    def __getitem__(self, key):
        raise AssertionError("the Apache Kafka half did not run (PYKBROKER_QUICK=1): use same_as_kafka()")

    def __repr__(self):
        return "<Apache Kafka not run: PYKBROKER_QUICK=1>"


KAFKA_NOT_RUN = _KafkaNotRun()


def sides(p, k):
    """The outputs of the sides that ran: (pykbroker, Kafka), or (pykbroker,) in quick mode."""
    return (p,) if k is KAFKA_NOT_RUN else (p, k)


def same_as_kafka(p, k, view=lambda x: x):
    """The last check of a ``both`` test: ``view(p) == view(k)``.  In quick mode (the Kafka half
    not run) the test is reported as skipped, after pykbroker's own assertions have passed."""
    if k is KAFKA_NOT_RUN:
        pytest.skip("PYKBROKER_QUICK=1: pykbroker's own assertions passed; the comparison with "
                    "Apache Kafka runs in CI")
    assert view(p) == view(k)
