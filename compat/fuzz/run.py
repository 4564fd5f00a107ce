"""Fuzz a live pykbroker over its whole request surface and print the figures.

    python compat/fuzz/run.py --seconds 600                  # ten minutes, a fresh broker
    python compat/fuzz/run.py --requests 1000000 --json /tmp/fuzz.json
    python compat/fuzz/run.py --seconds 60 --seed 3 --mutate-share 0.8
    python compat/fuzz/run.py --seconds 600 --connections 4   # four fuzzing connections at once
    python compat/fuzz/run.py --sasl --requests 5000      # the SASL exchange (compat/fuzz/sasl.py), 5000 sessions
    python compat/fuzz/run.py --sasl --seconds 600        # as many SASL sessions as ten minutes hold
    python compat/fuzz/run.py --after-sasl --seconds 600  # every API fuzzed after SASL/PLAIN authentication

A broker is started as users run it (`pykbroker serve`, a child process, fresh data dir), a real
client (confluent-kafka) produces records to a topic of its own and commits a group's offsets,
then requests generated from protocol_specs/ (every API and version the broker advertises) and
mutations of the requests real clients sent in captured sessions (compat/fuzz/corpus/, made by
compat/fuzz/capture.py) are sent in batches.  After each batch a real client must produce
within 15 s and the broker's RSS and open fds are read.  At the end the records and the committed
offsets are read back by a real consumer and compared byte for byte.
(compat/fuzz/fuzzer.py says exactly what is counted.)

Exit status 0 when there was no crash, hang, held connection, undecodable answer, health-check
failure, logged internal error, and the other client's data was intact; 1 otherwise.
"""
import argparse
import json
import os
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from compat.fuzz.fuzzer import run_against_new_broker  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, help="stop after this many requests")
    ap.add_argument("--seconds", type=float, help="stop after this long (default 60 s without --requests)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=300, help="requests between two health checks")
    ap.add_argument("--mutate-share", type=float, default=0.5,
                    help="share of requests that are mutated captures (the rest generated from the specs)")
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"), help="captured sessions (*.bin)")
    ap.add_argument("--connections", type=int, default=1,
                    help="fuzzing connections at once, each a process with its own generator stream "
                         "derived from --seed (connection 0 draws what a one-connection run draws)")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    ap.add_argument("--log", metavar="FILE", help="write the broker's log there at the end")
    ap.add_argument("--quiet", action="store_true", help="no progress line per batch")
    ap.add_argument("--sasl", action="store_true",
                    help="fuzz the SASL exchange of a SASL_PLAINTEXT listener instead (--requests: sessions)")
    ap.add_argument("--after-sasl", action="store_true",
                    help="the broker's listener is SASL_PLAINTEXT and every connection authenticates "
                         "(SASL/PLAIN) before its requests are fuzzed: the whole request surface after "
                         "authentication (--sasl fuzzes the exchange itself)")
    args = ap.parse_args(argv)
    # SIGTERM (a time limit, kill) ends the run as Ctrl-C does: the broker child is stopped and
    # the fuzzing workers joined on the way out, not left running without their parent
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.sasl:
        from compat.fuzz.sasl import run_against_new_broker as run_sasl
        with tempfile.TemporaryDirectory() as d:
            # --seconds alone: as many sessions as fit in that time
            sessions = args.requests or (2000 if args.seconds is None else 10 ** 9)
            fig = run_sasl(os.path.join(d, "data"), sessions=sessions, seed=args.seed,
                           batch=args.batch, mutate_share=args.mutate_share, seconds=args.seconds)
        for k, v in vars(fig).items():
            if k != "findings":
                print("%-16s %s" % (k, v))
        for f in fig.findings:
            print("finding:", f)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(vars(fig), fh, indent=1, default=str)
        return 0 if fig.ok() else 1
    if args.requests is None and args.seconds is None:
        args.seconds = 60.0

    def progress(fig, t):
        if not args.quiet:
            print("%6.0fs  %8d requests  %6d closes  %5d errors-answers  RSS %.0f MB  fds %s" % (
                t, fig.requests, fig.closes, fig.error_answers, fig.rss_mb[-1] if fig.rss_mb else 0,
                fig.fds[-1] if fig.fds else "-"), flush=True)

    with tempfile.TemporaryDirectory(prefix="pykbroker-fuzz-") as d:
        fig = run_against_new_broker(os.path.join(d, "data"), requests=args.requests, seconds=args.seconds,
                                     seed=args.seed, corpus_dir=args.corpus, batch=args.batch,
                                     mutate_share=args.mutate_share, progress=progress, log_path=args.log,
                                     connections=args.connections, sasl=args.after_sasl)
    print()
    print(fig.table())
    # each kind of finding once, labelled: its kind, how often it was seen, its first example
    for kind, n in fig.finding_counts.items():
        print("finding [%s] x%d: %s" % (kind, n, fig.finding_examples.get(kind, "(example not kept)")))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(fig.as_dict(), fh, indent=1, default=str)
    return 0 if fig.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
