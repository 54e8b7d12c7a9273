"""Forgetting on a stream whose concept flips half-way (tests/test_adaptive_forget.py's
`drift_stream`: 6,000 Gaussian rows of 20 columns in units from 1e-2 to 1e2, labels of a
fixed linear concept with 5% noise, its sign flipped at row 3,000), one pass by
`partial_fit` in chunks of 100 rows, each chunk scored before it trains: the
progressive log loss over windows of rows, with and without forgetting, for the adaptive
geometry (sigma 1e-4 and eta 0.5, and both raced) and the global one (its defaults, on
the raw columns and on the same columns divided by their largest |value|).

    python bench/bench_forget_drift.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_adaptive_forget import drift_stream  # noqa: E402

from onlinepgs import PGSClassifier  # noqa: E402

WINDOWS = [(0, 3000), (3000, 3500), (3500, 4000), (4000, 5000), (5000, 6000), (3000, 6000)]


def window_losses(est, X, y, chunk=100):
    seen = {0: (0.0, 0.0)}
    for a in range(0, X.shape[0], chunk):
        est.partial_fit(X[a:a + chunk], y[a:a + chunk], classes=[-1, 1])
        st = est.online_stats_
        seen[a + chunk] = (st["sum_weight"], st["progressive_loss"] * st["sum_weight"])
    return [(seen[b][1] - seen[a][1]) / (seen[b][0] - seen[a][0]) for a, b in WINDOWS]


def main():
    X, y = drift_stream()
    scaled = X / np.max(np.abs(X), axis=0)
    adaptive = dict(geometry="adaptive", iterate="last", radius=None, random_state=0)
    runs = []
    for forget in (1.0, 0.999, 0.99):
        runs.append((f"adaptive, sigma 1e-4, eta 0.5, forget {forget:g}", X,
                     dict(adaptive, sigma=1e-4, eta=0.5, forget=forget)))
    for forget in (1.0, 0.999, 0.99):
        runs.append((f"adaptive, raced, forget {forget:g}", X, dict(adaptive, forget=forget)))
    for forget in (1.0, 0.999, 0.99):
        runs.append((f"global, defaults, forget {forget:g}", X,
                     dict(random_state=0, forget=forget)))
    for forget in (1.0, 0.999, 0.99):
        runs.append((f"global, defaults, forget {forget:g}, columns max-abs scaled", scaled,
                     dict(random_state=0, forget=forget)))
    print("| run | " + " | ".join(f"rows {a}-{b}" for a, b in WINDOWS) + " |")
    print("|---|" + "---|" * len(WINDOWS))
    for name, data, params in runs:
        losses = window_losses(PGSClassifier(**params), data, y)
        print(f"| {name} | " + " | ".join(f"{v:.4g}" for v in losses) + " |")


if __name__ == "__main__":
    main()
