"""The fuzzers' shared parts: `fuzzer`, which makes each one deterministic with a slow
larger run beside it, and the byte edits of the readers' and model files' fuzzers."""
import lzma
import sys

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

# the seed of every slow run (a default run's is its test's own: derandomize)
SLOW_SEED = 50
# a slow run tries this many times the default run's examples
SLOW_FACTOR = 5


def fuzzer(examples, *strategies, slow_examples=None, **named):
    """`@given(*strategies, **named)` made deterministic, as two tests.

    The decorated function is the default run: `examples` examples from a seed derived
    from the test itself (Hypothesis's ``derandomize``). Beside it, in the same module,
    ``<name>_slow`` is its larger run (`slow_examples`, default SLOW_FACTOR times as
    many, from SLOW_SEED), marked ``slow`` (CI runs it; ``-m "not slow"`` skips it).
    Neither reads nor writes Hypothesis's example database and neither has a deadline
    or a health check of speed, so a run in CI and one on a laptop, loaded or not, try
    the same examples and give the same verdict; a failure prints its example, which
    a test of its own then keeps.
    """
    common = dict(database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow,
                                         HealthCheck.function_scoped_fixture])

    def make(check):
        default = settings(max_examples=examples, derandomize=True, **common)(
            given(*strategies, **named)(check))
        larger = settings(max_examples=slow_examples or SLOW_FACTOR * examples, **common)(
            given(*strategies, **named)(check))
        name = check.__name__ + "_slow"
        larger.__name__ = larger.__qualname__ = name
        sys._getframe(1).f_globals[name] = pytest.mark.slow(seed(SLOW_SEED)(larger))
        return default
    return make


# edits of a byte string: (what, where as a fraction of its length, the bytes)
MUTATIONS = st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace"]),
                               st.floats(0, 1), st.binary(min_size=1, max_size=3)),
                     min_size=1, max_size=6)


def mutate(data, mutations):
    """data with the MUTATIONS applied in turn."""
    data = bytearray(data)
    for kind, where, piece in mutations:
        i = int(where * len(data))
        if kind == "insert":
            data[i:i] = piece
        elif kind == "delete":
            del data[i:i + len(piece)]
        else:
            data[i:i + len(piece)] = piece
    return bytes(data)


def xz_streams(data):
    """Every xz stream of `data`, with the stream padding the format allows between them
    (NUL bytes, a multiple of 4) skipped: lzma.decompress stops at padding and drops the
    streams after it as junk, where they are data."""
    out, rest = [], data
    while rest:
        stream = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        try:
            out.append(stream.decompress(rest))
        except lzma.LZMAError:
            if out:  # junk after the streams: ignored, as lzma.decompress ignores it
                break
            raise
        if not stream.eof:
            raise lzma.LZMAError("a truncated stream")
        rest = stream.unused_data
        stripped = rest.lstrip(b"\0")
        if (len(rest) - len(stripped)) % 4:
            break  # not padding: junk, as above
        rest = stripped
    return b"".join(out)
