"""Helpers shared by the fuzzers of the readers (test_svmlight, test_dask)."""
from hypothesis import strategies as st

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
