"""An RCV1-shaped generator: sparse tf-idf rows with Zipf feature frequencies and planted labels.

The paper's experiments use the CCAT category of RCV1 (781,265 training rows, 23,149 test
rows, 47,236 features, 0.16% dense, i.e. about 76 non-zeros per row). That set is not part
of this repository, so `RCV1Like` makes rows of the same shape:

* documents are bags of tokens drawn from a Zipf law over the features (rank r has
  probability proportional to ``(r + zipf_offset)^(-zipf_exponent)``), with a
  log-normal length calibrated so that a row has ``nnz_per_row`` distinct features on
  average;
* values are ``(1 + log tf) * idf``, each row scaled to unit L2 norm, as in RCV1's
  standard representation (and the IMDB files of the examples). The idf is the population one,
  ``log(1 / P(feature in a document))``, computed from the generating law rather than
  from a sample, so every row is independent of the others: the first m rows of a longer
  stream are exactly the rows of a shorter one, which makes nested training sets free;
* labels come from a planted sparse linear model ``w_true`` (about ``support`` of the
  features, drawn more often among frequent ones, with Gaussian weights): ``y = sign(
  <w_true, x> + b + noise)``, the noise Gaussian with standard deviation
  ``noise * std(<w_true, x>)`` and b set so that about ``positive_rate`` of the rows are
  positive. Frequent features are learnt from few rows and rare ones only from many,
  so the achievable accuracy keeps growing with the number of rows, as on real text.

Rows are made in blocks of ``BLOCK_ROWS``, each from its own seed derived from
``(seed, stream, block)``, so the output depends only on the seed, the stream and the row
count. Memory: one block's temporaries (a few tens of MB) plus the finished blocks, and
while they are stacked into the result, the result once more (about 0.75 GB per copy at
CCAT's 781,265 rows; generating them takes 10-20 s). Stream 0 is for
training and stream 1 for testing; both share the planted model.
"""
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

BLOCK_ROWS = 32_768


@dataclass
class RCV1Like:
    """Parameters of the generator; `sample` makes rows.

    Parameters
    ----------
    n_features : int, default=47236
        Columns (RCV1's 47,236).
    nnz_per_row : float, default=76
        Target mean number of distinct features per row.
    zipf_exponent, zipf_offset : float, default=1.0 and 5.0
        Feature rank r is drawn with probability proportional to
        ``(r + zipf_offset)^(-zipf_exponent)``.
    length_spread : float, default=0.6
        Standard deviation of the log of a document's token count.
    support : float, default=0.01
        Sets the size of the planted support: about ``support * n_features`` features,
        fewer once the most frequent ones are certain to be in it.
    support_decay : float, default=1.5
        Feature rank r enters the support with probability proportional to
        ``(r + zipf_offset)^(-support_decay)``: mostly frequent words carry the label, as in
        topic categories, and rarer ones add a long tail that only many rows reveal.
    noise : float, default=0.12
        Label noise, relative to the spread of the planted scores (see the module doc).
    positive_rate : float, default=0.47
        Approximate fraction of positive rows (CCAT's is 0.47).
    seed : int, default=0
        Seeds the planted model and, with the stream number, every block of rows.
    """

    n_features: int = 47_236
    nnz_per_row: float = 76.0
    zipf_exponent: float = 1.0
    zipf_offset: float = 5.0
    length_spread: float = 0.6
    support: float = 0.01
    support_decay: float = 1.5
    noise: float = 0.12
    positive_rate: float = 0.47
    seed: int = 0
    _cdf: np.ndarray = field(init=False, repr=False)
    _idf: np.ndarray = field(init=False, repr=False)
    _log_tokens: float = field(init=False, repr=False)
    w_true: np.ndarray = field(init=False, repr=False)
    bias: float = field(init=False, repr=False)
    score_scale: float = field(init=False, repr=False)

    def __post_init__(self):
        n = self.n_features
        ranks = np.arange(1, n + 1, dtype=np.float64)
        prob = (ranks + self.zipf_offset) ** -self.zipf_exponent
        prob /= prob.sum()
        self._cdf = np.cumsum(prob)
        self._cdf[-1] = 1.0
        self._log_tokens = self._calibrate_length(prob)
        self._idf = self._population_idf(prob)
        rng = np.random.default_rng([self.seed, 2**20])
        w = rng.standard_normal(n)
        # inclusion probability falling with the rank: mostly common words carry the label
        incl = (ranks + self.zipf_offset) ** -self.support_decay
        incl *= self.support * n / incl.sum()
        w[rng.random(n) >= incl] = 0.0
        self.w_true = w
        # the bias and the noise scale from a pilot sample of stream 2 (never returned)
        self.bias, self.score_scale = 0.0, 1.0
        X, _ = self._block(np.random.default_rng([self.seed, 2, 0]), 20_000)
        scores = X @ w
        self.score_scale = float(np.std(scores))
        self.bias = -float(np.quantile(scores, 1.0 - self.positive_rate))

    # ---- the document-length law ----------------------------------------------------------
    def _length_quantiles(self, log_mean, k=256):
        """k log-normal token counts at evenly spaced quantiles (for expectations over it)."""
        from scipy.stats import norm

        z = norm.ppf((np.arange(k) + 0.5) / k)
        return np.maximum(1.0, np.exp(log_mean + self.length_spread * z))

    def _calibrate_length(self, prob):
        """The log mean token count giving ``nnz_per_row`` distinct features on average.

        A document of D tokens holds feature j with probability 1 - (1 - p_j)^D, so its
        expected distinct count is sum_j of that; bisection on the log-normal's location.
        """
        log1m = np.log1p(-prob)

        def distinct(log_mean):
            D = self._length_quantiles(log_mean, 64)
            return float(np.mean([np.sum(-np.expm1(d * log1m)) for d in D]))

        lo, hi = 0.0, 12.0
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if distinct(mid) < self.nnz_per_row else (lo, mid)
        return 0.5 * (lo + hi)

    def _population_idf(self, prob):
        log1m = np.log1p(-prob)
        D = self._length_quantiles(self._log_tokens)
        df = np.zeros_like(prob)
        for d in D:
            df += -np.expm1(d * log1m)
        return np.log(len(D) / df)

    # ---- rows -----------------------------------------------------------------------------
    def _block(self, rng, rows):
        """One block: CSR (rows, n_features) with sorted indices, and its labels."""
        n = self.n_features
        tokens = np.maximum(1, np.rint(np.exp(
            self._log_tokens + self.length_spread * rng.standard_normal(rows)))).astype(np.int64)
        row_of = np.repeat(np.arange(rows, dtype=np.int64), tokens)
        feature = np.searchsorted(self._cdf, rng.random(row_of.shape[0]), side="right")
        np.minimum(feature, n - 1, out=feature)
        # one sort gives the distinct (row, feature) pairs in CSR order and their counts
        keys, tf = np.unique(row_of * n + feature, return_counts=True)
        r, cols = np.divmod(keys, n)
        values = (1.0 + np.log(tf)) * self._idf[cols]
        indptr = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=rows), out=indptr[1:])
        sq = np.add.reduceat(values * values, indptr[:-1])
        values /= np.sqrt(np.repeat(sq, np.diff(indptr)))
        X = sp.csr_matrix((values, cols.astype(np.int32), indptr), shape=(rows, n))
        scores = (X @ self.w_true) / self.score_scale
        y = np.where(scores + self.bias / self.score_scale
                     + self.noise * rng.standard_normal(rows) > 0, 1.0, -1.0)
        return X, y

    def sample(self, n_rows, stream=0):
        """The first ``n_rows`` rows of a stream (0: training, 1: test).

        Parameters
        ----------
        n_rows : int
        stream : int, default=0

        Returns
        -------
        X : scipy.sparse.csr_matrix of shape (n_rows, n_features), float64, int32 indices
        y : ndarray of shape (n_rows,), labels in {-1, +1}

        Examples
        --------
        >>> gen = RCV1Like(n_features=2000, nnz_per_row=20, seed=1)
        >>> X, y = gen.sample(1000)
        >>> X.shape, bool(abs(X.getnnz(axis=1).mean() - 20) < 2)
        ((1000, 2000), True)
        >>> bool(np.allclose(np.sqrt(X.multiply(X).sum(axis=1)), 1.0))
        True
        >>> bool((gen.sample(300)[0] != X[:300]).nnz == 0)
        True
        """
        blocks, labels = [], []
        for b in range(-(-n_rows // BLOCK_ROWS)):
            rows = min(BLOCK_ROWS, n_rows - b * BLOCK_ROWS)
            X, y = self._block(np.random.default_rng([self.seed, stream, b]), BLOCK_ROWS)
            blocks.append(X[:rows])
            labels.append(y[:rows])
        if not blocks:
            return sp.csr_matrix((0, self.n_features)), np.zeros(0)
        X = sp.vstack(blocks, format="csr")
        X.indices = X.indices.astype(np.int32, copy=False)
        return X, np.concatenate(labels)
