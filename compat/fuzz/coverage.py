"""Coverage-guided fuzzing (atheris / libFuzzer) of the sans-IO layer: the request dispatcher,
the generated codecs and the record-batch parser (compat/fuzz/targets.py says what
each target promises).  Not part of the test suite (it runs until stopped); a crash is written
by libFuzzer as ``crash-<sha1>`` in the working directory, with the traceback on stderr.

    pip install atheris
    python compat/fuzz/coverage.py                      # all targets, until Ctrl-C
    python compat/fuzz/coverage.py records -max_total_time=300 -print_final_stats=1
    python compat/fuzz/coverage.py codec compat/fuzz/corpus/codec   # keep a corpus directory

The first argument (optional) is a target name (codec, dispatch, records, all); the rest are
libFuzzer's options and corpus directories.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import atheris  # noqa: E402

with atheris.instrument_imports(include=["pykbroker"]):
    from compat.fuzz import targets as fuzz_targets  # noqa: E402
    # the modules the targets reach, instrumented too (the generated codecs: see below)
    import pykbroker.protocol.codec  # noqa: E402,F401
    import pykbroker.protocol.records  # noqa: E402,F401
    import pykbroker.protocol.primitives  # noqa: E402,F401
    import pykbroker.protocol.framing  # noqa: E402,F401
    import pykbroker.server.dispatch  # noqa: E402,F401


def _instrument_generated_codecs():
    """The codecs are Python source generated and exec'd at first use (codec.py): instrument
    every function each compile makes, so libFuzzer sees their branches too."""
    import types
    from pykbroker.protocol import codec

    original = codec._compile

    def compile_instrumented(fields, version, flexible, direction):
        top, src = original(fields, version, flexible, direction)
        for v in list(top.__globals__.values()):
            if isinstance(v, types.FunctionType) and v.__code__.co_filename.startswith("<codec"):
                atheris.instrument_func(v)
        return top, src

    codec._compile = compile_instrumented


def main(argv):
    name = "all"
    if len(argv) > 1 and not argv[1].startswith("-") and argv[1] in (*fuzz_targets.TARGETS, "all"):
        name = argv.pop(1)
    target = fuzz_targets.all_targets if name == "all" else fuzz_targets.TARGETS[name]
    _instrument_generated_codecs()
    fuzz_targets._handlers()   # load the handlers before fuzzing starts
    atheris.Setup(argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(list(sys.argv))
