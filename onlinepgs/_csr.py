"""THE constructor of the CSR chunks that readers hand to learners.

Every reader (svmlight, VW text, CSV, JSON lines) and the namespaced-features kernel
build their chunks here, so that the matrix type the command's path carries is
decided in one place.
"""


def csr(data, indices, indptr, shape, canonical=False):
    """A CSR matrix over the arrays (not copied). ``canonical``: the indices of each
    row are sorted and unique (the caller guarantees it)."""
    import scipy.sparse as sp

    X = sp.csr_matrix((data, indices, indptr), shape=shape)
    if canonical:
        X.has_canonical_format = True
    return X
