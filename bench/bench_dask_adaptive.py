"""The adaptive geometry on Dask's lanes against one process: test AUC and log loss.

One pass of ``PGSClassifier(geometry="adaptive", iterate="last", radius=None, eta=--eta,
sigma=--sigma)`` over each set's training rows: ``partial_fit`` in one process over the
rows in order, against ``onlinepgs.dask.fit`` on Dask's threads with ``--lanes`` lanes
(the rows in ``--partitions`` partitions of equal size, dealt round-robin to the lanes),
with ``slice_rows="auto"`` and with ``--slice-rows``. The sets' files are read from
``$ONLINEPGS_DATA`` (a9a: ``a9a.svm.gz``, ``a9a.t.svm.gz``; imdb: ``imdb_train.svm.gz``,
``imdb_test.svm.gz``).

    python bench/bench_dask_adaptive.py --data a9a imdb --out docs/bench/dask_adaptive.md#sets

(``--out FILE#NAME`` writes the run as the section NAME of FILE: bench/_record.py.)
"""
import argparse
import os
import sys
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

import onlinepgs.dask as opd
from onlinepgs import PGSClassifier, load_svmlight

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import write_record  # noqa: E402  (bench/, the directory of this script)

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ONLINEPGS_DATA", REPO.parent / "shared" / "data"))
SETS = {"a9a": ("a9a.svm.gz", "a9a.t.svm.gz"),
        "imdb": ("imdb_train.svm.gz", "imdb_test.svm.gz")}


def one_set(name, args, out):
    train, test = SETS[name]
    X, y = load_svmlight(DATA / train)
    Xt, yt = load_svmlight(DATA / test, n_features=X.shape[1])
    sigma = args.sigma if args.sigma == "auto" else float(args.sigma)

    def learner():
        return PGSClassifier(geometry="adaptive", iterate="last", radius=None, eta=args.eta,
                             sigma=sigma, random_state=0)

    def scores(clf):
        p = clf.predict_proba(Xt)[:, 1]
        return roc_auc_score(yt, p), log_loss(yt, p)

    one = scores(learner().partial_fit(X, y, classes=[-1, 1]))
    cuts = np.linspace(0, X.shape[0], args.partitions + 1).astype(int)
    dX = da.concatenate([da.from_array(X[a:b], chunks=X[a:b].shape, asarray=False)
                         for a, b in zip(cuts, cuts[1:])], axis=0)
    out(f"\n{name}: one process, test AUC {one[0]:.4f}, log loss {one[1]:.4f}\n")
    out("| lanes | slice_rows | AUC | log loss | AUC - one process's |")
    out("|---|---|---|---|---|")
    for lanes in args.lanes:
        for slice_rows in ("auto", args.slice_rows):
            clf = opd.fit(learner(), dX, y, classes=[-1, 1], n_lanes=lanes,
                          slice_rows=slice_rows)
            auc, loss = scores(clf)
            out(f"| {lanes} | {slice_rows} | {auc:.4f} | {loss:.4f} | {auc - one[0]:+.4f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", choices=sorted(SETS), default=["a9a", "imdb"])
    parser.add_argument("--eta", type=float, default=0.5)
    parser.add_argument("--sigma", default="auto")
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--slice-rows", type=int, default=1024)
    parser.add_argument("--out", help="FILE#NAME: write the run as that section")
    args = parser.parse_args()
    lines = [f"One pass, eta = {args.eta}, sigma = {args.sigma}, {args.partitions} "
             "partitions, Dask's threads."]

    def out(line):
        print(line, flush=True)
        lines.append(line)

    for name in args.data:
        one_set(name, args, out)
    if args.out:
        write_record(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
