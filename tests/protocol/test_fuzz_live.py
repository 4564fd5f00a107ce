"""A short run of the protocol fuzzer (compat/fuzz/run.py) against a live broker: requests
generated from protocol_specs/ for every advertised API and version plus mutated captures of
real client sessions; no crash, hang, held connection, undecodable answer, failed health check
or logged internal error, and a real client's records and committed offsets read back intact.
The long runs and their figures: docs/fuzzing.md."""
import os

import pytest

from compat.fuzz.fuzzer import run_against_new_broker

pytestmark = pytest.mark.timeout(240)

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "compat", "fuzz", "corpus")


def test_short_fuzz_run(tmp_path):
    fig = run_against_new_broker(str(tmp_path / "data"), requests=1000, seed=1, corpus_dir=CORPUS, batch=200)
    print(fig.table())
    for f in fig.findings:
        print("finding:", f)
    assert fig.requests == 1000
    assert fig.generated > 200 and fig.mutated > 200      # both sources were used
    assert len(fig.apis) > 80                            # many APIs x versions reached
    assert fig.answers > 0 and fig.closes > 0            # both outcomes seen (mutants close)
    assert fig.health_checks >= 6
    assert fig.data_intact is True
    assert fig.ok(), fig.findings[:5]


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_the_fuzzer_reports_a_crash_and_a_hang(tmp_path, fault):
    """The figures can fail: a broker killed mid-run is a crash, a stopped one (SIGSTOP) a hang,
    and the run ends there instead of drawing on."""
    import signal
    import threading

    from pykbroker.local.broker_process import BrokerProcess
    from compat.fuzz.fuzzer import LiveFuzzer, load_corpus

    with BrokerProcess(str(tmp_path / "data")) as b:
        fz = LiveFuzzer(b.bootstrap, pid=b.proc.pid, log_lines=b.lines, corpus=load_corpus(CORPUS),
                        answer_timeout=1.0, alive_timeout=3.0)
        pid = b.proc.pid
        t = threading.Timer(2.0, lambda: os.kill(pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP))
        t.start()
        try:
            fig = fz.run(seconds=90, batch=100)
        finally:
            t.cancel()
            if fault == "stop":
                os.kill(pid, signal.SIGCONT)
            fz.close()
        assert (fig.crashes, fig.hangs) == ((1, 0) if fault == "kill" else (0, 1))
        assert not fig.ok() and fig.seconds < 80


def test_several_connections_sum_their_figures_and_report_a_crash(tmp_path):
    """--connections: the connections' figures add up (every request counted once, each stream
    drawn from its own seed), and a broker killed mid-run is a crash that stops every connection."""
    import signal
    import threading

    from pykbroker.local.broker_process import BrokerProcess
    from compat.fuzz.fuzzer import LiveFuzzer, run_connections, stream_seed

    assert stream_seed(4, 0) == 4 and len({stream_seed(4, i) for i in range(3)}) == 3
    with BrokerProcess(str(tmp_path / "data")) as b:
        pid = b.proc.pid
        fz = LiveFuzzer(b.bootstrap, pid=pid, log_lines=b.lines, corpus=[], seed=3, alive_timeout=3.0)
        t = threading.Timer(8.0, lambda: os.kill(pid, signal.SIGKILL))
        t.start()
        try:
            # one batch that outlasts the broker: the parent's health check (whose producer would
            # wait its 15 s delivery timeout on a dead broker) comes only at the end
            fig = run_connections(fz, 2, None, requests=None, seconds=90, batch=20, health_every=10**6)
        finally:
            t.cancel()
        # both connections' requests, each counted once, before the kill; then the crash
        assert fig.requests > 40 and fig.generated == fig.requests == sum(fig.apis.values())
        assert fig.answers > 0
        assert fig.crashes >= 1 and not fig.ok() and fig.seconds < 40
