"""Seconds per one-epoch fit of PGS on IMDB with the core as built: run it on a build with
the software prefetches and on one without (``ONLINEPGS_NO_PREFETCH=1``), alternately.

    python bench/bench_prefetch.py                      # this checkout's build
    python bench/bench_prefetch.py --repo /tmp/nopf     # another checkout's build

Prints the median over ``--repeats`` fits for PGS p=2 and p=1.8 (defaults otherwise).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

REPO = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(REPO), help="checkout whose build to time")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    sys.path.insert(0, args.repo)
    from onlinepgs import PGSClassifier
    from onlinepgs._core import _pgs

    X, y = load_svmlight_file(str(Path(args.data) / "imdb_train.svm.gz"))
    medians = []
    for cfg in (dict(p=2.0), dict(p=1.8)):
        PGSClassifier(sigma=1e-4, max_epochs=1, random_state=0, **cfg).fit(X, y)  # warm-up
        times = []
        for _ in range(args.repeats):
            est = PGSClassifier(sigma=1e-4, max_epochs=1, random_state=0, **cfg)
            start = time.perf_counter()
            est.fit(X, y)
            times.append(time.perf_counter() - start)
        medians.append(np.median(times))
    print(f"{_pgs.__file__}: p=2 {medians[0] * 1e3:.2f} ms, p=1.8 {medians[1] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
