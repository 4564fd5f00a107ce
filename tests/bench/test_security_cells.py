"""The harness's security cells run end to end on pykbroker (tiny sizes, no Apache Kafka):
produce and consume over SSL and SASL_SSL (SCRAM-SHA-512) on the ``secure`` target, connection
set-up over TLS + SCRAM, and produce/consume with the authorizer on and its 10,000 bindings
(``acl`` target).  Nothing about speed: that every record went through and came back, the
numbers are there, and the table shows the authorizer on/off row."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compat" / "bench"))

import importlib.util  # noqa: E402

# loaded by path: "bench" is this test package's own name
_spec = importlib.util.spec_from_file_location("pykbroker_bench_harness", ROOT / "compat" / "bench" / "bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
B = bench.B


def _runner():
    args = argparse.Namespace(budget_mb=0.1, seconds=1, e2e_records=10, tail_rate=50)
    return bench.Runner(args, [])


@pytest.mark.timeout(300)
def test_secure_cells_on_pykbroker(tmp_path):
    t = B.PyKSecure(str(tmp_path / "p")).start()
    r = _runner()
    try:
        for sec in ("SSL", "SASL_SSL"):
            m = r.run(bench.cell("tput", "ck", topology="secure", sec=sec, size=1024), t)
            assert m["produced"] == m["consumed"] == 100, (sec, m)
            assert m["produce_mb_s"] > 0 and m["consume_mb_s"] > 0
        m = r.run(bench.cell("connect", "wire", topology="secure", sec="SASL_SSL", connections=5), t)
        assert m["conn_s"] > 0 and 0 < m["setup_p50_ms"] <= m["setup_p99_ms"], m
        assert m["broker_ms_per_conn"] >= 0
        # a wrong password is refused: the connect cell really authenticates
        bad = dict(t.client_config("SASL_SSL"), **{"sasl.password": "wrong"})
        import json
        with pytest.raises(RuntimeError, match="exited"):
            r._run(r._lg("connect", "--bootstrap", t.secure_bootstrap("SASL_SSL"), "--topic", "x",
                         "--n", 1, "--config", json.dumps(bad)), timeout=60)
    finally:
        r.close_admins()
        t.stop()


@pytest.mark.timeout(300)
def test_acl_cell_on_pykbroker(tmp_path):
    t = B.PyKAcl(str(tmp_path / "p")).start()
    noauth = B.PyKNoAuth(str(tmp_path / "n")).start()
    r = _runner()
    try:
        from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)
        f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
        assert len(r.admin(t.bootstrap).describe_acls(f, request_timeout=60).result()) == B.BINDINGS
        # the authorizer decides: a topic bound to another principal only is hidden from this one
        from confluent_kafka import KafkaError
        md = r.admin(t.bootstrap).list_topics("app-1", timeout=30).topics["app-1"]
        assert md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, md.error
        c = bench.cell("tput", "ck", topology="acl", size=1024)
        runs = {b: [] for b in bench.brokers_of("acl")}
        # the A/A control's second broker is the same kind of process; the first one stands in
        # for it here (this checks the harness's bookkeeping, not the machine's noise)
        for b, target in (("pykbroker", t), (bench.NOAUTH, noauth), (bench.NOAUTH_B, noauth), ("kafka", t)):
            m = r.run(c, target)
            assert m["produced"] == m["consumed"] == 100, m
            runs[b].append(m)
        s = bench.summarize(runs)
        assert s["produce_mb_s"]["vs_noauth"]["median"] > 0
        table = bench.table({"targets": {}, "cells": [dict(c, runs=runs, summary=s)]})
        assert s["produce_mb_s"]["aa"]["median"] > 0
        assert "authorizer on/off" in table and "A/A off/off" in table and "quota_compare.py" in table
    finally:
        r.close_admins()
        t.stop()
        noauth.stop()


def test_acl_orders_and_the_noise_note():
    """Every broker of the acl cells runs in every position equally often, and follows Kafka as
    often as the others; an on/off miss is judged against the A/A spread of the same run."""
    orders = bench._ACL_ORDERS
    names = set(bench.brokers_of("acl"))
    assert all(set(o) == names for o in orders)
    for pos in range(len(names)):
        counts = {b: sum(1 for o in orders if o[pos] == b) for b in names}
        assert len(set(counts.values())) == 1, (pos, counts)
    after_kafka = {b: sum(1 for o in orders for x, y in zip(o, o[1:]) if x == "kafka" and y == b)
                   for b in names - {"kafka"}}
    assert len(set(after_kafka.values())) == 1, after_kafka
    aa = {"median": 1.0, "min": 0.9, "max": 1.13}
    assert "within the A/A spread" in bench.within_noise({"median": 0.93}, aa)
    assert "outside the A/A spread" in bench.within_noise({"median": 0.80}, aa)
    assert bench.within_noise({"median": 0.8}, None) == ""
