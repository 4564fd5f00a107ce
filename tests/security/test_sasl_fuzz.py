"""A short run of the SASL fuzzer (compat/fuzz/sasl.py) against a broker process with a
SASL_PLAINTEXT listener serving PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER: handshakes and
SaslAuthenticate / raw v0 tokens, right, wrong and mutated, requests out of order; no crash,
hang, held connection, undecodable answer, refused valid exchange, failed real-client
authentication or logged internal error."""
import os
import signal
import threading

import pytest

from tests import needs

from compat.fuzz.sasl import SaslFuzzer, broker_overrides, run_against_new_broker

needs.module("confluent_kafka")
pytestmark = pytest.mark.timeout(180)


def test_short_sasl_fuzz_run(tmp_path):
    fig = run_against_new_broker(str(tmp_path / "data"), sessions=600, seed=1, batch=200)
    print(fig)
    assert fig.sessions == 600
    assert fig.authenticated > 100 and fig.mutated > 200   # valid and mutated exchanges both ran
    assert fig.raw_answers > 0 and fig.closes > 50         # v0 framing reached; refusals close
    assert fig.health_checks >= 4
    assert fig.ok(), fig.findings[:5]


def test_the_sasl_fuzzer_reports_a_crash(tmp_path):
    """The figures can fail: a broker killed mid-run is a crash and the run stops there."""
    from pykbroker.local.broker_process import BrokerProcess
    with BrokerProcess(str(tmp_path / "data"), broker_overrides()) as b:
        fz = SaslFuzzer(b.bootstrap, pid=b.proc.pid, log_lines=b.lines, seed=2)
        t = threading.Timer(1.0, lambda: os.kill(b.proc.pid, signal.SIGKILL))
        t.start()
        try:
            fig = fz.run(100000, batch=100000)   # no health check: the SCRAM user was never made
        finally:
            t.cancel()
        assert fig.crashes == 1 and not fig.ok() and fig.sessions < 100000
