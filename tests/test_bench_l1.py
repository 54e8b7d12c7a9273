"""bench/bench_l1.py's selection rules against hand-counted cases: the frontier (the sparsest
setting within 0.002 of the bar, ties at exactly 0.002 included) and the CV choice."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_l1  # noqa: E402


def test_frontier_takes_the_sparsest_within_tolerance_counting_exact_ties():
    n = 25000  # accuracies as ratios of counts, as the bench computes them
    bar = 22285 / n
    results = [dict(acc=22235 / n, nnz=6804),   # exactly 0.002 below: within
               dict(acc=22234 / n, nnz=3000),   # one row more wrong: outside
               dict(acc=22290 / n, nnz=20000)]
    assert bench_l1.frontier(results, bar)["nnz"] == 6804
    assert bench_l1.frontier(results, 22300 / n)["nnz"] == 20000
    assert bench_l1.frontier(results, 22400 / n) is None


def test_cv_choice_prefers_the_largest_l1_within_tolerance_else_the_most_accurate():
    l2 = [(3e-5, 0.0), (1e-5, 0.0)]
    cv = {(3e-5, 0.0): 0.900, (1e-5, 0.0): 0.899,
          (1e-5, 2e-6): 0.8985, (1e-5, 1e-5): 0.8981, (1e-5, 2e-5): 0.890}
    assert bench_l1.cv_choice(cv, l2) == ((1e-5, 1e-5), 0.900)
    cv[(1e-5, 1e-5)] = 0.897  # now only l1=2e-6 is within 0.002
    assert bench_l1.cv_choice(cv, l2)[0] == (1e-5, 2e-6)
    cv[(1e-5, 2e-6)] = 0.897  # none within: the most accurate l1 setting
    cv[(1e-5, 1e-5)] = 0.8975
    assert bench_l1.cv_choice(cv, l2)[0] == (1e-5, 1e-5)
