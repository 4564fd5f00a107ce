"""A short run of the protocol fuzzer (compat/fuzz/run.py) against a live broker: requests
generated from protocol_specs/ for every advertised API and version plus mutated captures of
real client sessions; no crash, hang, held connection, undecodable answer, failed health check
or logged internal error, and a real client's records and committed offsets read back intact.
The long runs and their figures: docs/fuzzing.md."""
import os

import pytest

from pykbroker.testing.fuzz import run_against_new_broker

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
