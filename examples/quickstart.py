"""Train PGS on a generated sparse stream, chunk by chunk, and report what it learned.

Run:  python examples/quickstart.py [--rows 200000] [--p 1.8]

The data are made here (no download): rows with ~30 non-zeros out of 5,000 features,
L2-normalised, labels from a planted sparse linear model with 5% label noise. The
model sees each chunk once (`partial_fit`), as it would a log stream, and we print the
online statistics the solver keeps, then the accuracy on rows it never saw.
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp

from onlinepgs import PGSClassifier


def make_chunk(rng, w_true, rows, nnz=30):
    n = w_true.shape[0]
    # Zipf-like feature frequencies, as in text
    cols = np.minimum(rng.zipf(1.3, size=rows * nnz) - 1, n - 1)
    indptr = np.arange(0, rows * nnz + 1, nnz)
    X = sp.csr_matrix((rng.rand(rows * nnz), cols, indptr), shape=(rows, n))
    X.sum_duplicates()
    X = sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X
    y = np.where(X @ w_true > 0, 1, -1)
    flip = rng.rand(rows) < 0.05
    y[flip] = -y[flip]
    return X.tocsr(), y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=20_000)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    args = parser.parse_args()

    rng = np.random.RandomState(0)
    n_features = 5000
    w_true = rng.randn(n_features) * (rng.rand(n_features) < 0.2)
    clf = PGSClassifier(loss="logistic", p=args.p, sigma=args.sigma, random_state=0)
    start = time.perf_counter()
    print(f"{'examples':>10} {'progressive loss':>17} {'progressive error':>18}")
    for _ in range(args.rows // args.chunk):
        X, y = make_chunk(rng, w_true, args.chunk)
        clf.partial_fit(X, y, classes=[-1, 1])
        s = clf.online_stats_
        print(f"{s['n_examples']:>10} {s['progressive_loss']:>17.4f} "
              f"{s['progressive_error_rate']:>18.4f}")
    elapsed = time.perf_counter() - start
    X_test, y_test = make_chunk(rng, w_true, 20_000)
    stats = clf.online_stats_
    print(f"\ntrained on {stats['n_examples']} rows in {elapsed:.2f} s "
          f"(p={args.p}, sigma={args.sigma:g}, includes generating the data)")
    print(f"held-out accuracy:          {clf.score(X_test, y_test):.4f}  (label noise 5%: best ~0.95)")
    print(f"progressive error rate:     {stats['progressive_error_rate']:.4f}")
    print(f"regret bound (Lemma 1):     {stats['regret_bound']:.4g}")
    print(f"E[F(w_rand)] - F(w*) bound: {stats['optimization_error_bound']:.4g}")


if __name__ == "__main__":
    main()
