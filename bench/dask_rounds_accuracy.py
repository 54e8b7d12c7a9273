"""Test accuracy against the rounds a pass: 2 lanes on Dask's threads at 16 and 8 rounds
a pass (or ``--rounds``; "auto" is the default, slice_rows="auto", whose rounds grow)
against one process, on the generated stream of bench_dask.py.

The models are deterministic (the lanes' rows and the merge order do not depend on
timing), so one fit each is the figure; nothing is timed. For each ``--rows`` and each
(p, sigma) it prints single-process test accuracy (100,000 test rows) and the difference
of each rounds count, whose slice is rows / (2 rounds) rows a lane (for "auto": the
rounds a pass and a lane's rows in each).

    python bench/dask_rounds_accuracy.py --rows 3000000 4000000 6000000
    python bench/dask_rounds_accuracy.py --rows 2000000 4000000 --rounds auto 8 4
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[3_000_000])
    parser.add_argument("--rounds", type=bd._slice_rows, nargs="+", default=[16, 8])
    parser.add_argument("--p", type=float, nargs="+", default=[2.0, 1.8])
    parser.add_argument("--sigma", type=float, nargs="+", default=[1e-5, 1e-6])
    args = parser.parse_args()
    import onlinepgs.dask as opd

    print("| rows | p | sigma | single process | "
          + " | ".join(f"{r} rounds" for r in args.rounds) + " |")
    print("|---" * (4 + len(args.rounds)) + "|")
    for rows in args.rows:
        stream = argparse.Namespace(rows=rows, block_rows=100_000, dim=2**18, nnz=60,
                                    zipf=1.2, test_rows=100_000, passes=1, lanes=2)
        _, blocks, (Xt, yt) = bd.generate(stream)
        X, y = bd.dask_array(blocks, stream.dim)
        for sigma in args.sigma:
            for p in args.p:
                single = bd.run_single(stream, p, sigma, blocks)[1].score(Xt, yt)
                cells = []
                for rounds in args.rounds:
                    if rounds == "auto":
                        seen = []
                        model = bd.estimator(p, sigma)
                        opd.fit(model, X, y, classes=[-1.0, 1.0], n_lanes=2,
                                callback=lambda info: seen.append(info["rows"] // 2))
                        how = f"{len(seen)}: " + ", ".join(f"{r:,}" for r in seen)
                    else:
                        slice_rows = -(-rows // (2 * rounds))
                        model = bd.run_dask(stream, p, sigma, X, y, slice_rows=slice_rows)[1]
                        how = f"{slice_rows:,}"
                    cells.append(f"{model.score(Xt, yt) - single:+.4f} ({how})")
                print(f"| {rows:,} | {p:g} | {sigma:g} | {single:.4f} | "
                      + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
